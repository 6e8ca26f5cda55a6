"""Linear algebra against torch: products, einsum, triangular parts and the decompositions.

Decompositions whose factors are unique only up to signs (eigh, svd) are compared through
sign-invariant quantities (V * V, reconstructions); well-conditioned inputs come from ``make=``.
"""
import numpy as np

from oracle import Case

F64 = ("float64",)


def _np(dtype):
    return np.float32 if dtype == "float32" else np.float64


def wellcond(*shapes):
    """Square matrices R + n I (R uniform in [-1, 1]): comfortably invertible."""
    def make(rng, dtype):
        out = []
        for s in shapes:
            n = s[-1]
            if len(s) >= 2 and s[-2] == n:
                out.append((rng.uniform(-1, 1, s) + n * np.eye(n)).astype(_np(dtype)))
            else:
                out.append(rng.uniform(-1, 1, s).astype(_np(dtype)))
        return out
    return make


def spd(*shapes):
    """Symmetric positive-definite matrices X X^T + n I, then plain random right-hand sides."""
    def make(rng, dtype):
        out = []
        for s in shapes:
            if len(s) >= 2 and s[-1] == s[-2] and not out:
                x = rng.uniform(-1, 1, s)
                out.append((x @ np.swapaxes(x, -1, -2) + s[-1] * np.eye(s[-1])).astype(_np(dtype)))
            else:
                out.append(rng.uniform(-1, 1, s).astype(_np(dtype)))
        return out
    return make


def sym(shape):
    def make(rng, dtype):
        x = rng.uniform(-1, 1, shape)
        return [((x + np.swapaxes(x, -1, -2)) / 2).astype(_np(dtype))]
    return make


def plain(*shapes):
    """Uniform [-1, 1] matrices with nothing added to the diagonal (LU's pivots then move rows)."""
    def make(rng, dtype):
        return [rng.uniform(-1, 1, s).astype(_np(dtype)) for s in shapes]
    return make


def lower(shape, unit=False):
    def make(rng, dtype):
        n = shape[-1]
        x = np.tril(rng.uniform(-1, 1, shape)) + n * np.eye(n)
        return [x.astype(_np(dtype)), rng.uniform(-1, 1, shape[:-1] + (2,)).astype(_np(dtype))]
    return make


def _inplace(m, name, inp, *args, **kw):
    x = inp * 1.0
    getattr(x, name)(*args, **kw)
    return x


def _svd_invariants(m, A, full):
    U, S, Vh = m.linalg.svd(A, full_matrices=full)
    k = S.shape[-1]
    rec = m.matmul(U[..., :, :k] * S.unsqueeze(-2), Vh[..., :k, :])
    return S, U[..., :, :k] * U[..., :, :k], Vh[..., :k, :] * Vh[..., :k, :], rec


def _eigh_invariants(m, A, uplo="L"):
    L, V = m.linalg.eigh(A, UPLO=uplo)
    return L, V * V, m.matmul(V * L.unsqueeze(-2), V.mT)


def _eig_invariants(m, A):
    L, V = m.linalg.eig(A)          # (geev's order and phase in both libraries; compared through real parts)
    return L.real, L.imag, V.abs() ** 2, m.linalg.eigvals(A).real


def _torch_svd(m, A):
    U, S, V = m.svd(A)
    return S, U * U, V * V


