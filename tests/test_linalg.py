"""Linear algebra beyond the op table: error types and messages (against torch), LinAlgError,
out=/in-place forms, low-precision matmul, singular-matrix gradients, the ember.linalg namespace."""
import warnings

import numpy as np
import pytest
import torch

import ember

warnings.filterwarnings("ignore", category=UserWarning)


def _pair(*arrays):
    """The same values as (ember tensors, torch tensors)."""
    e = [ember.from_numpy(np.array(a)) for a in arrays]
    t = [torch.from_numpy(np.array(a)) for a in arrays]
    return e, t


def _same_error(fn, *arrays):
    """``fn(lib, *tensors)`` raises the same exception type and message in ember and torch."""
    e_in, t_in = _pair(*arrays)
    with pytest.raises(Exception) as te:
        fn(torch, *t_in)
    with pytest.raises(Exception) as ee:
        fn(ember, *e_in)
    t_exc, e_exc = te.value, ee.value
    if isinstance(t_exc, torch.linalg.LinAlgError):
        assert isinstance(e_exc, ember.linalg.LinAlgError), type(e_exc)
    else:
        assert type(e_exc) is type(t_exc), (type(e_exc), type(t_exc), str(e_exc))
    assert str(e_exc) == str(t_exc).split("\n")[0], f"\nember: {e_exc}\ntorch: {t_exc}"


f32 = lambda *s: np.ones(s, np.float32)          # noqa: E731
f64 = lambda *s: np.ones(s, np.float64)          # noqa: E731
i64 = lambda *s: np.ones(s, np.int64)            # noqa: E731
b8 = lambda *s: np.ones(s, np.bool_)             # noqa: E731

