"""Masks: ``masked_fill``, ``masked_select``, ``masked_scatter``, ``fill_diagonal_``, and the
coordinates of nonzeros (``nonzero``, ``argwhere``, ``nonzero_static``, one-argument ``where``)."""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from .registry import register, apply, attach, dtype_name, FUNCTIONS
from ._util import broadcast_error, fmt_shape
from .inplace import write_result, copy_out
from .index import _check_fill_value, _const, _pad_to, _tensor_arg, _zeros


# ---- masked_fill / masked_select / masked_scatter ---------------------------------------------------


def _bshape(op, *shapes):
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise broadcast_error(op, shapes) from None


def _masked_fill_kernel(x, mask, value):
    # a copy, then the value written where the mask is set: about 1.8x faster than np.where, which picks
    # element by element (measured here on attention scores under a causal mask)
    v = np.asarray(value).astype(x.dtype)
    if mask.shape == x.shape:
        out = x.copy()
    else:
        out = np.empty(np.broadcast_shapes(x.shape, mask.shape), x.dtype)
        np.copyto(out, x)
    np.copyto(out, v, where=mask)
    return out


def _masked_write_bw(ctx, g, written_grad):
    """Backward of an op that writes ``input`` where ``mask`` is True (masked_fill, masked_scatter): ``input``'s
    gradient is ``g`` zeroed there; ``written_grad(ctx, g, mask)`` gives the written operand's."""
    mask = ctx.inputs[1]
    gx = apply(MASKED_FILL, (g, mask, 0)) if ctx.edges[0] is not None else None
    gw = written_grad(ctx, g, mask) if ctx.edges[2] is not None else None
    return gx, None, gw


def _masked_fill_bw(ctx, g):
    return _masked_write_bw(ctx, g, lambda ctx, g, mask: apply(MASKED_FILL, (g, mask.logical_not(), 0)))


MASKED_FILL = register("masked_fill", _masked_fill_kernel, _masked_fill_bw, save="1", prim="where")


def _check_mask(mask, op_msg):
    if not isinstance(mask, Tensor):
        raise TypeError(f"argument 'mask' must be Tensor, not {type(mask).__name__}")
    if mask._dtype is not _dt.bool:
        raise RuntimeError(op_msg(mask))


def masked_fill(input, mask, value) -> Tensor:
    """``input`` with ``value`` where ``mask`` is True (the mask broadcasts)."""
    _tensor_arg(input, "masked_fill", "input", 1)
    _check_mask(mask, lambda m: f"masked_fill_ only supports boolean masks, but got mask with dtype "
                                f"{_c_type(m._dtype)}")
    _check_fill_value("masked_fill", value, input._dtype)
    if mask._data.shape != input._data.shape:
        _bshape("masked_fill", input._data.shape, mask._data.shape)
    return apply(MASKED_FILL, (input, mask, value))


def _c_type(d) -> str:
    return {"float32": "float", "float64": "double", "int64": "long int", "int32": "int", "int16": "short int",
            "int8": "signed char", "uint8": "unsigned char", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16"}.get(d.name, d.name)


def _masked_fill_(self, mask, value):
    """In-place ``masked_fill`` (the mask must broadcast to ``self``)."""
    _check_mask(mask, lambda m: f"masked_fill_ only supports boolean masks, but got mask with dtype "
                                f"{_c_type(m._dtype)}")
    return write_result(self, lambda s: masked_fill(s, mask, value), "masked_fill_")


def _masked_select_kernel(x, mask):
    xb, mb = np.broadcast_arrays(x, mask)
    return xb[mb]


def _masked_select_bw(ctx, g):
    mask = ctx.inputs[1]
    shape = np.broadcast_shapes(ctx.in_shape(0), mask._data.shape)
    mb = mask if mask._data.shape == tuple(shape) else mask.expand(shape)     # (a view: a graph value)
    return apply(MASKED_SCATTER, (_zeros(shape, g._dtype), mb, g)), None


MASKED_SELECT = register("masked_select", _masked_select_kernel, _masked_select_bw, save="1", prim="compress")


def masked_select(input, mask, *, out=None) -> Tensor:
    """The 1-D tensor of ``input``'s values where ``mask`` is True (both broadcast)."""
    _tensor_arg(input, "masked_select", "input", 1)
    _check_mask(mask, lambda m: "masked_select: expected BoolTensor for mask")
    _bshape("masked_select", input._data.shape, mask._data.shape)
    r = apply(MASKED_SELECT, (input, mask))
    return r if out is None else copy_out(r, out)


def _masked_scatter_kernel(x, mask, source):
    shape = np.broadcast_shapes(x.shape, mask.shape)
    out = np.array(np.broadcast_to(x, shape), copy=True)
    mb = np.broadcast_to(mask, shape)
    n = int(np.count_nonzero(mb))
    out[mb] = source.reshape(-1)[:n]
    return out


def _scattered_source_grad(ctx, g, mask):
    # source's leading values went to the masked positions, in order; the rest of source got no gradient
    shape = ctx.in_shape(2)
    numel = int(np.prod(shape, dtype=np.int64))
    sel = apply(MASKED_SELECT, (g, mask))
    return _pad_to(sel, (numel,)).reshape(shape)


def _masked_scatter_bw(ctx, g):
    return _masked_write_bw(ctx, g, _scattered_source_grad)


MASKED_SCATTER = register("masked_scatter", _masked_scatter_kernel, _masked_scatter_bw, save="1", prim="scatter")


def masked_scatter(input, mask, source) -> Tensor:
    """``input`` with ``source``'s leading values copied, in order, where ``mask`` is True."""
    _tensor_arg(input, "masked_scatter", "input", 1)
    _tensor_arg(source, "masked_scatter", "source", 3)
    _check_mask(mask, lambda m: f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                                f"{dtype_name(m._dtype)}")
    if source._dtype is not input._dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got"
                           f"{dtype_name(input._dtype)} and {dtype_name(source._dtype)}")
    shape = _bshape("masked_scatter", input._data.shape, mask._data.shape)
    if np.count_nonzero(np.broadcast_to(mask._data, shape)) > source._data.size:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    return apply(MASKED_SCATTER, (input, mask, source))


