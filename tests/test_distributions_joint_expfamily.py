"""torch.distributions pieces checked against torch: CatTransform, StackTransform, CorrCholeskyTransform,
CumulativeDistributionTransform (values, inverses, log-dets, constraints, biject_to/transform_to, with_cache),
the ExponentialFamily base (isinstance, entropy and Bregman KL through autograd) and GeneralizedPareto."""
import numpy as np
import pytest
import torch

import ember


def _np(v):
    if hasattr(v, "detach"):
        return v.detach().numpy()
    return np.asarray(v)


def close(fn, tol=1e-6):
    t, e = fn(torch), fn(ember)
    if not isinstance(t, (tuple, list)):
        t, e = [t], [e]
    assert len(t) == len(e)
    for a, b in zip(t, e):
        np.testing.assert_allclose(_np(b), _np(a), rtol=tol, atol=tol)


x = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)
def cat(L):
    D = L.distributions; T = D.transforms
    t = T.CatTransform([T.ExpTransform(), T.AffineTransform(1., 2.), T.SigmoidTransform()], dim=1, lengths=[2, 2, 1])
    xx = L.tensor(x); y = t(xx)
    return y, t.inv(y), t.log_abs_det_jacobian(xx, y), t.domain.check(xx), t.codomain.check(y)

def cat0(L):
    D = L.distributions; T = D.transforms
    t = T.CatTransform([T.ExpTransform(), T.StickBreakingTransform()], dim=-1, lengths=[2, 3])
    xx = L.tensor(x); y = T.CatTransform([T.ExpTransform(), T.ExpTransform()], dim=0, lengths=[1, 2])(xx)
    t2 = T.CatTransform([T.IndependentTransform(T.ExpTransform(), 1), T.IndependentTransform(T.AffineTransform(0., 3.), 1)], dim=0, lengths=[1,2])
    y2 = t2(xx)
    return y, t2.log_abs_det_jacobian(xx, y2), t2.event_dim

def stack(L):
    T = L.distributions.transforms
    t = T.StackTransform([T.ExpTransform(), T.AffineTransform(1., 2.), T.TanhTransform()], dim=0)
    xx = L.tensor(x); y = t(xx)
    t1 = T.StackTransform([T.ExpTransform()] * 5, dim=1)
    return y, t.inv(y), t.log_abs_det_jacobian(xx, y), t.codomain.check(y), t1(xx), t1.log_abs_det_jacobian(xx, t1(xx)), t.domain.event_dim

def corr(L):
    T = L.distributions.transforms
    t = T.CorrCholeskyTransform()
    v = L.tensor(np.random.default_rng(1).normal(size=(4, 6)).astype(np.float64), requires_grad=True)
    y = t(v)
    ld = t.log_abs_det_jacobian(v, y)
    g, = L.autograd.grad(ld.sum() + y.sum(), v)
    return y, t.inv(y), ld, g, L.tensor(t.forward_shape((2, 6))), L.tensor(t.inverse_shape((4, 4))), t.codomain.check(y), L.distributions.biject_to(L.distributions.constraints.corr_cholesky)(v)

def cdt(L):
    D = L.distributions; T = D.transforms
    t = T.CumulativeDistributionTransform(D.Normal(L.tensor([0., 1.]), L.tensor([1., 2.])))
    xx = L.tensor(x[:, :2]); y = t(xx)
    td = D.TransformedDistribution(D.Normal(0., 1.), [T.CumulativeDistributionTransform(D.Normal(0., 1.))])
    return y, t.inv(y), t.log_abs_det_jacobian(xx, y), td.log_prob(L.tensor([0.1, 0.5, 0.9]))

def reg(L):
    D = L.distributions; C = D.constraints
    c = C.cat([C.positive, C.real, C.unit_interval], dim=0, lengths=[1, 1, 1])
    s = C.stack([C.positive, C.unit_interval], dim=1)
    z = L.tensor([[0.3, -1.2], [2.0, 0.1], [-0.5, 0.4]])
    return D.biject_to(c)(z), D.transform_to(s)(z), c.check(D.biject_to(c)(z)), s.check(D.transform_to(s)(z)), L.tensor(float(s.event_dim)), L.tensor(float(C.stack([C.real_vector], dim=-1).event_dim))


@pytest.mark.parametrize("fn,tol", [(cat, 1e-6), (cat0, 1e-6), (stack, 1e-6), (corr, 1e-10), (cdt, 2e-6), (reg, 1e-6)])
def test_joint_transforms_match_torch(fn, tol):
    close(fn, tol)


def test_with_cache_and_errors_match_torch():
    for L in (torch, ember):
        T = L.distributions.transforms
        assert T.ExpTransform().with_cache(1)._cache_size == 1
        assert T.ExpTransform().inv.with_cache(1)._cache_size == 1
        assert T.AffineTransform(0., 2.).with_cache(1)._cache_size == 1
        with pytest.raises(AssertionError):
            T.CatTransform([T.ExpTransform()], dim=0, lengths=[2])(L.ones(3))
        with pytest.raises(ValueError, match="flattened lower-diagonal"):
            T.CorrCholeskyTransform().forward_shape((4,))
        assert T.CorrCholeskyTransform().forward_shape((2, 6)) == (2, 4, 4)

