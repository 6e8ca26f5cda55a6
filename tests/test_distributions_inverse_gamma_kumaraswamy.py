"""InverseGamma, Kumaraswamy, LogisticNormal OneHotCategoricalStraightThrough, FisherSnedecor and ContinuousBernoulli against torch (moments, entropy, log_prob, cdf, shapes, expand,
rsample statistics and gradients), plus what they needed: PowerTransform.sign (a decreasing transform flips
the cdf), ComposeTransform.forward_shape/inverse_shape, TransformedDistribution.expand through a transform
that owns event dims. Kumaraswamy.mode is checked against the argmax of torch's density (torch's own mode
property returns NaN for b > 1)."""
import numpy as np
import pytest
import torch

import ember


def T(L, *a, grad=False):
    return L.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def _close(e, t, **k):
    np.testing.assert_allclose(np.asarray(e.detach().numpy()), t.detach().numpy(), rtol=1e-9, atol=1e-12, **k)


def test_inverse_gamma():
    d = {L: L.distributions.InverseGamma(T(L, 0.5, 1.5, 3.), T(L, 1., 2., 3.)) for L in (torch, ember)}
    for name in ("mean", "mode", "variance", "concentration", "rate"):
        _close(getattr(d[ember], name), getattr(d[torch], name))
    _close(d[ember].entropy(), d[torch].entropy())
    for L in (torch, ember):
        d[L] = (d[L], d[L].log_prob(T(L, 0.7)), d[L].cdf(T(L, 0.7)))
    _close(d[ember][1], d[torch][1])
    _close(d[ember][2], d[torch][2])
    assert d[ember][0].expand([2, 3]).mean.shape == (2, 3)
    ember.manual_seed(0)
    s = d[ember][0].rsample((40000,))
    np.testing.assert_allclose(s.median(0).values.numpy(), [4.396, 1.700, 1.120], rtol=0.05)


def test_kumaraswamy():
    a, b = (0.5, 2., 3., 1.), (2., 0.5, 4., 1.)
    d = {L: L.distributions.Kumaraswamy(T(L, *a), T(L, *b)) for L in (torch, ember)}
    for name in ("mean", "variance"):
        _close(getattr(d[ember], name), getattr(d[torch], name))
    _close(d[ember].entropy(), d[torch].entropy())
    x = (0.05, 0.3, 0.7, 0.95)
    for v in x:
        _close(d[ember].log_prob(T(ember, v)), d[torch].log_prob(T(torch, v)))
        _close(d[ember].cdf(T(ember, v)), d[torch].cdf(T(torch, v)))
    assert str(d[ember].support) == str(d[torch].support)
    assert d[ember].expand([2, 4]).batch_shape == (2, 4)
    # the mode: a > 1 and b > 1 only (nan elsewhere); compare with the argmax of torch's density
    mode = d[ember].mode.numpy()
    assert np.isnan(mode[[0, 1]]).all()
    grid = torch.linspace(1e-4, 1 - 1e-4, 20001, dtype=torch.float64)
    dens = torch.distributions.Kumaraswamy(torch.tensor(3.), torch.tensor(4.)).log_prob(grid)
    assert abs(mode[2] - grid[dens.argmax()].item()) < 1e-4
    ember.manual_seed(1)
    s = d[ember].rsample((40000,))
    np.testing.assert_allclose(s.mean(0).numpy(), d[torch].mean.numpy(), atol=0.01)


def test_kumaraswamy_rsample_gradient():
    a = ember.tensor(2.0, requires_grad=True)
    ember.manual_seed(2)
    s = ember.distributions.Kumaraswamy(a, ember.tensor(3.0)).rsample((20000,))
    s.mean().backward()
    # d/da of E X = d/da b B(1 + 1/a, b), from torch's mean by autograd
    ta = torch.tensor(2.0, requires_grad=True)
    torch.distributions.Kumaraswamy(ta, torch.tensor(3.0)).mean.backward()
    assert abs(a.grad.item() - ta.grad.item()) < 0.01


