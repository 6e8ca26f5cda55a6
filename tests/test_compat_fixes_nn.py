"""Regression tests for what the compat programs (examples/compat) found missing or wrong in nn, each checked
against torch: module backward hooks and state-dict hooks, pixel shuffle/fold modules, grid_sample & co.,
parametrizations, swa_utils, utils.checkpoint, deepcopy/pickle of hooked modules."""
import copy
import io
import pickle
import warnings

import numpy as np
import pytest
import torch

import ember
from compat_support import _assert_same, assert_same, both, fixed_linear, same_error


# ---- nn.Module hooks and state dicts ------------------------------------------------------------------------


def test_full_backward_hook_sees_grads_and_can_replace_them():
    def run(lib):
        lin, log = fixed_linear(lib), []
        h = lin.register_full_backward_hook(lambda m, gi, go: log.append(
            ([None if g is None else tuple(g.shape) for g in gi], [tuple(g.shape) for g in go],
             None if gi[0] is None else gi[0].sum().item(), go[0].sum().item())))
        x = lib.ones(4, 3, requires_grad=True)
        lin(x).sum().backward()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lin(lib.ones(4, 3)).sum().backward()           # no input needs grad: fires with grad_input None
        h.remove()
        h = lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0 + 1,))
        x.grad = None
        lin(x).sum().backward()
        replaced = x.grad.tolist()
        h.remove()
        h = lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))
        x.grad = None
        lin(x).sum().backward()
        doubled = x.grad.tolist()
        h.remove()
        x.grad = None
        lin(x).sum().backward()
        return log, replaced, doubled, x.grad.tolist()
    t, e = both(run)
    assert t[0] == e[0] or np.allclose([v for r in t[0] for v in r[2:] if v is not None],
                                       [v for r in e[0] for v in r[2:] if v is not None])
    assert [r[:2] for r in t[0]] == [r[:2] for r in e[0]]
    np.testing.assert_allclose(e[1], t[1])
    np.testing.assert_allclose(e[2], t[2], rtol=1e-6)
    np.testing.assert_allclose(e[3], t[3], rtol=1e-6)


def test_backward_hook_with_non_tensor_args_and_errors():
    def run(lib):
        class M(lib.nn.Module):
            def forward(self, a, k, b):
                return a * k + b, a.detach()
        m, log = M(), []
        m.register_full_backward_hook(lambda mod, gi, go: log.append(
            ([None if g is None else tuple(g.shape) for g in gi], [None if g is None else tuple(g.shape) for g in go])))
        a = lib.ones(2, requires_grad=True)
        o, o2 = m(a, 3, lib.ones(2))
        o.sum().backward()
        return log, o2.requires_grad
    t, e = both(run)
    assert t == e

    def bad(lib):
        lin = fixed_linear(lib)
        lin.register_full_backward_hook(lambda m, gi, go: (lib.ones(4, 3),))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lin(lib.ones(4, 3)).sum().backward()
    same_error(bad, exact=True)
    with ember.no_grad():                       # hooks don't wrap anything without grad mode
        lin = fixed_linear(ember)
        lin.register_full_backward_hook(lambda m, gi, go: None)
        assert not lin(ember.ones(1, 3, requires_grad=True)).requires_grad


def test_load_state_dict_reports_keys_and_runs_hooks():
    def run(lib):
        m, log = lib.nn.Linear(2, 2), []
        m.register_load_state_dict_pre_hook(lambda mod, sd, prefix, *a: log.append(("pre", prefix, sorted(sd))))
        m.register_state_dict_post_hook(lambda mod, sd, prefix, meta: log.append(("post", prefix, sorted(sd))))
        m.state_dict()
        r = m.load_state_dict({"weight": lib.ones(2, 2), "foo": lib.ones(1)}, strict=False)
        return log, r.missing_keys, r.unexpected_keys, repr(r)
    t, e = both(run)
    assert t == e
    assert repr(ember.nn.Linear(1, 1).load_state_dict(ember.nn.Linear(1, 1).state_dict())) == \
        "<All keys matched successfully>"


def test_parameter_dict_repr_uses_type_names():
    def run(lib):
        d = lib.nn.ParameterDict({"a": lib.nn.Parameter(lib.ones(2, dtype=lib.float64)),
                                  "b": lib.nn.Parameter(lib.ones(2, 3))})
        return repr(d).replace("torch.", "").replace("ember.", "")
    t, e = both(run)
    assert t == e


