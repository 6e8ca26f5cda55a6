"""torch's top-level loss forms (``torch.kl_div(input, target, 2)`` and co., int reduction) against torch:
values for every reduction code, gradients, and the argument errors."""
import numpy as np
import pytest
import torch

import ember


def _pair(a, grad=False):
    return torch.tensor(a, requires_grad=grad), ember.tensor(a, requires_grad=grad)


rng = np.random.default_rng(0)
X = rng.standard_normal((4, 5)).astype(np.float32)
Y = rng.standard_normal((4, 5)).astype(np.float32)
Z = rng.standard_normal((4, 5)).astype(np.float32)
S = np.array([1, -1, 1, -1], np.float32)
B = (rng.random((4, 5)) > 0.5).astype(np.float32)

CASES = {
    "kl_div": (lambda m, x, r: m.kl_div(x.log_softmax(1), m.tensor(Y).softmax(1), r)),
    "kl_div_log_target": (lambda m, x, r: m.kl_div(x, m.tensor(Y), r, log_target=True)),
    "binary_cross_entropy_with_logits": (lambda m, x, r: m.binary_cross_entropy_with_logits(
        x, m.tensor(B), m.tensor(np.abs(Y)), m.tensor(np.full(5, 2.0, np.float32)), r)),
    "cosine_embedding_loss": (lambda m, x, r: m.cosine_embedding_loss(x, m.tensor(Y), m.tensor(S), 0.1, r)),
    "hinge_embedding_loss": (lambda m, x, r: m.hinge_embedding_loss(x, m.tensor(np.sign(Y)), 0.5, r)),
    "margin_ranking_loss": (lambda m, x, r: m.margin_ranking_loss(x, m.tensor(Y), m.tensor(np.sign(Z)), 0.2, r)),
    "poisson_nll_loss": (lambda m, x, r: m.poisson_nll_loss(x, m.tensor(np.abs(Y)), True, True, 1e-8, r)),
    "triplet_margin_loss": (lambda m, x, r: m.triplet_margin_loss(x, m.tensor(Y), m.tensor(Z), 1.0, 2, 1e-6,
                                                                 True, r)),
}


@pytest.mark.parametrize("reduction", [0, 1, 2, 5])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name, reduction):
    f = CASES[name]
    xt, xe = _pair(X, grad=True)
    rt, re = f(torch, xt, reduction), f(ember, xe, reduction)
    assert tuple(re.shape) == tuple(rt.shape)
    np.testing.assert_allclose(re.detach().numpy(), rt.detach().numpy(), rtol=1e-5, atol=1e-6)
    rt.sum().backward()
    re.sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_default_reduction_as_torch(name):
    """torch's top-level forms return the unreduced loss when reduction is left out."""
    f = CASES[name]
    xt, xe = _pair(X)
    no_red = {"kl_div": lambda m, x: m.kl_div(x, m.tensor(np.abs(Y))),
              "hinge_embedding_loss": lambda m, x: m.hinge_embedding_loss(x, m.tensor(np.sign(Y))),
              "cosine_embedding_loss": lambda m, x: m.cosine_embedding_loss(x, m.tensor(Y), m.tensor(S)),
              "margin_ranking_loss": lambda m, x: m.margin_ranking_loss(x, m.tensor(Y), m.tensor(np.sign(Z))),
              "triplet_margin_loss": lambda m, x: m.triplet_margin_loss(x, m.tensor(Y), m.tensor(Z)),
              "binary_cross_entropy_with_logits": lambda m, x: m.binary_cross_entropy_with_logits(x, m.tensor(B))}
    g = no_red.get(name)
    if g is None:
        assert name in ("kl_div_log_target", "poisson_nll_loss")   # (poisson's arguments are all required)
        g = lambda m, x: f(m, x, 0)                               # noqa: E731
    rt, re = g(torch, xt), g(ember, xe)
    assert tuple(re.shape) == tuple(rt.shape)
    np.testing.assert_allclose(re.numpy(), rt.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_ctc_loss(reduction):
    lp = rng.standard_normal((6, 2, 4)).astype(np.float32)
    tg = np.array([[1, 2], [3, 3]], np.int64)
    rt = torch.ctc_loss(torch.tensor(lp).log_softmax(2), torch.tensor(tg), [6, 5], [2, 2], 0, reduction, False)
    re = ember.ctc_loss(ember.tensor(lp).log_softmax(2), ember.tensor(tg), [6, 5], [2, 2], 0, reduction, False)
    np.testing.assert_allclose(re.numpy(), rt.numpy(), rtol=1e-5, atol=1e-5)
    if reduction == 0:
        d = ember.ctc_loss(ember.tensor(lp).log_softmax(2), ember.tensor(tg), [6, 5], [2, 2])
        np.testing.assert_allclose(d.numpy(), rt.numpy(), rtol=1e-5, atol=1e-5)     # default: none


def test_string_reduction_is_type_error():
    xt, xe = _pair(X)
    with pytest.raises(TypeError, match=r"argument 'reduction'.* must be int, not str"):
        torch.kl_div(xt, xt, "mean")
    with pytest.raises(TypeError, match=r"argument 'reduction'.* must be int, not str"):
        ember.kl_div(xe, xe, "mean")
    with pytest.raises(TypeError):
        ember.poisson_nll_loss(xe, xe)          # every argument is required, as torch's