PRODUCT_ERRORS = [
    (lambda m, a, b: m.mm(a, b), (f32(2, 3), f32(4, 5))),
    (lambda m, a, b: m.mm(a, b), (f32(2, 3), f64(3, 5))),
    (lambda m, a, b: m.mm(a, b), (f32(3), f32(3, 5))),
    (lambda m, a, b: m.mm(a, b), (f32(2, 3), f32(3))),
    (lambda m, a, b: m.mm(a, b), (i64(2, 3), f32(3, 5))),
    (lambda m, a, b: m.mm(a, b), (b8(2, 3), b8(3, 5))),
    (lambda m, a, b: m.matmul(a, b), (f32(2, 3), f32(4, 5))),
    (lambda m, a, b: m.matmul(a, b), (f32(2, 3), f64(3, 5))),
    (lambda m, a, b: m.matmul(a, b), (f32(3), f64(3))),
    (lambda m, a, b: m.matmul(a, b), (f32(3), f32(4))),
    (lambda m, a, b: m.matmul(a, b), (f32(2, 3), f32(4))),
    (lambda m, a, b: m.matmul(a, b), (f32(3), f32(4, 5))),
    (lambda m, a, b: m.matmul(a, b), (f32(2, 2, 3), f32(2, 4, 5))),
    (lambda m, a, b: m.matmul(a, b), (f32(2, 3, 4), f32(3, 4, 6))),
    (lambda m, a, b: m.matmul(a, b), (f32(2, 3, 4), f32(5, 6))),
    (lambda m, a, b: m.matmul(a, b), (f32(2, 3, 4), f32(5))),
    (lambda m, a, b: m.matmul(a, b), (f32(2, 3, 4), f64(2, 4, 6))),
    (lambda m, a, b: m.matmul(a, b), (f32(2, 3, 4), f64(4))),
    (lambda m, a, b: m.matmul(a, b), (f32(4), f32(2, 5, 6))),
    (lambda m, a, b: m.matmul(a, b), (f32(), f32(3))),
    (lambda m, a, b: m.matmul(a, b), (b8(2, 3), b8(3, 4))),
    (lambda m, a, b: a @ b, (f32(2, 3), f32(4, 5))),
    (lambda m, a, b: m.bmm(a, b), (f32(2, 3, 4), f32(2, 5, 6))),
    (lambda m, a, b: m.bmm(a, b), (f32(3, 4), f32(3, 4, 6))),
    (lambda m, a, b: m.bmm(a, b), (f32(2, 3, 4), f64(2, 4, 6))),
    (lambda m, a, b: m.mv(a, b), (f32(2, 3), f32(4))),
    (lambda m, a, b: m.mv(a, b), (f32(2, 3), f64(3))),
    (lambda m, a, b: m.mv(a, b), (f32(2, 3), f32(3, 1))),
    (lambda m, a, b: m.dot(a, b), (f32(3), f32(4))),
    (lambda m, a, b: m.dot(a, b), (f32(3, 1), f32(3))),
    (lambda m, a, b: m.dot(a, b), (f32(3), f64(3))),
    (lambda m, a, b: m.dot(a, b), (b8(3), b8(3))),
    (lambda m, a, b: m.vdot(a, b), (f32(3), f32(4))),
    (lambda m, a, b: m.inner(a, b), (f32(2, 3), f32(4, 4))),
    (lambda m, a, b: m.inner(a, b), (f32(2, 3), f64(4, 3))),
    (lambda m, a, b: m.outer(a, b), (f32(2, 3), f32(4))),
    (lambda m, a, b: m.outer(a, b), (f32(3), f32(3, 1))),
    (lambda m, a, b: m.tensordot(a, b, dims=1), (f32(2, 3), f32(4, 5))),
    (lambda m, a, b: m.tensordot(a, b, dims=([0], [0])), (f32(2, 3), f32(3, 5))),
    (lambda m, a, b: m.tensordot(a, b, dims=-1), (f32(2, 3), f32(3, 5))),
    (lambda m, a, b: m.tensordot(a, b, dims=1), (f32(2, 3), f64(3, 5))),
    (lambda m, a, b: m.cross(a, b), (f32(2, 3), f32(2, 4))),
    (lambda m, a, b: m.cross(a, b), (f32(2, 4), f32(2, 4))),
    (lambda m, a, b: m.cross(a, b), (f32(2, 3), f32(3))),
    (lambda m, a, b: m.cross(a, b, dim=1), (f32(3, 3), f64(3, 3))),
    (lambda m, a, b: m.linalg.cross(a, b), (f32(2, 4), f32(2, 4))),
    (lambda m, a, b: m.linalg.cross(a, b), (f32(5, 3), f32(2, 3))),
    (lambda m, a, b: m.linalg.vecdot(a, b), (f32(2, 3), f64(3))),
    (lambda m, a, b: m.linalg.vecdot(a, b), (i64(2, 3), i64(3))),
]


@pytest.mark.parametrize("fn,arrays", PRODUCT_ERRORS, ids=[str(i) for i in range(len(PRODUCT_ERRORS))])
def test_product_errors_match_torch(fn, arrays):
    _same_error(fn, *arrays)


