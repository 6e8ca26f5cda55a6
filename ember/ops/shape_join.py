"""Joining and repeating: cat/stack and friends (hstack, vstack, dstack, column_stack), the
``atleast_*d`` / broadcasting helpers, repeat/tile/repeat_interleave, and the grids built from several
inputs (meshgrid, cartesian_prod, combinations) with the index generators tril/triu_indices.

Ops that copy data are registered with NumPy kernels; their derivatives are ember ops (slices of the
gradient for cat, sums over reshaped tiles for repeat, a group sum for repeat_interleave), so double
backward works. Ops that are only views or compositions (stack, meshgrid, atleast_*d,
broadcast_tensors) are built from other ember ops and get their derivatives from them.
"""
from __future__ import annotations

import builtins
import itertools

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap, Size
from .registry import register, apply, apply_view, attach, node_class, rename, dtype_name, HOOKS, DEVICE_RUN
from ..autograd.grad_mode import GRAD
from ._reduce_util import numpy_names
from ._util import wrap_dim, fmt_shape, can_cast
from ._layout_rule import suggests_channels_last, channels_last_empty
from .shape import reshape, narrow, TAKE_FLAT, VIEW, _UNSQUEEZE
from ._shape_util import _int_list, _out, _tensor_list, _varargs_tensors, _zeros


# ---- cat / stack ------------------------------------------------------------------------------------


def _cat_kernel(*xs, axis, dt, keep, sizes):
    if not keep:
        return np.empty((0,), dtype=dt)
    # (the promotion as part of the join: NumPy casts each input as it copies it, as astype would)
    if len(keep) != len(xs):
        xs = [xs[i] for i in keep]
    if xs[0].ndim in (4, 5) and all(type(x) is np.ndarray and suggests_channels_last(x.shape, x.strides)
                                    for x in xs):
        # torch's cat keeps channels_last when every input suggests it
        shp = list(xs[0].shape)
        shp[axis] = builtins.sum(x.shape[axis] for x in xs)
        return np.concatenate(xs, axis=axis, out=channels_last_empty(shp, dt), casting="unsafe")
    r = np.concatenate(xs, axis=axis, dtype=dt, casting="unsafe")
    if not r.flags.c_contiguous:
        # torch's cat result is contiguous otherwise (NumPy followed transposed inputs' order, so a later
        # view() failed where torch's works)
        r = np.ascontiguousarray(r)
    return r


def _cat_bw(ctx, g):
    axis, keep, sizes = ctx.attrs["axis"], ctx.attrs["keep"], ctx.attrs["sizes"]
    grads = [None] * len(ctx.edges)
    start = 0
    for i in range(len(ctx.edges)):
        kept = i in keep
        if ctx.edges[i] is not None:
            grads[i] = narrow(g, axis, start, sizes[i]) if kept else _zeros(ctx.in_shape(i), g._dtype)
        if kept:
            start += sizes[i]
    return tuple(grads)


CAT = register("cat", _cat_kernel, _cat_bw)


def cat(tensors, dim: int = 0, *, axis=None, out=None) -> Tensor:
    """Concatenate tensors along ``dim``, promoting dtypes as torch does.

    1-D tensors with no elements are skipped (torch's legacy behaviour) but still take part in the
    dtype promotion.
    """
    if axis is not None:
        dim = axis
    tensors = _tensor_list(tensors, "cat")
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    dt = tensors[0]._dtype
    keep = []
    for i, t in enumerate(tensors):
        shp = t._data.shape
        if not shp:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
        if t._dtype is not dt:
            dt = _dt.promote_types(dt, t._dtype)
        if shp != (0,):
            keep.append(i)
    if out is not None and not can_cast(dt, out._dtype):
        raise TypeError(f"torch.cat(): input types can't be cast to the desired output type {dtype_name(out._dtype)}")
    d = 0
    sizes = [0] * len(tensors)
    if keep:
        ref = tensors[keep[0]]._data.shape
        d = wrap_dim(dim, len(ref))
        lead, trail = ref[:d], ref[d + 1:]
        for i in keep:
            shp = tensors[i]._data.shape
            if shp[:d] != lead or shp[d + 1:] != trail or len(shp) != len(ref):
                _cat_mismatch(ref, shp, d, i)
            sizes[i] = shp[d]
    else:
        wrap_dim(dim, 1)
    r = apply(CAT, tuple(tensors), {"axis": d, "dt": dt.np, "keep": tuple(keep), "sizes": tuple(sizes)})
    return r if out is None else _out(r, out)


