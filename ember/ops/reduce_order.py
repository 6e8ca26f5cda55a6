"""Order statistics and the other index-selecting reductions: max/min (with ``dim``), amax/amin/aminmax,
argmax/argmin, sort/argsort/msort, topk, kthvalue, median/nanmedian, mode, cummax/cummin,
unique/unique_consecutive, and ``ember.return_types``, the named tuples they return.

The index-selecting ops (max/min with ``dim``, sort, topk, kthvalue, median/mode with ``dim``,
cummax/cummin) compute the int64 indices in the kernel and gather the values at them; the derivative
scatters the gradient at the saved indices OUTPUT (a tensor argument of ``scatter`` / ``scatter_add``,
so a compiled replay uses the new indices; their derivative is a gather, so double backward works).
Index outputs are int64 and never differentiable.
"""
from __future__ import annotations

import builtins
import collections

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from ..autograd.grad_mode import no_grad
from ._std_sort import torch_mode_indices
from ..autograd.node import _version_error
from .registry import register, apply, attach, FUNCTIONS, node_class, rename, dtype_name
from ._layout_rule import contiguous_results
from ._util import wrap_dim, int_arg
from ._along import take_along
from .._native import eager_kernels as _native
from .reduce import _expand_back, SUM
from .index_scatter import SCATTER, SCATTER_ADD
from .creation import zeros as _zeros
from ._reduce_util import _int_dim, _out, _reduce_axes
from ._reduce_util import numpy_names


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


# ---- helpers ------------------------------------------------------------------------------------------

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


def _check_nonempty(x: Tensor, axes, op: str) -> None:
    shp = x._data.shape
    if x._data.size == 0 and not shp:
        return
    for d in axes:
        if shp[d] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")


# ---- index-selecting ops (values + int64 indices) --------------------------------------------------
# Each kernel computes the indices itself (so captured graphs replay correctly) and gathers the values;
# the derivative scatters the gradient to the saved indices.


def _gathered(x, ind, axis, keepdims):
    vals = take_along(x, ind, axis)
    if not keepdims:
        return vals.squeeze(axis), ind.squeeze(axis)
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


_BF16 = _dt.bfloat16.np


def _keys(a):
    """Sort keys: NumPy orders bfloat16 NaN as an ordinary value, so bfloat16 sorts as (exact) float32."""
    return a.astype(np.float32) if a.dtype == _BF16 else a


def _argsort_np(a, axis, descending):
    """Stable argsort; descending keeps equal elements in their original order (NaN counts as largest).
    A descending order comes back as a reversed view (the callers copy what they keep)."""
    a = _keys(a)
    if not descending:
        return a.argsort(axis=axis, kind="stable")
    n = a.shape[axis]
    rev = (slice(None),) * axis + (slice(None, None, -1),)     # (np.flip costs microseconds of Python)
    r = a[rev].argsort(axis=axis, kind="stable")
    np.subtract(n - 1, r, out=r)
    return r[rev]


def _maxmin_dim_kernel(largest):
    f = np.ndarray.argmax if largest else np.ndarray.argmin

    def k(x, axis, keepdims):
        if x.ndim == 0:
            return _scalar_sel(x)
        return _gathered(x, f(x, axis=axis, keepdims=True).astype(np.int64, copy=False), axis, keepdims)
    return k


def _sort_kernel(x, axis, descending=False):
    if x.ndim == 0:
        return _scalar_sel(x)
    return _gathered(x, np.ascontiguousarray(_argsort_np(x, axis, descending), dtype=np.int64), axis, True)


def _topk_kernel(x, k, axis, largest=True):
    if x.ndim == 0:
        return _scalar_sel(x)
    if axis == x.ndim - 1:
        r = _native.topk_last(x, k, largest)     # (float32 rows, k <= 64: one insertion pass)
        if r is not None:
            return r
    ind = _argsort_np(x, axis, largest)[(slice(None),) * axis + (slice(0, k),)]
    return _gathered(x, np.ascontiguousarray(ind, dtype=np.int64), axis, True)


def _kthvalue_kernel(x, k, axis, keepdims):
    if x.ndim == 0:
        return _scalar_sel(x)
    ind = np.take(np.argsort(_keys(x), axis=axis, kind="stable"), [k - 1], axis=axis).astype(np.int64)
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
    order = np.argsort(_keys(x), axis=axis, kind="stable")
    ind = take_along(order, _median_pos(x, axis, ignore_nan), axis).astype(np.int64)
    return _gathered(x, ind, axis, keepdims)


def _mode_kernel(x, axis, keepdims):
    """Per slice: the most frequent value (smallest among equally frequent) at its last index."""
    if x.ndim == 0:
        return _scalar_sel(x)
    order = np.argsort(_keys(x), axis=axis, kind="stable")
    s = take_along(x, order, axis)
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
    ind = take_along(order, best, axis).astype(np.int64)
    if n > 16 or (x.dtype.kind == "f" and np.isnan(x).any()):
        ind = torch_mode_indices(x, axis, ind)      # (torch's std::sort order: NaNs, ties in long slices)
    return _gathered(x, ind, axis, keepdims)


