"""Regression tests for what the compat programs (examples/compat) found missing or wrong in distributions
and torch.func, each checked against torch."""

import numpy as np
import pytest
import torch

import ember
from compat_support import _assert_same, assert_same, both, same_error


# ---- distributions -----------------------------------------------------------------------------------------------

_RS = np.random.RandomState(0)
_L = (np.tril(_RS.rand(3, 3)) + np.eye(3)).astype(np.float32)
_COV = (_L @ _L.T).astype(np.float32)
_LOGITS = _RS.randn(2, 4).astype(np.float32)


@pytest.mark.parametrize("fn", [
    lambda m, D: D.Normal(m.tensor([0.0, 1.0]), m.tensor([1.0, 2.0])).log_prob(m.tensor([[0.5, 0.5], [1.0, 2.0]])),
    lambda m, D: D.Normal(m.tensor([0.0, 1.0]), m.tensor([1.0, 2.0])).entropy(),
    lambda m, D: (D.Normal(0.0, 2.0).cdf(m.tensor([0.3, -1.0])), D.Normal(0.0, 2.0).icdf(m.tensor([0.3, 0.9]))),
    lambda m, D: D.kl_divergence(D.Normal(m.tensor([0.0, 1.0]), m.tensor([1.0, 2.0])), D.Normal(m.tensor([0.5]),
                                                                                                  m.tensor([3.0]))),
    lambda m, D: D.Normal(m.tensor([0.0, 1.0]), 1.0).expand((3, 2)).log_prob(m.zeros(3, 2)),
    lambda m, D: D.Categorical(logits=m.tensor(_LOGITS)).log_prob(m.tensor([1, 3])),
    lambda m, D: D.Categorical(probs=m.tensor([0.2, 0.3, 0.5])).log_prob(m.tensor([[0, 1], [2, 2]])),
    lambda m, D: (D.Categorical(logits=m.tensor(_LOGITS)).entropy(), D.Categorical(probs=m.tensor([0.0, 0.5, 0.5]))
                  .entropy(), D.Categorical(logits=m.tensor(_LOGITS)).probs, D.Categorical(probs=m.tensor([1.0, 3.0]))
                  .logits),
    lambda m, D: D.kl_divergence(D.Categorical(logits=m.tensor(_LOGITS)), D.Categorical(probs=m.tensor([0.1, 0.2, 0.3,
                                                                                                        0.4]))),
    lambda m, D: D.kl_divergence(D.Categorical(probs=m.tensor([0.0, 1.0])), D.Categorical(probs=m.tensor([0.5, 0.5]))),
    lambda m, D: (D.Categorical(logits=m.tensor(_LOGITS)).mode, D.Categorical(logits=m.tensor(_LOGITS)).mean,
                  D.Categorical(logits=m.tensor(_LOGITS)).enumerate_support()),
    lambda m, D: D.OneHotCategorical(logits=m.tensor(_LOGITS)).log_prob(m.tensor([[0.0, 1, 0, 0], [0, 0, 0, 1]])),
    lambda m, D: (D.Bernoulli(probs=m.tensor([0.2, 0.7])).log_prob(m.tensor([1.0, 0.0])),
                  D.Bernoulli(logits=m.tensor([0.2, -3.0])).entropy(), D.Bernoulli(probs=m.tensor([0.2, 0.5, 0.7])).mode),
    lambda m, D: D.kl_divergence(D.Bernoulli(probs=m.tensor([0.2, 0.7])), D.Bernoulli(logits=m.tensor([0.2, -3.0]))),
    lambda m, D: (D.Uniform(m.tensor([0.0, 1.0]), m.tensor([2.0, 4.0])).log_prob(m.tensor([1.0, 1.5])),
                  D.Uniform(0.0, 2.0).cdf(m.tensor([0.5, 1.5])),
                  D.Uniform(0.0, 1.0, validate_args=False).log_prob(m.tensor(2.0))),
    lambda m, D: D.kl_divergence(D.Uniform(0.0, 1.0), D.Uniform(m.tensor([-1.0, 0.5]), m.tensor([2.0, 3.0]))),
    lambda m, D: (D.Exponential(m.tensor([0.5, 2.0])).log_prob(m.tensor([1.0, 0.3])), D.Exponential(2.0).entropy(),
                  D.kl_divergence(D.Exponential(m.tensor([0.5, 2.0])), D.Exponential(1.5))),
    lambda m, D: (D.Laplace(m.tensor([0.0, 1.0]), m.tensor([1.0, 2.0])).log_prob(m.tensor([0.5, -1.0])),
                  D.Laplace(0.0, 2.0).cdf(m.tensor([0.4, -1.0])), D.kl_divergence(D.Laplace(0.0, 1.0), D.Laplace(1.0, 2.0))),
    lambda m, D: (D.Independent(D.Normal(m.zeros(2, 3), m.ones(2, 3)), 1).log_prob(m.arange(6.0).view(2, 3)),
                  D.kl_divergence(D.Independent(D.Normal(m.zeros(2, 3), m.ones(2, 3)), 1),
                                  D.Independent(D.Normal(m.ones(2, 3), m.ones(2, 3) * 2), 1))),
    lambda m, D: (D.MultivariateNormal(m.zeros(3), covariance_matrix=m.tensor(_COV)).log_prob(
        m.tensor([[0.5, -0.3, 1.0], [0.0, 0.0, 0.0]])), D.MultivariateNormal(m.ones(2, 3), scale_tril=m.tensor(_L))
        .log_prob(m.tensor([0.5, -0.3, 1.0])), D.MultivariateNormal(m.zeros(2, 3), covariance_matrix=m.tensor(_COV))
        .entropy()),
    lambda m, D: D.kl_divergence(D.MultivariateNormal(m.zeros(3), covariance_matrix=m.tensor(_COV)),
                                 D.MultivariateNormal(m.ones(3), scale_tril=m.tensor(_L * 0.5 + np.eye(3, dtype=np.float32)))),
    lambda m, D: (D.MultivariateNormal(m.zeros(3), precision_matrix=m.tensor(np.linalg.inv(_COV).astype(np.float32)))
                  .log_prob(m.tensor([0.5, -0.3, 1.0])), D.MultivariateNormal(m.zeros(3), scale_tril=m.tensor(_L))
                  .covariance_matrix),
])
def test_distributions_match_torch(fn):
    assert_same(lambda m: fn(m, m.distributions), atol=2e-5)


