"""Scans along one dim: cumsum, cumprod and logcumsumexp (and the in-place cumsum_ / cumprod_). The
running max/min (cummax/cummin) select indices, so they live in reduce_order.py. Integer inputs
accumulate in int64, as torch does."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from ..autograd.grad_mode import GRAD
from .registry import register, apply, attach
from ._util import wrap_dim
from .reduce import sum as _sum
from .shape import PUT_FLAT
from ._reduce_util import _INF, _accumulation, _const, _down, _int_dim, _name, _out, _out_dtype, _up
from ._reduce_util import numpy_names
from .reduce_softmax import SOFTMAX


def _logical(shape) -> np.ndarray:
    return np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)


# ---- scans -----------------------------------------------------------------------------------------


def _scan(fn, x, axis, reverse, dtype=None):
    if x.ndim == 0:
        return np.array(x, dtype=dtype or x.dtype, copy=True)
    if reverse:
        rev = (slice(None),) * axis + (slice(None, None, -1),)     # (np.flip costs microseconds of Python)
        return np.ascontiguousarray(fn(x[rev], axis=axis, dtype=dtype)[rev])
    r = fn(x, axis=axis, dtype=dtype)
    return r if r.flags.c_contiguous else np.ascontiguousarray(r)     # (torch's scans are contiguous)


def _cumsum_kernel(x, axis, reverse=False, dtype=None):
    x, dtype, od = _accumulation(x, dtype)
    return _down(_scan(np.add.accumulate, x, axis, reverse, dtype), od)


def _cumsum_bw(ctx, g):
    return apply(CUMSUM, (g,), {"axis": ctx.attrs["axis"], "reverse": not ctx.attrs.get("reverse", False)})


CUMSUM = register("cumsum", _cumsum_kernel, _cumsum_bw, prim="cumsum")


def _cumprod_kernel(x, axis, reverse=False, dtype=None):
    x, dtype, od = _accumulation(x, dtype)
    return _down(_scan(np.multiply.accumulate, x, axis, reverse, dtype), od)


def _rcumsum_np(a, axis, reverse):
    """Cumulative sum against the scan direction (the adjoint of a scan)."""
    return _scan(np.add.accumulate, a, axis, not reverse)


def _cumprod_grad(g: Tensor, x: Tensor, y: Tensor, axis: int, reverse: bool) -> Tensor:
    """First-order cumprod gradient in O(n), exact with zeros, in ember ops without branching on values
    (so a compiled replay is right whether or not the new input has zeros). Used when no graph is built."""
    from .binary import where
    scan = {"axis": axis, "reverse": reverse}
    anti = {"axis": axis, "reverse": not reverse}     # a sum against the scan direction (its adjoint)
    is_zero = x == 0
    nz = apply(CUMSUM, (is_zero,), scan)
    before = nz == 0                      # positions before the first zero
    first = is_zero & (nz == 1)           # the first zero itself
    out = where(before, apply(CUMSUM, (g * y,), anti) / where(before, x, 1), 0)
    y1 = apply(CUMPROD, (where(first, 1, x),), scan)
    return out + where(first, apply(CUMSUM, (g * y1,), anti), 0)


def _cumprod_bw(ctx, g):
    x = ctx.inputs[0]
    y = ctx.output
    axis, rev = ctx.attrs["axis"], ctx.attrs.get("reverse", False)
    if x._data.ndim == 0 or x._data.shape[axis] <= 1:
        return g
    if not GRAD[0]:
        return _cumprod_grad(g, x, y, axis, rev)
    if not (x._data == 0).any():
        # NOTE: a branch on values, taken only while building a graph of the backward (double backward)
        return apply(CUMSUM, (g * y,), {"axis": axis, "reverse": not rev}) / x
    # building a graph (double backward): the O(n^2) form whose derivative is exact with zeros
    n = x._data.shape[axis]
    shp = x._data.shape
    li = _logical(shp)
    total = None
    for k in range(n):
        after = (k + 1, n - k - 1) if not rev else (0, k)
        prev = k - 1 if not rev else k + 1
        term = g.narrow(axis, k, 1)
        if after[1] > 0:
            c = apply(CUMPROD, (x.narrow(axis, *after),), {"axis": axis, "reverse": rev})
            term = term + _sum(c * g.narrow(axis, *after), axis, keepdim=True)
        if 0 <= prev < n:
            term = term * y.narrow(axis, prev, 1)
        placed = apply(PUT_FLAT, (term,), {"idx": np.take(li, [k], axis=axis), "shape": shp})
        total = placed if total is None else total + placed
    return total


CUMPROD = register("cumprod", _cumprod_kernel, _cumprod_bw, save="io")


def _scan_dim(input, dim, op):
    nd = input._data.ndim
    return wrap_dim(_int_dim(dim, op), nd) if nd else (wrap_dim(_int_dim(dim, op), 0) * 0)


def _accumulate(op, name, input, dim, dtype, out, axis):
    """cumsum / cumprod: ``axis=`` for ``dim``, the result dtype from ``dtype`` or ``out``, one scan."""
    if axis is not None or dim is None:
        dim, _ = numpy_names(name, dim, False, axis, None, required=True)
    dtype = _out_dtype(dtype, out)
    attrs = {"axis": _scan_dim(input, dim, name), "reverse": False}
    if dtype is not None:
        attrs["dtype"] = dtype.np
    r = apply(op, (input,), attrs)
    return r if out is None else _out(r, out)


def cumsum(input, dim=None, *, dtype=None, out=None, axis=None):
    """Cumulative sum along ``dim``; integers and bools accumulate in int64 unless ``dtype`` is given."""
    return _accumulate(CUMSUM, "cumsum", input, dim, dtype, out, axis)


def cumprod(input, dim=None, *, dtype=None, out=None, axis=None):
    """Cumulative product along ``dim`` (gradient exact when the input has zeros, as in torch)."""
    return _accumulate(CUMPROD, "cumprod", input, dim, dtype, out, axis)


def _cumsum_(self, dim, *, dtype=None):
    from .inplace import write_result
    return write_result(self, lambda s: cumsum(s, dim, dtype=dtype), "cumsum_")


def _cumprod_(self, dim, *, dtype=None):
    from .inplace import write_result
    return write_result(self, lambda s: cumprod(s, dim, dtype=dtype), "cumprod_")


def _logcumsumexp_kernel(x, axis):
    x, od = _up(x)
    if x.ndim == 0:
        return _down(x.copy(), od)
    return _down(_scan(np.logaddexp.accumulate, x, axis, False), od)


def _logcumsumexp_grad(g: Tensor, x: Tensor, y: Tensor, axis: int) -> Tensor:
    """First-order gradient in O(n) and in ember ops (a compiled replay recomputes it for new values):
    grad_k = sum_{j>=k} g_j exp(x_k - y_j), summed in log space separately for g > 0 and g < 0."""
    from .binary import where
    from .shape_rearrange import FLIP
    flip = {"axes": (axis,)}
    la = where(g == 0, 1, g).abs().log()
    terms = []
    for m in (g > 0, g < 0):
        lg = where(m, la, -_INF) - y
        acc = apply(FLIP, (apply(LOGCUMSUMEXP, (apply(FLIP, (lg,), flip),), {"axis": axis}),), flip)
        terms.append((acc + x).exp())
    return terms[0] - terms[1]


def _logcumsumexp_bw(ctx, g):
    x = ctx.inputs[0]
    y = ctx.output
    axis = ctx.attrs["axis"]
    if x._data.ndim == 0:
        return g
    if not GRAD[0]:
        return _logcumsumexp_grad(g, x, y, axis)
    # building a graph: row j of the Jacobian is a softmax of x over positions <= j
    n = x._data.shape[axis]
    xm = x.movedim(axis, -1)
    gm = g.movedim(axis, -1)
    mask = np.where(np.tril(np.ones((n, n), dtype=bool)), 0.0, -np.inf)
    w = apply(SOFTMAX, (xm.unsqueeze(-2) + _const(mask, x._dtype),), {"axis": -1})
    return _sum(gm.unsqueeze(-1) * w, -2).movedim(-1, axis)


LOGCUMSUMEXP = register("logcumsumexp", _logcumsumexp_kernel, _logcumsumexp_bw, save="io")


def logcumsumexp(input, dim=None, *, out=None, axis=None):
    """``log(cumsum(exp(input)))`` along ``dim``, computed stably."""
    if axis is not None or dim is None:
        dim, _ = numpy_names("logcumsumexp", dim, False, axis, None, required=True)
    if not input._dtype.is_floating_point:
        raise NotImplementedError(f'"logcumsumexp_out_cpu" not implemented for \'{_name(input._dtype)}\'')
    r = apply(LOGCUMSUMEXP, (input,), {"axis": _scan_dim(input, dim, "logcumsumexp")})
    return r if out is None else _out(r, out)


# ---- exports ------------------------------------------------------------------------------------------

for _name_, _fn in [("cumsum", cumsum), ("cumprod", cumprod), ("logcumsumexp", logcumsumexp)]:
    attach(_name_, _fn)
attach("cumsum_", _cumsum_, function=False)
attach("cumprod_", _cumprod_, function=False)