def _masked_scatter_(self, mask, source):
    """In-place ``masked_scatter`` (the mask must broadcast to ``self``)."""
    _check_mask(mask, lambda m: f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                                f"{dtype_name(m._dtype)}")
    if not _bcast_ok(self, mask) or np.broadcast_shapes(self._data.shape, mask._data.shape) != self._data.shape:
        raise RuntimeError(f"masked_scatter_: mask of shape {fmt_shape(mask._data.shape)} cannot be broadcast to "
                           f"self of shape {fmt_shape(self._data.shape)}")
    return write_result(self, lambda s: masked_scatter(s, mask, source), "masked_scatter_")


def _bcast_ok(a, b):
    try:
        np.broadcast_shapes(a._data.shape, b._data.shape)
        return True
    except ValueError:
        return False


def fill_diagonal_(self, fill_value, wrap: bool = False):
    """Fill the main diagonal (``self[i, i, ...]``) with ``fill_value`` in place; every dimension must have
    the same length beyond two dims. ``wrap=True`` restarts the diagonal every ``width + 1`` rows of a
    tall matrix, as torch (and NumPy) do. Differentiable: the gradient is zero on the diagonal."""
    _tensor_arg(self, "fill_diagonal_", "self", 1)
    shape = self._data.shape
    if len(shape) < 2:
        raise RuntimeError("dimensions must larger than 1")
    if len(shape) > 2 and any(n != shape[0] for n in shape):
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(shape, dtype=np.bool_)
    np.fill_diagonal(mask, True, wrap=bool(wrap) and len(shape) == 2)
    mask_t = _const(mask)
    return write_result(self, lambda s: masked_fill(s, mask_t, fill_value), "fill_diagonal_")


attach("fill_diagonal_", fill_diagonal_, function=False)
attach("masked_fill", masked_fill)
attach("masked_select", masked_select)
attach("masked_scatter", masked_scatter)
attach("masked_fill_", _masked_fill_, function=False)
attach("masked_scatter_", _masked_scatter_, function=False)


# ---- nonzero / argwhere / where(condition) ----------------------------------------------------------


def _nonzero_kernel(x):
    return np.argwhere(x != 0).astype(np.int64, copy=False)


NONZERO = register("nonzero", _nonzero_kernel, differentiable=False)


def nonzero(input, *, out=None, as_tuple: bool = False):
    """Coordinates of the non-zero elements: an ``(n, ndim)`` int64 tensor, or one 1-D tensor per dim."""
    _tensor_arg(input, "nonzero", "input", 1)
    if as_tuple:
        x = input.reshape((1,)) if input._data.ndim == 0 else input
        coords = apply(NONZERO, (x,))
        if type(coords._data) is not np.ndarray:       # a device tensor: column views, copied on the device
            return tuple(coords.select(1, k).contiguous() for k in range(x._data.ndim))
        return tuple(wrap(np.ascontiguousarray(coords._data[:, k])) for k in range(x._data.ndim))
    r = apply(NONZERO, (input,))
    if out is not None:
        if isinstance(out, Tensor) and out._dtype is not _dt.int64:
            raise RuntimeError(f"nonzero: Expected out tensor to have scalar type Long but got scalar type"
                               f"{dtype_name(out._dtype)}")
        return copy_out(r, out)
    return r


def argwhere(input) -> Tensor:
    """Same as ``nonzero(input)``: the ``(n, ndim)`` coordinates of non-zero elements."""
    return nonzero(input)


def nonzero_static(input, *, size: int, fill_value: int = -1) -> Tensor:
    """``nonzero`` padded with ``fill_value`` (or truncated) to exactly ``size`` rows."""
    r = nonzero(input)._data
    nd = input._data.ndim
    out = np.full((size, nd), fill_value, dtype=np.int64)
    k = builtins.min(size, r.shape[0])
    out[:k] = r[:k]
    return wrap(out)


def _where_single(condition):
    """``where(condition)``: the same as ``nonzero(condition, as_tuple=True)``."""
    return nonzero(condition, as_tuple=True)


attach("nonzero", nonzero)
attach("argwhere", argwhere)
attach("nonzero_static", nonzero_static)

if "where" not in FUNCTIONS:
    # the 3-argument where lives in ops/binary.py; until it is loaded, offer the 1-argument form only
    def where(condition, input=None, other=None, *, out=None):
        """``where(condition)`` = ``nonzero(condition, as_tuple=True)`` (the 3-argument form is in binary)."""
        if input is None and other is None:
            return _where_single(condition)
        raise RuntimeError("where(condition, input, other): the 3-argument form is not available: "
                           "ember.ops.binary was not loaded")

    attach("where", where)
