"""ReshapeTransform, LowerCholeskyTransform and PositiveDefiniteTransform against torch: values, inverses,
shapes, log-det, errors, equality, and a TransformedDistribution through a reshape."""
import numpy as np
import pytest
import torch

import ember

M = np.array([[0.3, 0.5, -1.], [0.2, -0.4, 0.7], [1.1, 0.0, 0.1]])


def both(fn):
    return fn(torch), fn(ember)


def test_reshape_transform():
    def f(L):
        tr = L.distributions.transforms
        x = L.tensor(np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 10 - 1)
        r = tr.ReshapeTransform((3, 4), (2, 6))
        y = r(x)
        return (y.numpy(), r.inv(y).numpy(), tuple(r.log_abs_det_jacobian(x, y).shape), tuple(r.forward_shape((5, 3, 4))),
                tuple(r.inverse_shape((2, 6))), r.domain.event_dim, r.codomain.event_dim, r.bijective)
    t, e = both(f)
    for a, b in zip(t, e):
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
    for L in (torch, ember):
        with pytest.raises(ValueError, match="different numbers of elements"):
            L.distributions.transforms.ReshapeTransform((3,), (2, 2))
        with pytest.raises(ValueError, match="Shape mismatch"):
            L.distributions.transforms.ReshapeTransform((3, 4), (2, 6)).forward_shape((3, 5))


def test_cholesky_transforms():
    def f(L):
        tr = L.distributions.transforms
        m = L.tensor(M)
        lc, pd = tr.LowerCholeskyTransform(), tr.PositiveDefiniteTransform()
        return (lc(m).numpy(), lc.inv(lc(m)).numpy(), pd(m).numpy(), pd.inv(pd(m)).numpy(),
                lc == tr.LowerCholeskyTransform(), pd == lc, lc.codomain.event_dim)
    t, e = both(f)
    for a, b in zip(t, e):
        np.testing.assert_allclose(np.asarray(b, dtype=float), np.asarray(a, dtype=float), rtol=1e-12, atol=1e-12)


def test_transformed_distribution_through_reshape():
    def f(L):
        D = L.distributions
        td = D.TransformedDistribution(D.Normal(L.zeros(2, 6), L.ones(2, 6)),
                                       [D.transforms.ReshapeTransform((6,), (2, 3))])
        v = L.tensor(np.linspace(-1, 1, 12).reshape(2, 2, 3))
        return tuple(td.batch_shape), tuple(td.event_shape), td.log_prob(v).numpy(), tuple(td.sample((4,)).shape)
    t, e = both(f)
    assert t[0] == e[0] and t[1] == e[1] and t[3] == e[3]
    np.testing.assert_allclose(e[2], t[2], rtol=1e-6)
