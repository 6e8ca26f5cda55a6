"""The gather/scatter family: ``gather``, ``scatter`` (src or value, the legacy ``reduce=``),
``scatter_add``, ``scatter_reduce``, ``index_reduce``, and the flat-index forms ``take`` /
``take_along_dim`` / ``put``.

Indices are tensor arguments of the ops (a compiled replay reads each call's own); derivatives are
gathers of scatters and scatters of gathers, so double backward works.
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from ..autograd.grad_mode import no_grad
from .registry import register, apply, attach, dtype_name, node_class, rename
from ._reduce_util import numpy_names, dim_from_axis
from ._util import wrap_dim, fmt_shape
from ._along import take_along, _MAX
from .._native import eager_kernels as _native

_I64, _U64 = np.dtype(np.int64), np.dtype(np.uint64)
from .shape import getitem_basic
from .inplace import write_result, copy_out
from .index import (INDEX, INDEX_PUT, _NUMBER, _const, _dim_index_args, _first_bad, _literal, _pad_to, _tensor_arg,
                    _zeros)
from .index_masked import _bshape, masked_fill


# ---- gather / scatter family --------------------------------------------------------------------------


def _coords(idx: np.ndarray, dim: int) -> tuple:
    """Full coordinates for scatter/gather: ``idx`` along ``dim``, the element's own position elsewhere."""
    nd = idx.ndim
    out = []
    for d, n in enumerate(idx.shape):
        if d == dim:
            out.append(idx)
        else:
            out.append(np.arange(n).reshape([n if k == d else 1 for k in range(nd)]))
    return tuple(out)


def _corner(a: np.ndarray, shape) -> np.ndarray:
    """The leading ``shape`` block of ``a`` (scatter/gather use only that part of src/self)."""
    if a.shape == tuple(shape):
        return a
    return a[tuple(slice(0, n) for n in shape)]


def _check_index_dtype(index: Tensor, op: str):
    if index._data.size and index._dtype not in (_dt.int64, _dt.int32):
        raise RuntimeError(f"{op}(): Expected dtype int32/int64 for index")


def _nd1(shape):
    return tuple(shape) if len(shape) else (1,)


def _scatter_checks(self, dim, index, src):
    """torch's shape/dtype/bounds checks shared by scatter, scatter_add and scatter_reduce."""
    nd = self._data.ndim
    d = wrap_dim(dim, nd)
    _check_index_dtype(index, "scatter")
    if isinstance(src, Tensor) and src._dtype is not self._dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    ishape = _nd1(index._data.shape)
    sshape = _nd1(self._data.shape)
    if index._data.size == 0:
        return d
    if len(ishape) != len(sshape):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if isinstance(src, Tensor):
        srcshape = _nd1(src._data.shape)
        if len(srcshape) != len(ishape):
            raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
        if any(i > s for k, (i, s) in enumerate(zip(ishape, sshape)) if k != d) or \
                any(i > s for i, s in zip(ishape, srcshape)):
            raise RuntimeError(f"Expected index {fmt_shape(index._data.shape)} to be no larger than self "
                               f"{fmt_shape(self._data.shape)} apart from dimension {d} and to be no larger size "
                               f"than src {fmt_shape(src._data.shape)}")
    elif any(i > s for k, (i, s) in enumerate(zip(ishape, sshape)) if k != d):
        raise RuntimeError(f"Expected index {fmt_shape(index._data.shape)} to be no larger than self "
                           f"{fmt_shape(self._data.shape)} apart from dimension {d}")
    bad = _first_bad(index._data, sshape[d], False)
    if bad is not None:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {sshape[d]}")
    return d


def _gather_kernel(x, index, dim):
    """Checks the indices (gather() leaves that to the kernel for CPU arrays): one native pass, or one
    unsigned reduction before NumPy's fancy index."""
    if x.ndim and index.ndim:
        if x.ndim == index.ndim:
            r = _native.gather_dim(x, index, dim)
            if r is not None:
                if r[1] >= 0:
                    _out_of_range(int(index.reshape(-1)[r[1]]), dim, x.shape[dim])
                return r[0]
        _check_bounds(index, dim, x.shape[dim])
        return take_along(x, index, dim)
    _check_bounds(index, dim, x.shape[dim] if x.ndim else 1)
    xa = np.atleast_1d(x)
    ia = np.atleast_1d(index)
    return xa[_coords(ia.astype(np.intp, copy=False), dim)].reshape(index.shape)


