"""Reductions beyond sum/mean, scans, sorting and softmax.

Three kinds of ops live here:

* value reductions (prod, amax/amin, var/std, norms, logsumexp, nansum, median): a NumPy kernel and a
  derivative built from ember ops, expanded back with ``_expand_back``;
* index-selecting ops (max/min with ``dim``, sort, topk, kthvalue, median/mode with ``dim``,
  cummax/cummin): the kernel computes the int64 indices and gathers the values at them; the
  derivative scatters the gradient at the saved indices OUTPUT (a tensor argument of ``scatter`` /
  ``scatter_add``, so a compiled replay uses the new indices; their derivative is a gather, so double
  backward works);
* scans (cumsum, cumprod, logcumsumexp) and softmax/log_softmax.

Index outputs are int64 and never differentiable. Integer inputs follow torch: sum-like results
(prod, cumsum, cumprod, nansum) accumulate in int64; var/std/norm/nanmean refuse them.
"""
from __future__ import annotations

import builtins
import collections
import math
import warnings

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from ..autograd.grad_mode import GRAD, no_grad
from ..autograd.node import _version_error
from .registry import register, apply, attach, dtype_name, FUNCTIONS, node_class, rename
from ._util import dims_arg, wrap_dim, int_arg
from .reduce import _expand_back, sum as _sum, mean as _mean, SUM
from .shape import PUT_FLAT
from .index_scatter import SCATTER, SCATTER_ADD
from .creation import zeros as _zeros, ones as _ones

_INF = float("inf")
_HALF = (np.dtype(np.float16), _dt.bfloat16.np)

# ---- torch.return_types ------------------------------------------------------------------------


def _return_type(name: str, fields: tuple):
    """A named tuple printed like torch's ``torch.return_types.<name>`` structseq."""
    cls = collections.namedtuple(name, fields)

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self))
        return f"ember.return_types.{name}(\n{body})"
    cls.__repr__ = __repr__
    cls.__module__ = "ember.return_types"
    return cls


class _ReturnTypes:
    """Namespace of the named tuples returned by (values, indices) ops, like ``torch.return_types``."""


return_types = _ReturnTypes()
for _n in ("max", "min", "sort", "topk", "kthvalue", "median", "nanmedian", "mode", "cummax", "cummin"):
    setattr(return_types, _n, _return_type(_n, ("values", "indices")))
return_types.aminmax = _return_type("aminmax", ("min", "max"))

# ---- small helpers -------------------------------------------------------------------------------


def _const(arr, dtype: _dt.dtype) -> Tensor:
    """A constant (no-grad) tensor of ``dtype`` from a NumPy array (masks and scales in derivatives)."""
    return wrap(np.asarray(arr).astype(dtype.np, copy=False), dtype)


def _up(x: np.ndarray):
    """Compute half-precision types in float32 (torch accumulates them in float); returns (x, cast_back)."""
    if x.dtype in _HALF:
        return x.astype(np.float32), x.dtype
    return x, None


def _down(r, od):
    r = np.asarray(r)
    return r if od is None else r.astype(od)


def _logical(shape) -> np.ndarray:
    return np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)


def _name(d) -> str:
    return dtype_name(d)


def _out(result, out):
    from .inplace import copy_out
    return copy_out(result, out)


def _out_dtype(dtype, out):
    """Sum-like ops with ``out=`` and no ``dtype`` compute in ``out``'s dtype, as torch does."""
    if dtype is None and isinstance(out, Tensor):
        return out._dtype
    return dtype


_C_TYPE = {"float32": "float", "float64": "double", "int64": "long int", "int32": "int", "int16": "short int",
           "int8": "signed char", "uint8": "unsigned char", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
           "bool": "bool"}


def _out_tuple(results, out, rtype):
    """``out=(a, b)`` for ops with two results."""
    if not isinstance(out, (tuple, list)) or len(out) != len(results):
        raise TypeError(f"argument 'out' must be a tuple of {len(results)} Tensors")
    for r, o in zip(results, out):      # (all checked before anything is written)
        if isinstance(o, Tensor) and o._dtype is not r._dtype:
            raise RuntimeError(f"Expected out tensor to have dtype {_C_TYPE.get(r._dtype.name, r._dtype.name)}, "
                               f"but got {_C_TYPE.get(o._dtype.name, o._dtype.name)} instead")
    return rtype(*(_out(r, o) for r, o in zip(results, out)))


def _reduce_axes(dim, nd: int, empty_means_all: bool = True) -> tuple:
    """``dim`` (None, int or sequence) as a sorted tuple; ``()`` means every dim where torch says so."""
    if nd == 0:
        if dim is not None:
            for d in ((dim,) if isinstance(dim, (int, np.integer)) else dim):
                wrap_dim(d, 0)
        return ()
    if dim is not None and not isinstance(dim, (int, np.integer)) and len(dim) == 0:
        return tuple(range(nd)) if empty_means_all else ()
    return dims_arg(dim, nd)


def _int_dim(dim, op: str, arg: str = "dim") -> int:
    if isinstance(dim, Tensor):
        dim = dim.item()
    if isinstance(dim, builtins.bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}(): argument '{arg}' must be int, not {type(dim).__name__}")
    return int(dim)


def _check_nonempty(x: Tensor, axes, op: str) -> None:
    shp = x._data.shape
    if x._data.size == 0 and not shp:
        return
    for d in axes:
        if shp[d] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")


def _float_or_default(x: Tensor) -> Tensor:
    return x if x._dtype.is_floating_point else x.to(_dt.get_default_dtype())


# ---- prod ------------------------------------------------------------------------------------------


def _prod_kernel(x, axis, keepdims, dtype=None):
    if dtype is None and x.dtype.kind in "biu":
        dtype = np.int64
    od = None
    if dtype is None:
        x, od = _up(x)
    return _down(np.prod(x, axis=axis, keepdims=keepdims, dtype=dtype), od)


