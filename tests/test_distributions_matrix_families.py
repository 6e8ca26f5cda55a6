"""LowRankMultivariateNormal, VonMises, Wishart and LKJCholesky against torch: densities (and their
gradients), moments, entropies, the derived matrices, shapes of expand/sample, KL divergences, the
constructor errors; draws checked by their moments (the two libraries' generators differ)."""
import numpy as np
import pytest
import torch

import ember
from oracle import same_error

RNG = np.random.default_rng(0)
LOC = RNG.normal(size=(2, 4))
W = RNG.normal(size=(4, 2))
DIAG = RNG.random(4) + 0.5
X = RNG.normal(size=(3, 2, 4))
V = np.array([[2.0, 0.5], [0.5, 1.0]])
CORR = np.array([[1.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 1.0]])


def _cmp(fn, rtol=1e-6, atol=1e-8):
    t, e = fn(torch), fn(ember)
    assert len(t) == len(e)
    for a, b in zip(t, e):
        if isinstance(a, torch.Size):
            assert tuple(a) == tuple(b)
            continue
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=rtol, atol=atol)


def test_lowrank_mvn_matches_torch():
    def fn(L):
        w = L.tensor(W, requires_grad=True)
        d = L.distributions.LowRankMultivariateNormal(L.tensor(LOC), w, L.tensor(DIAG))
        lp = d.log_prob(L.tensor(X))
        lp.sum().backward()
        full = L.distributions.MultivariateNormal(L.tensor(LOC), d.covariance_matrix.detach())
        other = L.distributions.LowRankMultivariateNormal(L.tensor(LOC) * 0.5, L.tensor(W) * 0.7, L.tensor(DIAG) + 0.2)
        kl = L.distributions.kl_divergence
        return (d.batch_shape, lp, w.grad, d.entropy(), d.variance, d.mean, d.covariance_matrix, d.precision_matrix,
                d.scale_tril, full.log_prob(L.tensor(X)), kl(d, other), kl(d, full), kl(full, other),
                d.expand((5, 2)).log_prob(L.tensor(X[0])), L.tensor(d.rsample((7,)).shape))
    _cmp(fn)


@pytest.mark.parametrize("call", [
    lambda L: L.distributions.LowRankMultivariateNormal(L.zeros(4), L.zeros(3, 2), L.ones(4)),
    lambda L: L.distributions.LowRankMultivariateNormal(L.zeros(4), L.zeros(4, 2), L.ones(3)),
    lambda L: L.distributions.LowRankMultivariateNormal(L.tensor(1.0), L.zeros(4, 2), L.ones(4)),
    lambda L: L.distributions.LowRankMultivariateNormal(L.zeros(4), L.zeros(4), L.ones(4)),
])
def test_lowrank_mvn_errors_match_torch(call):
    same_error(call)


def test_lowrank_mvn_draws_have_the_covariance():
    ember.manual_seed(0)
    d = ember.distributions.LowRankMultivariateNormal(ember.tensor(LOC[0]), ember.tensor(W), ember.tensor(DIAG))
    s = d.sample((40000,)).numpy()
    np.testing.assert_allclose(np.cov(s.T), W @ W.T + np.diag(DIAG), atol=0.1)
    np.testing.assert_allclose(s.mean(0), LOC[0], atol=0.05)


def test_von_mises_matches_torch():
    def fn(L):
        # (float64: torch's float32 variance loses digits to cancellation at k=500; ember's does not)
        k = L.tensor([2.0, 0.3, 500.0], dtype=L.float64, requires_grad=True)
        d = L.distributions.VonMises(L.tensor([0.5, -1.0, 0.2], dtype=L.float64), k)
        lp = d.log_prob(L.tensor([0.1, 3.0, 0.21], dtype=L.float64))
        lp.sum().backward()
        return lp, k.grad, d.mean, d.mode, d.variance, d.expand((4, 3)).batch_shape, d.sample((5,)).shape
    _cmp(fn, rtol=1e-5, atol=1e-6)
    with pytest.raises(NotImplementedError):
        ember.distributions.VonMises(0.0, 1.0).entropy()
    assert not ember.distributions.VonMises(0.0, 1.0).has_rsample


