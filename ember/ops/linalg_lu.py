"""LU with partial pivoting: ``linalg.lu_factor(_ex)``, ``linalg.lu``, ``linalg.lu_solve``, ``lu_unpack``
and the older ``torch.lu`` / ``torch.lu_solve``.

One op is registered, ``linalg_lu_factor_ex``: a NumPy kernel (LAPACK getrf's algorithm, unblocked,
vectorised over the batch: the same pivots, LAPACK's 1-based int32 ``pivots`` and ``info``) whose derivative
is written in ember ops for square, wide and tall matrices. Its formulas come from differentiating
P^T A = L U: with X = L^{-1} P^T dA U^{-1} (square case), dL = L tril(X, -1) and dU = triu(X) U, so

    grad A = P L^{-T} (tril(L^T gL, -1) + triu(gU U^T)) U^{-T};

a wide A = P L [U1 U2] adds the U2 block (grad A2 = P L^{-T} gU2, and -gU2 U2^T in the strict lower
part), a tall A = P [L1; L2] U the L2 block (grad B2 = gL2 U^{-T}, and -L2^T gL2 in the upper part).
Everything else (unpacking, solves) is composed of ember ops, so gradients flow through it.
"""
from __future__ import annotations

import collections
import warnings

import numpy as np

from .. import dtypes as _dt
from .registry import register, apply, attach
from .linalg import LinAlgError, _check_linalg, _not_impl, _const, _eye, _out_tuple, _out, _batch_prefix, _tensor_arg
from .linalg_parts import tril, triu
from .linalg_products import matmul_raw

__all__ = ["lu_factor", "lu_factor_ex", "lu", "lu_solve", "lu_unpack", "lu_legacy", "lu_solve_legacy"]

LUFactorResult = collections.namedtuple("linalg_lu_factor", ["LU", "pivots"])
LUFactorExResult = collections.namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
LUResult = collections.namedtuple("linalg_lu", ["P", "L", "U"])
LUUnpackResult = collections.namedtuple("lu_unpack", ["P", "L", "U"])


def _getrf(a: np.ndarray):
    """Partial-pivoting LU of a batch (..., m, n) -> (packed LU, 1-based int32 pivots, int32 info)."""
    lu = np.array(a, copy=True)
    batch, (m, n) = lu.shape[:-2], lu.shape[-2:]
    k = min(m, n)
    flat = lu.reshape((-1, m, n))
    nb = flat.shape[0]
    piv = np.empty((nb, k), np.int32)
    info = np.zeros(nb, np.int32)
    rows = np.arange(nb)
    for j in range(k):
        p = j + np.argmax(np.abs(flat[:, j:, j]), axis=1)
        piv[:, j] = p + 1
        swap = p != j
        if swap.any():
            r, pr = rows[swap], p[swap]
            tmp = flat[r, j, :].copy()
            flat[r, j, :] = flat[r, pr, :]
            flat[r, pr, :] = tmp
        pivot = flat[:, j, j]
        zero = pivot == 0
        info[zero & (info == 0)] = j + 1
        if j + 1 < m:
            flat[:, j + 1:, j] /= np.where(zero, 1, pivot)[:, None]       # (a zero pivot's column is zero)
            if j + 1 < n:
                flat[:, j + 1:, j + 1:] -= flat[:, j + 1:, j:j + 1] * flat[:, j:j + 1, j + 1:]
    return flat.reshape(lu.shape), piv.reshape(batch + (k,)), info.reshape(batch)