def _check_bounds(idx, d: int, size: int) -> None:
    # (the usual int64 index: one unsigned max, where a negative index wraps to a huge value)
    if type(idx) is not np.ndarray or idx.dtype != _I64 or (idx.size and int(_MAX(idx.view(_U64), axis=None)) >= size):
        bad = _first_bad(idx, size, False)
        if bad is not None:
            _out_of_range(bad, d, size)


def _out_of_range(bad: int, d: int, size: int):
    raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {size}")


def _gather_bw(ctx, g):
    index = ctx.inputs[1]
    zero = _zeros(ctx.in_shape(0), g._dtype)
    return apply(SCATTER_ADD, (zero, index, g), {"dim": ctx.attrs["dim"]}), None


GATHER = register("gather", _gather_kernel, _gather_bw, save="1", prim="gather")


def gather(input, dim=None, index=None, *, sparse_grad: bool = False, out=None, axis=None) -> Tensor:
    """``out[i][j] = input[index[i][j]][j]`` (for dim 0): pick values along ``dim`` at ``index``."""
    dim = _dim_index_args("gather", input, dim, axis, index, index_pos=2)
    if sparse_grad:
        raise RuntimeError("gather(): sparse_grad=True is not supported: ember has no sparse tensors")
    nd = input._data.ndim
    d = wrap_dim(dim, nd)
    idx = index._data
    if idx.size:
        _check_index_dtype(index, "gather")
        ishape, sshape = idx.shape or (1,), input._data.shape or (1,)
        if len(ishape) != len(sshape):
            raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
        for k in range(len(ishape)):
            if k != d and ishape[k] > sshape[k]:
                raise RuntimeError(f"Size does not match at dimension {k} expected index "
                                   f"{fmt_shape(index._data.shape)} to be no larger than self "
                                   f"{fmt_shape(input._data.shape)} apart from dimension {d}")
        if type(idx) is not np.ndarray or type(input._data) is not np.ndarray:
            _check_bounds(idx, d, sshape[d])      # (the CPU kernel checks its indices itself)
    r = apply(GATHER, (input, index), {"dim": d})
    return r if out is None else copy_out(r, out)


def _scatter_targets(x, index, src, dim):
    """A scatter kernel's operands: the output (a copy of ``x``), its at-least-1-d view, the coordinates
    ``index`` addresses along ``dim``, and the source values for them (None when ``index`` is empty)."""
    out = np.array(x, copy=True)
    if index.size == 0:
        return out, None, None, None
    o = np.atleast_1d(out)
    ia = np.atleast_1d(index).astype(np.intp, copy=False)
    s = _corner(np.atleast_1d(src), ia.shape) if isinstance(src, np.ndarray) else np.array(src).astype(o.dtype)
    return out, o, _coords(ia, dim), s


def _scatter_kernel(x, index, src, dim, reduce=None):
    out, o, c, s = _scatter_targets(x, index, src, dim)
    if o is None:
        return out
    if reduce is None:
        o[c] = s
    elif reduce == "add":
        np.add.at(o, c, s)
    else:
        np.multiply.at(o, c, s)
    return out


def _scatter_bw(ctx, g):
    a = ctx.attrs
    if a.get("reduce") is not None:
        raise RuntimeError("derivative for aten::scatter is not implemented")
    index = ctx.inputs[1]
    gx = gs = None
    if ctx.edges[0] is not None:
        gx = apply(SCATTER, (g, index, 0), {"dim": a["dim"]})
    if len(ctx.edges) > 2 and ctx.edges[2] is not None:
        gs = _pad_to(apply(GATHER, (g, index), {"dim": a["dim"]}), ctx.in_shape(2))
    return gx, None, gs


SCATTER = register("scatter", _scatter_kernel, _scatter_bw, save="1", prim="scatter")
# torch's overloads: scatter.src (a tensor) / scatter.value (a number); the legacy reduce= has no derivative
SCATTER.node_name = lambda args, attrs: (
    "torch::autograd::NotImplemented" if "reduce" in attrs else
    "ScatterBackward0" if isinstance(args[2], Tensor) else "ScatterBackward1")