def test_distribution_shapes_validation_and_gradients():
    for lib in (torch, ember):
        D = lib.distributions
        assert tuple(D.Normal(lib.zeros(3), 1.0).sample((5, 2)).shape) == (5, 2, 3)
        assert tuple(D.Categorical(logits=lib.zeros(2, 4)).sample((5,)).shape) == (5, 2)
        assert D.Categorical(logits=lib.zeros(2, 4)).sample().dtype == lib.int64
        d = D.Independent(D.Normal(lib.zeros(2, 3), lib.ones(2, 3)), 1)
        assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (3,)
        assert tuple(D.MultivariateNormal(lib.zeros(3), scale_tril=lib.tensor(_L)).rsample((4,)).shape) == (4, 3)
    for fn in (lambda m: m.distributions.Normal(m.tensor([0.0]), m.tensor([-1.0])),
               lambda m: m.distributions.Categorical(probs=m.tensor([-0.1, 1.1])),
               lambda m: m.distributions.Categorical(probs=m.tensor([0.5, 0.5])).log_prob(m.tensor(3)),
               lambda m: m.distributions.Bernoulli(probs=m.tensor([0.2])).log_prob(m.tensor([0.5])),
               lambda m: m.distributions.Uniform(2.0, 1.0),
               lambda m: m.distributions.Uniform(0.0, 1.0).log_prob(m.tensor(2.0)),
               lambda m: m.distributions.Categorical(),
               lambda m: m.distributions.Normal(m.zeros(3), 1.0).log_prob(m.zeros(2))):
        same_error(fn, exact=True)
    assert repr(ember.distributions.Normal(ember.zeros(3), 1.0)) == "Normal(loc: ember.Size([3]), scale: ember.Size([3]))"

    def grads(lib):
        D = lib.distributions
        loc = lib.tensor([0.3, -0.2], requires_grad=True)
        sc = lib.tensor([1.5, 0.7], requires_grad=True)
        lg = lib.tensor(_LOGITS, requires_grad=True)
        tot = (D.Normal(loc, sc).log_prob(lib.tensor([1.0, 2.0])).sum() + D.Normal(loc, sc).entropy().sum()
               + D.kl_divergence(D.Categorical(logits=lg), D.Categorical(logits=lg * 0.5)).sum()
               + D.Categorical(logits=lg).entropy().sum() + D.Normal(loc, sc).rsample().sum() * 0)
        tot.backward()
        return loc.grad, sc.grad, lg.grad
    assert_same(grads, atol=1e-5)
    ember.manual_seed(0)
    s = ember.distributions.Normal(ember.tensor(2.0), ember.tensor(0.5)).sample((20000,))
    assert abs(s.mean().item() - 2.0) < 0.02 and abs(s.std().item() - 0.5) < 0.02
    c = ember.distributions.Categorical(probs=ember.tensor([0.2, 0.3, 0.5])).sample((20000,))
    assert np.allclose(np.bincount(c.numpy(), minlength=3) / 20000, [0.2, 0.3, 0.5], atol=0.015)