def _cat_mismatch(ref, shp, d, i):
    if len(shp) != len(ref):
        raise RuntimeError(f"Tensors must have same number of dimensions: got {len(ref)} and {len(shp)}")
    for k in range(len(ref)):
        if k != d and shp[k] != ref[k]:
            raise RuntimeError(
                f"Sizes of tensors must match except in dimension {d}. Expected size {ref[k]} but got "
                f"size {shp[k]} for tensor number {i} in the list.")


def stack(tensors, dim: int = 0, *, out=None, axis=None) -> Tensor:
    """Join equally shaped tensors along a new dimension ``dim``."""
    if axis is not None:
        dim, _ = numpy_names("stack", dim, False, axis, None, 0)
    tensors = _tensor_list(tensors, "stack")
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    ref = tensors[0]._data.shape
    dt = tensors[0]._dtype
    for i, t in enumerate(tensors):
        if t._data.shape != ref:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {fmt_shape(ref)} at entry 0 "
                               f"and {fmt_shape(t._data.shape)} at entry {i}")
        if t._dtype is not dt:
            dt = _dt.promote_types(dt, t._dtype)
    d = wrap_dim(dim, len(ref) + 1)
    # each input viewed with the new dim (torch's unsqueeze, made here once for all), then joined by the
    # cat op (the shapes are known equal: nothing of cat's checking is left to do)
    shape = ref[:d] + (1,) + ref[d:]
    if out is None and not HOOKS and DEVICE_RUN[0] is None and not (GRAD[0] and any(t._rg for t in tensors)):
        # nothing records or watches the views: the cat kernel joins the reshaped arrays themselves
        n = len(tensors)
        return apply(CAT, tuple([t._data.reshape(shape) for t in tensors]),
                     {"axis": d, "dt": dt.np, "keep": tuple(range(n)), "sizes": (1,) * n})
    views = tuple([rename(apply_view(VIEW, (t,), {"shape": shape}), _UNSQUEEZE) for t in tensors])
    if out is not None:
        return cat(views, d, out=out)
    n = len(views)
    r = apply(CAT, views, {"axis": d, "dt": dt.np, "keep": tuple(range(n)), "sizes": (1,) * n})
    return rename(r, _STACK)


_STACK = node_class("StackBackward0")


def _nonempty(tensors, op):
    tensors = _tensor_list(tensors, op)
    if not tensors:
        raise RuntimeError(f"{op} expects a non-empty TensorList")
    return tensors


def hstack(tensors, *, out=None) -> Tensor:
    """Concatenate along dim 1 (dim 0 for 1-D tensors) after ``atleast_1d``."""
    ts = [atleast_1d(t) for t in _nonempty(tensors, "hstack")]
    return cat(ts, 0 if ts[0]._data.ndim == 1 else 1, out=out)


def vstack(tensors, *, out=None) -> Tensor:
    """Concatenate along dim 0 after ``atleast_2d``."""
    return cat([atleast_2d(t) for t in _nonempty(tensors, "vstack")], 0, out=out)


def dstack(tensors, *, out=None) -> Tensor:
    """Concatenate along dim 2 after ``atleast_3d``."""
    return cat([atleast_3d(t) for t in _nonempty(tensors, "dstack")], 2, out=out)


def column_stack(tensors, *, out=None) -> Tensor:
    """Stack 0-D/1-D tensors as columns (and 2-D tensors as they are) along dim 1."""
    ts = _nonempty(tensors, "column_stack")
    ts = [reshape(t, (t._data.size, 1)) if t._data.ndim <= 1 else t for t in ts]
    return cat(ts, 1, out=out)


for _n, _f in [("cat", cat), ("concat", cat), ("concatenate", cat), ("stack", stack), ("hstack", hstack),
               ("vstack", vstack), ("row_stack", vstack), ("dstack", dstack), ("column_stack", column_stack)]:
    attach(_n, _f, method=False)


# ---- atleast_*d / broadcasting -------------------------------------------------------------------------


def _atleast(tensors, fn, op):
    if len(tensors) == 1 and isinstance(tensors[0], Tensor):
        return fn(tensors[0])
    ts = _varargs_tensors(tensors, op)
    return tuple(fn(t) for t in ts)