def test_von_mises_draws_match_the_circular_moments():
    ember.manual_seed(0)
    s = ember.distributions.VonMises(ember.tensor([0.5, 3.0]), ember.tensor([2.0, 0.3])).sample((40000,)).numpy()
    assert s.min() >= -np.pi and s.max() <= np.pi
    c, sn = np.cos(s).mean(0), np.sin(s).mean(0)
    np.testing.assert_allclose(np.arctan2(sn, c)[0], 0.5, atol=0.03)
    # mean resultant length I1(k)/I0(k)
    np.testing.assert_allclose(np.hypot(c, sn), [0.6978, 0.1483], atol=0.01)


@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_wishart_matches_torch(param):
    def fn(L):
        df = L.tensor([5.0, 6.0], dtype=L.float64, requires_grad=True)
        m = {"covariance_matrix": L.tensor(V), "precision_matrix": L.linalg.inv(L.tensor(V)),
             "scale_tril": L.linalg.cholesky(L.tensor(V))}[param]
        d = L.distributions.Wishart(df, **{param: m})
        x = L.tensor([[3.0, 1.0], [1.0, 2.0]], dtype=L.float64)
        lp = d.log_prob(x)
        lp.sum().backward()
        return (lp, df.grad, d.mean, d.mode, d.variance, d.entropy(), d.covariance_matrix, d.precision_matrix,
                d.scale_tril, d.expand((3, 2)).log_prob(x), d.batch_shape, d.event_shape)
    _cmp(fn)


def test_wishart_draws_have_the_mean():
    ember.manual_seed(1)
    d = ember.distributions.Wishart(ember.tensor(6.0), covariance_matrix=ember.tensor(V))
    s = d.rsample((20000,))
    assert s.shape == (20000, 2, 2)
    np.testing.assert_allclose(s.mean(0).numpy(), 6 * V, rtol=0.05)
    df = ember.tensor(5.0, requires_grad=True)
    ember.distributions.Wishart(df, covariance_matrix=ember.tensor(V)).rsample((100,)).sum().backward()
    assert df.grad is not None and float(df.grad) > 0      # a larger df gives larger draws


@pytest.mark.parametrize("call", [
    lambda L: L.distributions.Wishart(L.tensor(1.0), covariance_matrix=L.eye(3)),
    lambda L: L.distributions.Wishart(L.tensor(5.0)),
    lambda L: L.distributions.LKJCholesky(1),
])
def test_wishart_and_lkj_errors_match_torch(call):
    same_error(call)


def test_lkj_cholesky_matches_torch():
    def fn(L):
        conc = L.tensor([0.5, 2.0], requires_grad=True)
        d = L.distributions.LKJCholesky(3, conc)
        chol = L.linalg.cholesky(L.tensor(CORR))
        lp = d.log_prob(chol)
        lp.sum().backward()
        cc = L.distributions.constraints.corr_cholesky
        return (lp, conc.grad, L.distributions.LKJCholesky(2).log_prob(L.eye(2, dtype=L.float64)),
                d.expand((5, 2)).log_prob(chol), d.batch_shape, d.event_shape,
                cc.check(chol), cc.check(L.eye(3, dtype=L.float64) * 2))
    _cmp(fn)


def test_lkj_cholesky_draws():
    ember.manual_seed(2)
    d = ember.distributions.LKJCholesky(3, ember.tensor([0.5, 2.0]))
    s = d.sample((4000,))
    assert s.shape == (4000, 2, 3, 3)
    assert bool(ember.distributions.constraints.corr_cholesky.check(s).all())
    c = (s @ s.mT).numpy()
    # an off-diagonal correlation of LKJ(eta) in dim d has variance 1 / (2 eta + d - 1)
    np.testing.assert_allclose((c[:, :, 0, 1] ** 2).mean(0), [1 / 3, 1 / 6], rtol=0.1)