def _shift(t: Tensor, d: int, reverse: bool) -> Tensor:
    """``t`` moved one step along ``d`` (forward: out[k] = t[k-1]), the vacated slot filled with 1."""
    from .shape_more import cat
    n = t._data.shape[d]
    one = _ones(t._data.shape[:d] + (1,) + t._data.shape[d + 1:], dtype=t._dtype)
    if reverse:
        return cat([t.narrow(d, 1, n - 1), one], d)
    return cat([one, t.narrow(d, 0, n - 1)], d)


def _prod_others(x: Tensor, d: int) -> Tensor:
    """Product of all other elements along ``d`` (exclusive cumprods from both ends; safe with zeros)."""
    left = _shift(apply(CUMPROD, (x,), {"axis": d, "reverse": False}), d, False)
    right = _shift(apply(CUMPROD, (x,), {"axis": d, "reverse": True}), d, True)
    return left * right


def _prod_bw(ctx, g):
    x = ctx.inputs[0]
    axis, keep = ctx.attrs["axis"], ctx.attrs["keepdims"]
    shp = x._data.shape
    if not shp:
        return g
    gk = _expand_back(g, shp, axis, keep)
    if x._data.size == 0:
        return gk
    # always the zero-safe form: a compiled replay must not keep a branch taken on the traced values
    if len(axis) == 1:
        return gk * _prod_others(x, axis[0])
    return gk * _prod_others(x.reshape(-1), 0).reshape(shp)


PROD = register("prod", _prod_kernel, _prod_bw, save="i")
_PROD_DIM = node_class("ProdBackward1")


def prod(input, dim=None, keepdim: bool = False, *, dtype=None, out=None):
    """Product of all elements, or along one ``dim``; integers and bools accumulate in int64."""
    if isinstance(dim, _dt.dtype):
        dtype, dim = dim, None
    dtype = _out_dtype(dtype, out)
    nd = input._data.ndim
    if dim is None:
        axis = tuple(range(nd))
    else:
        d = wrap_dim(_int_dim(dim, "prod"), nd)
        axis = (d,) if nd else ()
    attrs = {"axis": axis, "keepdims": keepdim if dim is not None else False}
    if dtype is not None:
        attrs["dtype"] = dtype.np
    r = apply(PROD, (input,), attrs)
    if dim is not None:
        rename(r, _PROD_DIM)     # torch's prod.dim_int overload
    return r if out is None else _out(r, out)


# ---- scans -----------------------------------------------------------------------------------------


def _scan(fn, x, axis, reverse, dtype=None):
    if x.ndim == 0:
        return np.array(x, dtype=dtype or x.dtype, copy=True)
    if reverse:
        return np.ascontiguousarray(np.flip(fn(np.flip(x, axis), axis=axis, dtype=dtype), axis))
    return fn(x, axis=axis, dtype=dtype)


def _cumsum_kernel(x, axis, reverse=False, dtype=None):
    if dtype is None and x.dtype.kind in "biu":
        dtype = np.int64
    od = None
    if dtype is None:
        x, od = _up(x)
    return _down(_scan(np.cumsum, x, axis, reverse, dtype), od)


def _cumsum_bw(ctx, g):
    return apply(CUMSUM, (g,), {"axis": ctx.attrs["axis"], "reverse": not ctx.attrs.get("reverse", False)})


CUMSUM = register("cumsum", _cumsum_kernel, _cumsum_bw, prim="cumsum")


def _cumprod_kernel(x, axis, reverse=False, dtype=None):
    if dtype is None and x.dtype.kind in "biu":
        dtype = np.int64
    od = None
    if dtype is None:
        x, od = _up(x)
    return _down(_scan(np.cumprod, x, axis, reverse, dtype), od)


def _rcumsum_np(a, axis, reverse):
    """Cumulative sum against the scan direction (the adjoint of a scan)."""
    return _scan(np.cumsum, a, axis, not reverse)


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


def cumsum(input, dim, *, dtype=None, out=None):
    """Cumulative sum along ``dim``; integers and bools accumulate in int64 unless ``dtype`` is given."""
    dtype = _out_dtype(dtype, out)
    attrs = {"axis": _scan_dim(input, dim, "cumsum"), "reverse": False}
    if dtype is not None:
        attrs["dtype"] = dtype.np
    r = apply(CUMSUM, (input,), attrs)
    return r if out is None else _out(r, out)


def cumprod(input, dim, *, dtype=None, out=None):
    """Cumulative product along ``dim`` (gradient exact when the input has zeros, as in torch)."""
    dtype = _out_dtype(dtype, out)
    attrs = {"axis": _scan_dim(input, dim, "cumprod"), "reverse": False}
    if dtype is not None:
        attrs["dtype"] = dtype.np
    r = apply(CUMPROD, (input,), attrs)
    return r if out is None else _out(r, out)


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
    return _down(np.logaddexp.accumulate(x, axis=axis), od)


def _logcumsumexp_grad(g: Tensor, x: Tensor, y: Tensor, axis: int) -> Tensor:
    """First-order gradient in O(n) and in ember ops (a compiled replay recomputes it for new values):
    grad_k = sum_{j>=k} g_j exp(x_k - y_j), summed in log space separately for g > 0 and g < 0."""
    from .binary import where
    from .shape_more import FLIP
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


def logcumsumexp(input, dim, *, out=None):
    """``log(cumsum(exp(input)))`` along ``dim``, computed stably."""
    if not input._dtype.is_floating_point:
        raise NotImplementedError(f'"logcumsumexp_out_cpu" not implemented for \'{_name(input._dtype)}\'')
    r = apply(LOGCUMSUMEXP, (input,), {"axis": _scan_dim(input, dim, "logcumsumexp")})
    return r if out is None else _out(r, out)


# ---- index-selecting ops (values + int64 indices) --------------------------------------------------
# Each kernel computes the indices itself (so captured graphs replay correctly) and gathers the values;
# the derivative scatters the gradient to the saved indices.


def _gathered(x, ind, axis, keepdims):
    vals = np.take_along_axis(x, ind, axis=axis)
    if not keepdims:
        return np.squeeze(vals, axis), np.squeeze(ind, axis)
    return vals, ind