CASES = [
    # ---- matmul in all its shapes -----------------------------------------------------------------
    Case("matmul_2d", lambda m, a, b: m.matmul(a, b), shapes=((3, 4), (4, 5)), double_backward=True),
    Case("matmul_1d_1d", lambda m, a, b: m.matmul(a, b), shapes=((4,), (4,)), double_backward=True),
    Case("matmul_2d_1d", lambda m, a, b: m.matmul(a, b), shapes=((3, 4), (4,)), double_backward=True),
    Case("matmul_1d_2d", lambda m, a, b: m.matmul(a, b), shapes=((4,), (4, 5)), double_backward=True),
    Case("matmul_nd_1d", lambda m, a, b: m.matmul(a, b), shapes=((2, 3, 4), (4,))),
    Case("matmul_1d_nd", lambda m, a, b: m.matmul(a, b), shapes=((4,), (2, 4, 5))),
    Case("matmul_nd_2d", lambda m, a, b: m.matmul(a, b), shapes=((2, 3, 4), (4, 5)), double_backward=True),
    Case("matmul_2d_nd", lambda m, a, b: m.matmul(a, b), shapes=((3, 4), (2, 4, 5)), double_backward=True),
    Case("matmul_2d_4d", lambda m, a, b: m.matmul(a, b), shapes=((3, 4), (2, 3, 4, 5))),
    Case("matmul_bcast", lambda m, a, b: a @ b, shapes=((2, 1, 3, 4), (3, 4, 5)), double_backward=True),
    Case("matmul_bcast_both", lambda m, a, b: a @ b, shapes=((2, 1, 3, 4), (1, 3, 4, 2))),
    Case("matmul_batched", lambda m, a, b: a.matmul(b), shapes=((2, 3, 4), (2, 4, 5)),
         layouts=("contig", "noncontig", "zero")),
    Case("matmul_zero_inner", lambda m, a, b: a @ b, shapes=((2, 0), (0, 4))),
    Case("matmul_int", lambda m, a, b: a @ b, shapes=((3, 4), (4, 5)), dtypes=("int64", "int32", "uint8")),
    Case("matmul_int_1d", lambda m, a, b: a @ b, shapes=((4,), (4,)), dtypes=("int64",)),
    Case("matmul_int_batched", lambda m, a, b: a @ b, shapes=((2, 3, 4), (4, 2)), dtypes=("int64",)),
    Case("mm", lambda m, a, b: m.mm(a, b), shapes=((3, 4), (4, 5)), double_backward=True),
    Case("mm_method", lambda m, a, b: a.mm(b), shapes=((1, 4), (4, 1))),
    Case("bmm", lambda m, a, b: m.bmm(a, b), shapes=((2, 3, 4), (2, 4, 5)), double_backward=True,
         layouts=("contig", "noncontig", "zero")),
    Case("mv", lambda m, a, b: a.mv(b), shapes=((3, 4), (4,)), double_backward=True),
    Case("dot", lambda m, a, b: m.dot(a, b), shapes=((5,), (5,)), double_backward=True),
    Case("dot_int", lambda m, a, b: a.dot(b), shapes=((5,), (5,)), dtypes=("int64",)),
    Case("vdot", lambda m, a, b: m.vdot(a, b), shapes=((5,), (5,))),
    Case("inner_1d", lambda m, a, b: m.inner(a, b), shapes=((5,), (5,))),
    Case("inner_nd", lambda m, a, b: a.inner(b), shapes=((2, 3, 4), (5, 4)), double_backward=True),
    Case("inner_scalar", lambda m, a, b: m.inner(a, b), shapes=((), (3, 2))),
    Case("outer", lambda m, a, b: m.outer(a, b), shapes=((3,), (4,))),
    Case("ger", lambda m, a, b: a.ger(b), shapes=((3,), (4,))),
    # ---- addmm family --------------------------------------------------------------------------------
    Case("addmm", lambda m, c, a, b: m.addmm(c, a, b), shapes=((3, 5), (3, 4), (4, 5))),
    Case("addmm_scaled", lambda m, c, a, b: m.addmm(c, a, b, beta=0.5, alpha=-2.0), shapes=((5,), (3, 4), (4, 5)),
         double_backward=True),
    Case("addmm_beta0", lambda m, c, a, b: c.addmm(a, b, beta=0), shapes=((3, 5), (3, 4), (4, 5))),
    Case("addmm_int", lambda m, c, a, b: m.addmm(c, a, b, beta=2, alpha=3), shapes=((3, 5), (3, 4), (4, 5)),
         dtypes=("int64",)),
    Case("addmm_", lambda m, c, a, b: _inplace(m, "addmm_", c, a, b, alpha=0.5), shapes=((3, 5), (3, 4), (4, 5))),
    Case("addmv", lambda m, c, a, b: m.addmv(c, a, b, beta=1.5, alpha=0.5), shapes=((3,), (3, 4), (4,))),
    Case("addmv_", lambda m, c, a, b: _inplace(m, "addmv_", c, a, b), shapes=((3,), (3, 4), (4,))),
    Case("addr", lambda m, c, a, b: m.addr(c, a, b, beta=0.5, alpha=2.0), shapes=((3, 4), (3,), (4,))),
    Case("addr_", lambda m, c, a, b: _inplace(m, "addr_", c, a, b), shapes=((3, 4), (3,), (4,))),
    Case("addbmm", lambda m, c, a, b: m.addbmm(c, a, b, beta=0.5, alpha=2.0), shapes=((3, 5), (2, 3, 4), (2, 4, 5))),
    Case("addbmm_", lambda m, c, a, b: _inplace(m, "addbmm_", c, a, b), shapes=((3, 5), (2, 3, 4), (2, 4, 5))),
    Case("baddbmm", lambda m, c, a, b: m.baddbmm(c, a, b, beta=0.5, alpha=2.0), shapes=((3, 5), (2, 3, 4), (2, 4, 5))),
    Case("baddbmm_", lambda m, c, a, b: _inplace(m, "baddbmm_", c, a, b), shapes=((2, 3, 5), (2, 3, 4), (2, 4, 5))),
    # ---- einsum / tensordot / kron -----------------------------------------------------------------------
    Case("einsum_mm", lambda m, a, b: m.einsum("ij,jk->ik", a, b), shapes=((3, 4), (4, 5)), double_backward=True),
    Case("einsum_bmm", lambda m, a, b: m.einsum("bij,bjk->bik", a, b), shapes=((2, 3, 4), (2, 4, 5))),
    Case("einsum_diag", lambda m, a: m.einsum("ii->i", a), shapes=((4, 4),), double_backward=True),
    Case("einsum_trace", lambda m, a: m.einsum("ii", a), shapes=((4, 4),)),
    Case("einsum_diag_batch", lambda m, a: m.einsum("iij->ji", a), shapes=((3, 3, 2),)),
    Case("einsum_ellipsis", lambda m, a, b: m.einsum("...ij,...jk", a, b), shapes=((2, 1, 3, 4), (5, 4, 2))),
    Case("einsum_ellipsis_sum", lambda m, a: m.einsum("i...->...", a), shapes=((2, 3, 4),)),
    Case("einsum_outer", lambda m, a, b: m.einsum("i,j->ij", a, b), shapes=((3,), (4,))),
    Case("einsum_sum_all", lambda m, a: m.einsum("ij->", a), shapes=((3, 4),), double_backward=True),
    Case("einsum_private_sum", lambda m, a, b: m.einsum("ij,jk->k", a, b), shapes=((3, 4), (4, 5))),
    Case("einsum_bcast", lambda m, a, b: m.einsum("ij,ij->ij", a, b), shapes=((2, 3), (1, 3))),
    Case("einsum_bcast_contract", lambda m, a, b: m.einsum("ij,j->i", a, b), shapes=((2, 3), (1,))),
    Case("einsum_three", lambda m, a, b, c: m.einsum("ij,jk,kl->il", a, b, c), shapes=((2, 3), (3, 4), (4, 5)),
         double_backward=True),
    Case("einsum_list", lambda m, a, b: m.einsum("ij,kj", [a, b]), shapes=((2, 3), (4, 3))),
    Case("einsum_sublist", lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2], [0, 2]), shapes=((2, 3), (3, 4))),
    Case("einsum_transpose", lambda m, a: m.einsum("ij->ji", a) * 1.0, shapes=((2, 3),)),
    Case("einsum_int", lambda m, a, b: m.einsum("ij,jk->ik", a, b), shapes=((2, 3), (3, 4)), dtypes=("int64",)),
    Case("einsum_int_sum", lambda m, a: m.einsum("ij->i", a), shapes=((2, 3),), dtypes=("int32", "bool")),
    Case("einsum_zero", lambda m, a, b: m.einsum("bij,bjk->bik", a, b), shapes=((2, 3, 4), (2, 4, 5)),
         layouts=("zero",)),
    Case("tensordot_int", lambda m, a, b: m.tensordot(a, b, dims=2), shapes=((2, 3, 4), (3, 4, 5)),
         double_backward=True),
    Case("tensordot_lists", lambda m, a, b: m.tensordot(a, b, dims=([0, 2], [2, 0])), shapes=((2, 3, 4), (4, 5, 2))),
    Case("tensordot_zero_dims", lambda m, a, b: m.tensordot(a, b, dims=0), shapes=((2,), (3,))),
    Case("kron", lambda m, a, b: m.kron(a, b), shapes=((2, 3), (3, 2))),
    # torch's own kron fails on a transposed (2, 3) input with a 1-D other, so contiguous only
    Case("kron_mixed_ndim", lambda m, a, b: a.kron(b), shapes=((2, 3), (2,)), layouts=("contig",)),
    # ---- triangular, trace, cross -----------------------------------------------------------------------------
    Case("tril", lambda m, a: m.tril(a), shapes=((4, 5),), double_backward=True),
    Case("tril_diag", lambda m, a: a.tril(-1), shapes=((2, 4, 5),), layouts=("contig", "noncontig", "zero")),
    Case("triu", lambda m, a: m.triu(a, 1), shapes=((4, 5),), double_backward=True),
    Case("triu_batch", lambda m, a: a.triu(-2), shapes=((2, 4, 3),)),
    Case("tril_int", lambda m, a: m.tril(a, 1), shapes=((4, 4),), dtypes=("int64", "bool")),
    Case("tril_", lambda m, a: _inplace(m, "tril_", a, 1), shapes=((4, 5),)),
    Case("triu_", lambda m, a: _inplace(m, "triu_", a), shapes=((4, 5),)),
    Case("trace", lambda m, a: m.trace(a), shapes=((4, 5),), double_backward=True),
    Case("trace_int", lambda m, a: a.trace(), shapes=((3, 3),), dtypes=("int64", "int32")),
    Case("cross", lambda m, a, b: m.cross(a, b, dim=1), shapes=((4, 3), (4, 3)), double_backward=True),
    Case("cross_default_dim", lambda m, a, b: a.cross(b), shapes=((3, 4), (3, 4))),
    Case("linalg_cross_bcast", lambda m, a, b: m.linalg.cross(a, b), shapes=((2, 1, 3), (1, 4, 3))),
    Case("cross_int", lambda m, a, b: m.linalg.cross(a, b), shapes=((2, 3), (2, 3)), dtypes=("int64",)),
    # ---- inverse / solve / det ----------------------------------------------------------------------------------
    Case("inv", lambda m, a: m.linalg.inv(a), make=wellcond((2, 3, 3)), double_backward=True, atol=1e-5),
    Case("inverse", lambda m, a: m.inverse(a), make=wellcond((4, 4))),
    Case("inv_zero", lambda m, a: m.linalg.inv(a), make=lambda rng, dt: [np.zeros((2, 0, 0), dt)]),
    Case("inv_ex", lambda m, a: m.linalg.inv_ex(a), make=wellcond((3, 3)), dtypes=F64),
    Case("solve_matrix", lambda m, a, b: m.linalg.solve(a, b), make=wellcond((3, 3), (3, 2)), double_backward=True),
    Case("solve_vector", lambda m, a, b: m.linalg.solve(a, b), make=wellcond((3, 3), (3,))),
    Case("solve_batch_vector", lambda m, a, b: m.linalg.solve(a, b), make=wellcond((2, 3, 3), (2, 3))),
    Case("solve_bcast", lambda m, a, b: m.linalg.solve(a, b), make=wellcond((2, 3, 3), (4, 1, 3, 2))),
    Case("solve_left_false", lambda m, a, b: m.linalg.solve(a, b, left=False), make=wellcond((3, 3), (2, 3))),
    Case("solve_ex", lambda m, a, b: m.linalg.solve_ex(a, b), make=wellcond((3, 3), (3, 2)), dtypes=F64),
    Case("solve_triangular", lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False), make=lower((3, 3))),
    Case("solve_triangular_upper_right", lambda m, a, b: m.linalg.solve_triangular(a.mT, b.mT, upper=True, left=False),
         make=lower((3, 3))),
    Case("solve_triangular_unit", lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False, unitriangular=True),
         make=lower((3, 3)), dtypes=F64),
    # LU with partial pivoting (plain random matrices, so the pivots are not just the diagonal)
    Case("lu_factor", lambda m, a: m.linalg.lu_factor(a), make=plain((2, 4, 4)), double_backward=True),
    Case("lu_factor_wide", lambda m, a: m.linalg.lu_factor(a), make=plain((2, 3, 5))),
    Case("lu_factor_tall", lambda m, a: m.linalg.lu_factor_ex(a), make=plain((5, 3))),
    Case("lu", lambda m, a: m.linalg.lu(a), make=plain((2, 4, 3))),
    Case("lu_unpack", lambda m, a: m.lu_unpack(*m.linalg.lu_factor(a)), make=plain((3, 5))),
    Case("lu_solve", lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b), make=plain((2, 3, 3), (2, 3, 2)),
         double_backward=True),
    Case("lu_solve_adjoint_right", lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b, left=False,
                                                                      adjoint=True), make=plain((3, 3), (2, 3))),
    Case("det", lambda m, a: m.linalg.det(a), make=wellcond((2, 3, 3)), double_backward=True),
    Case("det_method", lambda m, a: a.det(), make=wellcond((4, 4))),
    Case("det_zero", lambda m, a: m.linalg.det(a), make=lambda rng, dt: [np.zeros((2, 0, 0), dt)]),
    Case("slogdet", lambda m, a: m.linalg.slogdet(a), make=wellcond((2, 3, 3)), double_backward=True),
    Case("slogdet_negative", lambda m, a: m.slogdet(-a), make=wellcond((3, 3))),
    Case("logdet", lambda m, a: m.logdet(a), make=spd((3, 3))),
    Case("logdet_negative", lambda m, a: m.logdet(-a), make=wellcond((3, 3)), grad=False),
    Case("matrix_power", lambda m, a: m.linalg.matrix_power(a, 5), make=wellcond((2, 3, 3)), atol=1e-4,
         double_backward=True),
    Case("matrix_power_neg", lambda m, a: m.linalg.matrix_power(a, -2), make=wellcond((3, 3))),
    Case("matrix_power_0_1", lambda m, a: (a.matrix_power(0), a.matrix_power(1)), make=wellcond((3, 3))),
    Case("matrix_power_int", lambda m, a: m.linalg.matrix_power(a, 3), shapes=((3, 3),), dtypes=("int64",)),
    # ---- factorizations ---------------------------------------------------------------------------------------------
    Case("cholesky", lambda m, a: m.linalg.cholesky(a), make=spd((2, 3, 3)), double_backward=True),
    Case("cholesky_upper", lambda m, a: m.linalg.cholesky(a, upper=True), make=spd((4, 4))),
    Case("cholesky_legacy", lambda m, a: a.cholesky(), make=spd((3, 3))),
    Case("cholesky_ex", lambda m, a: m.linalg.cholesky_ex(a), make=spd((3, 3)), dtypes=F64),
    Case("cholesky_solve", lambda m, a, b: m.cholesky_solve(b, m.linalg.cholesky(a)), make=spd((3, 3), (3, 2))),
    Case("cholesky_inverse", lambda m, a: m.cholesky_inverse(m.linalg.cholesky(a)), make=spd((3, 3))),
    Case("qr_tall", lambda m, a: m.linalg.qr(a), shapes=((5, 3),), double_backward=True, atol=1e-4),
    Case("qr_wide", lambda m, a: m.linalg.qr(a), shapes=((3, 5),), atol=1e-4),
    Case("qr_batch", lambda m, a: m.linalg.qr(a), shapes=((2, 4, 4),), atol=1e-4),
    Case("qr_complete", lambda m, a: m.linalg.qr(a, mode="complete"), shapes=((5, 3),), grad=False),
    Case("qr_r", lambda m, a: m.linalg.qr(a, mode="r")[1], shapes=((5, 3),), grad=False),
    Case("qr_legacy", lambda m, a: m.qr(a), shapes=((4, 3),), atol=1e-4),
    Case("eigh", _eigh_invariants, make=sym((2, 4, 4)), dtypes=F64, double_backward=True),
    Case("eigh_upper", lambda m, a: _eigh_invariants(m, a, "U"), make=sym((3, 3)), atol=1e-4),
    Case("eigvalsh", lambda m, a: m.linalg.eigvalsh(a), make=sym((2, 3, 3)), double_backward=True),
    Case("eig", _eig_invariants, shapes=((2, 4, 4),), atol=1e-4),
    Case("svd_reduced_tall", lambda m, a: _svd_invariants(m, a, False), shapes=((5, 3),), dtypes=F64,
         double_backward=True),
    Case("svd_reduced_wide", lambda m, a: _svd_invariants(m, a, False), shapes=((3, 5),), dtypes=F64),
    Case("svd_full", lambda m, a: _svd_invariants(m, a, True), shapes=((2, 4, 3),), dtypes=F64),
    Case("svd_square", lambda m, a: _svd_invariants(m, a, False), shapes=((4, 4),), atol=1e-4),
    Case("svd_legacy", _torch_svd, shapes=((4, 3),), dtypes=F64),
    Case("svdvals", lambda m, a: m.linalg.svdvals(a), shapes=((2, 4, 3),), double_backward=True, atol=1e-4),
    Case("svdvals_nograd", lambda m, a: m.linalg.svdvals(a), shapes=((3, 5),), grad=False),
    Case("pinv", lambda m, a: m.linalg.pinv(a), shapes=((4, 3),), dtypes=F64),
    Case("pinv_wide_batch", lambda m, a: m.linalg.pinv(a), shapes=((2, 3, 5),), dtypes=F64),
    Case("pinv_hermitian", lambda m, a: m.linalg.pinv(a, hermitian=True), make=spd((3, 3)), dtypes=F64),
    Case("pinverse", lambda m, a: a.pinverse(), shapes=((3, 4),), dtypes=F64),
    Case("lstsq", lambda m, a, b: m.linalg.lstsq(a, b), shapes=((5, 3), (5, 2)), dtypes=F64),
    Case("lstsq_gelsd", lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd"), shapes=((2, 5, 3), (2, 5, 2)),
         dtypes=F64),
    Case("lstsq_vector", lambda m, a, b: m.linalg.lstsq(a, b, driver="gels").solution, shapes=((5, 3), (5,)),
         dtypes=F64),
    Case("matrix_rank", lambda m, a: m.linalg.matrix_rank(a), shapes=((2, 4, 3),), grad=False),
    Case("cond", lambda m, a: m.linalg.cond(a), make=wellcond((3, 3)), dtypes=F64),
    # ---- chains and vectors ----------------------------------------------------------------------------
    Case("multi_dot", lambda m, a, b, c, d: m.linalg.multi_dot([a, b, c, d]), shapes=((3,), (3, 10), (10, 2), (2, 6)),
         double_backward=True),
    Case("multi_dot_vec_vec", lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), shapes=((3,), (3, 4), (4,))),
    Case("chain_matmul", lambda m, a, b, c: m.chain_matmul(a, b, c), shapes=((2, 3), (3, 4), (4, 5))),
    Case("vecdot", lambda m, a, b: m.linalg.vecdot(a, b), shapes=((2, 3), (3,))),
    Case("vecdot_dim", lambda m, a, b: m.linalg.vecdot(a, b, dim=0), shapes=((3, 4), (3, 1))),
    Case("linalg_diagonal", lambda m, a: m.linalg.diagonal(a, offset=1), shapes=((2, 3, 4),)),
    Case("linalg_matmul", lambda m, a, b: m.linalg.matmul(a, b), shapes=((2, 3, 4), (4,))),
]
