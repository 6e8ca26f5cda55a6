"""Decompositions: ``cholesky`` (and ``cholesky_ex``), ``qr``, ``eigh``/``eigvalsh``, ``svd``/``svdvals``
(and torch's legacy forms), and what the SVD gives directly: ``pinv`` and ``lstsq`` (the
pseudo-inverse applied to B).

One op per LAPACK routine, each with its derivative written in ember ops (torch's formulas).
"""
from __future__ import annotations

import collections

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from ..autograd.grad_mode import GRAD
from .registry import register, apply, attach, dtype_name
from .linalg import (
    CholeskyExResult, EighResult, LinAlgError, LstsqResult, QRResult, SVDOldResult, SVDResult, _bcast_shapes,
    _check_linalg, _chol_fail_order, _chol_partial, _const, _eye, _first_failure, _info_array, _not_pd_error, _out,
    _out_tuple, _tensor_arg)
from .linalg_products import matmul_raw
from .linalg_parts import TRIL, TRIU
from .linalg_solvers import SOLVE


def _safe_div(num: Tensor, den: Tensor) -> Tensor:
    """``num / den`` with 0 where both are 0 (instead of 0/0 = NaN), written in ember ops so that a
    compiled replay decides per element. Eigen/singular-vector derivatives divide by eigenvalue gaps,
    which are 0 for repeated values; the numerator is then exactly 0 when the vectors get no gradient."""
    both = (num == 0) & (den == 0)
    from .binary import where
    return num / where(both, 1.0, den)


# ---- the LAPACK-backed ops ----------------------------------------------------------------------------


def _cholesky_kernel(a, op="linalg.cholesky"):
    try:
        L = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise _not_pd_error(op, a) from None
    if L.size and np.isnan(np.diagonal(L, axis1=-2, axis2=-1)).any() and _first_failure(a, _chol_fail_order)[0] is not None:
        raise _not_pd_error(op, a)      # a NaN pivot fails potrf's check, as a non-positive one does
    return L


def _solve_right(X, A):
    """X @ A^{-1} via a solve: (A^T \\ X^T)^T."""
    return apply(SOLVE, (A.mT, X.mT)).mT


def _cholesky_bw(ctx, gL):
    L = ctx.output
    # gA = L^{-T} Phi L^{-1}, Phi = sym(tril(L^T gL)) with halved diagonal (torch's formula)
    P = apply(TRIL, (matmul_raw(L.mT, gL),), {"k": 0})
    P = (P + apply(TRIL, (P,), {"k": -1}).mT) * 0.5
    gA = apply(SOLVE, (L.mT, P))
    return (_solve_right(gA, L),)


CHOLESKY = register("linalg_cholesky", _cholesky_kernel, _cholesky_bw, save="o")


def _qr_kernel(a, mode):
    if mode == "r":
        r = np.linalg.qr(a, mode="r")
        return np.zeros((0,), dtype=a.dtype), r
    q, r = np.linalg.qr(a, mode=mode)
    return q, r


def _qr_square_bw(gQ, gR, Q, R):
    """gA for A = QR with m >= n: (gQ + Q copyltu(M)) R^{-T}, M = gR R^T - Q^T gQ."""
    M = matmul_raw(gR, R.mT) - matmul_raw(Q.mT, gQ)
    S = apply(TRIU, (M,), {"k": 0})
    S = S + apply(TRIU, (S,), {"k": 1}).mT
    return _solve_right(matmul_raw(Q, S) + gQ, R.mT)