def _scalar_sel(x):
    return x.copy(), np.zeros((), dtype=np.int64)


def _saved_indices(ctx) -> Tensor:
    """The saved int64 index output as a tensor on its own buffer (so a capturing compiler sees the op's
    output, not a constant), checked for in-place changes (the values output may change freely)."""
    ctx._check()
    data, dt, vc, v = ctx.saved_out[1]
    if vc[0] != v:
        _version_error((data.shape, dt), ctx, vc[0], v, output=1)
    return wrap(data, dt)


def _take_bw(ctx, g, _gi=None):
    """Gradient of gathering at the indices output: scatter ``g`` into zeros of the input's shape.
    cummax/cummin repeat indices, whose gradients add up (scatter_add); the other ops pick each
    position at most once, so a plain scatter (about 3x faster) is exact."""
    axis, keep = ctx.attrs["axis"], ctx.attrs.get("keepdims", True)
    shp = ctx.in_shape(0)
    if not shp:
        return g.reshape(())
    ind = _saved_indices(ctx)
    if not keep:
        ind, g = ind.unsqueeze(axis), g.unsqueeze(axis)
    op = SCATTER_ADD if ctx.op.name in ("cummax", "cummin") else SCATTER
    return apply(op, (_zeros(shp, dtype=g._dtype), ind, g), {"dim": axis})


def _select_op(name, kernel):
    return register(name, kernel, _take_bw, save="o", nout=2, nondiff_outputs=(1,))


def _argsort_np(a, axis, descending):
    """Stable argsort; descending keeps equal elements in their original order (NaN counts as largest)."""
    if not descending:
        return np.argsort(a, axis=axis, kind="stable")
    n = a.shape[axis]
    r = np.argsort(np.flip(a, axis), axis=axis, kind="stable")
    return np.flip(n - 1 - r, axis)


def _maxmin_dim_kernel(largest):
    f = np.argmax if largest else np.argmin

    def k(x, axis, keepdims):
        if x.ndim == 0:
            return _scalar_sel(x)
        return _gathered(x, f(x, axis=axis, keepdims=True).astype(np.int64), axis, keepdims)
    return k


def _sort_kernel(x, axis, descending=False):
    if x.ndim == 0:
        return _scalar_sel(x)
    return _gathered(x, _argsort_np(x, axis, descending).astype(np.int64), axis, True)


def _topk_kernel(x, k, axis, largest=True):
    if x.ndim == 0:
        return _scalar_sel(x)
    ind = np.take(_argsort_np(x, axis, largest), np.arange(k), axis=axis).astype(np.int64)
    return _gathered(x, ind, axis, True)


def _kthvalue_kernel(x, k, axis, keepdims):
    if x.ndim == 0:
        return _scalar_sel(x)
    ind = np.take(np.argsort(x, axis=axis, kind="stable"), [k - 1], axis=axis).astype(np.int64)
    return _gathered(x, ind, axis, keepdims)


def _is_float(a) -> bool:
    return a.dtype.kind == "f" or a.dtype == _dt.bfloat16.np