ADD_ERRORS = [
    (lambda m, c, a, b: m.addmm(c, a, b), (f32(2, 5), f32(2, 3), f32(4, 5))),
    (lambda m, c, a, b: m.addmm(c, a, b), (f32(3, 5), f32(2, 3), f32(3, 5))),
    (lambda m, c, a, b: m.addmm(c, a, b), (f64(2, 5), f32(2, 3), f32(3, 5))),
    (lambda m, c, a, b: m.addmm(c, a, b), (f32(2, 5), f32(3), f32(3, 5))),
    (lambda m, c, a, b: m.addmv(c, a, b), (f32(2), f32(2, 3), f32(4))),
    (lambda m, c, a, b: m.addmv(c, a, b), (f32(3), f32(2, 3), f32(3))),
    (lambda m, c, a, b: m.addmv(c, a, b), (f64(2), f32(2, 3), f32(3))),
    (lambda m, c, a, b: m.addmv(c, a, b), (f32(2, 2), f32(2, 3), f32(3))),
    (lambda m, c, a, b: m.addr(c, a, b), (f32(2, 3), f32(2), f32(4))),
    (lambda m, c, a, b: m.addr(c, a, b), (f32(2, 3), f32(2, 1), f32(3))),
    (lambda m, c, a, b: m.addr(c, a, b, beta=0.5), (i64(2, 3), i64(2), i64(3))),
    (lambda m, c, a, b: m.addbmm(c, a, b), (f32(3, 5), f32(2, 3, 4), f32(3, 4, 5))),
    (lambda m, c, a, b: m.addbmm(c, a, b), (f32(3, 5), f32(2, 3, 4), f32(2, 5, 5))),
    (lambda m, c, a, b: m.addbmm(c, a, b), (f64(3, 5), f32(2, 3, 4), f32(2, 4, 5))),
    (lambda m, c, a, b: m.baddbmm(c, a, b), (f32(2, 3, 5), f32(2, 3, 4), f32(2, 5, 5))),
    (lambda m, c, a, b: m.baddbmm(c, a, b), (f64(2, 3, 5), f32(2, 3, 4), f32(2, 4, 5))),
    (lambda m, c, a, b: m.baddbmm(c, a, b), (f32(3, 5), f32(3, 4), f32(2, 5, 5))),
    (lambda m, c, a, b: m.addbmm(c, a, b), (f32(3, 5), f32(3, 4), f32(2, 5, 5))),
]


@pytest.mark.parametrize("fn,arrays", ADD_ERRORS, ids=[str(i) for i in range(len(ADD_ERRORS))])
def test_addmm_family_errors_match_torch(fn, arrays):
    _same_error(fn, *arrays)


SING = np.array([[1., 2, 3], [2, 4, 6], [1, 1, 1]])
LINALG_ERRORS = [
    (lambda m, a: m.linalg.inv(a), (f32(2, 3),)),
    (lambda m, a: m.linalg.inv(a), (f32(3),)),
    (lambda m, a: m.linalg.inv(a), (i64(3, 3),)),
    (lambda m, a: m.linalg.inv(a), (np.ones((3, 3), np.float16),)),
    (lambda m, a: m.linalg.inv(a), (f32(3, 3),)),
    (lambda m, a: m.linalg.inv(a), (f32(2, 3, 3),)),
    (lambda m, a: m.linalg.inv(a), (SING,)),
    (lambda m, a: m.inverse(a), (np.stack([np.eye(3), SING]),)),
    (lambda m, a: m.linalg.det(a), (f32(2, 3),)),
    (lambda m, a: m.linalg.det(a), (i64(3, 3),)),
    (lambda m, a: m.linalg.det(a), (np.ones((3, 3), np.float16),)),
    (lambda m, a: m.linalg.cholesky(a), (f32(3, 3),)),
    (lambda m, a: m.linalg.cholesky(a), (f32(2, 3, 3),)),
    (lambda m, a: m.linalg.cholesky(a), (-np.eye(3),)),
    (lambda m, a: m.linalg.cholesky(a), (f32(2, 3),)),
    (lambda m, a: m.cholesky(a), (f32(3, 3),)),
    (lambda m, a: m.linalg.qr(a, mode="x"), (f32(4, 3),)),
    (lambda m, a: m.linalg.qr(a), (f32(4),)),
    (lambda m, a: m.linalg.eigh(a), (f32(3, 4),)),
    (lambda m, a: m.linalg.eigh(a, UPLO="X"), (f32(3, 3),)),
    (lambda m, a: m.linalg.svd(a), (f32(4),)),
    (lambda m, a: m.linalg.matrix_power(a, 2), (f32(3, 4),)),
    (lambda m, a: m.linalg.matrix_power(a, -1), (i64(3, 3),)),
    (lambda m, a: m.linalg.matrix_power(a, -1), (f32(3, 3),)),
    (lambda m, a: m.trace(a), (f32(2, 3, 3),)),
    (lambda m, a: m.trace(a), (b8(3, 3),)),
    (lambda m, a: m.tril(a), (f32(3),)),
    (lambda m, a: m.triu(a), (f32(),)),
    (lambda m, a: m.linalg.multi_dot([a]), (f32(3),)),
    (lambda m, a: m.linalg.multi_dot([a, a]), (f32(2, 3, 3),)),
]