def _perm_of(piv: np.ndarray, m: int) -> np.ndarray:
    """Row order ``perm`` with (L U)[i] = A[perm[i]], from LAPACK's sequential row swaps."""
    flat = piv.reshape((-1, piv.shape[-1])).astype(np.int64) - 1
    perm = np.tile(np.arange(m), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for i in range(flat.shape[1]):
        p = flat[:, i]
        tmp = perm[rows, i].copy()
        perm[rows, i] = perm[rows, p]
        perm[rows, p] = tmp
    return perm.reshape(piv.shape[:-1] + (m,))


def _perm_matrix(piv: np.ndarray, m: int, dtype) -> np.ndarray:
    perm = _perm_of(piv, m)
    P = np.zeros(perm.shape + (m,), dtype)
    np.put_along_axis(P, perm[..., None], 1, axis=-1)      # P[perm[i], i] = 1, transposed below
    return np.swapaxes(P, -1, -2)


def _split(LU, m, n):
    """(L, U) tensors of packed ``LU``: L unit lower m x k, U upper k x n."""
    k = min(m, n)
    Lp = LU[..., :, :k] if n > k else LU
    Up = LU[..., :k, :] if m > k else LU
    return tril(Lp, -1) + _eye(m, LU._dtype)[:, :k], triu(Up)


def _solve_lower_unit_T(L, B):
    """L^{-T} B for unit lower triangular L (square)."""
    from .linalg_solvers import solve_triangular
    return solve_triangular(L.mT, B, upper=True, unitriangular=True)


def _right_solve_upper_T(B, U):
    """B U^{-T} for upper triangular U (square)."""
    from .linalg_solvers import solve_triangular
    return solve_triangular(U.mT, B, upper=False, left=False)


def _lu_factor_bw(ctx, g, _gp, _gi):
    LU, piv, _ = ctx.outputs
    m, n = LU._data.shape[-2:]
    k = min(m, n)
    L, U = _split(LU, m, n)
    gL = tril(g[..., :, :k], -1)
    gU = triu(g[..., :k, :])
    if m == n:
        M = tril(matmul_raw(L.mT, gL), -1) + triu(matmul_raw(gU, U.mT))
        gB = _right_solve_upper_T(_solve_lower_unit_T(L, M), U)
    elif m < n:                          # wide: U = [U1 U2]
        U1, U2, gU1, gU2 = U[..., :, :k], U[..., :, k:], gU[..., :, :k], gU[..., :, k:]
        M = tril(matmul_raw(L.mT, gL) - matmul_raw(gU2, U2.mT), -1) + triu(matmul_raw(gU1, U1.mT))
        gB1 = _right_solve_upper_T(_solve_lower_unit_T(L, M), U1)
        gB = _cat_last(gB1, _solve_lower_unit_T(L, gU2), -1)
    else:                                # tall: L = [L1; L2]
        L1, L2, gL1, gL2 = L[..., :k, :], L[..., k:, :], gL[..., :k, :], gL[..., k:, :]
        M = tril(matmul_raw(L1.mT, gL1), -1) + triu(matmul_raw(gU, U.mT) - matmul_raw(L2.mT, gL2))
        gB1 = _right_solve_upper_T(_solve_lower_unit_T(L1, M), U)
        gB = _cat_last(gB1, _right_solve_upper_T(gL2, U), -2)
    P = _const(_perm_matrix(piv._data, m, LU._dtype.np), LU._dtype)
    return (matmul_raw(P, gB),)


def _cat_last(a, b, dim):
    from .shape_join import cat
    return cat([a, b], dim)


def _lu_kernel(a):
    return _getrf(a)


LU_FACTOR = register("linalg_lu_factor_ex", _lu_kernel, _lu_factor_bw, save="o", nout=3, nondiff_outputs=(1, 2))


def _check_pivot(pivot, op):
    if not pivot:
        raise RuntimeError(f"{op}: LU without pivoting is not implemented on the CPU")


def _check_input(A, op):
    _tensor_arg(A, op, "A")
    if A._data.ndim < 2:
        raise RuntimeError(f"torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: "
                           f"[{', '.join(str(s) for s in A._data.shape)}] instead")
    if not (A._dtype.is_floating_point or A._dtype.is_complex):
        raise _not_impl("lu_cpu", A._dtype)
    _check_linalg(A, op, square=False)


def lu_factor_ex(A, *, pivot: bool = True, check_errors: bool = False, out=None):
    """``(LU, pivots, info)``: the packed factors, LAPACK's 1-based pivots and info (k > 0: U[k, k] is zero)."""
    _check_input(A, "linalg.lu_factor_ex")
    _check_pivot(pivot, "linalg.lu_factor")
    LU, piv, info = apply(LU_FACTOR, (A,))
    if check_errors and info._data.any():
        raise LinAlgError(f"linalg.lu_factor_ex: {_batch_prefix(A._data, int(np.argmax(info._data.ravel() > 0)))}"
                          f"U[{_first(info)},{_first(info)}] is zero and using it on lu_solve would result in a "
                          "division by zero.")
    res = LUFactorExResult(LU, piv, info)
    return res if out is None else _out_tuple(res, out, "linalg.lu_factor_ex")


def _first(info):
    flat = info._data.ravel()
    return int(flat[np.argmax(flat > 0)])


def lu_factor(A, *, pivot: bool = True, out=None):
    """``(LU, pivots)``; a zero pivot raises torch's error (use ``lu_factor_ex`` to get ``info`` instead)."""
    _check_input(A, "linalg.lu_factor")
    _check_pivot(pivot, "linalg.lu_factor")
    LU, piv, info = apply(LU_FACTOR, (A,))
    if info._data.any():
        flat = info._data.ravel()
        b = int(np.argmax(flat > 0))
        i = int(flat[b])
        raise RuntimeError(f"torch.linalg.lu_factor: {_batch_prefix(A._data, b)}U[{i},{i}] is zero and using it on "
                           "lu_solve would result in a division by zero. If you still want to perform the "
                           "factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    res = LUFactorResult(LU, piv)
    return res if out is None else _out_tuple(res, out, "linalg.lu_factor")


def lu_unpack(LU_data, LU_pivots, unpack_data: bool = True, unpack_pivots: bool = True, *, out=None):
    """``(P, L, U)`` from packed factors: A = P @ L @ U (empty tensors for the parts not asked for)."""
    _tensor_arg(LU_data, "lu_unpack", "LU_data")
    _tensor_arg(LU_pivots, "lu_unpack", "LU_pivots")
    if LU_data._data.ndim < 2:
        raise RuntimeError("torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: "
                           f"[{', '.join(str(s) for s in LU_data._data.shape)}] instead")
    if LU_pivots._dtype is not _dt.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.\n"
                           "Note: this function is intended to be used with the output produced by "
                           "torch.linalg.lu_factor")
    m, n = LU_data._data.shape[-2:]
    empty = _const(np.zeros(0), LU_data._dtype)
    if unpack_data:
        L, U = _split(LU_data, m, n)
    else:
        L = U = empty
    if unpack_pivots:
        P = _const(_perm_matrix(LU_pivots._data, m, LU_data._dtype.np), LU_data._dtype)
    else:
        P = empty
    res = LUUnpackResult(P, L, U)
    return res if out is None else _out_tuple(res, out, "lu_unpack")


def lu(A, *, pivot: bool = True, out=None):
    """``linalg.lu``: ``(P, L, U)`` with A = P @ L @ U (a zero pivot is no error here)."""
    _check_input(A, "linalg.lu")
    _check_pivot(pivot, "linalg.lu_factor")      # (torch names lu_factor here too)
    LU, piv, _ = apply(LU_FACTOR, (A,))
    P, L, U = lu_unpack(LU, piv)
    res = LUResult(P, L, U)
    return res if out is None else _out_tuple(res, out, "linalg.lu")


def lu_solve(LU, pivots, B, *, left: bool = True, adjoint: bool = False, out=None):
    """Solve A X = B (``left=False``: X A = B; ``adjoint``: with A^H) from ``lu_factor``'s output."""
    from .linalg_solvers import solve_triangular
    for name, t in (("LU", LU), ("pivots", pivots), ("B", B)):
        _tensor_arg(t, "linalg.lu_solve", name)
    if LU._data.ndim < 2 or LU._data.shape[-1] != LU._data.shape[-2]:
        raise RuntimeError(f"linalg.lu_solve: A must be batches of square matrices, but they are "
                           f"{LU._data.shape[-2] if LU._data.ndim >= 2 else 1} by {LU._data.shape[-1]} matrices")
    n = LU._data.shape[-1]
    if B._data.ndim < 2 or B._data.shape[-2 if left else -1] != n:
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and "
                           f"{'x'.join(str(s) for s in B._data.shape[-2:])})")
    if LU._dtype is not B._dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type "
                           f"{LU._dtype} and B of type {B._dtype} instead")
    P, L, U = lu_unpack(LU, pivots)
    # A = P L U;  A^T = U^T L^T P^T
    if left and not adjoint:       # X = U^{-1} L^{-1} P^T B
        Y = solve_triangular(L, matmul_raw(P.mT, B), upper=False, unitriangular=True)
        X = solve_triangular(U, Y, upper=True)
    elif left:                     # A^T X = B: X = P L^{-T} U^{-T} B
        Y = solve_triangular(U.mT, B, upper=False)
        X = matmul_raw(P, solve_triangular(L.mT, Y, upper=True, unitriangular=True))
    elif not adjoint:              # X A = B: X = B U^{-1} L^{-1} P^T
        Y = solve_triangular(U, B, upper=True, left=False)
        X = matmul_raw(solve_triangular(L, Y, upper=False, left=False, unitriangular=True), P.mT)
    else:                          # X A^T = B: X = B P L^{-T} U^{-T}
        Y = solve_triangular(L.mT, matmul_raw(B, P), upper=True, left=False, unitriangular=True)
        X = solve_triangular(U.mT, Y, upper=False, left=False)
    return X if out is None else _out(X, out)


def lu_legacy(A, pivot: bool = True, get_infos: bool = False, out=None):
    """``torch.lu`` (deprecated in torch): ``(LU, pivots)`` or ``(LU, pivots, infos)``."""
    warnings.warn("torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and will "
                  "be removed in a future PyTorch release.", UserWarning, stacklevel=2)
    if get_infos:
        r = tuple(lu_factor_ex(A, pivot=pivot))
    else:
        r = tuple(lu_factor(A, pivot=pivot))
    return r if out is None else _out_tuple(r, out, "lu")


def lu_solve_legacy(b, LU_data, LU_pivots, *, out=None):
    """``torch.lu_solve(b, LU_data, LU_pivots)`` (deprecated in torch; the arguments of linalg.lu_solve reversed)."""
    warnings.warn("torch.lu_solve is deprecated in favor of torch.linalg.lu_solve and will be removed in a future "
                  "PyTorch release.", UserWarning, stacklevel=2)
    return lu_solve(LU_data, LU_pivots, b, out=out)


attach("lu_unpack", lu_unpack, method=False)
attach("lu", lu_legacy)
attach("lu_solve", lu_solve_legacy)
