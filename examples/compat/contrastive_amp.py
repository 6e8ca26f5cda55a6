"""A modern training loop: SimCLR-style contrastive pre-training of a small encoder on two noisy
"views" of the digits, then a linear probe. Exercises: a DataLoader with num_workers=2,
worker_init_fn, persistent_workers and pin_memory; torch.autocast("cpu", dtype=torch.bfloat16) with a
GradScaler (enabled flag off on CPU, as scripts do); an EMA copy of the model via
torch.optim.swa_utils.AveragedModel; activation checkpointing with torch.utils.checkpoint;
F.normalize, a cosine-similarity matrix with fill_diagonal_(-inf) in the NT-Xent loss, logsumexp,
torch.inference_mode for feature extraction, and the probe's LBFGS-free closed loop with SGD.
"""
import numpy as np
from sklearn.datasets import load_digits

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=2, deterministic=False, log=print):
    torch.manual_seed(0)
    from_checkpoint = torch.utils.checkpoint.checkpoint
    X, y = load_digits(return_X_y=True)
    X = (X[:320] / 16.0).astype(np.float32)
    y = y[:320]
    noise_rng = np.random.RandomState(0)
    noise = noise_rng.randn(2, *X.shape).astype(np.float32) * 0.2

    class TwoViews(torch.utils.data.Dataset):
        def __len__(self):
            return len(X)

        def __getitem__(self, i):
            if deterministic:
                a, b = X[i] + noise[0, i], X[i] + noise[1, i]
            else:
                info = torch.utils.data.get_worker_info()
                rng = np.random.default_rng((info.seed if info is not None else 0) % 2**32 + i)
                a, b = X[i] + 0.2 * rng.standard_normal(64), X[i] + 0.2 * rng.standard_normal(64)
            return torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32)

    def seed_worker(worker_id):
        np.random.seed(torch.initial_seed() % 2**32)

    if deterministic:
        loader = torch.utils.data.DataLoader(TwoViews(), batch_size=64)
    else:
        loader = torch.utils.data.DataLoader(TwoViews(), batch_size=64, shuffle=True, num_workers=2,
                                             worker_init_fn=seed_worker, persistent_workers=True,
                                             pin_memory=torch.cuda.is_available(), drop_last=True)

    class Encoder(nn.Module):
        def __init__(self, d=64, h=64, z=16, use_checkpoint=True):
            super().__init__()
            self.block1 = nn.Sequential(nn.Linear(d, h), nn.LayerNorm(h), nn.GELU())
            self.block2 = nn.Sequential(nn.Linear(h, h), nn.LayerNorm(h), nn.GELU())
            self.proj = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, z))
            self.use_checkpoint = use_checkpoint

        def features(self, x):
            h = self.block1(x)
            if self.use_checkpoint and self.training:
                h = h + from_checkpoint(self.block2, h, use_reentrant=False)
            else:
                h = h + self.block2(h)
            return h

        def forward(self, x):
            return self.proj(self.features(x))

    def nt_xent(z1, z2, temperature=0.5):
        z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
        sim = z @ z.T / temperature
        sim.fill_diagonal_(float("-inf"))
        n = z1.size(0)
        targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
        return F.cross_entropy(sim, targets)

    model = Encoder()
    init_state = sync_init(torch, model, init)
    ema = torch.optim.swa_utils.AveragedModel(model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    use_amp = not deterministic      # bfloat16 autocast changes the numbers; comparable runs keep float32
    scaler = torch.amp.GradScaler("cuda", enabled=torch.cuda.is_available())
    losses = []
    for epoch in range(epochs):
        model.train()
        for v1, v2 in loader:
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=use_amp):
                z1, z2 = model(v1), model(v2)
                loss = nt_xent(z1.float(), z2.float())
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            scaler.step(optimizer)
            scaler.update()
            ema.update_parameters(model)
            losses.append(loss.item())
    assert int(ema.n_averaged) == len(losses)

    # linear probe on frozen EMA features
    ema.eval()
    with torch.inference_mode():
        feats = ema.module.features(torch.from_numpy(X))
    feats = feats.clone()                     # inference tensors can't be saved for backward
    labels = torch.from_numpy(y)
    probe = nn.Linear(feats.size(1), 10)
    with torch.no_grad():
        probe.weight.zero_()
        probe.bias.zero_()
    popt = torch.optim.SGD(probe.parameters(), lr=0.5, momentum=0.9)
    for _ in range(30):
        popt.zero_grad()
        probe_loss = F.cross_entropy(probe(feats[:256]), labels[:256])
        probe_loss.backward()
        popt.step()
    with torch.no_grad():
        acc = (probe(feats[256:]).argmax(1) == labels[256:]).float().mean().item()
    log(f"contrastive loss {losses[0]:.3f} -> {losses[-1]:.3f}; probe loss {probe_loss.item():.3f}, "
        f"probe accuracy {acc:.2f}")
    return {"losses": losses, "probe_loss": probe_loss.item(), "acc": acc, "init": init_state}


if __name__ == "__main__":
    main(run)
