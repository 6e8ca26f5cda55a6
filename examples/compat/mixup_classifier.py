"""A torchvision-free image classifier with the training-loop furniture of a modern recipe, on synthetic
12x12 images of 4 stripe orientations: a conv net ending in nn.AdaptiveAvgPool2d(1) + flatten, mixup
with lam drawn from torch.distributions.Beta (and randperm pairing), CrossEntropyLoss(label_smoothing=),
OneCycleLR stepped per optimizer step, gradient accumulation over micro-batches, clip_grad_value_,
torch.backends.cudnn flags, torch.compile(model, mode=..., dynamic=False) with its _orig_mod,
torch.inference_mode() evaluation, nn.ModuleDict heads and nn.ParameterList scales, named_modules
filtering (no weight decay on norms and biases), register_buffer(persistent=False), a checkpoint
holding model + optimizer + scheduler state (plus RNG state) and a resume that continues the schedule,
ReduceLROnPlateau on the validation loss, and load_state_dict(strict=False) into a wider model that
reports missing / unexpected keys.
"""
import io

import numpy as np

from _common import main, sync_init


def _data(rng, n):
    yy, xx = np.mgrid[0:12, 0:12]
    angles = [(1, 0), (0, 1), (1, 1), (1, -1)]
    y = rng.randint(0, 4, n)
    x = np.zeros((n, 1, 12, 12), np.float32)
    for i, c in enumerate(y):
        a, b = angles[c]
        x[i, 0] = np.sin((a * xx + b * yy) * rng.uniform(0.8, 1.4) + rng.uniform(0, 6.3))
    x += 0.3 * rng.randn(*x.shape).astype(np.float32)
    return x, y.astype(np.int64)