def _median_pos(a, axis, ignore_nan):
    """Positions (in stable-sorted order, keepdim layout) of the lower median along ``axis``."""
    n = a.shape[axis]
    if _is_float(a):
        nans = np.sum(np.isnan(a), axis=axis, keepdims=True)
    else:
        nans = np.zeros([1 if i == axis else s for i, s in enumerate(a.shape)], dtype=np.int64)
    if ignore_nan:
        valid = n - nans
        return np.where(valid > 0, (valid - 1) // 2, 0)
    # torch: a slice with NaN has median NaN, at the first NaN (stable sort puts NaNs last, in order)
    return np.where(nans > 0, n - nans, (n - 1) // 2)


def _median_dim_kernel(x, axis, keepdims, ignore_nan=False):
    if x.ndim == 0:
        return _scalar_sel(x)
    order = np.argsort(x, axis=axis, kind="stable")
    ind = np.take_along_axis(order, _median_pos(x, axis, ignore_nan), axis=axis).astype(np.int64)
    return _gathered(x, ind, axis, keepdims)


def _mode_kernel(x, axis, keepdims):
    """Per slice: the most frequent value (smallest among equally frequent) at its last index."""
    if x.ndim == 0:
        return _scalar_sel(x)
    order = np.argsort(x, axis=axis, kind="stable")
    s = np.take_along_axis(x, order, axis=axis)
    n = x.shape[axis]
    shp = [1] * x.ndim
    shp[axis] = n
    pos = np.broadcast_to(np.arange(n).reshape(shp), x.shape)
    new_run = np.ones(x.shape, dtype=bool)
    if n > 1:
        cur = [slice(None)] * x.ndim
        cur[axis] = slice(1, None)
        prev = [slice(None)] * x.ndim
        prev[axis] = slice(None, -1)
        new_run[tuple(cur)] = s[tuple(cur)] != s[tuple(prev)]
    start = np.maximum.accumulate(np.where(new_run, pos, 0), axis=axis)
    best = np.argmax(pos - start + 1, axis=axis, keepdims=True)   # end of the first longest run
    # the stable sort keeps equal values in index order, so a run's end is the value's last index
    return _gathered(x, np.take_along_axis(order, best, axis=axis).astype(np.int64), axis, keepdims)


def _cum_kernel(largest):
    acc = np.maximum.accumulate if largest else np.minimum.accumulate

    def k(x, axis):
        """Running max/min; ties and NaNs move the index to the latest position, as torch does."""
        if x.ndim == 0:
            return _scalar_sel(x)
        v = acc(x, axis=axis)
        n = x.shape[axis]
        if n == 0:
            return v, np.zeros(x.shape, dtype=np.int64)
        prev = np.take(v, np.arange(-1, n - 1), axis=axis)   # running value before each position
        with np.errstate(invalid="ignore"):
            better = (x >= prev) if largest else (x <= prev)
        if _is_float(x):
            better = np.isnan(x) | (~np.isnan(prev) & better)
        shp = [1] * x.ndim
        shp[axis] = n
        pos = np.broadcast_to(np.arange(n).reshape(shp), x.shape)
        ind = np.maximum.accumulate(np.where(better | (pos == 0), pos, 0), axis=axis).astype(np.int64)
        return v, ind
    return k


MAX_DIM = _select_op("max_dim", _maxmin_dim_kernel(True))
MIN_DIM = _select_op("min_dim", _maxmin_dim_kernel(False))
MAX_DIM.node_name, MIN_DIM.node_name = "MaxBackward0", "MinBackward0"     # torch's max.dim / min.dim
SORT = _select_op("sort", _sort_kernel)
TOPK = _select_op("topk", _topk_kernel)
KTHVALUE = _select_op("kthvalue", _kthvalue_kernel)
MEDIAN_DIM = _select_op("median_dim", _median_dim_kernel)
MODE = _select_op("mode", _mode_kernel)
CUMMAX = _select_op("cummax", _cum_kernel(True))
CUMMIN = _select_op("cummin", _cum_kernel(False))
ARGSORT = register("argsort", lambda x, axis, descending: (
    np.zeros((), np.int64) if x.ndim == 0 else
    np.ascontiguousarray(_argsort_np(x, axis, descending).astype(np.int64))), differentiable=False)


def _select(op, rtype, x, attrs, out):
    res = rtype(*apply(op, (x,), attrs))
    return res if out is None else _out_tuple(res, out, rtype)


def _one_dim(input, dim, op):
    """``dim`` wrapped for ``input``; 0-dim tensors accept 0 and -1."""
    nd = input._data.ndim
    d = wrap_dim(_int_dim(dim, op), nd)
    return d if nd else 0


# max / min -------------------------------------------------------------------------------------------


def _amax_kernel(x, axis, keepdims, nan_ties=False):
    return np.max(x, axis=axis, keepdims=keepdims)


def _amin_kernel(x, axis, keepdims, nan_ties=False):
    return np.min(x, axis=axis, keepdims=keepdims)


def _distribute_bw(ctx, g):
    """Gradient of max/min/median-like reductions: shared evenly among the inputs equal to the result.
    The tie mask is computed with ember ops (a compiled replay recomputes it for new values)."""
    x = ctx.inputs[0]
    y = ctx.output
    axis, keep = ctx.attrs["axis"], ctx.attrs["keepdims"]
    shp = x._data.shape
    with no_grad():
        yk = _expand_back(y, shp, axis, keep)
        mask = x == yk
        if ctx.attrs.get("nan_ties"):
            mask = mask | (x.isnan() & yk.isnan())
        mask = mask.to(x._dtype)
        scale = mask / (apply(SUM, (mask,), {"axis": axis, "keepdims": True}) if axis else mask)
    return _expand_back(g, shp, axis, keep) * scale


AMAX = register("amax", _amax_kernel, _distribute_bw, save="io")
AMIN = register("amin", _amin_kernel, _distribute_bw, save="io")


def _amaxmin_node(plain, all_):
    """``node_cls`` of amax/amin, which also run ``max(x)`` / ``min(x)`` (marked by their ``nan_ties``
    attr; torch's max/min overloads without dim, ``all_``): chosen here in one call when a node is
    recorded, as max/min are hot and a rename after the call would cost every call."""
    def make(op, args, attrs, nout):
        return (all_ if "nan_ties" in attrs else plain)(op, args, attrs, nout)
    return make


AMAX.node_cls = _amaxmin_node(node_class("AmaxBackward0"), node_class("MaxBackward1"))
AMIN.node_cls = _amaxmin_node(node_class("AminBackward0"), node_class("MinBackward1"))
_AMINMAX = node_class("AminmaxBackward0")


def _amaxmin(input, dim, keepdim, out, largest, op):
    nd = input._data.ndim
    if dim is None and input._data.size == 0:
        raise RuntimeError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0. "
                           "Specify the reduction dim with the 'dim' argument.")
    axis = _reduce_axes(dim, nd)
    _check_nonempty(input, axis, op)
    r = apply(AMAX if largest else AMIN, (input,), {"axis": axis, "keepdims": keepdim})
    return r if out is None else _out(r, out)


def amax(input, dim=(), keepdim: bool = False, *, out=None):
    """Maximum over ``dim`` (all dims by default); the gradient is shared evenly among ties."""
    return _amaxmin(input, None if dim is None or (not isinstance(dim, int) and len(dim) == 0) else dim,
                    keepdim, out, True, "amax")


def amin(input, dim=(), keepdim: bool = False, *, out=None):
    """Minimum over ``dim`` (all dims by default); the gradient is shared evenly among ties."""
    return _amaxmin(input, None if dim is None or (not isinstance(dim, int) and len(dim) == 0) else dim,
                    keepdim, out, False, "amin")


def _maxmin(input, dim, keepdim, out, largest):
    op = "max" if largest else "min"
    if isinstance(dim, Tensor):
        other = "maximum" if largest else "minimum"
        f = FUNCTIONS.get(other)
        if f is None:
            raise RuntimeError(f"{op}(input, other): the binary form needs ember.{other}, which is not available")
        return f(input, dim) if out is None else f(input, dim, out=out)
    if dim is None:
        if input._data.size == 0:
            raise RuntimeError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0. "
                               "Specify the reduction dim with the 'dim' argument.")
        attrs = {"axis": tuple(range(input._data.ndim)), "keepdims": False, "nan_ties": True}
        r = apply(AMAX if largest else AMIN, (input,), attrs)
        return r if out is None else _out(r, out)
    d = _one_dim(input, dim, op)
    _check_nonempty(input, (d,) if input._data.ndim else (), op)
    return _select(MAX_DIM if largest else MIN_DIM, getattr(return_types, op), input,
                   {"axis": d, "keepdims": keepdim}, out)


