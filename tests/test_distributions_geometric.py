"""Geometric against torch.distributions.Geometric: moments, log_prob, entropy, shapes, expand,
validation, and draws checked against the analytic moments."""
import numpy as np
import pytest
import torch

import ember
from ember.distributions import Geometric


@pytest.mark.parametrize("kind", ["probs", "logits"])
def test_geometric_matches_torch(kind):
    p = np.array([[0.1, 0.5, 1.0], [0.3, 0.9, 0.05]], dtype=np.float32)
    arg = p if kind == "probs" else np.log(np.clip(p, 1e-6, 1 - 1e-6) / (1 - np.clip(p, 1e-6, 1 - 1e-6)))
    e = Geometric(**{kind: ember.tensor(arg)})
    t = torch.distributions.Geometric(**{kind: torch.tensor(arg)})
    for name in ("mean", "variance", "mode"):
        np.testing.assert_allclose(getattr(e, name).numpy(), getattr(t, name).numpy(), rtol=1e-4, atol=1e-5)
    x = np.array([0.0, 2.0, 5.0], dtype=np.float32)
    np.testing.assert_allclose(e.log_prob(ember.tensor(x)).numpy(), t.log_prob(torch.tensor(x)).numpy(),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(e.entropy().numpy(), t.entropy().numpy(), rtol=1e-4, atol=1e-5)
    assert tuple(e.sample((3,)).shape) == tuple(t.sample((3,)).shape) == (3, 2, 3)
    ex = Geometric(probs=ember.tensor(0.25)).expand((4,))
    assert type(ex) is Geometric and tuple(ex.batch_shape) == (4,)
    np.testing.assert_allclose(ex.mean.numpy(), np.full(4, 3.0))


def test_geometric_validation_and_draws():
    with pytest.raises(ValueError):
        Geometric(probs=ember.tensor([0.5, 1.5]))
    with pytest.raises(ValueError):
        torch.distributions.Geometric(probs=torch.tensor([0.0]))
    with pytest.raises(ValueError):
        Geometric(probs=ember.tensor([0.0]))
    with pytest.raises(ValueError, match="support"):
        Geometric(probs=ember.tensor(0.5)).log_prob(ember.tensor(1.5))
    ember.manual_seed(1)
    a = Geometric(probs=ember.tensor(0.2)).sample((20000,)).numpy()
    ember.manual_seed(1)
    b = Geometric(probs=ember.tensor(0.2)).sample((20000,)).numpy()
    np.testing.assert_array_equal(a, b)
    assert (a >= 0).all() and (a == np.floor(a)).all()
    # mean (1-p)/p = 4, variance (1-p)/p^2 = 20
    assert abs(a.mean() - 4.0) < 5 * np.sqrt(20.0 / 20000)
    assert abs(a.var() - 20.0) < 2.0


def test_geometric_kl_matches_torch():
    a, b = np.array([0.2, 0.5, 0.7], np.float32), np.array([0.4, 0.5, 0.1], np.float32)
    e = ember.distributions.kl_divergence(Geometric(probs=ember.tensor(a)), Geometric(probs=ember.tensor(b)))
    t = torch.distributions.kl_divergence(torch.distributions.Geometric(probs=torch.tensor(a)),
                                          torch.distributions.Geometric(probs=torch.tensor(b)))
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-4, atol=1e-6)
    assert not isinstance(Geometric(probs=ember.tensor(0.5)), ember.distributions.Bernoulli)