def test_logistic_normal():
    d = {L: L.distributions.LogisticNormal(T(L, 0.1, -0.3), T(L, 1., 0.5)) for L in (torch, ember)}
    assert d[ember].event_shape == (3,) and d[ember].batch_shape == ()
    _close(d[ember].log_prob(T(ember, 0.2, 0.3, 0.5)), d[torch].log_prob(T(torch, 0.2, 0.3, 0.5)))
    _close(d[ember].loc, d[torch].loc)
    e3 = d[ember].expand([4])
    assert e3.batch_shape == (4,) and e3.rsample((2,)).shape == (2, 4, 3)
    s = d[ember].rsample((5,))
    np.testing.assert_allclose(s.sum(-1).numpy(), 1.0, rtol=1e-12)


@pytest.mark.parametrize("exponent", [-1.0, 2.0, -0.5])
def test_power_transform_sign_and_compose_shapes(exponent):
    for L in (torch, ember):
        tr = L.distributions.transforms
        p = tr.PowerTransform(L.tensor(exponent))
        assert float(p.sign) == np.sign(exponent)
        c = tr.ComposeTransform([tr.ExpTransform(), tr.StickBreakingTransform()])
        assert tuple(c.forward_shape((5, 2))) == (5, 3) and tuple(c.inverse_shape((5, 3))) == (5, 2)


def test_one_hot_straight_through():
    grads = []
    for L in (torch, ember):
        logits = L.tensor([[0.2, -1.0, 0.5], [1.0, 0.0, -2.0]], requires_grad=True)
        d = L.distributions.OneHotCategoricalStraightThrough(logits=logits)
        assert d.has_rsample and d.expand([3, 2]).batch_shape == (3, 2)
        assert type(d.expand([3, 2])).__name__ == "OneHotCategoricalStraightThrough"
        s = d.rsample((4,))
        assert s.shape == (4, 2, 3) and bool((s.detach().sum(-1) == 1).all())
        (s * L.tensor([1.0, 2.0, 3.0])).sum().backward()             # the value's gradient is probs'
        grads.append(logits.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6, atol=1e-7)


def test_fisher_snedecor():
    d = {L: L.distributions.FisherSnedecor(T(L, 1., 3., 6.), T(L, 2., 5., 10.)) for L in (torch, ember)}
    for name in ("mean", "mode", "variance"):
        _close(getattr(d[ember], name), getattr(d[torch], name), equal_nan=True)
    for v in (0.1, 1.0, 4.0):
        _close(d[ember].log_prob(T(ember, v)), d[torch].log_prob(T(torch, v)))
    assert d[ember].expand([2, 3]).batch_shape == (2, 3)
    assert d[ember].rsample((5,)).shape == (5, 3)
    ember.manual_seed(4)
    s = ember.distributions.FisherSnedecor(ember.tensor(6.0), ember.tensor(10.0)).rsample((40000,))
    assert abs(s.median().item() - 0.9544) < 0.02           # the F(6, 10) median
    df1 = ember.tensor(6.0, requires_grad=True)
    ember.distributions.FisherSnedecor(df1, ember.tensor(10.0)).rsample((100,)).sum().backward()
    assert df1.grad is not None and np.isfinite(df1.grad.item())


@pytest.mark.parametrize("kind", ["probs", "logits"])
def test_continuous_bernoulli(kind):
    vals = (0.1, 0.4995, 0.5, 0.7, 0.999) if kind == "probs" else (-2.0, 0.0, 0.001, 3.0)
    out = []
    for L in (torch, ember):
        par = T(L, *vals, grad=True)
        d = L.distributions.ContinuousBernoulli(**{kind: par})
        v, u = T(L, 0.3), T(L, 0.8)
        row = [d.mean, d.variance, d.entropy(), d.log_prob(v), d.cdf(v), d.icdf(u), d.cdf(T(L, 1.0)), d.cdf(T(L, 0.0))]
        d.icdf(u).sum().backward()                                  # rsample's pathwise gradient
        out.append([r.detach().numpy() for r in row] + [par.grad.numpy()])
        assert d.expand([2, len(vals)]).batch_shape == (2, len(vals)) and d.rsample((3,)).shape == (3, len(vals))
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)
