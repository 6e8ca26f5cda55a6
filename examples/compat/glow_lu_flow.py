"""A Glow-style normalizing flow on 4-D data with the LU-decomposed invertible 1x1 convolution:

- each invertible linear map W = P L (U + diag(sign(s) exp(log|s|))) is initialised from a random rotation
  (``torch.linalg.qr``) factored with ``torch.linalg.lu``; P and sign(s) are buffers, L, U and log|s| are
  trained, so log|det W| is just ``log_s.sum()``;
- actnorm layers initialised from the first samples, affine coupling layers, a standard-normal base;
- the inverse pass (sampling) solves with ``torch.linalg.lu_factor`` / ``lu_solve``, checked against
  ``torch.linalg.inv``; ``torch.lu_unpack`` and ``lu_factor_ex`` give the determinant back;
- NLL training with Adam.
"""
import math

import numpy as np

from _common import main, sync_init


def _data(rng, n):
    z = rng.randn(n, 2)
    a = np.stack([z[:, 0], 0.5 * z[:, 0] ** 2 + 0.3 * z[:, 1]], 1)
    b = np.stack([np.sin(a[:, 0]), a[:, 1] - 1.0], 1) + 0.1 * rng.randn(n, 2)
    return np.concatenate([a, b], 1).astype(np.float32)


def run(torch, nn, F, init=None, steps=30, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    C = 4

    class InvLinearLU(nn.Module):
        def __init__(self, c):
            super().__init__()
            w = torch.linalg.qr(torch.randn(c, c))[0]
            p, lower, upper = torch.linalg.lu(w)
            s = torch.diagonal(upper)
            self.register_buffer("p", p)
            self.register_buffer("sign_s", torch.sign(s))
            self.register_buffer("l_mask", torch.tril(torch.ones(c, c), -1))
            self.register_buffer("eye", torch.eye(c))
            self.lower = nn.Parameter(lower)
            self.upper = nn.Parameter(torch.triu(upper, 1))
            self.log_s = nn.Parameter(torch.log(torch.abs(s)))

        def weight(self):
            lower = self.lower * self.l_mask + self.eye
            upper = self.upper * self.l_mask.T + torch.diag(self.sign_s * torch.exp(self.log_s))
            return self.p @ lower @ upper

        def forward(self, x):
            return x @ self.weight().T, self.log_s.sum().expand(x.size(0))

        def inverse(self, z):
            lu, piv = torch.linalg.lu_factor(self.weight())
            return torch.linalg.lu_solve(lu, piv, z.T).T

    class ActNorm(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.loc = nn.Parameter(torch.zeros(c))
            self.log_scale = nn.Parameter(torch.zeros(c))
            self.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))

        def forward(self, x):
            if self.initialized.item() == 0:      # data-dependent init from the first 64 samples
                with torch.no_grad():
                    self.loc.copy_(-x[:64].mean(0))
                    self.log_scale.copy_(-torch.log(x[:64].std(0) + 1e-6))
                    self.initialized.fill_(1)
            return (x + self.loc) * torch.exp(self.log_scale), self.log_scale.sum().expand(x.size(0))

        def inverse(self, z):
            return z * torch.exp(-self.log_scale) - self.loc

    class Coupling(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(c // 2, 32), nn.ReLU(), nn.Linear(32, c))
            nn.init.zeros_(self.net[2].weight)
            nn.init.zeros_(self.net[2].bias)

        def forward(self, x):
            xa, xb = x.chunk(2, dim=1)
            log_s, t = self.net(xa).chunk(2, dim=1)
            log_s = torch.tanh(log_s)
            return torch.cat([xa, xb * torch.exp(log_s) + t], 1), log_s.sum(1)

        def inverse(self, z):
            za, zb = z.chunk(2, dim=1)
            log_s, t = self.net(za).chunk(2, dim=1)
            return torch.cat([za, (zb - t) * torch.exp(-torch.tanh(log_s))], 1)

    layers = nn.ModuleList()
    for _ in range(3):
        layers.extend([ActNorm(C), InvLinearLU(C), Coupling(C)])
    init_state = sync_init(torch, layers, init)
    x = torch.from_numpy(_data(rng, 256))

    def nll(batch):
        z, logdet = batch, torch.zeros(batch.size(0))
        for layer in layers:
            z, ld = layer(z)
            logdet = logdet + ld
        log_pz = -0.5 * (z ** 2).sum(1) - 0.5 * C * math.log(2 * math.pi)
        return -(log_pz + logdet).mean()

    opt = torch.optim.Adam(layers.parameters(), lr=3e-3)
    losses = []
    for step in range(steps):
        batch = x if deterministic else x[torch.randperm(256)[:128]]
        loss = nll(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        z = x
        for layer in layers:
            z, _ = layer(z)
        back = z
        for layer in reversed(layers):
            back = layer.inverse(back)
        recon_err = float((back - x).abs().max())
        inv_layer = layers[1]
        W = inv_layer.weight()
        inv_err = float((inv_layer.inverse(torch.eye(C)) - torch.linalg.inv(W).T).abs().max())
        lu, piv, info = torch.linalg.lu_factor_ex(W)
        p_, l_, u_ = torch.lu_unpack(lu, piv)
        logdet_lu = float(torch.log(torch.abs(torch.diagonal(u_))).sum())
        checks = [logdet_lu, float(inv_layer.log_s.sum()), float(torch.linalg.slogdet(W)[1]),
                  float((p_ @ l_ @ u_ - W).abs().max()) < 1e-5, int(info)]
    log(f"nll {losses[0]:.3f} -> {losses[-1]:.3f}, reconstruction error {recon_err:.1e}")
    return {"losses": losses, "recon_ok": recon_err < 1e-3, "inv_ok": inv_err < 1e-4, "checks": checks,
            "init": init_state}


if __name__ == "__main__":
    main(run)
