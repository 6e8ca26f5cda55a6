"""DDPM-style diffusion on scikit-learn's 8x8 digits with a small UNet, the way diffusion tutorials write
it: sinusoidal timestep embeddings, residual blocks with GroupNorm + SiLU and a per-channel time bias,
a self-attention block over pixels, strided-conv downsampling and ConvTranspose2d upsampling with a skip
concatenation, epsilon-prediction MSE, AdamW with CosineAnnealingWarmRestarts, clip_grad_norm_, an EMA copy
through swa_utils.AveragedModel(get_ema_multi_avg_fn), and ancestral sampling from the EMA model.
"""
import math

import numpy as np
from sklearn.datasets import load_digits

from _common import main, sync_init


def run(torch, nn, F, init=None, steps=30, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    X, _ = load_digits(return_X_y=True)
    X = torch.from_numpy((X[:256] / 8.0 - 1.0).astype(np.float32)).view(-1, 1, 8, 8)
    T = 100
    betas = torch.linspace(1e-4, 0.05, T)
    alphas = 1 - betas
    abar = torch.cumprod(alphas, 0)

    def timestep_embedding(t, dim):
        half = dim // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.sin(args), torch.cos(args)], dim=-1)

    class ResBlock(nn.Module):
        def __init__(self, cin, cout, tdim):
            super().__init__()
            self.norm1 = nn.GroupNorm(4, cin)
            self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
            self.temb = nn.Linear(tdim, cout)
            self.norm2 = nn.GroupNorm(4, cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x, te):
            h = self.conv1(F.silu(self.norm1(x)))
            h = h + self.temb(te)[:, :, None, None]
            h = self.conv2(F.silu(self.norm2(h)))
            return h + self.skip(x)

    class Attention(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.norm = nn.GroupNorm(4, c)
            self.qkv = nn.Conv2d(c, 3 * c, 1)
            self.proj = nn.Conv2d(c, c, 1)

        def forward(self, x):
            B, C, H, W = x.shape
            q, k, v = self.qkv(self.norm(x)).reshape(B, 3, C, H * W).unbind(1)
            w = torch.softmax(q.transpose(1, 2) @ k / math.sqrt(C), dim=-1)
            return x + self.proj((v @ w.transpose(1, 2)).reshape(B, C, H, W))

    class UNet(nn.Module):
        def __init__(self, ch=16, tdim=32):
            super().__init__()
            self.tdim = tdim
            self.time = nn.Sequential(nn.Linear(tdim, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
            self.inc = nn.Conv2d(1, ch, 3, padding=1)
            self.down1 = ResBlock(ch, ch, tdim)
            self.pool = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
            self.down2 = ResBlock(ch, 2 * ch, tdim)
            self.mid = Attention(2 * ch)
            self.up = nn.ConvTranspose2d(2 * ch, ch, 4, stride=2, padding=1)
            self.up1 = ResBlock(2 * ch, ch, tdim)
            self.out = nn.Sequential(nn.GroupNorm(4, ch), nn.SiLU(), nn.Conv2d(ch, 1, 3, padding=1))

        def forward(self, x, t):
            te = self.time(timestep_embedding(t, self.tdim))
            h1 = self.down1(self.inc(x), te)
            h2 = self.mid(self.down2(self.pool(h1), te))
            u = self.up(h2)
            return self.out(self.up1(torch.cat([u, h1], dim=1), te))

    model = UNet()
    init_state = sync_init(torch, model, init)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=10, T_mult=2, eta_min=1e-4)
    ema = torch.optim.swa_utils.AveragedModel(model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))
    losses, lrs = [], []
    for step in range(steps):
        idx = torch.from_numpy(rng.integers(0, len(X), 32)) if deterministic else torch.randint(0, len(X), (32,))
        x0 = X[idx]
        if deterministic:       # comparable runs: NumPy draws for the timesteps and the noise
            t = torch.from_numpy(rng.integers(0, T, 32))
            noise = torch.from_numpy(rng.normal(size=(32, 1, 8, 8)).astype(np.float32))
        else:
            t = torch.randint(0, T, (32,))
            noise = torch.randn_like(x0)
        a = abar[t].view(-1, 1, 1, 1)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        loss = F.mse_loss(model(xt, t), noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step(step + 1)
        ema.update_parameters(model)
        losses.append(loss.item())
        lrs.append(sched.get_last_lr()[0])
    log(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")

    # ancestral sampling (a few steps) from the EMA model
    net = ema.module.eval()
    with torch.no_grad():
        x = torch.from_numpy(rng.normal(size=(4, 1, 8, 8)).astype(np.float32)) if deterministic \
            else torch.randn(4, 1, 8, 8)
        for i in reversed(range(0, T, 20)):
            t = torch.full((4,), i, dtype=torch.long)
            eps = net(x, t)
            x = (x - betas[i] / (1 - abar[i]).sqrt() * eps) / alphas[i].sqrt()
            if i > 0:
                z = torch.from_numpy(rng.normal(size=(4, 1, 8, 8)).astype(np.float32)) if deterministic \
                    else torch.randn_like(x)
                x = x + betas[i].sqrt() * z
        assert x.shape == (4, 1, 8, 8) and bool(torch.isfinite(x).all())
    return {"losses": losses, "lrs": lrs, "sample_mean": x.mean().item(), "init": init_state}


if __name__ == "__main__":
    main(run)