def _al1(t):
    return reshape(t, (1,)) if t._data.ndim == 0 else t


def _al2(t):
    nd = t._data.ndim
    return reshape(t, (1, 1)) if nd == 0 else t.unsqueeze(0) if nd == 1 else t


def _al3(t):
    nd = t._data.ndim
    if nd == 0:
        return reshape(t, (1, 1, 1))
    if nd == 1:
        return t.unsqueeze(0).unsqueeze(-1)
    if nd == 2:
        return t.unsqueeze(-1)
    return t


def atleast_1d(*tensors):
    """Views with at least 1 dim (a tensor for one input, a tuple for several or a list)."""
    return _atleast(tensors, _al1, "atleast_1d")


def atleast_2d(*tensors):
    """Views with at least 2 dims: 0-D -> (1, 1), 1-D (n) -> (1, n)."""
    return _atleast(tensors, _al2, "atleast_2d")


def atleast_3d(*tensors):
    """Views with at least 3 dims: 0-D -> (1, 1, 1), (n) -> (1, n, 1), (m, n) -> (m, n, 1)."""
    return _atleast(tensors, _al3, "atleast_3d")


attach("atleast_1d", atleast_1d, method=False)
attach("atleast_2d", atleast_2d, method=False)
attach("atleast_3d", atleast_3d, method=False)


def broadcast_shapes(*shapes) -> Size:
    """The shape that all ``shapes`` (ints or sequences of ints) broadcast to."""
    norm = []
    for s in shapes:
        s = _int_list(s, "broadcast_shapes", "shapes")
        for v in s:
            if v < 0:
                raise ValueError("Attempting to broadcast a dimension with negative length!")
        norm.append(s)
    nd = builtins.max((len(s) for s in norm), default=0)
    out = [1] * nd
    for idx, s in enumerate(norm):
        for k in range(1, len(s) + 1):
            v = s[-k]
            if v == 1:
                continue
            if out[-k] == 1:
                out[-k] = v
            elif out[-k] != v:
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {v} at {-k}! Mismatching argument at index "
                    f"{idx} had {tuple(s)}; but expected shape should be broadcastable to {fmt_shape(out)}")
    return Size(out)


def broadcast_tensors(*tensors):
    """Expanded views of all tensors with their common broadcast shape."""
    ts = _tensor_list(tensors, "broadcast_tensors")
    shape = ()
    for t in ts:
        s = t._data.shape
        nd = builtins.max(len(shape), len(s))
        a = (1,) * (nd - len(shape)) + tuple(shape)
        b = (1,) * (nd - len(s)) + tuple(s)
        new = []
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y and x != 1 and y != 1:
                raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                                   f"non-singleton dimension {i}")
            new.append(y if x == 1 else x)
        shape = tuple(new)
    return tuple(t if t._data.shape == shape else t.expand(shape) for t in ts)


attach("broadcast_shapes", broadcast_shapes, method=False)
attach("broadcast_tensors", broadcast_tensors, method=False)


# ---- repeat / tile / repeat_interleave -----------------------------------------------------------------


def _repeat_bw(ctx, g):
    reps = ctx.attrs["reps"]
    shp = ctx.in_shape(0)
    padded = (1,) * (len(reps) - len(shp)) + tuple(shp)
    # the output is a grid of tiles: split every dim into (repeat, size) and sum over the repeats
    split = []
    for r, s in zip(reps, padded):
        split += [r, s]
    gs = g.reshape(tuple(split))
    if reps:
        gs = gs.sum(tuple(range(0, 2 * len(reps), 2)))
    return gs.reshape(shp)


REPEAT = register("repeat", lambda x, reps: np.ascontiguousarray(np.tile(x, reps)) if reps else x.copy(), _repeat_bw)


def repeat(self, *sizes, repeats=None) -> Tensor:
    """``Tensor.repeat``: tile the tensor ``sizes[i]`` times along dim ``i`` (a copy)."""
    if repeats is not None and not sizes:
        sizes = (repeats,)
    if not sizes:
        raise TypeError('repeat() missing 1 required positional arguments: "repeats"')
    reps = sizes[0] if len(sizes) == 1 and not isinstance(sizes[0], (int, np.integer)) else sizes
    reps = _int_list(reps, "repeat", "repeats")
    shp = self._data.shape
    if len(reps) < len(shp):
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    padded = (1,) * (len(reps) - len(shp)) + shp
    target = [r * s for r, s in zip(reps, padded)]
    for r, t in zip(reps, target):
        if r < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {t}: {fmt_shape(target)}")
    return apply(REPEAT, (self,), {"reps": reps})