def run(torch, nn, F, init=None, epochs=2, deterministic=False, log=print, compile_backend="inductor"):
    """``compile_backend="eager"`` skips code generation (the test's torch side: inductor takes ~70 s)."""
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = deterministic
    rng = np.random.RandomState(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    xtr, ytr = _data(rng, 96)
    xva, yva = _data(rng, 48)
    Xtr, Ytr = torch.from_numpy(xtr), torch.from_numpy(ytr)
    Xva, Yva = torch.from_numpy(xva).to(device), torch.from_numpy(yva).to(device)

    class Net(nn.Module):
        def __init__(self, width=16, heads=("cls",)):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.SiLU(inplace=True),
                nn.Conv2d(width, width, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(width),
                nn.SiLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten())
            self.heads = nn.ModuleDict({h: nn.Linear(width, 4) for h in heads})
            self.scales = nn.ParameterList([nn.Parameter(torch.ones(1)) for _ in heads])
            self.register_buffer("class_prior", torch.full((4,), 0.25), persistent=False)

        def forward(self, x):
            z = self.features(x)
            return sum(s * head(z) for s, head in zip(self.scales, self.heads.values()))

    model = Net().to(device)
    init_state = sync_init(torch, model, init)
    assert "class_prior" not in model.state_dict() and "class_prior" in dict(model.named_buffers())
    no_decay = set()
    for mn, m in model.named_modules():
        for pn, p in m.named_parameters(recurse=False):
            full = f"{mn}.{pn}" if mn else pn
            if pn.endswith("bias") or isinstance(m, nn.BatchNorm2d) or full.startswith("scales"):
                no_decay.add(full)
    params = dict(model.named_parameters())
    groups = [{"params": [params[n] for n in sorted(params) if n not in no_decay], "weight_decay": 5e-4},
              {"params": [params[n] for n in sorted(params) if n in no_decay], "weight_decay": 0.0}]
    optimizer = torch.optim.SGD(groups, lr=0.05, momentum=0.9, nesterov=True)
    accum, micro = 2, 16
    steps_per_epoch = len(Xtr) // (micro * accum)
    total_epochs = epochs + 1
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=total_epochs * steps_per_epoch,
                                                    pct_start=0.3)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    compiled = torch.compile(model, backend=compile_backend, mode="reduce-overhead", dynamic=False)
    assert compiled._orig_mod is model
    beta = torch.distributions.Beta(torch.tensor([0.4]), torch.tensor([0.4]))

    def mix(x, y):
        if deterministic:
            lam = float(rng.beta(0.4, 0.4))
            index = torch.from_numpy(rng.permutation(x.size(0)))
        else:
            lam = beta.sample().item()
            index = torch.randperm(x.size(0))
        return lam * x + (1 - lam) * x[index, :], y, y[index], lam

    def evaluate(net):
        net.eval()
        with torch.inference_mode():
            logits = net(Xva)
            loss = F.cross_entropy(logits, Yva).item()
            acc = (logits.argmax(1) == Yva).float().mean().item()
        net.train()
        return loss, acc

    def train_epoch(net, opt, sched):
        out = []
        opt.zero_grad(set_to_none=True)
        for i in range(steps_per_epoch * accum):
            xb = Xtr[i * micro:(i + 1) * micro].to(device, non_blocking=True)
            yb = Ytr[i * micro:(i + 1) * micro].to(device)
            inputs, ya, yb2, lam = mix(xb, yb)
            logits = net(inputs)
            loss = lam * criterion(logits, ya) + (1 - lam) * criterion(logits, yb2)
            (loss / accum).backward()
            out.append(loss.item())
            if (i + 1) % accum == 0:
                nn.utils.clip_grad_value_(model.parameters(), clip_value=1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
        return out

    losses, lrs, val = [], [], []
    for epoch in range(epochs):
        losses += train_epoch(compiled, optimizer, scheduler)
        lrs.append(scheduler.get_last_lr()[0])
        val.append(evaluate(compiled))
        log(f"epoch {epoch}: loss {np.mean(losses[-6:]):.4f} val {val[-1][0]:.4f} acc {val[-1][1]:.3f}")

    # checkpoint: model + optimizer + scheduler (+ RNG), then resume in fresh objects for one more epoch
    buf = io.BytesIO()
    torch.save({"epoch": epochs, "model_state_dict": model.state_dict(),
                "optimizer_state_dict": optimizer.state_dict(), "scheduler_state_dict": scheduler.state_dict(),
                "rng_state": torch.get_rng_state()}, buf)
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=False)
    model2 = Net().to(device)
    model2.load_state_dict(ckpt["model_state_dict"])
    params2 = dict(model2.named_parameters())
    opt2 = torch.optim.SGD([{"params": [params2[n] for n in sorted(params2) if n not in no_decay], "weight_decay": 5e-4},
                            {"params": [params2[n] for n in sorted(params2) if n in no_decay], "weight_decay": 0.0}],
                           lr=0.05, momentum=0.9, nesterov=True)
    opt2.load_state_dict(ckpt["optimizer_state_dict"])
    sched2 = torch.optim.lr_scheduler.OneCycleLR(opt2, max_lr=0.1, total_steps=total_epochs * steps_per_epoch,
                                                 pct_start=0.3)
    sched2.load_state_dict(ckpt["scheduler_state_dict"])
    torch.set_rng_state(ckpt["rng_state"])
    model = model2
    losses += train_epoch(model2, opt2, sched2)
    lrs.append(sched2.get_last_lr()[0])
    val.append(evaluate(model2))

    # ReduceLROnPlateau on validation loss
    plateau_opt = torch.optim.SGD(model2.parameters(), lr=0.01)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(plateau_opt, mode="min", factor=0.5, patience=0)
    plateau_lrs = []
    for v in [1.0, 0.9, 0.95, 0.97, 0.5]:
        plateau.step(v)
        plateau_lrs.append(plateau_opt.param_groups[0]["lr"])

    # strict=False into a model with an extra head
    wide = Net(heads=("cls", "aux"))
    result = wide.load_state_dict(model2.state_dict(), strict=False)
    missing, unexpected = sorted(result.missing_keys), sorted(result.unexpected_keys)
    return {"losses": losses, "lrs": lrs, "val": val, "plateau_lrs": plateau_lrs, "missing": missing,
            "unexpected": unexpected, "init": init_state}


if __name__ == "__main__":
    main(run)