def max(input, dim=None, keepdim: bool = False, *, out=None):  # noqa: A001
    """``max(x)`` -> the largest value; ``max(x, dim)`` -> (values, indices); ``max(x, other)`` -> maximum."""
    return _maxmin(input, dim, keepdim, out, True)


def min(input, dim=None, keepdim: bool = False, *, out=None):  # noqa: A001
    """``min(x)`` -> the smallest value; ``min(x, dim)`` -> (values, indices); ``min(x, other)`` -> minimum."""
    return _maxmin(input, dim, keepdim, out, False)


def aminmax(input, *, dim=None, keepdim: bool = False, out=None):
    """(min, max) over ``dim`` (all dims by default)."""
    if input._data.size == 0 and dim is None:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation "
                           "has no identity.")
    lo = amin(input, () if dim is None else dim, keepdim)
    hi = amax(input, () if dim is None else dim, keepdim)
    res = return_types.aminmax(*rename((lo, hi), _AMINMAX))     # one node in torch, two here
    return res if out is None else _out_tuple(res, out, return_types.aminmax)


def _argmaxmin_kernel(x, axis, keepdims, largest):
    f = np.argmax if largest else np.argmin
    if axis is None:
        r = f(x.reshape(-1))
        return np.full((1,) * x.ndim if keepdims else (), r, dtype=np.int64)
    if x.ndim == 0:
        return np.zeros((), dtype=np.int64)
    return np.asarray(f(x, axis=axis, keepdims=keepdims), dtype=np.int64)


ARGMAX = register("argmax", lambda x, axis, keepdims: _argmaxmin_kernel(x, axis, keepdims, True),
                  differentiable=False)
ARGMIN = register("argmin", lambda x, axis, keepdims: _argmaxmin_kernel(x, axis, keepdims, False),
                  differentiable=False)


def _argmaxmin(input, dim, keepdim, largest):
    op = "argmax" if largest else "argmin"
    if input._dtype is _dt.bool:
        raise RuntimeError(f"{op}(): does not support bool input")
    if dim is None:
        if input._data.size == 0:
            raise IndexError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0.")
        axis = None
    else:
        axis = _one_dim(input, dim, op)
        _check_nonempty(input, (axis,) if input._data.ndim else (), op)
    return apply(ARGMAX if largest else ARGMIN, (input,), {"axis": axis, "keepdims": keepdim})


def argmax(input, dim=None, keepdim: bool = False):
    """Index of the largest value (flattened when ``dim`` is None); ties give the first index."""
    return _argmaxmin(input, dim, keepdim, True)


def argmin(input, dim=None, keepdim: bool = False):
    """Index of the smallest value (flattened when ``dim`` is None); ties give the first index."""
    return _argmaxmin(input, dim, keepdim, False)


# sort / argsort / msort / topk / kthvalue ----------------------------------------------------------------


def sort(input, dim: int = -1, descending: bool = False, *, stable: bool = False, out=None):
    """Sort along ``dim`` -> (values, indices). Always stable; NaN sorts as the largest value."""
    d = _one_dim(input, dim, "sort")
    return _select(SORT, return_types.sort, input, {"axis": d, "descending": builtins.bool(descending)}, out)


def argsort(input, dim: int = -1, descending: bool = False, *, stable: bool = False):
    """Indices that sort ``input`` along ``dim`` (stable)."""
    d = _one_dim(input, dim, "argsort")
    return apply(ARGSORT, (input,), {"axis": d, "descending": builtins.bool(descending)})


def msort(input, *, out=None):
    """Sort along the first dimension (values only)."""
    r = sort(input, 0).values
    return r if out is None else _out(r, out)


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True, *, out=None):  # noqa: A002
    """The ``k`` largest (or smallest) values along ``dim`` -> (values, indices), in sorted order."""
    if input._dtype is _dt.bool:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    d = _one_dim(input, -1 if dim is None else dim, "topk")
    k = int_arg(k, "topk", "k")
    n = input._data.shape[d] if input._data.ndim else 1
    if not 0 <= k <= n or (input._data.ndim == 0 and k == 0):
        raise RuntimeError("selected index k out of range")
    return _select(TOPK, return_types.topk, input, {"k": k, "axis": d, "largest": builtins.bool(largest)}, out)


def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False, *, out=None):
    """The ``k``-th smallest value along ``dim`` (1-based) -> (values, indices)."""
    if input._dtype is _dt.bool:
        raise NotImplementedError("\"kthvalue_cpu\" not implemented for 'Bool'")
    d = _one_dim(input, -1 if dim is None else dim, "kthvalue")
    _check_nonempty(input, (d,) if input._data.ndim else (), "kthvalue")
    n = input._data.shape[d] if input._data.ndim else 1
    k = int(k)
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    return _select(KTHVALUE, return_types.kthvalue, input, {"k": k, "axis": d, "keepdims": keepdim}, out)


# median / nanmedian / mode -------------------------------------------------------------------------------


def _median_kernel(x, axis, keepdims, ignore_nan=False, nan_ties=True):
    flat = x.reshape(-1)
    if flat.size == 0:
        return np.array(np.nan, dtype=x.dtype)
    order = np.argsort(flat, kind="stable")
    return np.array(flat[order[int(_median_pos(flat, 0, ignore_nan)[0])]])


MEDIAN = register("median", _median_kernel, _distribute_bw, save="io")


def _check_median_dtype(input, op):
    if input._dtype is _dt.bool:
        raise NotImplementedError(f"\"{op}_cpu\" not implemented for 'Bool'")


def median(input, dim=None, keepdim: bool = False, *, out=None):
    """Lower median of all values (NaN if any), or (values, indices) along ``dim``."""
    return _median(input, dim, keepdim, out, False)


def nanmedian(input, dim=None, keepdim: bool = False, *, out=None):
    """Like ``median`` but ignoring NaN values."""
    return _median(input, dim, keepdim, out, True)