@pytest.mark.parametrize("register", ["register_buffer", "register_parameter"])
@pytest.mark.parametrize("name", ["a.b", "", 3, "bias_"])
def test_register_buffer_and_parameter_name_errors(register, name):
    def run(lib):
        m = lib.nn.Linear(2, 2)
        m.bias_ = 1                      # a plain attribute: the name is taken
        getattr(m, register)(name, None)
    same_error(run)


def test_pixel_shuffle_fold_modules():
    for build in (lambda m: m.nn.PixelShuffle(2), lambda m: m.nn.PixelUnshuffle(2), lambda m: m.nn.ChannelShuffle(2),
                  lambda m: m.nn.Fold((4, 5), 2), lambda m: m.nn.Unfold(2, padding=1)):
        assert repr(build(torch)) == repr(build(ember))
    x = np.arange(2 * 8 * 4 * 4, dtype=np.float32).reshape(2, 8, 4, 4)
    assert_same(lambda m: m.nn.PixelShuffle(2)(m.tensor(x)))
    assert_same(lambda m: m.nn.PixelUnshuffle(2)(m.tensor(x)))
    assert_same(lambda m: m.nn.ChannelShuffle(4)(m.tensor(x)))
    assert_same(lambda m: m.channel_shuffle(m.tensor(x), 2))
    assert_same(lambda m: m.nn.Unfold(2, padding=1)(m.tensor(x)))
    assert_same(lambda m: m.nn.Fold((4, 4), 2, stride=2)(m.nn.Unfold(2, stride=2)(m.tensor(x))))
    same_error(lambda m: m.nn.functional.channel_shuffle(m.ones(1, 6, 2), 4), exact=True)
    same_error(lambda m: m.nn.functional.channel_shuffle(m.ones(6), 3), exact=True)


# ---- grid_sample / affine_grid / gumbel_softmax -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_torch(mode, padding_mode, align_corners):
    rs = np.random.RandomState(0)
    inp, grid, theta = rs.randn(2, 3, 5, 6), rs.uniform(-1.3, 1.3, (2, 4, 7, 2)), rs.randn(2, 2, 3) * 0.5

    def run(lib):
        F = lib.nn.functional
        x = lib.tensor(inp, requires_grad=True)
        g = lib.tensor(grid, requires_grad=True)
        th = lib.tensor(theta, requires_grad=True)
        gg = F.affine_grid(th, (2, 3, 4, 7), align_corners=align_corners) * 0.5 + g * 0.5
        y = F.grid_sample(x, gg, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
        w = lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))
        (y * w).sum().backward()
        return y, x.grad, g.grad, th.grad
    assert_same(run, atol=1e-9)


def test_grid_sample_and_affine_grid_errors():
    F = "nn.functional"
    th = np.array([[[1.0, 0, 0], [0, 1, 0]]], dtype=np.float32)
    for fn in (lambda m: m.nn.functional.affine_grid(m.tensor(th), (1, 1, 2, 3, 4), align_corners=False),
               lambda m: m.nn.functional.affine_grid(m.tensor(th).long(), (1, 1, 2, 3), align_corners=False),
               lambda m: m.nn.functional.grid_sample(m.ones(1, 1, 2, 3), m.zeros(1, 2, 2, 2), mode="foo"),
               lambda m: m.nn.functional.grid_sample(m.ones(1, 1, 2, 3), m.zeros(1, 2, 2, 2), padding_mode="foo"),
               lambda m: m.nn.functional.grid_sample(m.ones(1, 1, 2, 3), m.zeros(2, 2, 2, 2), align_corners=False),
               lambda m: m.nn.functional.grid_sample(m.ones(1, 1, 2, 3), m.zeros(1, 2, 2, 3), align_corners=False),
               lambda m: m.nn.functional.grid_sample(m.ones(1, 1, 2, 3), m.zeros(1, 2, 2, 2, dtype=m.float64),
                                                     align_corners=False)):
        same_error(fn, exact=True)
    assert F
    for lib in (torch, ember):
        with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
            lib.nn.functional.affine_grid(lib.tensor(th), (1, 1, 2, 3))