# ---- torch.func -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [
    lambda m, F, x, y: F.grad(lambda a: (a ** 3).sum())(x),
    lambda m, F, x, y: F.grad(F.grad(lambda a: (a ** 3).sum()))(m.tensor(2.0)),
    lambda m, F, x, y: F.grad_and_value(lambda a, b: (a * b).sin().sum(), argnums=(0, 1))(x, y),
    lambda m, F, x, y: F.grad(lambda a: ((a ** 2).sum(), a.mean()), has_aux=True)(x),
    lambda m, F, x, y: F.grad(lambda d: (d["w"] * d["b"]).sum())({"w": x, "b": y})["w"],
    lambda m, F, x, y: F.vjp(lambda a: a.sin() * 2, x)[1](m.ones(3)),
    lambda m, F, x, y: F.jacrev(lambda a: a.sin() * a.sum())(x),
    lambda m, F, x, y: F.jacrev(lambda a, b: a * b, argnums=(0, 1))(x, y),
    lambda m, F, x, y: F.jacfwd(lambda a: a.exp())(x),
    lambda m, F, x, y: F.hessian(lambda a: (a ** 3).sum() + a.prod())(x),
    lambda m, F, x, y: F.jvp(lambda a: a.sin() * a.sum(), (x,), (y,)),
    lambda m, F, x, y: F.vmap(lambda a, b: a @ b, in_dims=(0, None))(m.ones(3, 2, 2), m.tensor([1.0, 2.0])),
    lambda m, F, x, y: F.vmap(lambda a: (a.sum(), a * 2))(m.arange(6.0).view(2, 3)),
    lambda m, F, x, y: F.vmap(lambda a: a.sum(0), in_dims=1)(m.arange(6.0).view(2, 3)),
    lambda m, F, x, y: F.vmap(F.grad(lambda a: (a ** 2).sum()))(m.arange(6.0).view(2, 3)),
])
def test_func_transforms_match_torch(fn):
    def run(m):
        out = fn(m, m.func, m.tensor([1.0, 2.0, 3.0]), m.tensor([0.5, -1.0, 2.0]))
        return out
    t, e = both(run)
    _assert_same(t, e, 1e-4)
    for a in ember.func._flatten(e)[0]:
        if isinstance(a, ember.Tensor):
            assert not a.requires_grad


def test_func_errors_and_functional_call():
    same_error(lambda m: m.func.grad(lambda a: a ** 2)(m.tensor([1.0, 2.0])), exact=True)
    same_error(lambda m: m.func.vmap(lambda a, b: a + b)(m.ones(2, 3), m.ones(3, 3)), exact=True)

    def run(lib):
        m = lib.nn.Linear(3, 2)
        m.load_state_dict({"weight": lib.ones(2, 3), "bias": lib.zeros(2)})
        x = lib.tensor([1.0, 2.0, 3.0])
        a = lib.func.functional_call(m, {"weight": lib.full((2, 3), 2.0)}, (x,))
        b = lib.func.functional_call(m, ({"weight": lib.full((2, 3), 3.0)}, {"bias": lib.ones(2)}), x)
        return a, b, m(x), lib.func.stack_module_state([m, m])[0]["weight"]
    assert_same(run)
    same_error(lambda m: m.func.functional_call(m.nn.Linear(2, 2), {"weight": m.ones(2, 2)}, m.ones(2), strict=True),
               exact=True)
    same_error(lambda m: m.func.functional_call(m.nn.Linear(2, 2), ({"weight": m.ones(2, 2)}, {"weight": m.ones(2, 2)}),
                                                m.ones(2)), exact=True)

    def closure(lib):            # a closed-over tensor that requires grad keeps the graph
        xr = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        g = lib.func.grad(lambda a: (a ** 2 * xr).sum())(lib.tensor([1.0, 2.0, 3.0]))
        g.sum().backward()
        return g.requires_grad, xr.grad
    assert_same(closure)

