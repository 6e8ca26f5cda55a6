"""Mean-field variational Bayes for a sparse linear regression, the way probabilistic code writes it with
torch.distributions: weights w ~ Laplace(0, 0.3) (a sparsity prior), noise variance s2 ~ InverseGamma(2, 1);
q(w) = Normal(m, softplus(r)), q(s2) = InverseGamma(softplus(a), softplus(b)).

The ELBO's KL terms are ``kl_divergence(Normal, Laplace)`` (across families) and
``kl_divergence(InverseGamma, InverseGamma)`` (a TransformedDistribution pair); the expected
log-likelihood is estimated from ``rsample`` draws of both posteriors, or with ``deterministic=True`` taken
in closed form (E[1/s2] = a/b, E[log s2] = log b - digamma(a)) so torch and ember follow the same path.
At the end the posterior is read: the weights' means (the zero weights shrink), the noise variance's mean,
mode and cdf at the true value, and a Kumaraswamy / FisherSnedecor check of the residuals' spread.
"""
import math

import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, steps=80, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    D = torch.distributions
    n, d = 60, 6
    w_true = np.array([2.0, 0.0, 0.0, -1.5, 0.0, 0.5])
    Xn = rng.normal(size=(n, d))
    X = torch.tensor(Xn.astype(np.float32))
    y = torch.tensor((Xn @ w_true + 0.3 * rng.normal(size=n)).astype(np.float32))
    w_prior = D.Laplace(torch.zeros(d), torch.full((d,), 0.3))
    s2_prior = D.InverseGamma(torch.tensor(2.0), torch.tensor(1.0))

    class Posterior(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = nn.Parameter(torch.zeros(d))
            self.r = nn.Parameter(torch.full((d,), -1.0))
            self.a = nn.Parameter(torch.tensor(1.0))
            self.b = nn.Parameter(torch.tensor(1.0))

        def forward(self):
            return (D.Normal(self.m, F.softplus(self.r) + 1e-4),
                    D.InverseGamma(F.softplus(self.a) + 1e-3, F.softplus(self.b) + 1e-3))

    post = Posterior()
    init_state = sync_init(torch, post, init)
    opt = torch.optim.Adam(post.parameters(), lr=0.1)
    losses = []
    for step in range(steps):
        qw, qs = post()
        if deterministic:
            resid2 = (y - X @ qw.mean).pow(2) + (X.pow(2) * qw.variance).sum(1)
            inv_s2 = qs.concentration / qs.rate
            log_s2 = torch.log(qs.rate) - torch.digamma(qs.concentration)
            loglik = (-0.5 * math.log(2 * math.pi) - 0.5 * log_s2 - 0.5 * inv_s2 * resid2).sum()
        else:
            w = qw.rsample((8,))                                     # (8, d)
            s2 = qs.rsample((8,))                                    # (8,)
            loglik = D.Normal(w @ X.t(), s2.sqrt().unsqueeze(-1)).log_prob(y).sum(-1).mean()
        kl = D.kl_divergence(qw, w_prior).sum() + D.kl_divergence(qs, s2_prior)
        loss = (kl - loglik) / n
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        qw, qs = post()
        w_mean = qw.mean
        small = int((w_mean.abs() < 0.25).sum())
        s2_stats = [float(qs.mean), float(qs.mode), float(qs.cdf(torch.tensor(0.09)))]
        resid = y - X @ w_mean
        ratio = resid[: n // 2].var() / resid[n // 2:].var()
        f = D.FisherSnedecor(torch.tensor(n / 2 - 1.0), torch.tensor(n / 2 - 1.0))
        spread = [float(f.log_prob(ratio)), float(D.Kumaraswamy(torch.tensor(2.0), torch.tensor(3.0)).cdf(
            (resid.abs().max() / (resid.abs().max() + 1)).clamp(1e-6, 1 - 1e-6)))]
    log(f"-elbo/N {losses[0]:.3f} -> {losses[-1]:.3f}, w {np.round(w_mean.tolist(), 2).tolist()}, "
        f"E[s2] {s2_stats[0]:.3f}, near-zero weights {small}")
    return {"losses": losses, "w_mean": w_mean.tolist(), "small": small, "s2": s2_stats, "spread": spread,
            "init": init_state}


if __name__ == "__main__":
    main(run)