def _qr_bw(ctx, gQ, gR):
    mode = ctx.attrs["mode"]
    Q, R = ctx.outputs
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please "
                           "use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
    m, n = Q._data.shape[-2], R._data.shape[-1]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    if m >= n:
        return (_qr_square_bw(gQ, gR, Q, R),)
    # wide A = Q [U | V]: the square part X = Q U plus Y = Q V
    sl = (Ellipsis, slice(None), slice(0, m))
    sr = (Ellipsis, slice(None), slice(m, n))
    U, V = R[sl], R[sr]
    gU, gV = gR[sl], gR[sr]
    gX = _qr_square_bw(gQ + matmul_raw(Q, matmul_raw(V, gV.mT)), gU, Q, U)
    gY = matmul_raw(Q, gV)
    # place the two blocks side by side with constant selection matrices (keeps it differentiable)
    E1 = _const(np.eye(m, n), gX._dtype)
    E2 = _const(np.eye(n - m, n, k=m), gX._dtype)
    return (matmul_raw(gX, E1) + matmul_raw(gY, E2),)


QR = register("linalg_qr", _qr_kernel, _qr_bw, save="o", nout=2)


def _eigh_kernel(a, UPLO):
    w, v = np.linalg.eigh(a, UPLO=UPLO)
    return w.astype(a.dtype, copy=False), v.astype(a.dtype, copy=False)


# The eigen/singular-vector parts of these derivatives are always computed, never skipped by looking
# at the gradient's values: gradients of unused outputs arrive as zeros, a compiled backward is traced
# with zero gradients, and a double backward sends gradients to the vectors even of eigvalsh/svdvals.
# ``_safe_div`` keeps the terms finite (zero) for repeated values when the vectors get no gradient.


def _eigh_bw(ctx, gL, gV):
    L, V = ctx.outputs
    n = L._data.shape[-1]
    eye = _eye(n, L._dtype)
    VhgV = matmul_raw(V.mT, gV)
    VhgV = (VhgV - VhgV.mT) * 0.5
    E = L.unsqueeze(-2) - L.unsqueeze(-1) + eye           # E[i, j] = L[j] - L[i], 1 on the diagonal
    X = _safe_div(VhgV, E) + gL.unsqueeze(-1) * eye
    return (matmul_raw(V, matmul_raw(X, V.mT)),)


EIGH = register("linalg_eigh", _eigh_kernel, _eigh_bw, save="o", nout=2)


def _svd_kernel(a, full_matrices, compute_uv):
    try:
        return _svd_np(a, full_matrices, compute_uv)
    except np.linalg.LinAlgError:
        if not np.isfinite(a).all():
            raise LinAlgError("linalg.svd: The algorithm failed to converge because the input matrix contained "
                              "non-finite values.") from None
        raise LinAlgError("linalg.svd: The algorithm failed to converge because the input matrix is "
                          "ill-conditioned or has too many repeated singular values.") from None


def _svd_np(a, full_matrices, compute_uv):
    if not compute_uv:
        s = np.linalg.svd(a, compute_uv=False)
        return np.zeros((0,), dtype=a.dtype), s.astype(a.dtype, copy=False), np.zeros((0,), dtype=a.dtype)
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return u, s.astype(a.dtype, copy=False), vh


def _svd_bw(ctx, gU, gS, gVh):
    U, S, Vh = ctx.outputs
    k = S._data.shape[-1]
    m, n = U._data.shape[-2], Vh._data.shape[-1]
    if ctx.attrs["full_matrices"]:
        # only the first k singular vectors carry information (torch narrows them the same way)
        U, gU = U[..., :, :k], gU[..., :, :k]
        Vh, gVh = Vh[..., :k, :], gVh[..., :k, :]
    eye = _eye(k, S._dtype)
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye          # E[j, k] = S_k^2 - S_j^2, 1 on the diagonal
    UhgU = matmul_raw(U.mT, gU)
    VhgV = matmul_raw(Vh, gVh.mT)
    num = (UhgU - UhgU.mT) * S.unsqueeze(-2) + S.unsqueeze(-1) * (VhgV - VhgV.mT)
    gA = _safe_div(num, E) + gS.unsqueeze(-1) * eye
    if m > n:
        gA = matmul_raw(U, gA)
        gUSinv = _safe_div(gU, S.unsqueeze(-2))
        gA = gA + gUSinv - matmul_raw(U, matmul_raw(U.mT, gUSinv))
        gA = matmul_raw(gA, Vh)
    elif m < n:
        gA = matmul_raw(gA, Vh)
        SinvgVh = _safe_div(gVh, S.unsqueeze(-1))
        gA = gA + SinvgVh - matmul_raw(matmul_raw(SinvgVh, Vh.mT), Vh)
        gA = matmul_raw(U, gA)
    else:
        gA = matmul_raw(U, matmul_raw(gA, Vh))
    return (gA,)


