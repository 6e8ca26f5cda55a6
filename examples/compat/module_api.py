"""The nn.Module API surface that libraries and training frameworks lean on: printing a model, named_modules /
named_children / named_buffers, get_submodule / get_parameter, ModuleList insert / extend / slicing / +,
ModuleDict and ParameterList / ParameterDict, nn.Identity / Flatten / Unflatten, extra_repr, non-persistent
buffers, state_dict(keep_vars=True) and prefixes, load_state_dict(strict=False) reports, forward hooks with
kwargs, pre-hooks that rewrite inputs, requires_grad_(False) freezing, zero_grad(set_to_none=False),
copy.deepcopy and pickle round trips, torch.save of a whole model, .double()/.to(dtype) conversions,
torch.func.functional_call (MAML-style inner loop) and model.train()/eval() propagation.
"""
import copy
import io
import pickle

import numpy as np

from _common import main, sync_init


class Scale:
    """A picklable callable used as a module attribute."""

    def __init__(self, s):
        self.s = s

    def __call__(self, x):
        return x * self.s


def _define(torch, nn):
    """Build the model classes for one library and publish them at module level (pickle finds classes
    by module and name, as it would for a model defined in a script)."""
    prefix = torch.__name__.capitalize()

    class Residual(nn.Module):
        def __init__(self, d, act=None):
            super().__init__()
            self.fc = nn.Linear(d, d)
            self.act = act or nn.GELU()
            self.register_buffer("calls", torch.zeros((), dtype=torch.long), persistent=False)
            self.register_buffer("scale", torch.ones(d))

        def forward(self, x, gate=None):
            self.calls += 1
            h = self.act(self.fc(x)) * self.scale
            return x + (h if gate is None else gate * h)

        def extra_repr(self):
            return f"d={self.fc.in_features}"

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.Identity())
            self.blocks = nn.ModuleList([Residual(8) for _ in range(2)])
            self.blocks.append(Residual(8, act=nn.Tanh()))
            self.heads = nn.ModuleDict({"a": nn.Linear(8, 3), "b": nn.Linear(8, 1)})
            self.temps = nn.ParameterList([nn.Parameter(torch.ones(1)), nn.Parameter(torch.full((1,), 2.0))])
            self.extra = nn.ParameterDict({"bias": nn.Parameter(torch.zeros(3))})
            self.unflat = nn.Unflatten(1, (3, 1))
            self.post = Scale(0.5)

        def forward(self, x, gate=None):
            h = self.stem(x)
            for blk in self.blocks[:2]:
                h = blk(h, gate=gate)
            h = self.blocks[-1](h)
            a = self.heads["a"](h) / self.temps[0] + self.extra["bias"]
            return self.unflat(self.post(a)).squeeze(-1), self.heads["b"](h) * self.temps[1]

    for cls in (Residual, Net):
        cls.__qualname__ = cls.__name__ = prefix + cls.__name__
        globals()[cls.__name__] = cls
    return Residual, Net


def run(torch, nn, F, init=None, steps=15, deterministic=False, log=print):
    torch.manual_seed(0)
    Residual, Net = _define(torch, nn)
    model = Net()
    init_state = sync_init(torch, model, init)
    text = repr(model).replace("torch.", "").replace("ember.", "").replace("Torch", "").replace("Ember", "")
    rng = np.random.RandomState(0)
    X = torch.from_numpy(rng.randn(32, 3, 4).astype(np.float32))
    y = torch.from_numpy(rng.randint(0, 3, 32))
    info = {
        "modules": [n for n, _ in model.named_modules()],
        "children": [n for n, _ in model.named_children()],
        "buffers": [n for n, _ in model.named_buffers()],
        "state_keys": list(model.state_dict().keys()),
        "n_params": sum(p.numel() for p in model.parameters()),
        "submodule": type(model.get_submodule("blocks.2.act")).__name__,
        "get_parameter": tuple(model.get_parameter("heads.a.weight").shape),
        "keep_vars": all(isinstance(v, nn.Parameter) for k, v in model.state_dict(keep_vars=True).items()
                         if k.endswith("weight")),
        "prefix": list(model.heads.state_dict(prefix="heads.").keys()),
    }
    seen = []
    h1 = model.blocks[0].register_forward_hook(lambda m, args, kwargs, out: seen.append(sorted(kwargs)),
                                               with_kwargs=True)
    h2 = model.stem.register_forward_pre_hook(lambda m, args: (args[0] * 1.0,))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for step in range(steps):
        if step == 8:                            # freeze the stem half-way through
            model.stem.requires_grad_(False)
        logits, aux = model(X, gate=torch.tensor(0.5))
        loss = F.cross_entropy(logits, y) + 0.1 * aux.pow(2).mean()
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    h1.remove()
    h2.remove()
    info["hook_kwargs"] = seen[0]
    info["stem_grad_zero"] = bool((model.stem[1].weight.grad == 0).all())
    info["calls"] = int(model.blocks[0].calls)
    model.blocks.insert(0, Residual(8))
    model.blocks.extend([Residual(8)])
    info["n_blocks"] = len(model.blocks)
    info["slice_type"] = type(model.blocks[1:3]).__name__
    del model.blocks[0]
    del model.blocks[-1]
    # partial loading, reported
    other = Net()
    sd = {k: v for k, v in model.state_dict().items() if not k.startswith("heads.b")}
    sd["unexpected.weight"] = torch.zeros(1)
    res = other.load_state_dict(sd, strict=False)
    info["missing"], info["unexpected"] = sorted(res.missing_keys), sorted(res.unexpected_keys)
    model.eval()
    with torch.no_grad():
        ref, _ = model(X)
        clone = copy.deepcopy(model)
        pickled = pickle.loads(pickle.dumps(model))
        buf = io.BytesIO()
        torch.save(model, buf)
        buf.seek(0)
        whole = torch.load(buf, weights_only=False)
        info["copies_equal"] = [torch.equal(m(X)[0], ref) for m in (clone, pickled, whole)]
        info["eval_propagates"] = [m.training for m in whole.modules()].count(True)
        dmodel = copy.deepcopy(model).double()
        info["double"] = [str(p.dtype).split(".")[-1] for p in list(dmodel.parameters())[:2]]
        info["double_close"] = bool(torch.allclose(dmodel(X.double())[0].float(), ref, atol=1e-5))
    # functional_call: one MAML-style inner step with substituted parameters
    params = {k: v for k, v in model.named_parameters()}
    logits, _ = torch.func.functional_call(model, params, (X,))
    inner = F.cross_entropy(logits, y)
    grads = torch.autograd.grad(inner, [params["heads.a.weight"]], create_graph=True)
    fast = dict(params)
    fast["heads.a.weight"] = params["heads.a.weight"] - 0.1 * grads[0]
    outer = F.cross_entropy(torch.func.functional_call(model, fast, (X,))[0], y)
    outer.backward()
    info["meta_grad"] = float(model.heads["a"].weight.grad.abs().sum() > 0)
    outer_loss = outer.item()
    log(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; {info['n_params']} params; {info['copies_equal']}")
    return {"losses": losses, "repr": text, "info": info, "outer": outer_loss, "init": init_state}


if __name__ == "__main__":
    main(run)