def scatter(input, dim=None, index=None, src=None, value=None, *, reduce=None, out=None, axis=None) -> Tensor:
    """Write ``src`` (a tensor) or ``value`` (a number) into ``input`` at ``index`` along ``dim``.

    ``reduce="add"`` / ``"multiply"`` (torch's legacy argument) combines instead of overwriting.
    """
    dim = _dim_index_args("scatter", input, dim, axis, index)
    if src is None and value is None:
        raise TypeError("scatter() missing required argument: 'src' or 'value'")
    if src is None:
        src = value
    if reduce is not None and reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    if not isinstance(src, (Tensor,) + _NUMBER):
        raise TypeError(f"scatter(): argument 'src' must be Tensor or Number, not {type(src).__name__}")
    d = _scatter_checks(input, dim, index, src)
    attrs = {"dim": d} if reduce is None else {"dim": d, "reduce": reduce}
    r = apply(SCATTER, (input, index, src), attrs)
    return r if out is None else copy_out(r, out)


def _scatter_add_kernel(x, index, src, dim):
    return _scatter_kernel(x, index, src, dim, "add")


def _scatter_add_bw(ctx, g):
    index = ctx.inputs[1]
    gs = None
    if ctx.edges[2] is not None:
        gs = _pad_to(apply(GATHER, (g, index), {"dim": ctx.attrs["dim"]}), ctx.in_shape(2))
    return (g if ctx.edges[0] is not None else None), None, gs


SCATTER_ADD = register("scatter_add", _scatter_add_kernel, _scatter_add_bw, save="1", prim="scatter_add")


def scatter_add(input, dim=None, index=None, src=None, *, out=None, axis=None) -> Tensor:
    """Add ``src`` into ``input`` at ``index`` along ``dim`` (duplicates accumulate)."""
    dim = _dim_index_args("scatter_add", input, dim, axis, index, src=src)
    d = _scatter_checks(input, dim, index, src)
    r = apply(SCATTER_ADD, (input, index, src), {"dim": d})
    return r if out is None else copy_out(r, out)