@pytest.mark.parametrize("fn,arrays", LINALG_ERRORS, ids=[str(i) for i in range(len(LINALG_ERRORS))])
def test_linalg_errors_match_torch(fn, arrays):
    _same_error(fn, *arrays)


SOLVE_ERRORS = [
    (lambda m, a, b: m.linalg.solve(a, b), (f32(3, 3), f32(3))),
    (lambda m, a, b: m.linalg.solve(a, b), (np.eye(3, dtype=np.float32), f32(4))),
    (lambda m, a, b: m.linalg.solve(a, b), (f32(3, 4), f32(3))),
    (lambda m, a, b: m.linalg.solve(a, b), (f32(3, 3), f64(3))),
    (lambda m, a, b: m.linalg.solve(a, b), (np.eye(3, dtype=np.float32), f32(2, 3))),
    (lambda m, a, b: m.linalg.solve(a, b, left=False), (np.eye(3, dtype=np.float32), f32(3, 2))),
    (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True), (f32(3, 3), f32(3))),
    (lambda m, a, b: m.linalg.lstsq(a, b), (f32(4, 3), f32(5, 2))),
    (lambda m, a, b: m.linalg.lstsq(a, b), (f32(5, 3), f32(3))),
    (lambda m, a, b: m.linalg.lstsq(a, b, driver="x"), (f32(5, 3), f32(5, 2))),
    (lambda m, a, b: m.linalg.multi_dot([a, b]), (f32(2, 3), f32(4, 3))),
    (lambda m, a, b: m.linalg.multi_dot([a, b]), (f32(2, 3), f64(3, 3))),
]


@pytest.mark.parametrize("fn,arrays", SOLVE_ERRORS, ids=[str(i) for i in range(len(SOLVE_ERRORS))])
def test_solve_errors_match_torch(fn, arrays):
    _same_error(fn, *arrays)


EINSUM_ERRORS = [
    (lambda m, a, b: m.einsum("ij,j->i", a, b), (f32(2, 3), f32(4))),
    (lambda m, a, b: m.einsum("ij,j->i", a, b), (f32(2, 3), f64(3))),
    (lambda m, a, b: m.einsum("ij,jk", a), (f32(2, 3), f32(3))),
    (lambda m, a, b: m.einsum("i", a, b), (f32(3), f32(3))),
    (lambda m, a, b: m.einsum("ii,i", a, b), (f32(3, 4), f32(3))),
    (lambda m, a, b: m.einsum("ij->,i", a, b), (f32(3), f32(3))),
    (lambda m, a, b: m.einsum("ij,i->k", a, b), (f32(3, 2), f32(3))),
    (lambda m, a, b: m.einsum("ij,i->ii", a, b), (f32(3, 3), f32(3))),
    (lambda m, a, b: m.einsum("i1,i", a, b), (f32(2, 3), f32(2))),
    (lambda m, a, b: m.einsum("ijk...,i", a, b), (f32(2, 3), f32(2))),
]


@pytest.mark.parametrize("fn,arrays", EINSUM_ERRORS, ids=[str(i) for i in range(len(EINSUM_ERRORS))])
def test_einsum_errors_match_torch(fn, arrays):
    _same_error(fn, *arrays)


def test_linalg_error_is_a_runtime_error():
    assert issubclass(ember.linalg.LinAlgError, RuntimeError)
    with pytest.raises(RuntimeError, match="singular"):
        ember.linalg.inv(ember.ones(3, 3))


# ---- values and semantics --------------------------------------------------------------------------


def test_low_precision_matmul_keeps_dtype_and_matches_torch():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 8)), rng.standard_normal((8, 4))
    for ed, td in ((ember.float16, torch.float16), (ember.bfloat16, torch.bfloat16)):
        e = ember.tensor(a).to(ed) @ ember.tensor(b).to(ed)
        t = torch.tensor(a).to(td) @ torch.tensor(b).to(td)
        assert e.dtype is ed
        np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=2e-2, atol=2e-2)


