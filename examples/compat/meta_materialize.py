"""A small image classifier set up the way large-model code does it:

- the model is built under ``with torch.device("meta")`` (no memory, no init), with the classifier's input
  size found by a forward pass of a meta tensor through the feature extractor, then given storage with
  ``to_empty(device="cpu")`` and initialised by calling every module's ``reset_parameters()``;
- an extra head made with ``nn.utils.skip_init`` and initialised by hand; a second copy built on meta and
  filled with ``load_state_dict(state, assign=True)``;
- the images are downsampled with ``F.interpolate(..., mode="bilinear"/"bicubic", antialias=True)`` and both
  the batches and the model use ``memory_format=torch.channels_last``;
- a few keyword spellings torch accepts (``torch.sum(input=, dim=)``, ``x.view(size=)``, ``torch.max(input=,
  dim=)``, ``x.permute(dims=)``).
"""
import numpy as np

from _common import main, sync_init


def _images(rng, n):
    """Two classes: a bright blob on the left or on the right half of a noisy 3 x 32 x 32 image."""
    y = rng.randint(0, 2, n)
    yy, xx = np.mgrid[0:32, 0:32]
    imgs = 0.3 * rng.randn(n, 3, 32, 32)
    for i in range(n):
        cx = 8 + 16 * y[i] + rng.randint(-3, 4)
        cy = 16 + rng.randint(-6, 7)
        imgs[i] += np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / 20.0)[None] * rng.uniform(0.8, 1.2, (3, 1, 1))
    return imgs.astype(np.float32), y.astype(np.int64)


def run(torch, nn, F, init=None, steps=25, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    imgs, labels = _images(rng, 96)
    full = torch.from_numpy(imgs)
    x = F.interpolate(full, size=(16, 16), mode="bilinear", antialias=True)
    x_bicubic = F.interpolate(full, scale_factor=0.5, mode="bicubic", antialias=True)
    x = x.contiguous(memory_format=torch.channels_last)
    y = torch.from_numpy(labels)

    class Net(nn.Module):
        def __init__(self, device=None):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1, device=device), nn.BatchNorm2d(8, device=device), nn.ReLU(),
                nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1, device=device), nn.ReLU(), nn.AdaptiveAvgPool2d(2))
            with torch.no_grad():
                n_flat = self.features(torch.empty(1, 3, 16, 16, device=device)).numel()
            self.classifier = nn.Linear(n_flat, 2, device=device)

        def forward(self, inp):
            return self.classifier(torch.flatten(self.features(inp), 1))

    with torch.device("meta"):
        model = Net()
    meta_report = [(name, tuple(p.shape), p.is_meta) for name, p in model.named_parameters()][:3]
    probe = model(torch.empty(4, 3, 16, 16, device="meta"))
    meta_out = (tuple(probe.shape), probe.is_meta, str(probe.device))
    model.to_empty(device="cpu")
    for m in model.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()
    aux = nn.utils.skip_init(nn.Linear, 64, 2)
    with torch.no_grad():
        nn.init.xavier_uniform_(aux.weight)
        nn.init.zeros_(aux.bias)
    both = nn.ModuleDict({"net": model, "aux": aux})
    init_state = sync_init(torch, both, init)
    model = model.to(memory_format=torch.channels_last)
    conv_cl = model.features[0].weight.is_contiguous(memory_format=torch.channels_last)

    opt = torch.optim.SGD(both.parameters(), lr=0.02, momentum=0.9)
    losses, accs = [], []
    order = np.arange(len(labels))
    for step in range(steps):
        if not deterministic:
            rng.shuffle(order)
        idx = torch.from_numpy(order[(step * 32) % 96:(step * 32) % 96 + 32].copy())
        xb, yb = x[idx].contiguous(memory_format=torch.channels_last), y[idx]
        logits = model(xb)
        feats = torch.flatten(model.features(xb), 1)
        aux_logits = aux(feats.view(size=(feats.size(0), -1)))
        loss = F.cross_entropy(logits, yb) + 0.5 * F.cross_entropy(aux_logits, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        with torch.no_grad():
            pred = torch.max(input=logits, dim=1).indices
            accs.append(int(torch.sum(input=(pred == yb).long(), dim=0)))

    model.eval()
    with torch.device("meta"):
        copy = Net()
    copy.load_state_dict(model.state_dict(), assign=True)
    copy.eval()
    with torch.no_grad():
        same_copy = bool(torch.equal(copy(x), model(x)))
        perm = x.permute(dims=(0, 2, 3, 1))
        layout = [x.is_contiguous(), x.is_contiguous(memory_format=torch.channels_last), list(x.stride()),
                  perm.is_contiguous()]
    log(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, acc {accs[-1]}/32")
    return {"losses": losses, "accs": accs, "meta_report": meta_report, "meta_out": meta_out,
            "conv_cl": conv_cl, "same_copy": same_copy, "layout": layout,
            "x_mean": float(x.mean()), "x_bicubic": [float(x_bicubic.mean()), float(x_bicubic.std())],
            "copy_is_meta": any(p.is_meta for p in copy.parameters()), "init": init_state}


if __name__ == "__main__":
    main(run)