_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _identity(reduce, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f" or dtype == _dt.bfloat16.np:
        return -np.inf if reduce == "amax" else np.inf
    if dtype.kind == "b":
        return reduce == "amin"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _scatter_reduce_kernel(x, index, src, dim, reduce, include_self):
    out, o, c, s = _scatter_targets(x, index, src, dim)
    if o is None:
        return out
    if not include_self:
        o[c] = _identity(reduce, o.dtype)
    if reduce in ("sum", "mean"):
        np.add.at(o, c, s)
    elif reduce == "prod":
        np.multiply.at(o, c, s)
    elif reduce == "amax":
        np.maximum.at(o, c, s)
    else:
        np.minimum.at(o, c, s)
    if reduce == "mean":
        n = _scatter_counts(o.shape, c, include_self)
        if o.dtype.kind in "iu":
            np.floor_divide(o, n.astype(o.dtype), out=o)
        else:
            np.divide(o, n.astype(o.dtype), out=o)
    return out


def _scatter_counts(shape, c, include_self):
    """How many values were combined at each position (self counts once when included)."""
    n = np.zeros(shape, dtype=np.int64)
    np.add.at(n, c, 1)
    if include_self:
        n += 1
    else:
        n[n == 0] = 1
    return n


def _scatter_reduce_bw(ctx, g):
    a = ctx.attrs
    dim, reduce, incl = a["dim"], a["reduce"], a["include_self"]
    x, index, src = ctx.inputs
    need_x, need_s = ctx.edges[0] is not None, ctx.edges[2] is not None
    gx = gs = None
    if reduce in ("sum", "mean"):
        if reduce == "mean":
            # how many values were averaged at each position, counted with ops on the index tensor (a
            # compiled replay recounts for new indices); self counts once when included
            dt = g._dtype
            n = apply(SCATTER_ADD, (_zeros(x._data.shape, dt), index, _literal(np.ones(index._data.shape, dt.np), dt)),
                      {"dim": dim})
            n = n + 1 if incl else n.clamp(min=1)
            g = g / n
        if need_x:
            gx = g if incl else apply(SCATTER, (g, index, 0), {"dim": dim})
        if need_s:
            gs = apply(GATHER, (g, index), {"dim": dim})
    elif reduce in ("amax", "amin") and x._data.ndim and index._data.ndim:
        # the masks of who attained the extreme, from ember ops on the tensors (a compiled replay recomputes
        # them for new values and indices); ties share the gradient evenly, and like torch, self is counted
        # among the ties even when excluded
        dt = g._dtype
        with no_grad():
            xd, sd = x, src                 # (under no_grad: nothing is recorded)
            r = apply(SCATTER_REDUCE, (xd, index, sd), a)
            s_used = sd[tuple(slice(0, k) for k in index._data.shape)]
            self_is = (xd == r).to(dt)
            src_is = (s_used == apply(GATHER, (r, index), {"dim": dim})).to(dt)
            n = apply(SCATTER_ADD, (self_is, index, src_is), {"dim": dim}).clamp(min=1)
        gd = g / n
        if need_x:
            gx = gd * self_is
            if not incl:
                gx = apply(SCATTER, (gx, index, 0), {"dim": dim})
        if need_s:
            gs = apply(GATHER, (gd, index), {"dim": dim}) * src_is
    elif reduce in ("amax", "amin"):
        c = _coords(np.atleast_1d(index._data).astype(np.intp, copy=False), dim)
        r = _scatter_reduce_kernel(x._data, index._data, src._data, **a)   # 0-dim operands: NumPy masks
        r1 = np.atleast_1d(r)
        s_used = _corner(np.atleast_1d(src._data), idx.shape)
        self_is = np.atleast_1d(x._data) == r1
        src_is = s_used == r1[c]
        n = self_is.astype(np.int64)
        np.add.at(n, c, src_is.astype(np.int64))
        n[n == 0] = 1
        gd = g / _const(n.reshape(r.shape).astype(g._dtype.np))
        if need_x:
            gx = gd * _const(self_is.reshape(x._data.shape).astype(g._dtype.np))
            if not incl:
                gx = apply(SCATTER, (gx, index, 0), {"dim": dim})
        if need_s:
            gs = apply(GATHER, (gd, index), {"dim": dim}) * _const(src_is.reshape(index._data.shape).astype(g._dtype.np))
    else:  # prod: divide the product by each factor, with care for zeros
        gx, gs = _prod_bw(ctx, g, x, index, src, dim, incl, need_x, need_s)
    if gs is not None:
        gs = _pad_to(gs, ctx.in_shape(2))
    return gx, None, gs


def _prod_bw(ctx, g, x, index, src, dim, incl, need_x, need_s):
    gx = gs = None
    attrs = {"dim": dim, "reduce": "prod", "include_self": incl}
    if src._data.shape != index._data.shape:
        src = getitem_basic(src, tuple(slice(0, n) for n in index._data.shape))
    # (the zero masks are ember ops on the tensors: they run where the tensors live, device included)
    if need_x:
        # d(result)/d(self) = product of the scattered values (self's zeros replaced by 1 to get it)
        with no_grad():
            xz = x == 0
        masked_x = masked_fill(x, xz, 1)
        gx = g * apply(SCATTER_REDUCE, (masked_x, index, src), attrs) / masked_x
        if not incl:
            gx = apply(SCATTER, (gx, index, 0), {"dim": dim})
    if need_s:
        result = apply(SCATTER_REDUCE, (x, index, src), attrs)   # recomputed so double backward flows through it
        with no_grad():
            s_zero = src == 0
            zeros_here = apply(SCATTER_ADD, (_zeros(x._data.shape, _dt.int64), index, s_zero.to(_dt.int64)),
                               {"dim": dim})
            single = s_zero & (apply(GATHER, (zeros_here, index), {"dim": dim}) == 1)
        # the lone zero at a position: its derivative is the product of the others
        masked_src_result = apply(SCATTER_REDUCE, (x, index, masked_fill(src, single, 1)), attrs)
        a_term = apply(GATHER, (g * masked_src_result, index), {"dim": dim})
        b_term = apply(GATHER, (g * result, index), {"dim": dim}) / masked_fill(src, s_zero, 1)
        m = single.to(g._dtype)
        gs = a_term * m + b_term * (1 - m)
    return gx, gs


SCATTER_REDUCE = register("scatter_reduce", _scatter_reduce_kernel, _scatter_reduce_bw, save="i",
                          prim="scatter_reduce")


def scatter_reduce(input, dim=None, index=None, src=None, reduce=None, *, include_self: bool = True, out=None, axis=None) -> Tensor:
    """Reduce ``src`` into ``input`` at ``index`` along ``dim`` with sum/prod/mean/amax/amin."""
    dim = _dim_index_args("scatter_reduce", input, dim, axis, index, src=src, reduce=reduce)
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    d = _scatter_checks(input, dim, index, src)
    r = apply(SCATTER_REDUCE, (input, index, src), {"dim": d, "reduce": reduce, "include_self": builtins.bool(include_self)})
    return r if out is None else copy_out(r, out)


def _scatter_(self, dim=None, index=None, src=None, value=None, *, reduce=None, axis=None):
    """In-place ``scatter``."""
    if axis is not None or dim is None or index is None:
        dim = dim_from_axis("scatter_", dim, axis, index=index)
    return write_result(self, lambda s: scatter(s, dim, index, src, value, reduce=reduce), "scatter_")


def _scatter_add_(self, dim=None, index=None, src=None, *, axis=None):
    """In-place ``scatter_add``."""
    if axis is not None or dim is None or index is None or src is None:
        dim = dim_from_axis("scatter_add_", dim, axis, index=index, src=src)
    return write_result(self, lambda s: scatter_add(s, dim, index, src), "scatter_add_")


def _scatter_reduce_(self, dim=None, index=None, src=None, reduce=None, *, include_self=True, axis=None):
    """In-place ``scatter_reduce``."""
    if axis is not None or dim is None or index is None or src is None or reduce is None:
        dim = dim_from_axis("scatter_reduce_", dim, axis, index=index, src=src, reduce=reduce)
    return write_result(self, lambda s: scatter_reduce(s, dim, index, src, reduce, include_self=include_self),
                        "scatter_reduce_")


def index_reduce(input, dim=None, index=None, source=None, reduce=None, *, include_self: bool = True, out=None, axis=None) -> Tensor:
    """Reduce the slices ``source.select(dim, i)`` into ``input.select(dim, index[i])`` with prod / mean /
    amax / amin: ``scatter_reduce`` with the 1-D ``index`` spread along ``dim``."""
    dim = _dim_index_args("index_reduce", input, dim, axis, index, source=source, reduce=reduce)
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if index._dtype not in (_dt.int32, _dt.int64):
        raise RuntimeError(f"index_reduce_(): Expected dtype int32/int64 for index but got: {dtype_name(index._dtype)}")
    nd = builtins.max(source._data.ndim, 1)
    d = wrap_dim(dim, nd)
    if index._data.ndim > 1:
        raise RuntimeError("index_reduce_(): Index is supposed to be a vector")
    n_src = source._data.shape[d] if source._data.ndim else 1
    if index._data.size != n_src:
        raise RuntimeError(f"index_reduce_(): Number of indices ({index._data.size}) should be equal to "
                           f"source.size(dim): ({n_src}), for dim: {d}")
    shp = [1] * source._data.ndim
    if shp:
        shp[d] = -1
    idx = index.long().reshape(shp).expand(*source._data.shape) if shp else index.long().reshape(())
    return scatter_reduce(input, d, idx, source, reduce, include_self=include_self, out=out)


def _index_reduce_(self, dim, index, source, reduce, *, include_self=True):
    """In-place ``index_reduce``."""
    return write_result(self, lambda s: index_reduce(s, dim, index, source, reduce, include_self=include_self),
                        "index_reduce_")


attach("index_reduce", index_reduce)
attach("index_reduce_", _index_reduce_, function=False)
attach("gather", gather)
attach("scatter", scatter)
attach("scatter_add", scatter_add)
attach("scatter_reduce", scatter_reduce)
attach("scatter_", _scatter_, function=False)
attach("scatter_add_", _scatter_add_, function=False)
attach("scatter_reduce_", _scatter_reduce_, function=False)


# ---- take / take_along_dim / put ---------------------------------------------------------------------


def _check_flat_index(index: Tensor, numel: int) -> None:
    a = index._data
    bad = _first_bad(a, numel, True) if a.size else None
    if bad is not None:
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {numel} elements.")


_TAKE, _PUT = node_class("TakeBackward0"), node_class("PutBackward0")     # ops of their own in torch


def take(input, index, *, out=None) -> Tensor:
    """Values of ``input`` (read as 1-D in C order) at ``index``; the result has ``index``'s shape."""
    _tensor_arg(input, "take", "input", 1)
    _tensor_arg(index, "take", "index", 2)
    if index._dtype is not _dt.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {dtype_name(index._dtype)}")
    numel = input._data.size
    if index._data.size and numel == 0:
        raise IndexError("take(): tried to take from an empty tensor")
    _check_flat_index(index, numel)
    r = rename(apply(INDEX, (input.reshape(-1), index), {"pos": (0,)}), _TAKE)
    return r if out is None else copy_out(r, out)


def take_along_dim(input, indices, dim=None, *, out=None, axis=None) -> Tensor:
    """Pick values along ``dim`` at ``indices`` (broadcast against ``input`` except along ``dim``)."""
    if axis is not None:
        dim, _ = numpy_names("take_along_dim", dim, False, axis, None)
    _tensor_arg(input, "take_along_dim", "input", 1)
    _tensor_arg(indices, "take_along_dim", "indices", 2)
    if indices._dtype is not _dt.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{dtype_name(indices._dtype)}")
    if dim is None:
        r = _gather_neg(input.reshape(-1), 0, indices.reshape(-1))
        return r if out is None else copy_out(r, out)
    nd = input._data.ndim
    if nd != indices._data.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same number of "
                           f"dimensions, but got {nd} dimensions for input, and {indices._data.ndim} dimensions "
                           f"for indices")
    d = wrap_dim(dim, nd)
    ish, xsh = list(indices._data.shape), list(input._data.shape)
    ish[d] = xsh[d] = 1
    b = list(_bshape("take_along_dim", tuple(ish), tuple(xsh)))
    xs = b.copy()
    xs[d] = input._data.shape[d]
    js = b.copy()
    js[d] = indices._data.shape[d]
    x = input.expand(tuple(xs)) if tuple(xs) != input._data.shape else input
    j = indices.expand(tuple(js)) if tuple(js) != indices._data.shape else indices
    r = _gather_neg(x, d, j)
    return r if out is None else copy_out(r, out)