def test_rmatmul_and_numpy_operands():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = ember.tensor([1.0, 1.0])
    assert ember.Tensor.__rmatmul__(b, a).tolist() == [3.0, 7.0]
    with pytest.raises(TypeError):
        a @ 2


def test_int_matmul_and_overflow_wrap_like_torch():
    a = np.full((2, 2), 2**62, np.int64)
    e = (ember.from_numpy(a) @ ember.from_numpy(a)).numpy()
    t = (torch.from_numpy(a) @ torch.from_numpy(a)).numpy()
    np.testing.assert_array_equal(e, t)


def test_out_arguments():
    a, b = ember.ones(2, 3), ember.ones(3, 4)
    out = ember.empty(0)
    r = ember.matmul(a, b, out=out)
    assert r is out and out.shape == (2, 4) and out.tolist() == [[3.0] * 4] * 2
    out = ember.zeros(2, 4)
    ember.mm(a, b, out=out)
    assert out.tolist() == [[3.0] * 4] * 2
    out = ember.zeros(2, 4)
    ember.addmm(ember.ones(4), a, b, alpha=2, out=out)
    assert out.tolist() == [[7.0] * 4] * 2
    q, r = ember.empty(0, dtype=ember.float64), ember.empty(0, dtype=ember.float64)
    res = ember.linalg.qr(ember.tensor(np.eye(3)), out=(q, r))
    assert res.Q is q and res.R is r and q.shape == (3, 3)
    with pytest.raises(RuntimeError, match="out="):
        ember.matmul(ember.ones(2, 2, requires_grad=True), ember.ones(2, 2), out=ember.zeros(2, 2))


def test_addmm_beta_zero_ignores_nan_and_int_scalars():
    c = ember.tensor([[float("nan")]])
    assert ember.addmm(c, ember.ones(1, 2), ember.ones(2, 1), beta=0).tolist() == [[2.0]]
    ci = torch.ones(2, 2, dtype=torch.int64)
    t = torch.addmm(ci, ci, ci * 3, alpha=1.5, beta=2)
    e = ember.addmm(ember.ones(2, 2, dtype=ember.int64), ember.ones(2, 2, dtype=ember.int64),
                    ember.ones(2, 2, dtype=ember.int64) * 3, alpha=1.5, beta=2)
    assert e.dtype is ember.int64 and e.tolist() == t.tolist()


def test_bool_addr_like_torch():
    rng = np.random.default_rng(1)
    c, a, b = rng.random((3, 4)) > 0.5, rng.random(3) > 0.5, rng.random(4) > 0.5
    (ec, ea, eb), (tc, ta, tb) = _pair(c, a, b)
    assert ember.addr(ec, ea, eb).tolist() == torch.addr(tc, ta, tb).tolist()
    assert ember.addr(ec, ea, eb, beta=False).tolist() == torch.addr(tc, ta, tb, beta=False).tolist()


def test_inplace_forms():
    x = ember.tensor(np.arange(12.0).reshape(3, 4))
    y = x.tril_(1)
    assert y is x and x.tolist() == torch.arange(12.0).reshape(3, 4).tril(1).tolist()
    x.triu_()
    assert x.tolist() == torch.arange(12.0).reshape(3, 4).tril(1).triu().tolist()
    leaf = ember.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        leaf.addmm_(ember.ones(2, 2), ember.ones(2, 2))
    v = ember.ones(2)
    assert v.addmv_(ember.ones(2, 3), ember.ones(3), beta=2) is v and v.tolist() == [5.0, 5.0]


def test_matmul_backward_shapes_batched_broadcast():
    # (B, M, K) @ (K, N) folds into one GEMM; gradients keep the input shapes
    a = ember.tensor(np.random.default_rng(0).standard_normal((4, 3, 5)), requires_grad=True)
    w = ember.tensor(np.random.default_rng(1).standard_normal((5, 2)), requires_grad=True)
    (a @ w).sum().backward()
    assert a.grad.shape == (4, 3, 5) and w.grad.shape == (5, 2)
    np.testing.assert_allclose(w.grad.numpy(), a.detach().numpy().sum((0, 1))[:, None].repeat(2, 1), rtol=1e-5)


