"""Variational inference with reparameterised Gamma and Dirichlet posteriors (the "pathwise gradients for
Gamma" pattern of probabilistic-programming code), on two conjugate models whose exact posteriors are known:

- Poisson counts per group with a Gamma(2, 1) prior on each rate: q(rate) = Gamma(softplus(.), softplus(.));
- category counts with a Dirichlet(1) prior on the proportions: q = Dirichlet(softplus(.)).

The ELBO's expected log-likelihood is estimated from ``q.rsample()`` draws (their gradients with respect
to the concentrations come from implicit reparameterisation), the KL term is
``torch.distributions.kl_divergence(q, prior)``; with ``deterministic=True`` the expectations are the
closed forms (E[log x] = digamma(a) - log b, ...) so torch and ember follow the same path. At the end the
variational means are compared with the exact posterior means, and Gamma.cdf / special.gammainc are read.
"""
import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, steps=60, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    D = torch.distributions
    G, n, K = 5, 20, 4
    true_rates = rng.uniform(0.5, 6.0, G)
    counts = torch.tensor(rng.poisson(true_rates[:, None], (G, n)).astype(np.float32))
    cats = torch.tensor(np.bincount(rng.choice(K, 50, p=[0.1, 0.2, 0.3, 0.4]), minlength=K).astype(np.float32))
    prior = D.Gamma(torch.tensor(2.0), torch.tensor(1.0))
    dir_prior = D.Dirichlet(torch.ones(K))

    class Posterior(nn.Module):
        def __init__(self):
            super().__init__()
            self.raw_a = nn.Parameter(torch.zeros(G))
            self.raw_b = nn.Parameter(torch.zeros(G))
            self.raw_c = nn.Parameter(torch.zeros(K))

        def forward(self):
            return (D.Gamma(F.softplus(self.raw_a) + 1e-3, F.softplus(self.raw_b) + 1e-3),
                    D.Dirichlet(F.softplus(self.raw_c) + 1e-3))

    post = Posterior()
    init_state = sync_init(torch, post, init)
    opt = torch.optim.Adam(post.parameters(), lr=0.1)
    lgam = torch.lgamma(counts + 1).sum(1)
    losses = []
    for step in range(steps):
        q, qd = post()
        if deterministic:
            e_log = torch.digamma(q.concentration) - torch.log(q.rate)
            loglik = counts.sum(1) * e_log - n * q.mean - lgam
            e_logp = torch.digamma(qd.concentration) - torch.digamma(qd.concentration.sum(-1, keepdim=True))
            dir_loglik = (cats * e_logp).sum()
        else:
            rates = q.rsample((8,))                                  # (8, G)
            loglik = D.Poisson(rates.unsqueeze(-1)).log_prob(counts).sum(-1).mean(0)
            props = qd.rsample((8,))
            dir_loglik = (cats * torch.log(props)).sum(-1).mean()
        elbo = loglik.sum() - D.kl_divergence(q, prior).sum() + dir_loglik - D.kl_divergence(qd, dir_prior)
        loss = -elbo / (G * n)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        q, qd = post()
        exact = (2.0 + counts.sum(1)) / (1.0 + n)
        exact_dir = (1.0 + cats) / (K + cats.sum())
        rate_err = float(((q.mean - exact) / exact).abs().max())
        dir_err = float((qd.mean - exact_dir).abs().max())
        cdf = q.cdf(exact)
        reg = torch.special.gammainc(q.concentration, q.rate * exact)
    log(f"-elbo/N {losses[0]:.3f} -> {losses[-1]:.3f}, posterior mean error {rate_err:.3f} (rates), "
        f"{dir_err:.3f} (proportions)")
    return {"losses": losses, "rate_err": rate_err, "dir_err": dir_err, "cdf": cdf.tolist(),
            "same_cdf": float((cdf - reg).abs().max()), "means": q.mean.tolist(), "init": init_state}


if __name__ == "__main__":
    main(run)