def test_gumbel_softmax():
    ember.manual_seed(0)
    logits = ember.zeros(64, 3, requires_grad=True)
    soft = ember.nn.functional.gumbel_softmax(logits, tau=0.5)
    assert np.allclose(soft.sum(-1).detach().numpy(), 1) and (soft.detach().numpy() >= 0).all()
    hard = ember.nn.functional.gumbel_softmax(logits, tau=0.5, hard=True)
    assert set(np.unique(hard.detach().numpy())) <= {0.0, 1.0} and np.allclose(hard.sum(-1).detach().numpy(), 1)
    (hard * ember.arange(3.0)).sum().backward()
    assert logits.grad is not None and np.abs(logits.grad.numpy()).sum() > 0   # straight-through gradient
    counts = np.bincount(hard.argmax(-1).numpy(), minlength=3)
    assert counts.min() > 5                     # uniform logits: every class gets drawn


# ---- parametrizations ----------------------------------------------------------------------------------------


def _init_sin(lib, m, scale=1.0):
    m.load_state_dict({k: lib.tensor((np.sin(np.arange(v.numel()) * scale + 1.0)).reshape(tuple(v.shape)),
                                     dtype=lib.float32) for k, v in m.state_dict().items()})
    return m


def test_weight_norm_parametrization():
    def run(lib):
        P = lib.nn.utils.parametrize
        c = _init_sin(lib, lib.nn.Conv1d(3, 2, 3))
        lib.nn.utils.parametrizations.weight_norm(c)
        x = lib.tensor(np.cos(np.arange(24.0)).reshape(2, 3, 4), dtype=lib.float32)
        y = c(x)
        y.sum().backward()
        grads = [p.grad for _, p in sorted(c.named_parameters())]
        keys = list(c.state_dict().keys())
        name = type(c).__name__
        is_p = P.is_parametrized(c, "weight")
        with lib.no_grad():
            c.weight = lib.ones(2, 3, 3)
        g = c.parametrizations.weight.original0.detach().clone()
        P.remove_parametrizations(c, "weight")
        return y, grads, keys, name, is_p, g, type(c).__name__, list(c.state_dict().keys()), repr(c)
    assert_same(run, atol=1e-5)


def test_spectral_norm_parametrization_and_hook_versions():
    def run(lib):
        s = lib.nn.Linear(4, 3)
        lib.nn.utils.parametrizations.spectral_norm(s)
        keys = sorted(s.state_dict().keys())
        _init_sin(lib, s, 0.7)
        xx = lib.tensor(np.cos(np.arange(8.0)).reshape(2, 4), dtype=lib.float32)
        ys = s(xx)
        ys.sum().backward()
        u = s.parametrizations.weight[0]._u.clone()
        s.eval()
        ye = s(xx)
        o = _init_sin(lib, lib.nn.Linear(4, 3))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.nn.utils.weight_norm(o)
        names = [n for n, _ in o.named_parameters()]
        o(xx).sum().backward()
        gg = o.weight_g.grad
        lib.nn.utils.remove_weight_norm(o)
        q = lib.nn.Linear(4, 3)
        lib.nn.utils.spectral_norm(q)
        qkeys = sorted(q.state_dict().keys())
        _init_sin(lib, q, 0.7)
        yq = q(xx)
        lib.nn.utils.remove_spectral_norm(q)
        return (keys, ys, s.parametrizations.weight.original.grad, u, ye, names, gg,
                sorted(o.state_dict().keys()), qkeys, yq, sorted(q.state_dict().keys()))
    assert_same(run, atol=1e-5)
    same_error(lambda m: m.nn.utils.remove_weight_norm(m.nn.Linear(2, 2)), exact=True)


# ---- optim.swa_utils / utils.checkpoint ------------------------------------------------------------------------


def test_swa_utils_match_torch():
    def run(lib):
        swa = lib.optim.swa_utils
        out = []
        for kind in ("swa", "ema", "avgfn", "buffers"):
            m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 2))
            sd = {k: lib.tensor(np.linspace(-1, 1, max(v.numel(), 1)).reshape(tuple(v.shape)))
                  .to(v.dtype) for k, v in m.state_dict().items()}
            m.load_state_dict(sd)
            kw = {"ema": dict(multi_avg_fn=swa.get_ema_multi_avg_fn(0.9)), "avgfn": dict(avg_fn=swa.get_ema_avg_fn(0.8)),
                  "buffers": dict(use_buffers=True, multi_avg_fn=swa.get_ema_multi_avg_fn(0.5))}.get(kind, {})
            am = swa.AveragedModel(m, **kw)
            opt = lib.optim.SGD(m.parameters(), lr=0.01)
            sched = swa.SWALR(opt, swa_lr=0.05, anneal_epochs=3, anneal_strategy="linear" if kind == "ema" else "cos")
            x = lib.tensor(np.linspace(-2, 2, 24).reshape(8, 3), dtype=lib.float32)
            lrs = []
            for _ in range(5):
                opt.zero_grad()
                m(x).pow(2).mean().backward()
                opt.step()
                sched.step()
                am.update_parameters(m)
                lrs.append(opt.param_groups[0]["lr"])
            out.append((int(am.n_averaged), lrs, [v.float() for v in am.state_dict().values()]))
            swa.update_bn([(x[:4], 0), (x[4:], 1)], am)
            out.append((am.module[1].running_mean, am.module[1].momentum, am.training))
        return out
    assert_same(run, atol=1e-6)


