"""LU with partial pivoting (ember/ops/linalg_lu.py) against torch: singular inputs (info, the errors),
the argument checks, the deprecated torch.lu / torch.lu_solve, and gradcheck of the rectangular cases
(the table cases in tests/optable/linalg.py compare values and gradients of the common calls)."""
import warnings

import numpy as np
import pytest
import torch

import ember
from oracle import same_error


def _both(fn):
    return fn(torch), fn(ember)


def _close(a, b, atol=1e-6):
    for x, y in zip(a, b):
        np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy(), atol=atol, rtol=1e-5)


SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])


def test_singular_matrix_info_and_errors():
    t, e = _both(lambda L: L.linalg.lu_factor_ex(L.tensor(SINGULAR)))
    _close(t, e)
    assert int(e.info) == int(t.info) > 0 and e.pivots.dtype == ember.int32 and e.info.dtype == ember.int32
    batch = np.stack([np.eye(3), SINGULAR])
    _close(_both(lambda L: L.linalg.lu_factor_ex(L.tensor(batch)))[0], _both(lambda L: L.linalg.lu_factor_ex(
        L.tensor(batch)))[1])
    same_error(lambda L: L.linalg.lu_factor(L.tensor(SINGULAR)))
    same_error(lambda L: L.linalg.lu_factor(L.tensor(batch)))
    # linalg.lu does not raise for a singular matrix
    _close(*_both(lambda L: L.linalg.lu(L.tensor(SINGULAR))))


@pytest.mark.parametrize("call", [
    lambda L: L.linalg.lu_factor(L.randn(3)),
    lambda L: L.linalg.lu_factor(L.ones(3, 3, dtype=L.int64)),
    lambda L: L.linalg.lu_factor(L.randn(3, 3), pivot=False),
    lambda L: L.linalg.lu(L.randn(3, 3), pivot=False),
    lambda L: L.lu_unpack(L.randn(3, 3), L.ones(3, dtype=L.int64)),
])
def test_bad_arguments_raise_like_torch(call):
    same_error(call)


def test_lu_solve_shapes_and_errors():
    rng = np.random.RandomState(1)
    a, b = rng.randn(2, 4, 4), rng.randn(2, 4, 3)
    for left in (True, False):
        for adjoint in (False, True):
            rhs = b if left else np.swapaxes(b, -1, -2)
            _close(*_both(lambda L: (L.linalg.lu_solve(*L.linalg.lu_factor(L.tensor(a)), L.tensor(rhs), left=left,
                                                       adjoint=adjoint),)), atol=1e-9)
    same_error(lambda L: L.linalg.lu_solve(*L.linalg.lu_factor(L.tensor(a)), L.tensor(b[..., :3, :])),
               exact=False)
    same_error(lambda L: L.linalg.lu_solve(*L.linalg.lu_factor(L.tensor(a[..., :3])), L.tensor(b)), exact=False)


def test_unpack_flags_and_deprecated_forms():
    rng = np.random.RandomState(2)
    a = rng.randn(4, 4)
    t, e = _both(lambda L: L.lu_unpack(*L.linalg.lu_factor(L.tensor(a)), unpack_data=False))
    _close(t[:1], e[:1])
    assert e.L.numel() == 0 and e.U.numel() == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _close(*_both(lambda L: L.lu(L.tensor(a))))
        _close(*_both(lambda L: L.lu(L.tensor(a), get_infos=True)))
        b = rng.randn(4, 2)
        _close(*_both(lambda L: (L.lu_solve(L.tensor(b), *L.lu(L.tensor(a))),)), atol=1e-9)
        _close(*_both(lambda L: (L.tensor(b).lu_solve(*L.tensor(a).lu()),)), atol=1e-9)
    with pytest.warns(UserWarning, match="torch.lu is deprecated"):
        ember.lu(ember.tensor(a))


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 3)])
def test_gradcheck(shape):
    rng = np.random.RandomState(3)
    a = ember.tensor(rng.randn(*shape), requires_grad=True)
    assert ember.autograd.gradcheck(lambda x: ember.linalg.lu_factor(x)[0], (a,))
    assert ember.autograd.gradcheck(lambda x: ember.linalg.lu(x)[1:], (a,))