def tile(input, dims) -> Tensor:
    """Repeat like ``Tensor.repeat``; ``dims`` shorter than ``input.dim()`` is padded with leading 1s."""
    dims = _int_list(dims, "tile", "dims")
    nd = input._data.ndim
    if len(dims) < nd:
        dims = (1,) * (nd - len(dims)) + dims
    return repeat(input, dims)


def _tile_method(self, *dims):
    if len(dims) == 1 and not isinstance(dims[0], (int, np.integer)):
        dims = dims[0]
    return tile(self, dims)


attach("repeat", repeat, function=False)
attach("tile", _tile_method, function=False)
attach("tile", tile, method=False)


def _ri_kernel(x, reps, axis):
    return np.repeat(x, reps, axis=axis)


def _ri_bw(ctx, g):
    return apply(RI_GROUP_SUM, (g,), {"reps": ctx.attrs["reps"], "axis": ctx.attrs["axis"]})


def _group_sum_kernel(g, reps, axis):
    """Sum consecutive groups of ``reps[i]`` slices along ``axis`` (the adjoint of np.repeat)."""
    n = len(reps)
    moved = np.moveaxis(g, axis, 0)
    out = np.zeros((n,) + moved.shape[1:], dtype=g.dtype)
    np.add.at(out, np.repeat(np.arange(n), reps), moved)
    return np.ascontiguousarray(np.moveaxis(out, 0, axis))


def _group_sum_bw(ctx, gg):
    return apply(REPEAT_INTERLEAVE, (gg,), {"reps": ctx.attrs["reps"], "axis": ctx.attrs["axis"]})


REPEAT_INTERLEAVE = register("repeat_interleave", _ri_kernel, _ri_bw)
REPEAT_INTERLEAVE.node_name = "IndexSelectBackward0"     # torch gathers with index_select for tensor counts
_VIEW_NODE = node_class("ViewBackward0")
RI_GROUP_SUM = register("repeat_interleave_backward", _group_sum_kernel, _group_sum_bw)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None, axis=None) -> Tensor:
    """Repeat each element (or slice along ``dim``) ``repeats`` times, consecutively.

    ``repeats`` is an int or a 0-D/1-D integer tensor. ``repeat_interleave(counts)`` with one integer
    tensor returns ``arange(len(counts))`` with entry ``i`` repeated ``counts[i]`` times.
    """
    if axis is not None:
        dim, _ = numpy_names("repeat_interleave", dim, False, axis, None)
    if repeats is None:
        counts = _check_repeats_tensor(input)
        if counts._data.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        idx = wrap(np.arange(counts._data.shape[0], dtype=counts._dtype.np), counts._dtype)
        total = int(counts._data.sum())
        if output_size is not None and int(output_size) != total:
            raise RuntimeError("allocated size does not match required size")
        return apply(REPEAT_INTERLEAVE, (idx,), {"reps": counts._data.astype(np.int64), "axis": 0})
    if dim is None:
        x = reshape(input, (-1,))
        axis = 0
    else:
        x = input
        if input._data.ndim == 0:
            # torch refuses a dim for 0-D input (with these messages)
            if isinstance(repeats, Tensor):
                raise IndexError(f"Dimension specified as {int(dim)} but tensor has no dimensions")
            raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")
        axis = wrap_dim(dim, input._data.ndim)
    size = x._data.shape[axis]
    if isinstance(repeats, Tensor):
        counts = _check_repeats_tensor(repeats)
        if counts._data.ndim > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        reps = counts._data.reshape(-1).astype(np.int64)
        if reps.size == 1:
            reps = np.full(size, reps[0], dtype=np.int64)
        elif reps.size != size:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                               f"{reps.size} and input.size({axis}) = {size}")
        if (reps < 0).any():
            raise RuntimeError("repeats can not be negative")
        if output_size is not None and int(output_size) != int(reps.sum()):
            raise RuntimeError("allocated size does not match required size")
        return apply(REPEAT_INTERLEAVE, (x,), {"reps": reps, "axis": axis})
    r = int(repeats)
    if r < 0:
        raise RuntimeError("Repeats must be non-negative")
    if output_size is not None and int(output_size) != r * size:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {r * size} but got {int(output_size)}")
    # a constant count is a view + expand + copy: its derivative (a sum over the copies) comes for free
    shp = x._data.shape
    y = x.unsqueeze(axis + 1).expand(shp[:axis + 1] + (r,) + shp[axis + 1:])
    y = y.contiguous() if r > 1 else y.clone()     # always a new tensor, never a (stride-0) view of input
    return rename(reshape(y, shp[:axis] + (r * size,) + shp[axis + 1:]), _VIEW_NODE)   # torch: clone, then view