def test_checkpoint_recomputes_with_same_results():
    def run(lib, use_reentrant, x_requires_grad):
        ck = lib.utils.checkpoint
        blk = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 3))
        blk.load_state_dict({k: lib.tensor(np.linspace(-1, 1, v.numel()).reshape(tuple(v.shape)), dtype=lib.float32)
                             for k, v in blk.state_dict().items()})
        x = lib.tensor(np.arange(6.0).reshape(2, 3) / 5, dtype=lib.float32, requires_grad=x_requires_grad)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = ck.checkpoint(blk, x * 1, use_reentrant=use_reentrant)
        if not y.requires_grad:
            return y, None, None
        (y ** 2).sum().backward()
        return y, x.grad, blk[0].weight.grad
    for ur in (True, False):
        for xrg in (True, False):
            t, e = run(torch, ur, xrg), run(ember, ur, xrg)
            assert t[0].requires_grad == e[0].requires_grad
            _assert_same(tuple(v for v in t if v is not None), tuple(v for v in e if v is not None), 1e-6)


def test_checkpoint_preserves_dropout_mask_and_warns():
    ck = ember.utils.checkpoint
    drop = ember.nn.Sequential(ember.nn.Linear(3, 50), ember.nn.Dropout(0.5))
    x = ember.ones(4, 3, requires_grad=True)
    y = ck.checkpoint(drop, x, use_reentrant=False)
    y.sum().backward()
    expected = ((y != 0).float() * 2).matmul(drop[0].weight.detach())
    assert np.allclose(x.grad.numpy(), expected.numpy(), atol=1e-5)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        ck.checkpoint(drop, x)
    seq = ember.nn.Sequential(*[ember.nn.Linear(3, 3) for _ in range(4)])
    x = ember.ones(2, 3, requires_grad=True)
    ck.checkpoint_sequential(seq, 2, x, use_reentrant=False).sum().backward()
    assert x.grad.shape == (2, 3) and all(p.grad is not None for p in seq.parameters())




def _noop_hook(*args):
    return None


def test_deepcopy_and_pickle_of_parametrized_and_hooked_modules():
    m = ember.nn.Linear(3, 2)
    ember.nn.utils.parametrizations.weight_norm(m)
    c = copy.deepcopy(m)
    x = ember.ones(1, 3)
    assert ember.equal(c(x), m(x)) and type(c).__name__ == "ParametrizedLinear"
    buf = io.BytesIO()
    ember.save(m.state_dict(), buf)
    buf.seek(0)
    m2 = ember.nn.Linear(3, 2)
    ember.nn.utils.parametrizations.weight_norm(m2)
    m2.load_state_dict(ember.load(buf))
    assert ember.equal(m2(x), m(x))
    h = ember.nn.Linear(2, 2)
    h.register_full_backward_hook(_noop_hook)
    h2 = pickle.loads(pickle.dumps(h))
    assert ember.equal(h2(ember.ones(1, 2)), h(ember.ones(1, 2)))



def test_consume_prefix_in_state_dict_matches_torch():
    from collections import OrderedDict

    def fn(L):
        from importlib import import_module
        utils = import_module(L.__name__ + ".nn.modules.utils")
        sd = OrderedDict([("module.a", 1), ("module.b.c", 2), ("x", 3)])
        sd._metadata = {"": {"v": 1}, "module": {"v": 2}, "module.b": {"v": 3}}
        utils.consume_prefix_in_state_dict_if_present(sd, "module.")
        m = L.nn.Linear(2, 2)
        wrapped = OrderedDict(("module." + k, v) for k, v in m.state_dict().items())
        utils.consume_prefix_in_state_dict_if_present(wrapped, "module.")
        return list(sd.items()), sd._metadata, str(m.load_state_dict(wrapped))
    assert fn(torch) == fn(ember)