def test_det_gradient_of_singular_matrix_is_the_cofactor_matrix():
    a = np.array([[1.0, 2, 3], [2, 4, 6], [1, 0, 1]])
    x = ember.tensor(a, requires_grad=True)
    ember.linalg.det(x).backward()
    cof = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1)) for j in range(3)]
                    for i in range(3)])
    np.testing.assert_allclose(x.grad.numpy(), cof, atol=1e-10)


def test_matrix_power_zero_is_connected_with_zero_gradient():
    x = ember.tensor(np.eye(3) * 2, requires_grad=True)
    r = ember.linalg.matrix_power(x, 0)
    assert r.requires_grad and r.tolist() == np.eye(3).tolist()
    r.sum().backward()
    assert x.grad.tolist() == np.zeros((3, 3)).tolist()


def test_qr_r_mode_backward_raises_like_torch():
    x = ember.tensor(np.random.default_rng(0).standard_normal((4, 3)), requires_grad=True)
    Q, R = ember.linalg.qr(x, mode="r")
    assert Q.shape == (0,)
    with pytest.raises(RuntimeError, match="mode='r'"):
        R.sum().backward()


def test_inv_ex_and_cholesky_ex_report_info():
    a = np.stack([np.eye(3), SING])
    e = ember.linalg.inv_ex(ember.tensor(a))
    t = torch.linalg.inv_ex(torch.tensor(a))
    assert e.info.tolist() == t.info.tolist() and e.info.dtype is ember.int32
    a = np.stack([np.eye(3), -np.eye(3)])
    e = ember.linalg.cholesky_ex(ember.tensor(a))
    t = torch.linalg.cholesky_ex(torch.tensor(a))
    assert e.info.tolist() == t.info.tolist()
    with pytest.raises(ember.linalg.LinAlgError):
        ember.linalg.cholesky_ex(ember.tensor(a), check_errors=True)


def test_named_results():
    a = ember.tensor(np.eye(3) * 2)
    assert set(ember.linalg.slogdet(a)._fields) == {"sign", "logabsdet"}
    assert ember.linalg.eigh(a).eigenvalues.tolist() == [2.0, 2.0, 2.0]
    assert ember.linalg.svd(a).S.tolist() == [2.0, 2.0, 2.0]
    assert ember.linalg.qr(a).R.shape == (3, 3)


def test_norm_dispatch_matches_torch():
    try:
        import ember.ops.reduce_norm as rm
    except ImportError:
        pytest.skip("ember.ops.reduce_norm is not available")
    if not hasattr(rm, "vector_norm") or not hasattr(rm, "matrix_norm"):
        pytest.skip("vector_norm/matrix_norm not implemented yet")
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    (e,), (t,) = _pair(x)
    for kw in ({}, {"dim": 1}, {"dim": (1, 2)}, {"ord": 1, "dim": (0, 2)}, {"ord": 3, "dim": -1}):
        np.testing.assert_allclose(ember.linalg.norm(e, **kw).numpy(), torch.linalg.norm(t, **kw).numpy(), rtol=1e-6)
    np.testing.assert_allclose(ember.linalg.norm(e[0], "fro").numpy(), torch.linalg.norm(t[0], "fro").numpy())
    np.testing.assert_allclose(ember.linalg.vector_norm(e, 1).numpy(), torch.linalg.vector_norm(t, 1).numpy())
    np.testing.assert_allclose(ember.linalg.matrix_norm(e).numpy(), torch.linalg.matrix_norm(t).numpy())
    _same_error(lambda m, a: m.linalg.norm(a, ord=2), x)
    _same_error(lambda m, a: m.linalg.norm(a, dim=(0, 1, 2)), x)


