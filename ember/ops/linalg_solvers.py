"""Inverses and linear solves: ``inv``/``inv_ex``, ``solve``/``solve_ex``, ``solve_triangular`` (and the
legacy ``triangular_solve``), ``cholesky_solve``/``cholesky_inverse``, and the matrix functions built
on them: ``matrix_power`` (negative powers invert first) and ``matrix_exp`` (a Padé solve).

Two LAPACK-backed ops are registered here, ``linalg_inv`` and ``linalg_solve``; the rest is composed.
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from .registry import register, apply, attach, dtype_name
from .linalg import (
    InvExResult, SolveExResult, TriangularSolveResult, _bcast_shapes, _check_linalg, _check_square_input, _const, _eye, _info_array,
    _lu_zero_pivot, _nan_matrices, _not_impl, _out, _out_tuple, _singular_error, _tensor_arg, _without_nan_matrices)
from .linalg_products import ADD_SCALED, matmul_raw
from .linalg_parts import tril, triu


# ---- the LU-backed ops --------------------------------------------------------------------------------


def _inv_kernel(a, op="linalg.inv"):
    mask = _nan_matrices(a)
    if mask is not None:
        return np.where(mask[..., None, None], np.nan, _inv_kernel(_without_nan_matrices(a, mask), op)).astype(a.dtype)
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular_error(op, a) from None


def _inv_bw(ctx, g):
    Ainv = ctx.output
    AinvT = Ainv.mT
    return (-matmul_raw(AinvT, matmul_raw(g, AinvT)),)


INV = register("linalg_inv", _inv_kernel, _inv_bw, save="o")


def _solve_kernel(a, b):
    mask = _nan_matrices(a)
    if mask is not None:
        x = _solve_kernel(_without_nan_matrices(a, mask), b)
        return np.where(mask[..., None, None], np.nan, x).astype(x.dtype)
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise _singular_error("linalg.solve", a) from None


def _solve_bw(ctx, g):
    A, B = ctx.inputs
    X = ctx.output
    gB = apply(SOLVE, (A.mT, g))
    gA = -matmul_raw(gB, X.mT) if ctx.edges[0] is not None else None
    return gA, (gB if ctx.edges[1] is not None else None)


SOLVE = register("linalg_solve", _solve_kernel, _solve_bw, save="io")


# ---- inverses and solves ------------------------------------------------------------------------------


def inv(A, *, out=None) -> Tensor:
    """Inverse of a (batch of) square matrix; ``LinAlgError`` if singular."""
    _check_linalg(A, "linalg.inv")
    r = apply(INV, (A,))
    return r if out is None else _out(r, out)


def inverse(input, *, out=None) -> Tensor:
    """``torch.inverse``: alias of ``linalg.inv``."""
    return inv(input, out=out)


def inv_ex(A, *, check_errors: bool = False, out=None):
    """``(inverse, info)``; info is the LAPACK code (0 = success) instead of an error."""
    _check_linalg(A, "linalg.inv_ex")
    info = _info_array(A._data, _lu_zero_pivot)
    if not info.any():
        res = InvExResult(apply(INV, (A,)), _const(info, _dt.int32))
    elif check_errors:
        raise _singular_error("linalg.inv_ex", A._data)
    else:
        res = InvExResult(_const(np.full(A._data.shape, np.nan), A._dtype), _const(info, _dt.int32))
    return res if out is None else _out_tuple(res, out, "linalg.inv_ex")


def _solve_is_vector(A, B) -> bool:
    # torch: B is a (batch of) vector(s) if it is 1-D, or has one dim fewer than A and matches A's batch
    nb = B._data.ndim
    return nb == 1 or (nb == A._data.ndim - 1 and B._data.shape == A._data.shape[:-1])


def solve(A, B, *, left: bool = True, out=None) -> Tensor:
    """Solve ``A X = B`` (or ``X A = B`` with ``left=False``); batch dims broadcast."""
    _check_linalg(A, "linalg.solve")
    _tensor_arg(B, "linalg.solve", "B")
    if A._dtype is not B._dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                           f"{dtype_name(A._dtype)} and B of type {dtype_name(B._dtype)} instead")
    vec = _solve_is_vector(A, B)
    Bm = B.unsqueeze(-1) if vec else B
    n = A._data.shape[-1]
    if left:
        ok = Bm._data.ndim >= 2 and Bm._data.shape[-2] == n
    else:
        ok = Bm._data.ndim >= 2 and Bm._data.shape[-1] == n
    if vec and not left:
        Bm = B.unsqueeze(-2)
        ok = Bm._data.shape[-1] == n
    if not ok:
        bs = Bm._data.shape
        eqn = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation {eqn} ({n}x{n} and "
                           f"{bs[-2]}x{bs[-1]})")
    _bcast_shapes(A._data.shape[:-2], Bm._data.shape[:-2])
    if left:
        X = apply(SOLVE, (A, Bm))
    else:
        X = apply(SOLVE, (A.mT, Bm.mT)).mT
    if vec:
        X = X.squeeze(-1) if left else X.squeeze(-2)
    return X if out is None else _out(X, out)


def solve_ex(A, B, *, left: bool = True, check_errors: bool = False, out=None):
    """``(result, info)`` form of ``solve``."""
    _check_linalg(A, "linalg.solve_ex")
    info = _info_array(A._data, _lu_zero_pivot)
    if info.any() and not check_errors:
        shape = solve(_const(np.eye(A._data.shape[-1]), A._dtype).expand(A._data.shape), B, left=left)._data.shape
        res = SolveExResult(_const(np.full(shape, np.nan), A._dtype), _const(info, _dt.int32))
    else:
        res = SolveExResult(solve(A, B, left=left), _const(info, _dt.int32))
    return res if out is None else _out_tuple(res, out, "linalg.solve_ex")


def solve_triangular(A, B, *, upper: bool, left: bool = True, unitriangular: bool = False, out=None) -> Tensor:
    """Solve a triangular system (only the ``upper`` or lower triangle of A is read)."""
    _check_linalg(A, "linalg.solve_triangular")
    _tensor_arg(B, "linalg.solve_triangular", "B")
    if B._data.ndim < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 dimensions.")
    if A._dtype is not B._dtype:
        raise RuntimeError(f"linalg.solve_triangular: Expected A and B to have the same dtype, but found A of type "
                           f"{dtype_name(A._dtype)} and B of type {dtype_name(B._dtype)} instead")
    T = triu(A) if upper else tril(A)
    if unitriangular:
        n = A._data.shape[-1]
        eye = _eye(n, A._dtype)
        T = T * _const(1 - np.eye(n), A._dtype) + eye
    r = solve(T, B, left=left)
    return r if out is None else _out(r, out)


def cholesky_solve(B, L, upper: bool = False, *, out=None) -> Tensor:
    """Solve ``A X = B`` given the Cholesky factor of ``A``."""
    _check_linalg(L, "cholesky_solve", arg="L")
    if isinstance(B, Tensor) and B._dtype != L._dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type {dtype_name(B._dtype)} "
                           f"and A of type {dtype_name(L._dtype)} instead.")
    Lo = L.mT if upper else L
    Lo = tril(Lo)
    Y = solve(Lo, B)
    r = solve(Lo.mT, Y)
    return r if out is None else _out(r, out)


def cholesky_inverse(input, upper: bool = False, *, out=None) -> Tensor:  # noqa: A002 - torch's name
    """Inverse of ``A`` given its Cholesky factor ``input``."""
    _check_linalg(input, "cholesky_inverse", arg="L")
    n = input._data.shape[-1]
    eye = _eye(n, input._dtype).expand(input._data.shape)
    return cholesky_solve(eye, input, upper, out=out)


# ---- legacy triangular_solve ----------------------------------------------------------------------------


def triangular_solve(b, A, upper: bool = True, transpose: bool = False, unitriangular: bool = False):
    """Deprecated torch API: solve ``A X = b`` (``A^T X = b`` with ``transpose``) for triangular ``A``;
    returns ``(solution, cloned_coefficient)``. Use ``linalg.solve_triangular`` in new code."""
    warnings.warn("torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be removed "
                  "in a future PyTorch release.\ntorch.linalg.solve_triangular has its arguments reversed and does "
                  "not return a copy of one of the inputs.\nX = torch.triangular_solve(B, A).solution\nshould be "
                  "replaced with\nX = torch.linalg.solve_triangular(A, B).", UserWarning, stacklevel=2)
    M = A.mT if transpose else A
    x = solve_triangular(M, b, upper=upper != transpose, unitriangular=unitriangular)
    return TriangularSolveResult(x, A.clone())


# ---- matrix powers ------------------------------------------------------------------------------------


def matrix_power(A, n: int, *, out=None) -> Tensor:
    """``A`` to the integer power ``n`` (``n < 0`` inverts first; ``n == 0`` gives the identity)."""
    _check_square_input(A, "linalg.matrix_power")
    p = A._data.shape[-1]
    if not isinstance(n, (int, np.integer)):
        raise TypeError(f"matrix_power(): argument 'n' must be int, not {type(n).__name__}")
    n = int(n)
    if n == 0:
        # the identity, still attached to A's graph (with a zero gradient) like torch's copy_ of eye
        eye = _const(np.broadcast_to(np.eye(p), A._data.shape), A._dtype)
        r = apply(ADD_SCALED, (A, eye), {"beta": 0, "alpha": 1})
        return r if out is None else _out(r, out)
    if n < 0:
        A = inv(A)
        n = -n
    if A._dtype is _dt.bool:
        raise _not_impl("bmm", A._dtype)
    # binary powering: O(log n) products
    result = None
    base = A
    while n:
        if n & 1:
            result = base if result is None else matmul_raw(result, base)
        n >>= 1
        if n:
            base = matmul_raw(base, base)
    if result is A:
        result = result.clone()
    return result if out is None else _out(result, out)


# ---- matrix exponential ----------------------------------------------------------------------------------

_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
           10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152


def matrix_exp(A) -> Tensor:
    """The matrix exponential of (batches of) square matrices, by scaling and squaring with the degree-13
    Padé approximant (Higham 2005). Written with matmul and solve, so autograd differentiates the same
    computation (double backward included)."""
    _check_square_input(A, "linalg.matrix_exp")
    p = A._data.shape[-1]
    if not A._dtype.is_floating_point:
        raise _not_impl("linalg_matrix_exp", A._dtype)
    if A._data.size == 0:
        return A.clone()
    # one scaling for the whole batch: the largest 1-norm decides how often to square
    norm = float(np.abs(A._data.astype(np.float64)).sum(axis=-2).max())
    s = max(0, int(np.ceil(np.log2(norm / _THETA13)))) if norm > _THETA13 else 0
    a = A / (2.0 ** s) if s else A
    b = _PADE13
    ident = _const(np.broadcast_to(np.eye(p), A._data.shape), A._dtype)
    a2 = matmul_raw(a, a)
    a4 = matmul_raw(a2, a2)
    a6 = matmul_raw(a4, a2)
    u = matmul_raw(a, matmul_raw(a6, b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
                   + b[1] * ident)
    v = matmul_raw(a6, b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * ident
    r = solve(v - u, v + u)
    for _ in range(s):
        r = matmul_raw(r, r)
    return r


# ---- exports ------------------------------------------------------------------------------------------

for _n, _f in [("cholesky_solve", cholesky_solve), ("cholesky_inverse", cholesky_inverse), ("inverse", inverse),
               ("matrix_power", matrix_power), ("matrix_exp", matrix_exp), ("triangular_solve", triangular_solve)]:
    attach(_n, _f)