def _cum_kernel(largest):
    acc = np.maximum.accumulate if largest else np.minimum.accumulate

    def k(x, axis):
        """Running max/min; ties and NaNs move the index to the latest position, as torch does."""
        if x.ndim == 0:
            return _scalar_sel(x)
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)         # (torch's results are contiguous; NumPy's follow x's order)
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
    if input._dtype.is_complex:
        raise _no_complex("max_values_cpu" if largest else "min_values_cpu", input._dtype)
    if out is not None and isinstance(out, Tensor) and out._dtype is not input._dtype:
        raise RuntimeError(f"Expected the dtype for input and out to match, but got {dtype_name(input._dtype)} for "
                           f"input's dtype and {dtype_name(out._dtype)} for out's dtype.")
    r = apply(AMAX if largest else AMIN, (input,), {"axis": axis, "keepdims": keepdim})
    return r if out is None else _out(r, out)


def amax(input, dim=(), keepdim: bool = False, *, out=None, axis=None, keepdims=None):
    """Maximum over ``dim`` (all dims by default); the gradient is shared evenly among ties."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("amax", dim, keepdim, axis, keepdims, ())
    return _amaxmin(input, None if dim is None or (not isinstance(dim, int) and len(dim) == 0) else dim,
                    keepdim, out, True, "amax")


def amin(input, dim=(), keepdim: bool = False, *, out=None, axis=None, keepdims=None):
    """Minimum over ``dim`` (all dims by default); the gradient is shared evenly among ties."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("amin", dim, keepdim, axis, keepdims, ())
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
    if input._dtype.is_complex:
        if dim is None:
            raise _no_complex(f"{op}_all", input._dtype)
        raise RuntimeError(f"{op}(): does not support complex input")
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


def max(input, dim=None, keepdim: bool = False, *, out=None, axis=None, keepdims=None, other=None):  # noqa: A001
    """``max(x)`` -> the largest value; ``max(x, dim)`` -> (values, indices); ``max(x, other)`` -> maximum."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("max", dim, keepdim, axis, keepdims)
    if other is not None and dim is None:   # max(input, other=...): the elementwise maximum
        dim = other
    return _maxmin(input, dim, keepdim, out, True)


def min(input, dim=None, keepdim: bool = False, *, out=None, axis=None, keepdims=None, other=None):  # noqa: A001
    """``min(x)`` -> the smallest value; ``min(x, dim)`` -> (values, indices); ``min(x, other)`` -> minimum."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("min", dim, keepdim, axis, keepdims)
    if other is not None and dim is None:
        dim = other
    return _maxmin(input, dim, keepdim, out, False)


def aminmax(input, *, dim=None, keepdim: bool = False, out=None, axis=None, keepdims=None):
    """(min, max) over ``dim`` (all dims by default)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("aminmax", dim, keepdim, axis, keepdims)
    if input._data.size == 0 and dim is None:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation "
                           "has no identity.")
    lo = amin(input, () if dim is None else dim, keepdim)
    hi = amax(input, () if dim is None else dim, keepdim)
    res = return_types.aminmax(*rename((lo, hi), _AMINMAX))     # one node in torch, two here
    return res if out is None else _out_tuple(res, out, return_types.aminmax)


def _argmaxmin_kernel(x, axis, keepdims, largest):
    f = np.ndarray.argmax if largest else np.ndarray.argmin     # (the methods: np.argmax is a Python wrapper)
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
contiguous_results(AMAX, AMIN, ARGMAX, ARGMIN)


_NO_ARG = frozenset((_dt.bool, _dt.complex64, _dt.complex128))


def _no_complex(kernel, dt):
    from .registry import dtype_name
    return NotImplementedError(f"\"{kernel}\" not implemented for '{dtype_name(dt)}'")


def _argmaxmin(input, dim, keepdim, largest):
    op = "argmax" if largest else "argmin"
    if input._dtype in _NO_ARG:
        raise RuntimeError(f"{op}(): does not support {'bool' if input._dtype is _dt.bool else 'complex'} input")
    if dim is None:
        if input._data.size == 0:
            raise IndexError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0.")
        axis = None
    else:
        axis = _one_dim(input, dim, op)
        _check_nonempty(input, (axis,) if input._data.ndim else (), op)
    return apply(ARGMAX if largest else ARGMIN, (input,), {"axis": axis, "keepdims": keepdim})


def argmax(input, dim=None, keepdim: bool = False, *, axis=None, keepdims=None):
    """Index of the largest value (flattened when ``dim`` is None); ties give the first index."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("argmax", dim, keepdim, axis, keepdims)
    return _argmaxmin(input, dim, keepdim, True)


