"""Two density models on 2-D / 1-D synthetic data:

- a RealNVP normalizing flow on two moons: affine coupling layers with alternating binary masks
  (register_buffer), scale nets with Tanh, s/t chunked from one output, the log-det of the Jacobian
  summed per sample, a torch.distributions.MultivariateNormal base (log_prob and sample), NLL
  training with Adam, then sampling by running the couplings in reverse;
- a mixture-density network on an inverse problem (x = y + 0.3 sin(2 pi y) + noise, predict y from x):
  an MLP emitting mixture logits, means and log-scales, scored with
  torch.distributions.MixtureSameFamily(Categorical(logits=), Normal(loc, scale)) and trained by its
  negative log-likelihood; mean / variance of the mixture, sampling, and a torch.distributions.Beta /
  LogNormal / TransformedDistribution(TanhTransform) sanity check.
"""
import math

import numpy as np

from _common import main, sync_init


def _moons(rng, n):
    t = rng.uniform(0, math.pi, n)
    upper = rng.rand(n) < 0.5
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    return (np.stack([x, y], 1) + 0.05 * rng.randn(n, 2)).astype(np.float32)


def run(torch, nn, F, init=None, steps=30, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    D = torch.distributions

    class Coupling(nn.Module):
        def __init__(self, mask, hidden=32):
            super().__init__()
            self.register_buffer("mask", mask)
            self.net = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, 4))
            self.scale = nn.Parameter(torch.zeros(2))

        def forward(self, x):                  # data -> latent, with log|det J|
            s, t = self.net(x * self.mask).chunk(2, dim=1)
            s = torch.tanh(s) * self.scale * (1 - self.mask)
            t = t * (1 - self.mask)
            z = x * self.mask + (1 - self.mask) * (x * torch.exp(s) + t)
            return z, s.sum(dim=1)

        def inverse(self, z):
            s, t = self.net(z * self.mask).chunk(2, dim=1)
            s = torch.tanh(s) * self.scale * (1 - self.mask)
            t = t * (1 - self.mask)
            return z * self.mask + (1 - self.mask) * ((z - t) * torch.exp(-s))

    class RealNVP(nn.Module):
        def __init__(self, n_layers=4):
            super().__init__()
            masks = [torch.tensor([1.0, 0.0]) if i % 2 == 0 else torch.tensor([0.0, 1.0]) for i in range(n_layers)]
            self.layers = nn.ModuleList([Coupling(m) for m in masks])
            self.base = D.MultivariateNormal(torch.zeros(2), torch.eye(2))

        def forward(self, x):
            log_det = torch.zeros(x.shape[0])
            for layer in self.layers:
                x, ld = layer(x)
                log_det = log_det + ld
            return x, log_det

        def log_prob(self, x):
            z, log_det = self(x)
            return self.base.log_prob(z) + log_det

        def sample(self, n):
            if deterministic:
                z = torch.from_numpy(rng.randn(n, 2).astype(np.float32))
            else:
                z = self.base.sample((n,))
            for layer in reversed(self.layers):
                z = layer.inverse(z)
            return z

    class MDN(nn.Module):
        def __init__(self, k=4, hidden=32):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(1, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
            self.pi = nn.Linear(hidden, k)
            self.mu = nn.Linear(hidden, k)
            self.log_sigma = nn.Linear(hidden, k)

        def forward(self, x):
            h = self.body(x)
            mix = D.Categorical(logits=self.pi(h))
            comp = D.Normal(self.mu(h), self.log_sigma(h).clamp(-5, 3).exp())
            return D.MixtureSameFamily(mix, comp)

    flow, mdn = RealNVP(), MDN()
    init_state = sync_init(torch, nn.ModuleDict({"flow": flow, "mdn": mdn}), init)
    opt_f = torch.optim.Adam(flow.parameters(), lr=3e-3)
    opt_m = torch.optim.Adam(mdn.parameters(), lr=1e-2)
    yv = rng.uniform(0, 1, (256, 1)).astype(np.float32)
    xv = (yv + 0.3 * np.sin(2 * np.pi * yv) + 0.05 * rng.randn(256, 1)).astype(np.float32)
    X_mdn, Y_mdn = torch.from_numpy(xv), torch.from_numpy(yv)
    losses, mdn_losses = [], []
    for step in range(steps):
        x = torch.from_numpy(_moons(rng, 128))
        loss = -flow.log_prob(x).mean()
        opt_f.zero_grad()
        loss.backward()
        opt_f.step()
        losses.append(loss.item())
        dist = mdn(X_mdn)
        nll = -dist.log_prob(Y_mdn.squeeze(1)).mean()
        opt_m.zero_grad()
        nll.backward()
        nn.utils.clip_grad_norm_(mdn.parameters(), 5.0)
        opt_m.step()
        mdn_losses.append(nll.item())
        if step % 10 == 0:
            log(f"step {step}: flow nll {loss.item():.4f}  mdn nll {nll.item():.4f}")

    with torch.no_grad():
        samples = flow.sample(64)
        grid = torch.linspace(0, 1, 5).unsqueeze(1)
        dist = mdn(grid)
        mdn_mean, mdn_var = dist.mean, dist.variance
        drawn = dist.sample((3,))
        assert tuple(drawn.shape) == (3, 5)
        # other families a program of this kind touches
        beta = D.Beta(torch.tensor([2.0, 0.5]), torch.tensor([3.0, 0.5]))
        lognorm = D.LogNormal(torch.tensor([0.0]), torch.tensor([0.5]))
        squashed = D.TransformedDistribution(D.Normal(torch.zeros(2), torch.ones(2)),
                                             [D.transforms.TanhTransform(cache_size=1)])
        checks = [beta.log_prob(torch.tensor([0.3, 0.9])).tolist(), beta.mean.tolist(),
                  lognorm.log_prob(torch.tensor([1.5])).tolist(), lognorm.mean.tolist(),
                  squashed.log_prob(torch.tensor([0.2, -0.7])).tolist()]
    return {"losses": losses, "mdn_losses": mdn_losses, "sample_stats": [samples.mean(0).tolist(),
            samples.std(0).tolist()], "mdn_mean": mdn_mean.tolist(), "mdn_var": mdn_var.tolist(),
            "checks": checks, "init": init_state}


if __name__ == "__main__":
    main(run)
