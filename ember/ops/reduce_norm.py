"""p-norms: ``vector_norm`` and ``matrix_norm`` (``ember.linalg`` reaches them through linalg_norms.py),
``norm`` / ``Tensor.norm``, and ``abs_pow`` (|x|**p, the building block of their derivatives).
Integer inputs are refused, as torch does."""
from __future__ import annotations

import builtins
import math

import numpy as np

from ..autograd.grad_mode import no_grad
from .registry import register, apply, attach
from ._layout_rule import contiguous_results
from ._util import wrap_dim
from .reduce import _expand_back, sum as _sum, SUM
from ._reduce_util import _INF, _const, _down, _name, _out, _reduce_axes, _up
from .reduce_order import amax, amin


# ---- norms ---------------------------------------------------------------------------------------------


def _abs_pow_kernel(x, p):
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = np.abs(x) ** p
    if p < 0:
        r = np.where(x == 0, 0, r).astype(r.dtype)   # as torch's norm derivative masks 0^(negative)
    return r


def _abs_pow_bw(ctx, g):
    x = ctx.inputs[0]
    p = ctx.attrs["p"]
    if p == 0:
        return g * 0
    return g * (p * _const(np.sign(x._data), x._dtype)) * apply(ABS_POW, (x,), {"p": p - 1})


# |x|**p with a derivative written in ember ops: the building block of the p-norm derivatives
ABS_POW = register("abs_pow", _abs_pow_kernel, _abs_pow_bw, save="i")


def _norm_kernel(x, ord, axis, keepdims):
    x, od = _up(x)
    a = np.abs(x)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if ord == 2:
            r = np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims))
        elif ord == _INF:
            r = np.max(a, axis=axis, keepdims=keepdims)
        elif ord == -_INF:
            r = np.min(a, axis=axis, keepdims=keepdims)
        elif ord == 0:
            r = np.sum(a != 0, axis=axis, keepdims=keepdims).astype(x.dtype)
        elif ord == 1:
            r = np.sum(a, axis=axis, keepdims=keepdims)
        else:
            r = np.sum(a ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)
    return _down(np.asarray(r, dtype=x.dtype), od)


def _norm_bw(ctx, g):
    x = ctx.inputs[0]
    y = ctx.output
    p, axis, keep = ctx.attrs["ord"], ctx.attrs["axis"], ctx.attrs["keepdims"]
    shp = x._data.shape
    dt = x._dtype
    gk = _expand_back(g, shp, axis, keep)
    if p == 0:
        return gk * 0
    # masks and signs are constants of the derivative, computed with ember ops (so a compiled replay
    # recomputes them for new values)
    with no_grad():
        sign = x.sign()
    if p == 1:
        return gk * sign
    yk = _expand_back(y, shp, axis, keep)
    if math.isinf(p):
        with no_grad():
            a = x.abs()
            mask = ((a == yk) | a.isnan()).to(dt)
            scale = sign * mask / (apply(SUM, (mask,), {"axis": axis, "keepdims": True}) if axis else mask)
        return gk * scale
    with no_grad():
        zero = yk == 0
        nonzero = (~zero).to(dt)
        zero = zero.to(y._dtype)
    safe = yk + zero
    if p == 2:
        return x * (gk / safe) * nonzero
    if p < 1:
        return sign * apply(ABS_POW, (x,), {"p": p - 1}) * gk * apply(ABS_POW, (yk,), {"p": 1 - p})
    scale = gk / apply(ABS_POW, (safe,), {"p": p - 1}) * nonzero
    if p < 2:
        return sign * apply(ABS_POW, (x,), {"p": p - 1}) * scale
    return x * apply(ABS_POW, (x,), {"p": p - 2}) * scale