def _median(input, dim, keepdim, out, ignore_nan):
    op = "nanmedian" if ignore_nan else "median"
    _check_median_dtype(input, op)
    if dim is None:
        attrs = {"axis": tuple(range(input._data.ndim)), "keepdims": False, "ignore_nan": ignore_nan,
                 "nan_ties": True}
        r = apply(MEDIAN, (input,), attrs)
        return r if out is None else _out(r, out)
    d = _one_dim(input, dim, op)
    _check_nonempty(input, (d,) if input._data.ndim else (), op)
    return _select(MEDIAN_DIM, getattr(return_types, op), input,
                   {"axis": d, "keepdims": keepdim, "ignore_nan": ignore_nan}, out)


def mode(input, dim: int = -1, keepdim: bool = False, *, out=None):
    """Most frequent value along ``dim`` -> (values, indices); ties pick the smallest value."""
    d = _one_dim(input, dim, "mode")
    _check_nonempty(input, (d,) if input._data.ndim else (), "mode")
    return _select(MODE, return_types.mode, input, {"axis": d, "keepdims": keepdim}, out)


# cummax / cummin ---------------------------------------------------------------------------------------


def cummax(input, dim: int, *, out=None):
    """Running maximum along ``dim`` -> (values, indices)."""
    return _select(CUMMAX, return_types.cummax, input, {"axis": _one_dim(input, dim, "cummax")}, out)


def cummin(input, dim: int, *, out=None):
    """Running minimum along ``dim`` -> (values, indices)."""
    return _select(CUMMIN, return_types.cummin, input, {"axis": _one_dim(input, dim, "cummin")}, out)


# ---- var / std -----------------------------------------------------------------------------------------


def _var_kernel(x, axis, correction, keepdims, sqrt=False):
    x, od = _up(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        n = int(np.prod([x.shape[d] for d in axis], dtype=np.int64))
        m = np.mean(x, axis=axis, keepdims=True) if n else np.zeros((), x.dtype)
        ss = np.sum((x - m) ** 2, axis=axis, keepdims=keepdims)
        r = ss / builtins.max(n - correction, 0) if n else np.full(ss.shape, np.nan, ss.dtype)
        if sqrt:
            r = np.sqrt(r)
    return _down(np.asarray(r, dtype=x.dtype), od)


def _var_grad(gv, x, axis, correction, keep):
    shp = x._data.shape
    n = 1
    for d in axis:
        n *= shp[d]
    denom = n - correction
    scale = 2.0 / denom if denom != 0 else _INF
    centered = x - _mean(x, axis, keepdim=True)
    return _expand_back(gv, shp, axis, keep) * (scale * centered)


def _var_bw(ctx, g):
    a = ctx.attrs
    return _var_grad(g, ctx.inputs[0], a["axis"], a["correction"], a["keepdims"])


def _std_bw(ctx, g):
    a = ctx.attrs
    y = ctx.output
    with no_grad():
        zero = y == 0
        nonzero = (~zero).to(y._dtype)
        zero = zero.to(y._dtype)
    # torch: d std = d var / (2 std), with 0 where std == 0
    gv = g / (2 * (y + zero)) * nonzero
    return _var_grad(gv, ctx.inputs[0], a["axis"], a["correction"], a["keepdims"])


VAR = register("var", _var_kernel, _var_bw, save="i")
STD = register("std", lambda x, axis, correction, keepdims: _var_kernel(x, axis, correction, keepdims, True),
               _std_bw, save="io")


def _var_args(input, dim, unbiased, keepdim, correction, op):
    if not input._dtype.is_floating_point:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    if isinstance(dim, builtins.bool):          # var(x, True): the unbiased overload
        unbiased, dim = dim, None
    if unbiased is not None and correction is not None:
        raise TypeError(f"{op}(): cannot pass both 'unbiased' and 'correction'")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    nd = input._data.ndim
    axis = _reduce_axes(dim, nd)
    n = 1
    for d in axis:
        n *= input._data.shape[d]
    if n - correction <= 0:
        warnings.warn(f"{op}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                      "reduction factor (input numel divided by output numel).", UserWarning, stacklevel=3)
    return {"axis": axis, "correction": correction, "keepdims": keepdim}


def var(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, out=None):
    """Variance over ``dim`` with Bessel's ``correction`` (default 1; ``unbiased=False`` means 0)."""
    r = apply(VAR, (input,), _var_args(input, dim, unbiased, keepdim, correction, "var"))
    return r if out is None else _out(r, out)


def std(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, out=None):
    """Standard deviation over ``dim`` (see ``var``)."""
    r = apply(STD, (input,), _var_args(input, dim, unbiased, keepdim, correction, "std"))
    return r if out is None else _out(r, out)


# torch computes each pair in one op (one node with two outputs); here two nodes of that name
_VAR_MEAN, _STD_MEAN = node_class("VarMeanBackward0"), node_class("StdMeanBackward0")


def var_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, out=None):
    """(var, mean) over ``dim``."""
    attrs = _var_args(input, dim, unbiased, keepdim, correction, "var_mean")
    res = rename((apply(VAR, (input,), attrs), _mean(input, attrs["axis"], keepdim)), _VAR_MEAN)
    return res if out is None else tuple(_out(r, o) for r, o in zip(res, out))


def std_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None, out=None):
    """(std, mean) over ``dim``."""
    attrs = _var_args(input, dim, unbiased, keepdim, correction, "std_mean")
    res = rename((apply(STD, (input,), attrs), _mean(input, attrs["axis"], keepdim)), _STD_MEAN)
    return res if out is None else tuple(_out(r, o) for r, o in zip(res, out))


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
NORM.node_name = "LinalgVectorNormBackward0"     # torch.norm / Tensor.norm run linalg.vector_norm too


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None, out=None):
    """``linalg.vector_norm``: the ``ord``-norm of ``x`` over ``dim`` (all elements by default)."""
    if isinstance(ord, str) or isinstance(ord, builtins.bool) or not isinstance(ord, (int, float, np.number)):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, not {type(ord).__name__}")
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


# ---- logsumexp / softmax / log_softmax ---------------------------------------------------------------