def _check_repeats_tensor(t: Tensor) -> Tensor:
    if t._dtype not in (_dt.int64, _dt.int32):
        raise NotImplementedError(f"\"repeat_interleave_cpu\" not implemented for '{dtype_name(t._dtype)}'")
    return t


attach("repeat_interleave", repeat_interleave)


# ---- meshgrid / cartesian_prod / combinations ---------------------------------------------------------


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 0-D/1-D tensors; ``indexing="ij"`` (the default) or ``"xy"``.

    Outputs are expanded views of the inputs, as in torch.
    """
    ts = _varargs_tensors(tensors, "meshgrid")
    if not ts:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for t in ts:
        if t._data.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t}")
    for t in ts[1:]:
        if t._dtype is not ts[0]._dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    n = len(ts)
    # position of input i in the output: "xy" swaps the first two axes
    pos = list(range(n))
    if indexing == "xy" and n >= 2:
        pos[0], pos[1] = 1, 0
    out_shape = [0] * n
    for i, t in enumerate(ts):
        out_shape[pos[i]] = t._data.size
    out_shape = tuple(out_shape)
    grids = []
    for i, t in enumerate(ts):
        shp = [1] * n
        shp[pos[i]] = t._data.size
        grids.append(reshape(t, tuple(shp)).expand(out_shape))
    return tuple(grids)


attach("meshgrid", meshgrid, method=False)


def _check_1d(t):
    if t._data.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {fmt_shape(t._data.shape)}")


def cartesian_prod(*tensors) -> Tensor:
    """All combinations of one element from each 1-D tensor, as rows (itertools.product order)."""
    ts = _varargs_tensors(tensors, "cartesian_prod")
    for t in ts:
        _check_1d(t)
    if len(ts) == 1:
        return ts[0]
    grids = meshgrid(*ts, indexing="ij")
    return stack([reshape(g, (-1,)) for g in grids], 1)


def combinations(input, r: int = 2, with_replacement: bool = False) -> Tensor:
    """Length-``r`` combinations of a 1-D tensor's elements (itertools order), as rows."""
    _check_1d(input)
    r = int(r)
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return _zeros((0,), input._dtype)
    n = input._data.shape[0]
    gen = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(gen(range(n), r)), dtype=np.int64).reshape(-1, r)
    return apply(TAKE_FLAT, (input,), {"idx": idx})


attach("cartesian_prod", cartesian_prod, method=False)
attach("combinations", combinations, method=False)


def _tri_indices(row, col, offset, dtype, name, lower):
    row, col, offset = int(row), int(col), int(offset)
    if dtype is None:
        dtype = _dt.int64
    if dtype.category != 1:
        raise NotImplementedError(f"\"{name}\" not implemented for '{dtype_name(dtype)}'")
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    f = np.tril_indices if lower else np.triu_indices
    r, c = f(row, offset, col) if row and col else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    return wrap(np.stack([r, c]).astype(dtype.np), dtype)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None) -> Tensor:
    """Row/column indices (a 2 x N tensor) of the lower triangle of a ``row x col`` matrix."""
    from ..tensor import _check_device, _on_device
    return _on_device(_tri_indices(row, col, offset, dtype, "tril_indices", True), _check_device(device))


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None) -> Tensor:
    """Row/column indices (a 2 x N tensor) of the upper triangle of a ``row x col`` matrix."""
    from ..tensor import _check_device, _on_device
    return _on_device(_tri_indices(row, col, offset, dtype, "triu_indices", False), _check_device(device))


attach("tril_indices", tril_indices, method=False)
attach("triu_indices", triu_indices, method=False)
