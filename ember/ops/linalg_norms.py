"""What measures a matrix: determinants (``det``, ``slogdet``, ``logdet``), the norms of ``ember.linalg``
(``vector_norm``, ``matrix_norm``, ``norm``), the condition number ``cond`` and ``matrix_rank``.
"""
from __future__ import annotations

import importlib

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from .registry import register, apply, attach, node_class, rename
from .linalg import SlogdetResult, _check_linalg, _const, _nan_matrices, _out, _out_tuple, _shp, _tensor_arg
from .linalg_solvers import INV, inv
from .linalg_decompositions import _pinv_tol, _svd_kernel, _tol_arg, svdvals


# ---- determinants -------------------------------------------------------------------------------------


def _adjugate_T(a: np.ndarray) -> np.ndarray:
    """Transposed adjugate (the derivative of det) of each matrix, valid for singular ones too."""
    u, s, vh = np.linalg.svd(a)
    n = s.shape[-1]
    adj = np.empty_like(s)
    for i in range(n):
        adj[..., i] = np.prod(np.delete(s, i, axis=-1), axis=-1)
    sign = np.linalg.det(u) * np.linalg.det(vh)
    return (u * adj[..., None, :]) @ vh * sign[..., None, None]


def _det_bw(ctx, g):
    A, = ctx.inputs
    d = ctx.output
    if A._data.shape[-1] == 0:
        return (A * 0,)
    if np.all(d._data != 0):
        return ((g * d).unsqueeze(-1).unsqueeze(-1) * apply(INV, (A,)).mT,)
    # singular matrices: det' = adj(A)^T, computed directly (first order only)
    return (g.unsqueeze(-1).unsqueeze(-1) * _const(_adjugate_T(A._data), A._dtype),)


def _det_kernel(a):
    d = np.asarray(np.linalg.det(a), dtype=a.dtype)
    mask = _nan_matrices(a)
    return d if mask is None else np.where(mask, np.nan, d).astype(a.dtype)


DET = register("linalg_det", _det_kernel, _det_bw, save="io")


def _slogdet_kernel(a):
    s, l = np.linalg.slogdet(a)
    mask = _nan_matrices(a)
    if mask is not None:
        s, l = np.where(mask, 0, s), np.where(mask, np.nan, l)
    return np.asarray(s, dtype=a.dtype), np.asarray(l, dtype=a.dtype)


def _slogdet_bw(ctx, gs, gl):
    A, = ctx.inputs
    if A._data.shape[-1] == 0:
        return (A * 0,)
    return (gl.unsqueeze(-1).unsqueeze(-1) * apply(INV, (A,)).mT,)


SLOGDET = register("linalg_slogdet", _slogdet_kernel, _slogdet_bw, save="i", nout=2)


def det(A, *, out=None) -> Tensor:
    """Determinant of a (batch of) square matrix."""
    _check_linalg(A, "linalg.det")
    r = apply(DET, (A,))
    return r if out is None else _out(r, out)


def slogdet(A, *, out=None):
    """``(sign, logabsdet)`` of the determinant (stable for large/small determinants)."""
    _check_linalg(A, "linalg.slogdet")
    res = SlogdetResult(*apply(SLOGDET, (A,)))
    return res if out is None else _out_tuple(res, out, "linalg.slogdet")


def logdet(input) -> Tensor:
    """log(det(A)): nan for a negative determinant, -inf for zero."""
    _check_linalg(input, "logdet")
    sign, logabs = apply(SLOGDET, (input,))
    bad = np.where(sign._data < 0, np.nan, 0.0)
    return logabs + _const(bad, input._dtype) if bad.any() or np.isnan(bad).any() else logabs


# ---- norms: implemented in reduce_norm, dispatched here -----------------------------------------------

_VECTOR_NORM = node_class("LinalgVectorNormBackward0")


def _reduce_norm(name: str):
    """Fetch ``vector_norm``/``matrix_norm`` from ember.ops.reduce_norm (imported lazily: it is optional)."""
    try:
        mod = importlib.import_module("ember.ops.reduce_norm")
    except ModuleNotFoundError as e:
        if e.name != "ember.ops.reduce_norm":
            raise
        mod = None
    fn = getattr(mod, name, None)
    if fn is None:
        raise NotImplementedError(f"linalg.{name} is not available: it is implemented by ember.ops.reduce_norm."
                                  f"{name}, which is missing from this build")
    return fn


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """Vector norm over ``dim`` (all dims by default); see ``ember.ops.reduce_norm.vector_norm``."""
    r = _reduce_norm("vector_norm")(x, ord, dim, keepdim, dtype=dtype, out=out)
    return r if out is not None else rename(r, _VECTOR_NORM)     # one op in torch, whatever ord


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """Matrix norm over the two dims ``dim``; see ``ember.ops.reduce_norm.matrix_norm``."""
    r = _reduce_norm("matrix_norm")(A, ord, dim, keepdim, dtype=dtype, out=out)
    # torch computes the Frobenius norm as a vector norm (other orders end in other reductions)
    return rename(r, _VECTOR_NORM) if out is None and ord == "fro" else r


def norm(A, ord=None, dim=None, keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """``torch.linalg.norm``: a vector norm or a matrix norm depending on ``dim``/``ord``/``A.ndim``."""
    _tensor_arg(A, "linalg.norm", "A")
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {_shp(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype, out=out)
    nd = A._data.ndim
    if nd == 1 and not isinstance(ord, str):       # ('fro' and 'nuc' are matrix norms: a 1-D input fails there)
        return vector_norm(A, ord, None, keepdim, dtype=dtype, out=out)
    if nd <= 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype, out=out)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {nd}D.")


# ---- condition number and rank ------------------------------------------------------------------------


def cond(A, p=None, *, out=None) -> Tensor:
    """Condition number: ``s_max / s_min`` for p in (None, 2, -2), else ``norm(A, p) * norm(inv(A), p)``."""
    _check_linalg(A, "linalg.cond", square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        S = svdvals(A)
        hi, lo = S[..., 0], S[..., -1]
        r = hi / lo if p != -2 else lo / hi
    else:
        mn = _reduce_norm("matrix_norm")
        r = mn(A, p) * mn(inv(A), p)
    return r if out is None else _out(r, out)


def matrix_rank(A, *, atol=None, rtol=None, hermitian: bool = False, out=None) -> Tensor:
    """Numerical rank: the number of singular values above ``max(atol, rtol * s_max)`` (int64)."""
    _check_linalg(A, "linalg.matrix_rank", square=False)
    m, n = A._data.shape[-2:]
    if hermitian:
        S = np.abs(np.linalg.eigvalsh(A._data))
    else:
        S = _svd_kernel(A._data, False, False)[1]
    r = _const((S > _pinv_tol(S, m, n, _tol_arg(atol), _tol_arg(rtol), A._dtype.np)).sum(-1), _dt.int64)
    return r if out is None else _out(r, out)


# ---- exports ------------------------------------------------------------------------------------------

for _n, _f in [("det", det), ("logdet", logdet), ("slogdet", slogdet)]:
    attach(_n, _f)