def fams(L):
    D = L.distributions
    return [D.Normal(L.tensor([0., 1.]), L.tensor([1., 2.])), D.Bernoulli(L.tensor([0.3, 0.8])), D.Beta(L.tensor([2., 0.5]), L.tensor([1.5, 3.])),
            D.Dirichlet(L.tensor([[1., 2., 3.], [0.5, 0.5, 4.]])), D.Exponential(L.tensor([0.5, 2.])), D.Gamma(L.tensor([2., 0.7]), L.tensor([1., 3.])),
            D.Poisson(L.tensor([0.5, 4.])), D.ContinuousBernoulli(L.tensor([0.2, 0.7]))]

def ent(L):
    out=[]
    for d in fams(L):
        if type(d).__name__ not in ('Normal','Bernoulli','Exponential','ContinuousBernoulli'): continue
        out.append(L.distributions.ExponentialFamily.entropy(d))
    return out

def kl(L):
    out=[]
    D=L.distributions
    for p, q in zip(fams(L), fams(L)[::-1]):
        pass
    ps = fams(L); qs = [D.Normal(L.tensor([0.5, 0.]), L.tensor([2., 1.])), D.Bernoulli(L.tensor([0.5, 0.1])), D.Beta(L.tensor([1., 2.]), L.tensor([2., 2.])),
            D.Dirichlet(L.tensor([[2., 2., 2.], [1., 1., 1.]])), D.Exponential(L.tensor([1., 1.])), D.Gamma(L.tensor([1., 2.]), L.tensor([2., 1.])),
            D.Poisson(L.tensor([1., 2.])), D.ContinuousBernoulli(L.tensor([0.4, 0.5]))]
    from_mod = L.distributions.kl
    for p, q in zip(ps, qs):
        out.append(L.distributions.kl._kl_expfamily_expfamily(p, q) if L is torch else ember.distributions.exp_family._kl_bregman(p, q))
        out.append(D.kl_divergence(p, q))
    return out

def gp(L):
    D=L.distributions
    loc=L.tensor([0., 1., -1., 0.5]); scale=L.tensor([1., 2., 0.5, 1.]); c=L.tensor([0.3, 0., -0.4, 1.5])
    d=D.GeneralizedPareto(loc, scale, c, validate_args=False)
    x=L.tensor([0.5, 2., -0.8, 3.])
    u=L.tensor([0.1, 0.5, 0.9, 0.99])
    return [d.log_prob(x), d.cdf(x), d.icdf(u), d.log_cdf(x), d.log_survival_function(x), d.mean, d.variance, d.entropy(), d.mode, d.support.upper_bound, d.expand((3,4)).log_prob(x), D.GeneralizedPareto(0., 1., 0.2).log_prob(L.tensor(1.0))]

def gp_grad(L):
    loc=L.tensor([0., 1.], requires_grad=True); scale=L.tensor([1., 2.], requires_grad=True); c=L.tensor([0.3, -0.2], requires_grad=True)
    d=L.distributions.GeneralizedPareto(loc, scale, c)
    y = d.icdf(L.tensor([0.3, 0.6])) + d.log_prob(L.tensor([1.5, 2.0]))
    return L.autograd.grad(y.sum(), [loc, scale, c])


@pytest.mark.parametrize("fn,tol", [(ent, 1e-5), (kl, 2e-5), (gp, 1e-5), (gp_grad, 1e-5)])
def test_exponential_family_and_generalized_pareto_match_torch(fn, tol):
    close(fn, tol)


def test_exponential_family_membership_and_missing_parts():
    for L in (torch, ember):
        D = L.distributions
        assert all(isinstance(d, D.ExponentialFamily) for d in fams(L))
        assert not isinstance(D.Laplace(0., 1.), D.ExponentialFamily)
        with pytest.raises(NotImplementedError):
            D.ExponentialFamily.entropy(D.Poisson(L.tensor([1.])))
        with pytest.raises(NotImplementedError, match="Bregman"):
            D.kl_divergence(D.Dirichlet(L.tensor([1., 2.])), D.Beta(L.tensor(1.), L.tensor(2.)))


def test_generalized_pareto_sampling_and_support():
    ember.manual_seed(0)
    d = ember.distributions.GeneralizedPareto(0., 1., 0.2)
    s = d.rsample((20000,))
    assert s.shape == (20000,) and float(s.min()) >= 0
    assert abs(float(s.mean()) - 1 / 0.8) < 0.1            # mean scale / (1 - c)
    with pytest.raises(ValueError):
        d.log_prob(ember.tensor(-1.0))
    assert ember.distributions.transforms.CatTransform is ember.distributions.CatTransform