def _logsumexp_kernel(x, axis, keepdims):
    x, od = _up(x)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if x.size == 0:
            r = np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims))
        else:
            m = np.max(x, axis=axis, keepdims=True)
            m = np.where(np.isfinite(m), m, 0)      # all -inf (or +inf) slices: no shift needed
            r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
            if not keepdims and axis:
                r = np.squeeze(r, axis)
    return _down(np.asarray(r, dtype=x.dtype), od)


def _logsumexp_bw(ctx, g):
    x = ctx.inputs[0]
    axis, keep = ctx.attrs["axis"], ctx.attrs["keepdims"]
    if not axis:
        return g
    return _expand_back(g, x._data.shape, axis, keep) * apply(SOFTMAX, (x,), {"axis": axis})


LOGSUMEXP = register("logsumexp", _logsumexp_kernel, _logsumexp_bw, save="i")


def logsumexp(input, dim, keepdim: bool = False, *, out=None):
    """``log(sum(exp(input)))`` over ``dim``, computed stably (integers are promoted to float)."""
    x = _float_or_default(input)
    axis = _reduce_axes(dim, x._data.ndim)
    r = apply(LOGSUMEXP, (x,), {"axis": axis, "keepdims": keepdim})
    return r if out is None else _out(r, out)


def _softmax_kernel(x, axis):
    x, od = _up(x)
    if x.size == 0:
        return _down(x.copy(), od)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return _down(e / np.sum(e, axis=axis, keepdims=True), od)


def _softmax_bw(ctx, g):
    y = ctx.output
    axis = ctx.attrs["axis"]
    return y * (g - _sum(g * y, axis, keepdim=True))


def _log_softmax_kernel(x, axis):
    x, od = _up(x)
    if x.size == 0:
        return _down(x.copy(), od)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        s = x - np.max(x, axis=axis, keepdims=True)
        return _down(s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True)), od)


def _log_softmax_bw(ctx, g):
    y = ctx.output
    axis = ctx.attrs["axis"]
    return g - y.exp() * _sum(g, axis, keepdim=True)


SOFTMAX = register("softmax", _softmax_kernel, _softmax_bw, save="o")
LOG_SOFTMAX = register("log_softmax", _log_softmax_kernel, _log_softmax_bw, save="o")


def _implicit_softmax_dim(nd):
    warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call to include "
                  "dim=X as an argument.", UserWarning, stacklevel=4)
    return 0 if nd in (0, 1, 3) else 1


def _softmax_common(op, name, input, dim, dtype):
    if dtype is not None:
        input = input.to(dtype)
    if not input._dtype.is_floating_point:
        raise NotImplementedError(f"\"{name}_lastdim_kernel_impl\" not implemented for '{_name(input._dtype)}'")
    nd = input._data.ndim
    if dim is None:
        dim = _implicit_softmax_dim(nd)
    d = wrap_dim(_int_dim(dim, name), nd)
    return apply(op, (input,), {"axis": d if nd else ()})


def softmax(input, dim=None, dtype=None, *, _stacklevel=3):
    """Softmax along ``dim`` (``dtype`` casts the input first)."""
    return _softmax_common(SOFTMAX, "softmax", input, dim, dtype)


def log_softmax(input, dim=None, dtype=None, *, _stacklevel=3):
    """Log of softmax along ``dim``, computed stably."""
    return _softmax_common(LOG_SOFTMAX, "log_softmax", input, dim, dtype)


# ---- all / any / count_nonzero / nansum / nanmean ------------------------------------------------------


def _logical_reduce_kernel(x, axis, keepdims, any_=False):
    f = np.any if any_ else np.all
    r = f(x, axis=axis, keepdims=keepdims)
    return np.asarray(r).astype(np.uint8) if x.dtype == np.uint8 else np.asarray(r)


ALL = register("all", _logical_reduce_kernel, differentiable=False)
ANY = register("any", lambda x, axis, keepdims: _logical_reduce_kernel(x, axis, keepdims, True),
               differentiable=False)


def _all_any(op, input, dim, keepdim, out):
    nd = input._data.ndim
    axis = _reduce_axes(dim, nd, empty_means_all=False)
    r = apply(op, (input,), {"axis": axis, "keepdims": keepdim})
    return r if out is None else _out(r, out)


def all(input, dim=None, keepdim: bool = False, *, out=None):  # noqa: A001
    """True where every element over ``dim`` is non-zero (uint8 inputs give uint8, as in torch)."""
    return _all_any(ALL, input, dim, keepdim, out)


def any(input, dim=None, keepdim: bool = False, *, out=None):  # noqa: A001
    """True where some element over ``dim`` is non-zero (uint8 inputs give uint8, as in torch)."""
    return _all_any(ANY, input, dim, keepdim, out)


COUNT_NONZERO = register("count_nonzero",
                         lambda x, axis: np.asarray(np.count_nonzero(x, axis=axis), dtype=np.int64),
                         differentiable=False)


def count_nonzero(input, dim=None):
    """Number of non-zero elements over ``dim`` (all by default), as int64."""
    return apply(COUNT_NONZERO, (input,), {"axis": _reduce_axes(dim, input._data.ndim)})


def _nansum_kernel(x, axis, keepdims, dtype=None):
    if dtype is None and x.dtype.kind in "biu":
        dtype = np.int64
    od = None
    if dtype is None:
        x, od = _up(x)
    if x.dtype.kind == "f":
        return _down(np.nansum(x, axis=axis, keepdims=keepdims, dtype=dtype), od)
    return _down(np.sum(x, axis=axis, keepdims=keepdims, dtype=dtype), od)


def _nansum_bw(ctx, g):
    x = ctx.inputs[0]
    with no_grad():
        keep = (~x.isnan()).to(x._dtype)
    return _expand_back(g, x._data.shape, ctx.attrs["axis"], ctx.attrs["keepdims"]) * keep


NANSUM = register("nansum", _nansum_kernel, _nansum_bw, save="i")


