"""Ops indexing one dim with a vector of indices: ``index_select``, ``index_add``, ``index_copy`` and
``index_fill`` (with their in-place forms)."""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from .registry import register, apply, attach, dtype_name
from ._util import wrap_dim, fmt_shape
from ._reduce_util import dim_from_axis
from .inplace import write_result, copy_out
from .index import _check_fill_value, _dim_index_args, _first_bad, _zeros
from .index_scatter import _nd1


# ---- index_select / index_add / index_copy / index_fill ---------------------------------------------


def _dim_key(dim, idx):
    return (slice(None),) * dim + (idx,)


def _index_select_kernel(x, index, dim):
    return np.take(x, index.astype(np.intp, copy=False), axis=dim)


def _index_select_bw(ctx, g):
    index = ctx.inputs[1]
    zero = _zeros(ctx.in_shape(0), g._dtype)
    return apply(INDEX_ADD, (zero, index, g), {"dim": ctx.attrs["dim"], "alpha": 1}), None


INDEX_SELECT = register("index_select", _index_select_kernel, _index_select_bw, save="1", prim="gather")


def _vector_index(index: Tensor) -> Tensor:
    return index.reshape((1,)) if index._data.ndim == 0 else index


def index_select(input, dim=None, index=None, *, out=None, axis=None) -> Tensor:
    """The slices of ``input`` along ``dim`` at the positions in the 1-D ``index``."""
    dim = _dim_index_args("index_select", input, dim, axis, index)
    nd = input._data.ndim
    d = wrap_dim(dim, nd)
    if index._dtype not in (_dt.int64, _dt.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if index._data.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    x = input.reshape((1,)) if nd == 0 else input
    size = x._data.shape[d]
    if index._data.size and size == 0:
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    if _first_bad(index._data, size, False) is not None:
        raise IndexError("index out of range in self")
    r = apply(INDEX_SELECT, (x, _vector_index(index)), {"dim": d})
    if nd == 0:
        r = r.reshape(())
    return r if out is None else copy_out(r, out)


def _index_add_kernel(x, index, source, dim, alpha):
    out = np.array(x, copy=True)
    src = source if alpha == 1 else source * np.asarray(alpha).astype(out.dtype)
    np.add.at(out, _dim_key(dim, index.astype(np.intp, copy=False)), src.astype(out.dtype, copy=False))
    return out


def _index_add_bw(ctx, g):
    a = ctx.attrs
    index = ctx.inputs[1]
    gs = None
    if ctx.edges[2] is not None:
        gs = apply(INDEX_SELECT, (g, index), {"dim": a["dim"]})
        if a["alpha"] != 1:
            gs = gs * a["alpha"]
    return (g if ctx.edges[0] is not None else None), None, gs


INDEX_ADD = register("index_add", _index_add_kernel, _index_add_bw, save="1", prim="scatter_add")


def _same_slices(op, x, d, source, xshape, sshape):
    for k, (a, b) in enumerate(zip(xshape, sshape)):
        if k != d and a != b:
            if op == "index_copy_":
                raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice shapes. "
                                   f"Destination slice shape: {fmt_shape(xshape[:d] + xshape[d + 1:])[1:-1]} at "
                                   f"dimension {d} and source slice shape: "
                                   f"{fmt_shape(sshape[:d] + sshape[d + 1:])[1:-1]} at dimension 0.")
            raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the specified "
                               f"dimension. Got self.shape = {fmt_shape(x._data.shape)} source.shape = "
                               f"{fmt_shape(source._data.shape)}")


def _index_source_checks(op, x, d, index, source, long_only=False):
    nd = x._data.ndim
    if long_only:
        if index._dtype is not _dt.int64:
            raise RuntimeError(f"{op}(): Expected a long tensor for index, but got {dtype_name(index._dtype)}")
    elif index._dtype not in (_dt.int64, _dt.int32):
        raise RuntimeError(f"{op}(): Expected dtype int32/int64 for index but got: {dtype_name(index._dtype)}")
    if index._data.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector, but got dim: {index._data.ndim} with type: "
                         f"{dtype_name(index._dtype)} and size: {fmt_shape(index._data.shape)}")
    if source._dtype is not x._dtype:
        if op == "index_copy_":
            raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but got (self) "
                               f"{dtype_name(x._dtype)} and (source) {dtype_name(source._dtype)}")
        raise RuntimeError(f"{op}(): self ({dtype_name(x._dtype)}) and source ({dtype_name(source._dtype)}) must "
                           f"have the same scalar type")
    n = index._data.size
    sshape = _nd1(source._data.shape) if nd else (source._data.size,)
    xshape = _nd1(x._data.shape)
    if len(sshape) != len(xshape) and source._data.ndim:
        raise RuntimeError(f"{op}(): source and self must have the same number of dimensions, got source "
                           f"{fmt_shape(source._data.shape)} and self {fmt_shape(x._data.shape)}")
    if op == "index_copy_":             # (torch's index_copy_ compares slice shapes before the count)
        _same_slices(op, x, d, source, xshape, sshape)
    if sshape[d] != n:
        if op == "index_copy_":
            raise IndexError(f"index_copy_(): Number of indices ({n}) should be equal to source.size(dim) ({sshape[d]})")
        raise RuntimeError(f"{op}(): Number of indices ({n}) should be equal to source.size(dim): ({sshape[d]}), "
                           f"for dim: {d}")
    _same_slices(op, x, d, source, xshape, sshape)
    bad = _first_bad(index._data, xshape[d], False)
    if bad is not None and op == "index_add_" and nd <= 1:
        raise IndexError("index out of range in self")     # torch's 1-D index_add_ kernel words it so
    if bad is not None:
        prefix = "index_copy_(): " if op == "index_copy_" else ""
        exc = IndexError if op == "index_copy_" else RuntimeError
        raise exc(f"{prefix}index {bad} is out of bounds for dimension {d} with size {xshape[d]}")