def _gather_neg(x: Tensor, d: int, index: Tensor) -> Tensor:
    """``gather`` whose negative indices count from the end: brought into ``[0, size)`` by an ember op
    (``index % size``, so a compiled replay wraps each call's own indices), as the gather op takes only
    those; the message names the index wrapped once, as torch's."""
    size = x._data.shape[d]
    bad = _first_bad(index._data, size, True) if index._data.size else None
    if bad is not None:
        raise RuntimeError(f"index {bad + size if bad < 0 else bad} is out of bounds for dimension {d} with "
                           f"size {size}")
    if size and index._data.size:
        index = index % size
    return apply(GATHER, (x, index), {"dim": d})


def put(input, index, source, accumulate: bool = False) -> Tensor:
    """Out-of-place ``put_``: ``input`` (read as 1-D) with ``source`` written at ``index``."""
    _tensor_arg(input, "put", "input", 1)
    return _put(input, index, source, accumulate, "put")


def _put(x, index, source, accumulate, name):
    _tensor_arg(index, name, "index", 2)
    _tensor_arg(source, name, "source", 3)
    if index._dtype is not _dt.int64:
        raise RuntimeError(f"{name}(): Expected a long tensor for index, but got {dtype_name(index._dtype)}")
    if source._dtype is not x._dtype:
        raise RuntimeError(f"{name}(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {dtype_name(x._dtype)} and source.dtype = {dtype_name(source._dtype)}")
    if index._data.size != source._data.size:
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source._data.size}, index.numel() = {index._data.size}")
    _check_flat_index(index, x._data.size)
    flat = apply(INDEX_PUT, (x.reshape(-1), source.reshape(-1), index.reshape(-1)),
                 {"pos": (0,), "accumulate": builtins.bool(accumulate)})
    return rename(flat.reshape(x._data.shape), _PUT)


def put_(self, index, source, accumulate: bool = False) -> Tensor:
    """Write ``source`` into ``self`` (read as 1-D) at ``index``; ``accumulate`` adds instead."""
    return write_result(self, lambda s: _put(s, index, source, accumulate, "put_"), "put_")


attach("take", take)
attach("take_along_dim", take_along_dim)
attach("put", put)
attach("put_", put_, function=False)