NORM = register("norm", _norm_kernel, _norm_bw, save="io")
contiguous_results(NORM)
NORM.node_name = "LinalgVectorNormBackward0"     # torch.norm / Tensor.norm run linalg.vector_norm too


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None, out=None):
    """``linalg.vector_norm``: the ``ord``-norm of ``x`` over ``dim`` (all elements by default)."""
    if isinstance(ord, str) or isinstance(ord, builtins.bool) or not isinstance(ord, (int, float, np.number)):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, not {type(ord).__name__}")
    if x._dtype.is_complex and dtype is None:
        x = x.abs()             # the norm of complex entries is the norm of their magnitudes (a real result)
    if not x._dtype.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_name(x._dtype)}")
    if dtype is not None:
        if not dtype.is_floating_point:
            raise RuntimeError(f"linalg.vector_norm: dtype should be floating point or complex, but got {_name(dtype)}")
        x = x.to(dtype)
    ord = float(ord)
    nd = x._data.ndim
    axis = _reduce_axes(dim, nd)
    if ord < 0 or math.isinf(ord):
        empty = x._data.size == 0 if dim is None else builtins.any(x._data.shape[d] == 0 for d in axis)
        if empty:
            o = "inf" if ord == _INF else "-inf" if ord == -_INF else f"{ord:g}"
            raise RuntimeError(f"linalg.vector_norm cannot compute the {o} norm on an empty tensor because the "
                               "operation does not have an identity")
    r = apply(NORM, (x,), {"ord": ord, "axis": axis, "keepdims": keepdim})
    return r if out is None else _out(r, out)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None, out=None):
    """``linalg.matrix_norm``: 'fro', 'nuc', inf, -inf, 1, -1, 2, -2 norms over the two dims ``dim``."""
    if A._data.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if not A._dtype.is_floating_point:
        raise RuntimeError(f"linalg.matrix_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_name(A._dtype)}")
    if isinstance(dim, (int, np.integer)) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    nd = A._data.ndim
    d0, d1 = (wrap_dim(d, nd) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if dtype is not None:
        A = A.to(dtype)
    if ord == "fro":
        r = vector_norm(A, 2, (d0, d1), keepdim)
    elif ord in ("nuc", 2, -2) and not isinstance(ord, builtins.bool):
        from .linalg_decompositions import svdvals      # singular values (and their derivatives) live in ember.linalg
        sv = svdvals(A.movedim((d0, d1), (-2, -1)))
        r = _sum(sv, -1) if ord == "nuc" else (amax if ord == 2 else amin)(sv, -1)
        if keepdim:
            for d in sorted((d0, d1)):
                r = r.unsqueeze(d)
    elif not isinstance(ord, str) and ord in (1, -1, _INF, -_INF):
        # 1: largest column sum of |A|; inf: largest row sum
        sum_dim, red_dim = (d0, d1) if abs(ord) == 1 else (d1, d0)
        s = vector_norm(A, 1, sum_dim, keepdim=True)
        r = (amax if ord > 0 else amin)(s, red_dim, keepdim=True)
        if not keepdim:
            r = r.squeeze((d0, d1))
    else:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    return r if out is None else _out(r, out)


def norm(input, p="fro", dim=None, keepdim: bool = False, out=None, dtype=None):
    """``torch.norm``: vector norms for numeric ``p``; 'fro' (2-norm) and 'nuc' (matrix) for strings."""
    if p is None:
        p = "fro"
    if isinstance(dim, (int, np.integer)):
        dim = (int(dim),)
    if isinstance(p, str):
        if p == "fro" and (dim is None or len(dim) <= 2):
            r = vector_norm(input, 2, dim, keepdim, dtype=dtype)
        elif p == "nuc" or p == "fro":
            r = matrix_norm(input, p, (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
        else:
            raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
    else:
        r = vector_norm(input, p, dim, keepdim, dtype=dtype)
    return r if out is None else _out(r, out)


attach("norm", norm)


def _norm_method(self, p="fro", dim=None, keepdim: bool = False, dtype=None):
    """``Tensor.norm``: like ``ember.norm`` but the fourth positional argument is ``dtype``."""
    return norm(self, p, dim, keepdim, dtype=dtype)


attach("norm", _norm_method, function=False)