def nansum(input, dim=None, keepdim: bool = False, *, dtype=None, out=None):
    """Sum over ``dim`` treating NaN as zero."""
    attrs = {"axis": _reduce_axes(dim, input._data.ndim), "keepdims": keepdim}
    if dtype is not None:
        attrs["dtype"] = dtype.np
    r = apply(NANSUM, (input,), attrs)
    return r if out is None else _out(r, out)


def _nanmean_kernel(x, axis, keepdims):
    x, od = _up(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.nansum(x, axis=axis, keepdims=keepdims) / np.sum(~np.isnan(x), axis=axis, keepdims=keepdims)
    return _down(np.asarray(r, dtype=x.dtype), od)


def _nanmean_bw(ctx, g):
    x = ctx.inputs[0]
    axis = ctx.attrs["axis"]
    with no_grad():
        keep = (~x.isnan()).to(x._dtype)
        scale = keep / (apply(SUM, (keep,), {"axis": axis, "keepdims": True}) if axis else keep)
    return _expand_back(g, x._data.shape, axis, ctx.attrs["keepdims"]) * scale


NANMEAN = register("nanmean", _nanmean_kernel, _nanmean_bw, save="i")
NANMEAN.node_name = "DivBackward0"      # torch's nanmean is nansum(x) / count(x not NaN)


def nanmean(input, dim=None, keepdim: bool = False, *, dtype=None, out=None):
    """Mean over ``dim`` of the non-NaN elements."""
    if not (dtype or input._dtype).is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{_name(input._dtype)}")
    x = input if dtype is None else input.to(dtype)
    r = apply(NANMEAN, (x,), {"axis": _reduce_axes(dim, x._data.ndim), "keepdims": keepdim})
    return r if out is None else _out(r, out)


# ---- unique / unique_consecutive ------------------------------------------------------------------------


def _unique_kernel(x, sorted=True, axis=None, consecutive=False):  # noqa: A002
    if axis is None:
        flat = x.reshape(-1)
        if consecutive:
            n = flat.size
            change = np.ones(n, dtype=bool)
            if n > 1:
                change[1:] = flat[1:] != flat[:-1]
            vals = flat[change]
            inv = (np.cumsum(change) - 1).reshape(x.shape)
            counts = np.diff(np.append(np.flatnonzero(change), n))
        else:
            vals, inv, counts = np.unique(flat, return_inverse=True, return_counts=True, equal_nan=False)
            inv = inv.reshape(x.shape)
        return vals, inv.astype(np.int64), counts.astype(np.int64)
    if consecutive:
        m = np.moveaxis(x, axis, 0)
        n = m.shape[0]
        rows = m.reshape(n, -1)
        change = np.ones(n, dtype=bool)
        if n > 1:
            change[1:] = np.any(rows[1:] != rows[:-1], axis=1)
        vals = np.moveaxis(m[change], 0, axis)
        inv = np.cumsum(change) - 1
        counts = np.diff(np.append(np.flatnonzero(change), n))
    else:
        vals, inv, counts = np.unique(x, return_inverse=True, return_counts=True, axis=axis)
    return np.ascontiguousarray(vals), inv.reshape(-1).astype(np.int64), counts.astype(np.int64)


def _unique_bw(ctx, *grads):
    raise NotImplementedError("the derivative for '_unique2' is not implemented.")


UNIQUE = register("unique", _unique_kernel, _unique_bw, nout=3, nondiff_outputs=(1, 2))


def _unique_result(res, return_inverse, return_counts):
    vals, inv, counts = res
    out = (vals,) + ((inv,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


def _check_unique_dim(input, axis):
    if axis is not None and builtins.any(n == 0 for k, n in enumerate(input._data.shape) if k != axis):
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")


def unique(input, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,  # noqa: A002
           dim=None):
    """Unique elements (always sorted), optionally with inverse indices and counts; ``dim`` for slices."""
    axis = None if dim is None else wrap_dim(_int_dim(dim, "unique"), input._data.ndim)
    _check_unique_dim(input, axis)
    res = apply(UNIQUE, (input,), {"axis": axis, "consecutive": False})
    return _unique_result(res, return_inverse, return_counts)


def unique_consecutive(input, return_inverse: bool = False, return_counts: bool = False, dim=None):
    """Collapse runs of equal consecutive elements (or slices along ``dim``)."""
    axis = None if dim is None else wrap_dim(_int_dim(dim, "unique_consecutive"), input._data.ndim)
    _check_unique_dim(input, axis)
    res = apply(UNIQUE, (input,), {"axis": axis, "consecutive": True})
    return _unique_result(res, return_inverse, return_counts)


# ---- exports -------------------------------------------------------------------------------------------

for _name_, _fn in [("prod", prod), ("cumsum", cumsum), ("cumprod", cumprod), ("logcumsumexp", logcumsumexp),
                    ("max", max), ("min", min), ("amax", amax), ("amin", amin), ("aminmax", aminmax),
                    ("argmax", argmax), ("argmin", argmin), ("sort", sort), ("argsort", argsort),
                    ("msort", msort), ("topk", topk), ("kthvalue", kthvalue), ("median", median),
                    ("nanmedian", nanmedian), ("mode", mode), ("cummax", cummax), ("cummin", cummin),
                    ("var", var), ("std", std), ("norm", norm), ("logsumexp", logsumexp),
                    ("softmax", softmax), ("log_softmax", log_softmax), ("all", all), ("any", any),
                    ("count_nonzero", count_nonzero), ("nansum", nansum), ("nanmean", nanmean),
                    ("unique", unique), ("unique_consecutive", unique_consecutive)]:
    attach(_name_, _fn)


def _norm_method(self, p="fro", dim=None, keepdim: bool = False, dtype=None):
    """``Tensor.norm``: like ``ember.norm`` but the fourth positional argument is ``dtype``."""
    return norm(self, p, dim, keepdim, dtype=dtype)


attach("norm", _norm_method, function=False)
attach("var_mean", var_mean, method=False)
attach("std_mean", std_mean, method=False)
attach("cumsum_", _cumsum_, function=False)
attach("cumprod_", _cumprod_, function=False)
attach("return_types", return_types, method=False)