def argmin(input, dim=None, keepdim: bool = False, *, axis=None, keepdims=None):
    """Index of the smallest value (flattened when ``dim`` is None); ties give the first index."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("argmin", dim, keepdim, axis, keepdims)
    return _argmaxmin(input, dim, keepdim, False)


# sort / argsort / msort / topk / kthvalue ----------------------------------------------------------------


def sort(input, dim: int = -1, descending: bool = False, *, stable: bool = False, out=None, axis=None):
    """Sort along ``dim`` -> (values, indices). Always stable; NaN sorts as the largest value."""
    if axis is not None:
        dim, _ = numpy_names("sort", dim, False, axis, None, -1)
    d = _one_dim(input, dim, "sort")
    return _select(SORT, return_types.sort, input, {"axis": d, "descending": builtins.bool(descending)}, out)


def argsort(input, dim: int = -1, descending: bool = False, *, stable: bool = False, axis=None):
    """Indices that sort ``input`` along ``dim`` (stable)."""
    if axis is not None:
        dim, _ = numpy_names("argsort", dim, False, axis, None, -1)
    d = _one_dim(input, dim, "argsort")
    return apply(ARGSORT, (input,), {"axis": d, "descending": builtins.bool(descending)})


def msort(input, *, out=None):
    """Sort along the first dimension (values only)."""
    r = sort(input, 0).values
    return r if out is None else _out(r, out)


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True, *, out=None,  # noqa: A002
         axis=None):
    """The ``k`` largest (or smallest) values along ``dim`` -> (values, indices), in sorted order."""
    if axis is not None:
        dim, _ = numpy_names("topk", dim, False, axis, None, -1)
    if input._dtype is _dt.bool:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    d = _one_dim(input, -1 if dim is None else dim, "topk")
    k = int_arg(k, "topk", "k")
    n = input._data.shape[d] if input._data.ndim else 1
    if not 0 <= k <= n or (input._data.ndim == 0 and k == 0):
        raise RuntimeError("selected index k out of range")
    return _select(TOPK, return_types.topk, input, {"k": k, "axis": d, "largest": builtins.bool(largest)}, out)


def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False, *, out=None, axis=None, keepdims=None):
    """The ``k``-th smallest value along ``dim`` (1-based) -> (values, indices)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("kthvalue", dim, keepdim, axis, keepdims, -1)
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
        # torch's NaN, converted as its CPU converts it: int32/int64 get their lowest value, smaller ints 0
        if x.dtype.kind in "iu":
            return np.array(np.iinfo(x.dtype).min if x.dtype.itemsize >= 4 else 0, dtype=x.dtype)
        return np.array(np.nan, dtype=x.dtype)
    order = np.argsort(_keys(flat), kind="stable")
    return np.array(flat[order[int(_median_pos(flat, 0, ignore_nan)[0])]])


MEDIAN = register("median", _median_kernel, _distribute_bw, save="io")


def _check_median_dtype(input, op):
    if input._dtype is _dt.bool:
        raise NotImplementedError(f"\"{op}_cpu\" not implemented for 'Bool'")


def median(input, dim=None, keepdim: bool = False, *, out=None, axis=None, keepdims=None):
    """Lower median of all values (NaN if any), or (values, indices) along ``dim``."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("median", dim, keepdim, axis, keepdims)
    return _median(input, dim, keepdim, out, False)


def nanmedian(input, dim=None, keepdim: bool = False, *, out=None, axis=None, keepdims=None):
    """Like ``median`` but ignoring NaN values."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("nanmedian", dim, keepdim, axis, keepdims)
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


def mode(input, dim: int = -1, keepdim: bool = False, *, out=None, axis=None, keepdims=None):
    """Most frequent value along ``dim`` -> (values, indices); ties pick the smallest value."""
    if axis is not None or keepdims is not None:
        dim, keepdim = numpy_names("mode", dim, keepdim, axis, keepdims, -1)
    d = _one_dim(input, dim, "mode")
    _check_nonempty(input, (d,) if input._data.ndim else (), "mode")
    return _select(MODE, return_types.mode, input, {"axis": d, "keepdims": keepdim}, out)


# cummax / cummin ---------------------------------------------------------------------------------------


def cummax(input, dim=None, *, out=None, axis=None):
    """Running maximum along ``dim`` -> (values, indices)."""
    if axis is not None or dim is None:
        dim, _ = numpy_names("cummax", dim, False, axis, None, required=True)
    return _select(CUMMAX, return_types.cummax, input, {"axis": _one_dim(input, dim, "cummax")}, out)


def cummin(input, dim=None, *, out=None, axis=None):
    """Running minimum along ``dim`` -> (values, indices)."""
    if axis is not None or dim is None:
        dim, _ = numpy_names("cummin", dim, False, axis, None, required=True)
    return _select(CUMMIN, return_types.cummin, input, {"axis": _one_dim(input, dim, "cummin")}, out)


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


# ---- exports ------------------------------------------------------------------------------------------

for _name_, _fn in [("max", max), ("min", min), ("amax", amax), ("amin", amin), ("aminmax", aminmax),
                    ("argmax", argmax), ("argmin", argmin), ("sort", sort), ("argsort", argsort),
                    ("msort", msort), ("topk", topk), ("kthvalue", kthvalue), ("median", median),
                    ("nanmedian", nanmedian), ("mode", mode), ("cummax", cummax), ("cummin", cummin),
                    ("unique", unique), ("unique_consecutive", unique_consecutive)]:
    attach(_name_, _fn)
attach("return_types", return_types, method=False)