SVD = register("linalg_svd", _svd_kernel, _svd_bw, save="o", nout=3)


# ---- public functions ---------------------------------------------------------------------------------


def cholesky(A, *, upper: bool = False, out=None) -> Tensor:
    """Cholesky factor of a symmetric positive-definite matrix (lower, or upper with ``upper=True``)."""
    _check_linalg(A, "linalg.cholesky")
    L = apply(CHOLESKY, (A,), {"op": "linalg.cholesky"})
    r = L.mT if upper else L
    return r if out is None else _out(r, out)


def cholesky_legacy(input, upper: bool = False, *, out=None) -> Tensor:
    """``torch.cholesky`` (deprecated in torch in favour of ``linalg.cholesky``)."""
    _check_linalg(input, "cholesky")
    L = apply(CHOLESKY, (input,), {"op": "cholesky"})
    r = L.mT if upper else L
    return r if out is None else _out(r, out)


def cholesky_ex(A, *, upper: bool = False, check_errors: bool = False, out=None):
    """``(L, info)`` form of ``cholesky``; info is the order of the failing minor (0 = success)."""
    _check_linalg(A, "linalg.cholesky_ex")
    info = _info_array(A._data, _chol_fail_order)
    if not info.any() or check_errors:
        res = CholeskyExResult(cholesky(A, upper=upper), _const(info, _dt.int32))
    else:
        a = A._data
        part = np.stack([_chol_partial(m)[0] for m in a.reshape((-1,) + a.shape[-2:])]).reshape(a.shape)
        L = _const(part.astype(a.dtype), A._dtype)
        res = CholeskyExResult(L.mT if upper else L, _const(info, _dt.int32))
    return res if out is None else _out_tuple(res, out, "linalg.cholesky_ex")


def qr(A, mode: str = "reduced", *, out=None):
    """QR decomposition: ``mode`` "reduced" (default), "complete" or "r" (Q is then empty)."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           f"or 'complete'")
    _check_linalg(A, "linalg.qr", square=False)
    res = QRResult(*apply(QR, (A,), {"mode": mode}))
    return res if out is None else _out_tuple(res, out, "linalg.qr")


def qr_legacy(input, some: bool = True, *, out=None):
    """``torch.qr(input, some=True)``: reduced (``some``) or complete QR."""
    r = qr(input, "reduced" if some else "complete")
    r = collections.namedtuple("qr", ["Q", "R"])(*r)
    return r if out is None else _out_tuple(r, out, "qr")


def _check_uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def eigh(A, UPLO: str = "L", *, out=None):
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix (reads the ``UPLO`` triangle)."""
    _check_linalg(A, "linalg.eigh")
    _check_uplo(UPLO)
    res = EighResult(*apply(EIGH, (A,), {"UPLO": UPLO}))
    return res if out is None else _out_tuple(res, out, "linalg.eigh")


def eigvalsh(A, UPLO: str = "L", *, out=None) -> Tensor:
    """Eigenvalues (ascending) of a symmetric matrix."""
    _check_linalg(A, "linalg.eigvalsh")
    _check_uplo(UPLO)
    r = apply(EIGH, (A,), {"UPLO": UPLO})[0]
    return r if out is None else _out(r, out)