def _index_source_op(op, name, input, dim, index, source, out, long_only=False, **attrs):
    """index_add / index_copy after their argument checks: ``source``'s slices written or added into
    ``input``'s at ``index`` along ``dim``; 0-dim self/index/source are handled as 1-element vectors
    (as torch does)."""
    nd = input._data.ndim
    d = wrap_dim(dim, nd)
    _index_source_checks(name, input, d, index, source, long_only=long_only)
    x = input.reshape((1,)) if nd == 0 else input
    src = source.reshape((1,)) if source._data.ndim == 0 else source
    r = apply(op, (x, _vector_index(index), src), {"dim": d, **attrs})
    if nd == 0:
        r = r.reshape(())
    return r if out is None else copy_out(r, out)


def index_add(input, dim=None, index=None, source=None, *, alpha=1, out=None, axis=None) -> Tensor:
    """``input`` with ``alpha * source`` added at ``index`` along ``dim`` (duplicates accumulate)."""
    dim = _dim_index_args("index_add", input, dim, axis, index, source=source)
    return _index_source_op(INDEX_ADD, "index_add_", input, dim, index, source, out, alpha=alpha)


def _index_copy_kernel(x, index, source, dim):
    out = np.array(x, copy=True)
    out[_dim_key(dim, index.astype(np.intp, copy=False))] = source
    return out


def _index_write_bw(ctx, g, written_grad):
    """Backward of an op that writes slices of ``input`` at ``index`` (index_copy, index_fill): ``input``'s
    gradient is ``g`` with those slices zeroed; ``written_grad(g, index, dim)`` gives the written operand's."""
    index, dim = ctx.inputs[1], ctx.attrs["dim"]
    gx = apply(INDEX_FILL, (g, index, 0), {"dim": dim}) if ctx.edges[0] is not None else None
    gw = written_grad(g, index, dim) if ctx.edges[2] is not None else None
    return gx, None, gw


def _index_copy_bw(ctx, g):
    return _index_write_bw(ctx, g, lambda g, index, dim: apply(INDEX_SELECT, (g, index), {"dim": dim}))


INDEX_COPY = register("index_copy", _index_copy_kernel, _index_copy_bw, save="1", prim="scatter")


def index_copy(input, dim=None, index=None, source=None, *, out=None, axis=None) -> Tensor:
    """``input`` with the slices at ``index`` along ``dim`` replaced by ``source``'s."""
    dim = _dim_index_args("index_copy", input, dim, axis, index, source=source)
    return _index_source_op(INDEX_COPY, "index_copy_", input, dim, index, source, out, long_only=True)


def _index_fill_kernel(x, index, value, dim):
    out = np.array(x, copy=True)
    out[_dim_key(dim, index.astype(np.intp, copy=False))] = np.asarray(value).astype(out.dtype)
    return out


def _filled_value_grad(g, index, dim):
    # every filled slice received the value once (repeated or negative indices fill once)
    filled = apply(INDEX_FILL, (_zeros(g._data.shape, g._dtype), index, 1), {"dim": dim})
    return (g * filled).sum()


def _index_fill_bw(ctx, g):
    return _index_write_bw(ctx, g, _filled_value_grad)


INDEX_FILL = register("index_fill", _index_fill_kernel, _index_fill_bw, save="1", prim="scatter")


def index_fill(input, dim=None, index=None, value=None, *, axis=None) -> Tensor:
    """``input`` with the slices at ``index`` along ``dim`` set to ``value`` (a number or 0-dim tensor)."""
    dim = _dim_index_args("index_fill", input, dim, axis, index, value=value)
    nd = input._data.ndim
    d = wrap_dim(dim, nd)
    if index._dtype is not _dt.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if index._data.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    _check_fill_value("index_fill", value, input._dtype)
    x = input.reshape((1,)) if nd == 0 else input
    size = x._data.shape[d]
    bad = _first_bad(index._data, size, True)
    if bad is not None:
        raise IndexError(f"index {bad} is out of bounds for dimension {d} with size {size}")
    # (negative indices count from the end in the kernel, as NumPy reads them)
    r = apply(INDEX_FILL, (x, _vector_index(index), value), {"dim": d})
    return r.reshape(()) if nd == 0 else r


def _index_add_(self, dim=None, index=None, source=None, *, alpha=1, axis=None):
    """In-place ``index_add``."""
    if axis is not None or dim is None or index is None or source is None:
        dim = dim_from_axis("index_add_", dim, axis, index=index, source=source)
    return write_result(self, lambda s: index_add(s, dim, index, source, alpha=alpha), "index_add_")


def _index_copy_(self, dim=None, index=None, source=None, *, axis=None):
    """In-place ``index_copy``."""
    if axis is not None or dim is None or index is None or source is None:
        dim = dim_from_axis("index_copy_", dim, axis, index=index, source=source)
    return write_result(self, lambda s: index_copy(s, dim, index, source), "index_copy_")


def _index_fill_(self, dim=None, index=None, value=None, *, axis=None):
    """In-place ``index_fill``."""
    if axis is not None or dim is None or index is None or value is None:
        dim = dim_from_axis("index_fill_", dim, axis, index=index, value=value)
    return write_result(self, lambda s: index_fill(s, dim, index, value), "index_fill_")


attach("index_select", index_select)
attach("index_add", index_add)
attach("index_copy", index_copy)
attach("index_fill", index_fill)
attach("index_add_", _index_add_, function=False)
attach("index_copy_", _index_copy_, function=False)
attach("index_fill_", _index_fill_, function=False)
