"""RelaxedBernoulli, RelaxedOneHotCategorical, Weibull, Pareto, HalfCauchy, Multinomial and NegativeBinomial
against torch:
log_prob, moments, entropy, cdf, sample shapes and supports, reparameterised gradients."""
import numpy as np
import pytest
import torch

import ember


def _t(lib, v):
    return lib.tensor(np.asarray(v, dtype=np.float32))


def _n(x):
    return np.asarray(x.detach().numpy() if hasattr(x, "detach") else x, dtype=np.float64)


CASES = {
    "relaxed_bernoulli": (lambda L, D: D.RelaxedBernoulli(_t(L, 0.7), probs=_t(L, [0.2, 0.6, 0.9])),
                          [0.1, 0.5, 0.95], ()),
    "relaxed_bernoulli_logits": (lambda L, D: D.RelaxedBernoulli(_t(L, 0.3), logits=_t(L, [-1.0, 2.0])),
                                 [0.3, 0.8], ()),
    "relaxed_one_hot": (lambda L, D: D.RelaxedOneHotCategorical(_t(L, 0.5), probs=_t(L, [0.2, 0.3, 0.5])),
                        [0.1, 0.3, 0.6], ()),
    "weibull": (lambda L, D: D.Weibull(_t(L, [1.0, 2.0]), _t(L, [1.5, 0.7])), [0.5, 3.0],
                ("mean", "variance", "entropy", "cdf")),
    "pareto": (lambda L, D: D.Pareto(_t(L, [1.0, 2.0]), _t(L, [3.0, 2.5])), [1.5, 4.0],
               ("mean", "variance", "entropy", "cdf")),
    "half_cauchy": (lambda L, D: D.HalfCauchy(_t(L, [1.0, 0.5])), [0.3, 2.0], ("entropy", "cdf", "variance")),
    "multinomial": (lambda L, D: D.Multinomial(5, probs=_t(L, [0.2, 0.3, 0.5])), [1.0, 1.0, 3.0],
                    ("mean", "variance")),
    "negative_binomial": (lambda L, D: D.NegativeBinomial(_t(L, [3.0, 5.0]), probs=_t(L, [0.3, 0.6])), [2.0, 7.0],
                          ("mean", "variance", "mode")),
    "negative_binomial_logits": (lambda L, D: D.NegativeBinomial(_t(L, 2.0), logits=_t(L, 0.5)), 3.0,
                                 ("mean", "variance")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    make, value, extra = CASES[name]
    dt, de = make(torch, torch.distributions), make(ember, ember.distributions)
    np.testing.assert_allclose(_n(de.log_prob(_t(ember, value))), _n(dt.log_prob(_t(torch, value))),
                               rtol=1e-5, atol=1e-5)
    assert tuple(de.batch_shape) == tuple(dt.batch_shape) and tuple(de.event_shape) == tuple(dt.event_shape)
    for attr in extra:
        if attr == "cdf":
            a, b = dt.cdf(_t(torch, value)), de.cdf(_t(ember, value))
        elif attr == "entropy":
            a, b = dt.entropy(), de.entropy()
        else:
            a, b = getattr(dt, attr), getattr(de, attr)
        np.testing.assert_allclose(_n(b), _n(a), rtol=1e-5, atol=1e-5, err_msg=attr)
    s = de.sample((4,))
    assert tuple(s.shape) == tuple(dt.sample((4,)).shape)
    assert bool(de.support.check(s).all())


@pytest.mark.parametrize("name", ["relaxed_bernoulli", "relaxed_one_hot", "weibull", "pareto", "half_cauchy"])
def test_rsample_is_differentiable(name):
    D = ember.distributions
    p = ember.tensor([0.2, 0.3, 0.5], requires_grad=True)
    d = {"relaxed_bernoulli": lambda: D.RelaxedBernoulli(ember.tensor(0.5), probs=p),
         "relaxed_one_hot": lambda: D.RelaxedOneHotCategorical(ember.tensor(0.5), probs=p),
         "weibull": lambda: D.Weibull(p + 1, ember.tensor(1.5)),
         "pareto": lambda: D.Pareto(p + 1, ember.tensor(3.0)),
         "half_cauchy": lambda: D.HalfCauchy(p + 1)}[name]()
    ember.manual_seed(0)
    s = d.rsample((64,))
    assert d.has_rsample and bool(d.support.check(s).all())
    s.sum().backward()
    assert p.grad is not None and bool(ember.isfinite(p.grad).all())


def test_multinomial_counts_sum_to_total():
    ember.manual_seed(0)
    s = ember.distributions.Multinomial(7, logits=ember.tensor([[0.0, 1.0, 2.0], [2.0, 0.0, -1.0]])).sample((5,))
    assert s.shape == (5, 2, 3) and bool((s.sum(-1) == 7).all())