def test_namespace():
    import ember.linalg as L
    for name in ("inv", "solve", "det", "slogdet", "cholesky", "qr", "eigh", "eigvalsh", "svd", "svdvals", "pinv",
                 "matrix_power", "lstsq", "norm", "vector_norm", "matrix_norm", "multi_dot", "matmul", "diagonal",
                 "vecdot", "cross", "solve_triangular", "LinAlgError"):
        assert hasattr(L, name) and hasattr(torch.linalg, name), name
    for name in ("matmul", "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger", "addmm", "addmv", "addr",
                 "addbmm", "baddbmm", "kron", "tril", "triu", "trace", "cross", "det", "logdet", "slogdet",
                 "inverse", "pinverse", "matrix_power", "cholesky", "qr", "svd"):
        assert hasattr(ember, name) and hasattr(ember.Tensor, name), name
    for name in ("einsum", "tensordot", "chain_matmul"):
        assert hasattr(ember, name)
    for name in ("addmm_", "addmv_", "addr_", "addbmm_", "baddbmm_", "tril_", "triu_"):
        assert hasattr(ember.Tensor, name)


def test_legacy_svd_qr_forms_and_cond_rank():
    x = np.random.default_rng(3).standard_normal((2, 4, 3))
    (e,), (t,) = _pair(x)
    eu, es, ev = ember.svd(e, compute_uv=False)
    tu, ts, tv = torch.svd(t, compute_uv=False)
    assert eu.shape == tuple(tu.shape) and ev.shape == tuple(tv.shape) and not eu.numpy().any()
    np.testing.assert_allclose(es.numpy(), ts.numpy())
    q, r = e.qr(some=False)
    assert q.shape == (2, 4, 4) and r.shape == (2, 4, 3)
    np.testing.assert_allclose((q @ r).numpy(), x, atol=1e-12)
    sq = np.random.default_rng(4).standard_normal((3, 3)) + 3 * np.eye(3)
    (es_,), (ts_,) = _pair(sq)
    import importlib.util
    has_norms = importlib.util.find_spec("ember.ops.reduce_norm") is not None
    for p in (None, 2, -2, "fro", "nuc", 1, float("inf")):
        if p not in (None, 2, -2) and not has_norms:
            continue
        np.testing.assert_allclose(ember.linalg.cond(es_, p).numpy(), torch.linalg.cond(ts_, p).numpy(), rtol=1e-10)
    low = np.outer(np.arange(1.0, 5), np.arange(1.0, 4))
    (el,), (tl,) = _pair(low)
    assert ember.linalg.matrix_rank(el).item() == torch.linalg.matrix_rank(tl).item() == 1
    sym = low @ low.T
    assert ember.linalg.matrix_rank(ember.tensor(sym), hermitian=True).item() == 1
    assert ember.linalg.matrix_rank(el, atol=1e9).item() == torch.linalg.matrix_rank(tl, atol=1e9).item() == 0


def test_lstsq_outputs_follow_torch_drivers():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    (ea, eb), (ta, tb) = _pair(a, b)
    for drv in (None, "gels", "gelsy", "gelsd", "gelss"):
        e = ember.linalg.lstsq(ea, eb, driver=drv)
        t = torch.linalg.lstsq(ta, tb, driver=drv)
        for x, y in zip(e, t):
            assert x.shape == tuple(y.shape) and x.dtype.name == str(y.dtype)[6:], (drv, x.shape, y.shape)
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-8, atol=1e-10)
    # rank-deficient: minimum-norm solution, no residuals
    low = np.outer(np.arange(1.0, 6), np.arange(1.0, 4))
    e = ember.linalg.lstsq(ember.tensor(low), eb, driver="gelsd")
    t = torch.linalg.lstsq(torch.tensor(low), tb, driver="gelsd")
    assert e.rank.item() == t.rank.item() == 1 and e.residuals.shape == tuple(t.residuals.shape)
    np.testing.assert_allclose(e.solution.numpy(), t.solution.numpy(), rtol=1e-8)