def svd(A, full_matrices: bool = True, *, driver=None, out=None):
    """Singular value decomposition ``A = U diag(S) Vh`` (S descending)."""
    _check_linalg(A, "linalg.svd", square=False)
    res = SVDResult(*apply(SVD, (A,), {"full_matrices": full_matrices, "compute_uv": True}))
    return res if out is None else _out_tuple(res, out, "linalg.svd")


def svdvals(A, *, driver=None, out=None) -> Tensor:
    """Singular values (descending)."""
    _check_linalg(A, "linalg.svdvals", square=False)
    need_uv = GRAD[0] and A._rg
    r = apply(SVD, (A,), {"full_matrices": False, "compute_uv": need_uv})[1]
    return r if out is None else _out(r, out)


def svd_legacy(input, some: bool = True, compute_uv: bool = True, *, out=None):
    """``torch.svd``: returns ``(U, S, V)`` (V, not Vh); zero U, V when ``compute_uv=False``."""
    _check_linalg(input, "svd", square=False)
    if compute_uv:
        U, S, Vh = apply(SVD, (input,), {"full_matrices": not some, "compute_uv": True})
        res = SVDOldResult(U, S, Vh.mT)
    else:
        S = svdvals(input)
        m, n = input._data.shape[-2:]
        b = input._data.shape[:-2]
        res = SVDOldResult(_const(np.zeros(b + (m, m)), input._dtype), S, _const(np.zeros(b + (n, n)), input._dtype))
    return res if out is None else _out_tuple(res, out, "svd")


def _pinv_tol(S: np.ndarray, m: int, n: int, atol, rtol, npdt) -> np.ndarray:
    """max(atol, rtol * s_max) per matrix (shape (..., 1)); torch's defaults for unset tolerances."""
    smax = S.max(axis=-1, keepdims=True) if S.shape[-1] else np.zeros(S.shape[:-1] + (1,), dtype=S.dtype)
    if isinstance(atol, np.ndarray) and atol.ndim:
        atol = atol[..., None]
    if isinstance(rtol, np.ndarray) and rtol.ndim:
        rtol = rtol[..., None]
    if rtol is None:
        # rtol defaults to eps * max(m, n), or to 0 when a positive atol is given
        atol_set = atol is not None and not (np.ndim(atol) == 0 and atol == 0)
        rtol = 0.0 if atol_set else np.finfo(npdt).eps * max(m, n)
    return np.maximum(0.0 if atol is None else atol, rtol * smax)


def _safe_recip(x: np.ndarray, keep: np.ndarray) -> np.ndarray:
    return np.where(keep, 1.0 / np.where(keep, x, 1), 0).astype(x.dtype, copy=False)


def _pinv_kernel(a, atol, rtol, hermitian):
    m, n = a.shape[-2:]
    if hermitian:
        w, v = np.linalg.eigh(a)
        mag = np.abs(w)
        winv = _safe_recip(w, mag > _pinv_tol(mag, m, n, atol, rtol, a.dtype))
        return np.matmul(v * winv[..., None, :], np.swapaxes(v, -1, -2))
    u, s, vh = _svd_kernel(a, False, True)
    sinv = _safe_recip(s, s > _pinv_tol(s, m, n, atol, rtol, a.dtype))
    return np.matmul(np.swapaxes(vh, -1, -2) * sinv[..., None, :], np.swapaxes(u, -1, -2))


def _pinv_bw(ctx, g):
    # torch's pinv_backward: the derivative of the pseudo-inverse as a function of the whole matrix
    A, = ctx.inputs
    P = ctx.output
    m, n = A._data.shape[-2:]
    Ph, gh = P.mT, g.mT
    if m <= n:
        K = matmul_raw(gh, P)
        KPh = matmul_raw(K, Ph)
        return (-matmul_raw(P, K).mT + KPh - matmul_raw(matmul_raw(A, P), KPh)
                + matmul_raw(matmul_raw(Ph, P), gh - matmul_raw(K, A)),)
    K = matmul_raw(P, gh)
    PhK = matmul_raw(Ph, K)
    return (-matmul_raw(K, P).mT + PhK - matmul_raw(matmul_raw(PhK, P), A)
            + matmul_raw(matmul_raw(gh - matmul_raw(A, K), P), Ph),)


