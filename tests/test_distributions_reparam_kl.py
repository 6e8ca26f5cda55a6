"""Gamma-family reparameterised draws (ember/distributions/_incomplete_gamma.py), special.gammainc/gammaincc,
Gamma.cdf and the KL divergences of kl_families.py, against torch: values and gradients of the closed forms,
the implicit derivative of a gamma draw against the derivative of the quantile function, and the
Monte Carlo mean of rsample gradients against the derivative of the analytic mean."""
import numpy as np
import pytest
import torch

import ember
from ember.distributions._incomplete_gamma import standard_gamma_grad, lower_regularized

A = np.array([0.05, 0.5, 2.0, 30.0, 1000.0, 0.2, 5.0, 3.0])
X = np.array([1e-20, 0.3, 2.5, 28.0, 990.0, 10.0, 0.001, 40.0])


def test_gammainc_gammaincc_and_cdf_match_torch():
    for fn in ("gammainc", "gammaincc"):
        res = []
        for L in (torch, ember):
            x = L.tensor(X, requires_grad=True)
            y = getattr(L.special, fn)(L.tensor(A), x)
            y.sum().backward()
            res.append((y.detach().numpy(), x.grad.numpy()))
        np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-8, atol=1e-14)
        np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-8, atol=1e-14)
        for L in (torch, ember):
            with pytest.raises(NotImplementedError, match="derivative for 'igamma"):
                getattr(L.special, fn)(L.tensor(A, requires_grad=True), L.tensor(X)).sum().backward()
    res = [L.distributions.Gamma(L.tensor([2.0, 0.5]), L.tensor([1.5, 3.0])).cdf(L.tensor([[0.5], [3.0]])).numpy()
           for L in (torch, ember)]
    np.testing.assert_allclose(res[1], res[0], rtol=1e-5)


def _quantile(a, p):
    lo, hi = 0.0, 1e4
    for _ in range(200):
        m = (lo + hi) / 2
        if lower_regularized(np.array([a]), np.array([m]))[0] < p:
            lo = m
        else:
            hi = m
    return (lo + hi) / 2


def test_gamma_draw_derivative_is_the_quantile_derivative():
    for a, x in [(0.5, 0.3), (2.0, 2.5), (30.0, 28.0), (0.2, 10.0), (5.0, 0.001)]:
        p = lower_regularized(np.array([a]), np.array([x]))[0]
        h = 1e-5 * max(a, 1)
        numeric = (_quantile(a + h, p) - _quantile(a - h, p)) / (2 * h)
        assert standard_gamma_grad(np.array([a]), np.array([x]))[0] == pytest.approx(numeric, rel=1e-6)
    # torch approximates the same derivative (to ~1e-3)
    np.testing.assert_allclose(standard_gamma_grad(A, X), torch._standard_gamma_grad(torch.tensor(A), torch.tensor(X)),
                               rtol=2e-3)


def _mc_grad(make, n=40000):
    ember.manual_seed(0)
    c = ember.tensor([1.5, 0.7, 3.0], dtype=ember.float64, requires_grad=True)
    draws = make(c).rsample((n,))
    draws.mean(0).sum().backward() if draws.dim() > 1 else draws.mean().backward()
    return c.grad.numpy(), draws.detach().numpy()


def test_rsample_gradients_are_unbiased():
    # Gamma(c, 2): E[x] = c / 2 -> d/dc = 1/2 for each component
    g, d = _mc_grad(lambda c: ember.distributions.Gamma(c, ember.tensor(2.0, dtype=ember.float64)))
    se = d.std(0) / np.sqrt(len(d)) * 2 * 4 + 1e-3
    np.testing.assert_allclose(g, [0.5, 0.5, 0.5], atol=float(se.max()))
    # Dirichlet(c): sum of all components' means is 1 -> zero gradient; first component's mean c0 / sum(c)
    ember.manual_seed(1)
    c = ember.tensor([1.5, 0.7, 3.0], dtype=ember.float64, requires_grad=True)
    draws = ember.distributions.Dirichlet(c).rsample((40000,))
    draws[:, 0].mean().backward()
    s = 5.2
    np.testing.assert_allclose(c.grad.numpy(), [(s - 1.5) / s ** 2, -1.5 / s ** 2, -1.5 / s ** 2], atol=4e-3)
    # Beta(a, b): E[x] = a / (a + b)
    ember.manual_seed(2)
    a = ember.tensor(2.0, dtype=ember.float64, requires_grad=True)
    b = ember.tensor(3.0, dtype=ember.float64, requires_grad=True)
    ember.distributions.Beta(a, b).rsample((40000,)).mean().backward()
    assert float(a.grad) == pytest.approx(3 / 25, abs=4e-3) and float(b.grad) == pytest.approx(-2 / 25, abs=4e-3)
    # StudentT draws now carry a gradient to df, Chi2 to its df
    df = ember.tensor(4.0, requires_grad=True)
    ember.distributions.StudentT(df).rsample((10,)).sum().backward()
    assert df.grad is not None
    df = ember.tensor(3.0, dtype=ember.float64, requires_grad=True)
    ember.manual_seed(3)
    ember.distributions.Chi2(df).rsample((40000,)).mean().backward()     # E = df
    assert float(df.grad) == pytest.approx(1.0, abs=0.03)


