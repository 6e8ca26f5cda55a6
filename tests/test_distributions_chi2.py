"""Chi2 against torch.distributions.Chi2: moments, log_prob, entropy, shapes, expand, validation, draws."""
import numpy as np
import pytest
import torch

import ember
from ember.distributions import Chi2


def test_chi2_matches_torch():
    df = np.array([[0.7, 1.0, 3.0], [5.5, 10.0, 2.0]], dtype=np.float32)
    e, t = Chi2(ember.tensor(df)), torch.distributions.Chi2(torch.tensor(df))
    x = np.array([0.3, 1.2, 4.0], dtype=np.float32)
    for name in ("mean", "variance", "mode"):
        np.testing.assert_allclose(getattr(e, name).numpy(), getattr(t, name).numpy(), rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(e.df.numpy(), t.df.numpy(), rtol=1e-6)
    np.testing.assert_allclose(e.log_prob(ember.tensor(x)).numpy(), t.log_prob(torch.tensor(x)).numpy(), rtol=1e-5)
    np.testing.assert_allclose(e.entropy().numpy(), t.entropy().numpy(), rtol=1e-5, atol=1e-6)
    assert tuple(e.batch_shape) == tuple(t.batch_shape) and tuple(e.event_shape) == ()
    assert tuple(e.sample((4,)).shape) == tuple(t.sample((4,)).shape) == (4, 2, 3)
    ex = Chi2(ember.tensor(3.0)).expand((2, 5))
    assert type(ex) is Chi2 and tuple(ex.batch_shape) == (2, 5)
    np.testing.assert_allclose(ex.df.numpy(), np.full((2, 5), 3.0))


def test_chi2_validation_and_draws():
    with pytest.raises(ValueError, match="df"):
        Chi2(ember.tensor([1.0, -2.0]))
    with pytest.raises(ValueError, match="support"):
        Chi2(ember.tensor(2.0)).log_prob(ember.tensor(-1.0))
    ember.manual_seed(0)
    a = Chi2(ember.tensor(4.0)).sample((20000,)).numpy()
    ember.manual_seed(0)
    b = Chi2(ember.tensor(4.0)).sample((20000,)).numpy()
    np.testing.assert_array_equal(a, b)
    # mean 4, variance 8: five standard errors of the sample mean and a loose variance band
    assert abs(a.mean() - 4.0) < 5 * np.sqrt(8.0 / 20000)
    assert abs(a.var() - 8.0) < 0.5