PINV = register("linalg_pinv", _pinv_kernel, _pinv_bw, save="io")


def _tol_arg(t):
    return t._data if isinstance(t, Tensor) else t


def pinv(A, *, atol=None, rtol=None, hermitian: bool = False, out=None) -> Tensor:
    """Moore-Penrose pseudo-inverse (singular values below ``max(atol, rtol * s_max)`` are dropped)."""
    _check_linalg(A, "linalg.pinv", square=False)
    r = apply(PINV, (A,), {"atol": _tol_arg(atol), "rtol": _tol_arg(rtol), "hermitian": bool(hermitian)})
    return r if out is None else _out(r, out)


def pinverse(input, rcond: float = 1e-15) -> Tensor:
    """``torch.pinverse``: pseudo-inverse with relative tolerance ``rcond``."""
    return pinv(input, rtol=rcond)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """Least-squares solution of ``A X = B`` -> ``(solution, residuals, rank, singular_values)``.

    Which of residuals/rank/singular_values are filled follows torch's CPU drivers: gelsy (default)
    gives rank only; gelsd/gelss give all three; gels gives residuals only. Residuals are computed
    only when A is tall (m > n) and of full rank."""
    _check_linalg(A, "linalg.lstsq", square=False)
    _tensor_arg(B, "linalg.lstsq", "B")
    if driver is None:
        driver = "gelsy"
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if A._dtype is not B._dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
                           f"dtype {dtype_name(A._dtype)} and other's dtype {dtype_name(B._dtype)}")
    vec = B._data.ndim == A._data.ndim - 1
    Bm = B.unsqueeze(-1) if vec else B
    m, n = A._data.shape[-2:]
    if Bm._data.shape[-2] != m:
        which = "other.size(-1)" if vec else "other.size(-2)"
        raise RuntimeError(f"torch.linalg.lstsq: input.size(-2) should match {which}")
    batch = _bcast_shapes(A._data.shape[:-2], Bm._data.shape[:-2])
    # the solution is pinv(A) @ B (the minimum-norm least-squares solution); its gradient is torch's
    rtol = rcond if rcond is not None and rcond >= 0 else None
    if driver == "gels":
        rtol, atol = 0.0, 0.0
    else:
        atol = None
    X = matmul_raw(apply(PINV, (A,), {"atol": atol, "rtol": rtol, "hermitian": False}), Bm)
    S = _svd_kernel(A._data, False, False)[1]
    keep = S > _pinv_tol(S, m, n, atol, rtol, A._dtype.np)
    rank_np = keep.sum(-1).astype(np.int64)
    empty = _const(np.zeros((0,)), A._dtype)
    full_rank = bool(np.all(rank_np == min(m, n)))
    if driver != "gelsy" and m > n and (full_rank or driver == "gels"):
        Rsd = matmul_raw(A, X) - Bm
        from .reduce import sum as _sum
        residuals = _sum(Rsd * Rsd, -2)
    else:
        # an empty residuals tensor that is still part of the graph, as torch's
        from .shape import getitem_basic
        residuals = getitem_basic(X.reshape(-1), (slice(0, 0),))
    rank = _const(np.zeros((0,)), _dt.int64) if driver == "gels" else _const(rank_np, _dt.int64)
    sv = _const(S, A._dtype) if driver in ("gelsd", "gelss") else empty
    if vec:
        X = X.squeeze(-1)
    return LstsqResult(X, residuals, rank, sv)


# ---- exports ------------------------------------------------------------------------------------------

for _n, _f in [("cholesky", cholesky_legacy), ("qr", qr_legacy), ("svd", svd_legacy), ("pinverse", pinverse)]:
    attach(_n, _f)