def _pairs(L, made=None):
    D = L.distributions
    made = [] if made is None else made

    def t(*v):
        x = L.tensor(np.array(v, dtype=np.float64), requires_grad=True)
        made.append(x)
        return x
    return {
        "beta": (D.Beta(t(2.0, 0.5), t(1.5, 3.0)), D.Beta(t(1.0, 2.0), t(0.7, 4.0))),
        "dirichlet": (D.Dirichlet(t(2.0, 0.5, 1.5)), D.Dirichlet(t(1.0, 2.0, 3.0))),
        "gamma": (D.Gamma(t(2.0, 0.5), t(1.5, 3.0)), D.Gamma(t(1.0, 2.0), t(0.7, 4.0))),
        "chi2": (D.Chi2(t(2.0, 5.0)), D.Chi2(t(3.0, 1.0))),
        "exp_gamma": (D.Exponential(t(1.5, 0.3)), D.Gamma(t(1.0, 2.0), t(0.7, 4.0))),
        "gamma_exp": (D.Gamma(t(2.0, 0.5), t(1.5, 3.0)), D.Exponential(t(1.5, 0.3))),
        "poisson": (D.Poisson(t(2.0, 0.5)), D.Poisson(t(1.0, 4.0))),
        "binomial": (D.Binomial(5, probs=t(0.3, 0.8)), D.Binomial(5, probs=t(0.5, 0.1))),
        "binomial_inf": (D.Binomial(7, probs=t(0.3, 0.8)), D.Binomial(5, probs=t(0.5, 0.1))),
        "gumbel": (D.Gumbel(t(0.0, 1.0), t(1.0, 2.0)), D.Gumbel(t(0.5, -1.0), t(2.0, 0.5))),
        "halfnormal": (D.HalfNormal(t(1.0, 2.0)), D.HalfNormal(t(2.0, 0.5))),
        "cauchy": (D.Cauchy(t(0.0, 1.0), t(1.0, 2.0)), D.Cauchy(t(0.5, -1.0), t(2.0, 0.5))),
        "lognormal": (D.LogNormal(t(0.0, 1.0), t(1.0, 2.0)), D.LogNormal(t(0.5, -1.0), t(2.0, 0.5))),
    }


@pytest.mark.parametrize("pair", sorted(_pairs(torch)))
def test_kl_divergences_match_torch(pair):
    res = []
    for L in (torch, ember):
        made = []
        p, q = _pairs(L, made)[pair]
        kl = L.distributions.kl_divergence(p, q)
        params = [v for v in made if v.requires_grad]
        finite = kl.detach().numpy()[np.isfinite(kl.detach().numpy())]
        grads = L.autograd.grad(kl[L.isfinite(kl)].sum(), params, allow_unused=True) if finite.size else []
        res.append((kl.detach().numpy(), [None if g is None else g.numpy() for g in grads]))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-10)
    for a, b in zip(res[0][1], res[1][1]):
        if a is not None and b is not None:
            np.testing.assert_allclose(b, a, rtol=1e-7, atol=1e-12)


def test_binomial_kl_with_larger_q_count_raises_like_torch():
    for L in (torch, ember):
        with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
            L.distributions.kl_divergence(L.distributions.Binomial(3, probs=L.tensor(0.5)),
                                          L.distributions.Binomial(5, probs=L.tensor(0.5)))


def test_igamma_names():
    x = np.array([1.0, 2.0, 0.5])
    for fn in (lambda L: L.igamma(L.tensor(x), L.tensor(x[::-1].copy())), lambda L: L.tensor(x).igammac(L.tensor(x))):
        np.testing.assert_allclose(fn(ember).numpy(), fn(torch).numpy(), rtol=1e-12)
