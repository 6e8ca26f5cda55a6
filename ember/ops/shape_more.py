"""More shape ops: joining (cat/stack and friends), repeating (repeat/tile/repeat_interleave),
reordering (flip/roll/rot90), grids and diagonals (meshgrid, diag, diag_embed, block_diag), the
``atleast_*d`` / broadcasting helpers, index generators (tril/triu_indices, combinations), and the
whole-tensor writes ``fill_`` / ``zero_`` / ``copy_``.

Ops that copy data are registered with NumPy kernels; their derivatives are ember ops (slices of the
gradient for cat and block_diag, a flip for flip, a roll back for roll, sums over reshaped tiles for
repeat, a group sum for repeat_interleave), so double backward works. Ops that are only views or
compositions (stack, meshgrid, rot90, atleast_*d, broadcast_tensors) are built from other ember ops
and get their derivatives from them.
"""
from __future__ import annotations

import builtins
import itertools

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, Size, wrap
from .registry import register, apply, attach, dtype_name, node_class, rename
from ._util import wrap_dim, fmt_shape, can_cast, check_scalar_fits, wrap_unsigned
from .shape import reshape, narrow, diagonal, TAKE_FLAT


# ---- argument helpers ---------------------------------------------------------------------------------


def _tensor_list(tensors, op: str) -> list:
    """Check a ``tensors`` sequence argument the way torch's argument parser does."""
    if isinstance(tensors, Tensor):
        raise TypeError(f"{op}(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor")
    if not isinstance(tensors, (list, tuple)):
        tensors = list(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
    return list(tensors)


def _varargs_tensors(tensors, op: str) -> list:
    """``f(a, b)`` or ``f([a, b])`` (as meshgrid, block_diag, atleast_*d accept)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    return _tensor_list(tensors, op)


def _int_list(x, op: str, arg: str) -> tuple:
    """An int or a sequence of ints (NumPy ints and integer tensors too); floats and strings are torch's
    TypeError, never truncated."""
    if isinstance(x, (int, np.integer)):
        return (int(x),)
    if isinstance(x, Tensor) and x._dtype.category == 1:
        x = x.tolist()
        return (x,) if isinstance(x, int) else tuple(x)
    if isinstance(x, (str, bytes, Tensor)) or not hasattr(x, "__iter__"):
        raise TypeError(f"{op}(): argument '{arg}' must be tuple of ints, not {type(x).__name__}")
    out = []
    for i, v in enumerate(x):
        if not isinstance(v, (int, np.integer)):
            raise TypeError(f"{op}(): argument '{arg}' must be tuple of ints, but found element of type "
                            f"{type(v).__name__} at pos {i}")
        out.append(int(v))
    return tuple(out)


def _out(result: Tensor, out) -> Tensor:
    from .inplace import copy_out
    return copy_out(result, out)


def _zeros(shape, dtype) -> Tensor:
    return wrap(np.zeros(shape, dtype=dtype.np), dtype)


# ---- cat / stack ------------------------------------------------------------------------------------


def _cat_kernel(*xs, axis, dt, keep, sizes):
    arrs = [xs[i].astype(dt, copy=False) for i in keep]
    if not arrs:
        return np.empty((0,), dtype=dt)
    return np.concatenate(arrs, axis=axis)


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
    for i, t in enumerate(tensors):
        if t._data.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    keep = tuple(i for i, t in enumerate(tensors) if not (t._data.ndim == 1 and t._data.shape[0] == 0))
    dt = tensors[0]._dtype
    for t in tensors[1:]:
        dt = _dt.promote_types(dt, t._dtype)
    if out is not None and not can_cast(dt, out._dtype):
        raise TypeError(f"torch.cat(): input types can't be cast to the desired output type {dtype_name(out._dtype)}")
    d = 0
    sizes = [0] * len(tensors)
    if keep:
        ref = tensors[keep[0]]._data.shape
        d = wrap_dim(dim, len(ref))
        for i in keep:
            shp = tensors[i]._data.shape
            if len(shp) != len(ref):
                raise RuntimeError(f"Tensors must have same number of dimensions: got {len(ref)} and {len(shp)}")
            for k in range(len(ref)):
                if k != d and shp[k] != ref[k]:
                    raise RuntimeError(
                        f"Sizes of tensors must match except in dimension {d}. Expected size {ref[k]} but got "
                        f"size {shp[k]} for tensor number {i} in the list.")
            sizes[i] = shp[d]
    else:
        wrap_dim(dim, 1)
    r = apply(CAT, tuple(tensors), {"axis": d, "dt": dt.np, "keep": keep, "sizes": tuple(sizes)})
    return r if out is None else _out(r, out)


def stack(tensors, dim: int = 0, *, out=None) -> Tensor:
    """Join equally shaped tensors along a new dimension ``dim``."""
    tensors = _tensor_list(tensors, "stack")
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    ref = tensors[0]._data.shape
    for i, t in enumerate(tensors[1:], 1):
        if t._data.shape != ref:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {fmt_shape(ref)} at entry 0 "
                               f"and {fmt_shape(t._data.shape)} at entry {i}")
    d = wrap_dim(dim, len(ref) + 1)
    r = cat([t.unsqueeze(d) for t in tensors], d, out=out)
    return r if out is not None else rename(r, _STACK)


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


def repeat(self, *sizes) -> Tensor:
    """``Tensor.repeat``: tile the tensor ``sizes[i]`` times along dim ``i`` (a copy)."""
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


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None) -> Tensor:
    """Repeat each element (or slice along ``dim``) ``repeats`` times, consecutively.

    ``repeats`` is an int or a 0-D/1-D integer tensor. ``repeat_interleave(counts)`` with one integer
    tensor returns ``arange(len(counts))`` with entry ``i`` repeated ``counts[i]`` times.
    """
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

# ---- flip / roll / rot90 ------------------------------------------------------------------------------

FLIP = register("flip", lambda x, axes: np.flip(x, axes).copy() if axes else x.copy(),
                lambda ctx, g: apply(FLIP, (g,), {"axes": ctx.attrs["axes"]}))


def flip(input, dims) -> Tensor:
    """Reverse the order of elements along ``dims`` (a copy, as in torch)."""
    if isinstance(dims, (int, np.integer)):
        raise TypeError("flip(): argument 'dims' (position 2) must be tuple of ints, not int")
    nd = input._data.ndim
    axes = [wrap_dim(d, nd) for d in dims]
    seen = set()
    for a in axes:
        if a in seen:
            raise RuntimeError(f"dim {a} appears multiple times in the list of dims")
        seen.add(a)
    axes = tuple(sorted(axes)) if nd else ()
    return apply(FLIP, (input,), {"axes": axes})


def _flip_method(self, *dims):
    if len(dims) == 1 and not isinstance(dims[0], (int, np.integer)):
        dims = dims[0]
    return flip(self, tuple(dims))


def fliplr(input) -> Tensor:
    """Flip left/right (dim 1); needs at least 2 dims."""
    if input._data.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


def flipud(input) -> Tensor:
    """Flip up/down (dim 0); needs at least 1 dim."""
    if input._data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


attach("flip", flip, method=False)
attach("flip", _flip_method, function=False)
attach("fliplr", fliplr)
attach("flipud", flipud)


def _roll_bw(ctx, g):
    return apply(ROLL, (g,), {"shifts": tuple(-s for s in ctx.attrs["shifts"]), "axes": ctx.attrs["axes"]})


ROLL = register("roll", lambda x, shifts, axes: np.roll(x, shifts, axes), _roll_bw)


def roll(input, shifts, dims=None) -> Tensor:
    """Roll elements along ``dims`` by ``shifts`` (flattened first when ``dims`` is None)."""
    shifts = _int_list(shifts, "roll", "shifts")
    dims = () if dims is None else _int_list(dims, "roll", "dims")
    if not shifts:
        raise RuntimeError("`shifts` required")
    if not dims:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        flat = reshape(input, (-1,))
        return reshape(apply(ROLL, (flat,), {"shifts": shifts, "axes": (0,)}), input._data.shape)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    nd = input._data.ndim
    if nd == 0:
        raise IndexError(f"Dimension specified as {dims[0]} but tensor has no dimensions")
    axes = tuple(wrap_dim(d, nd) for d in dims)
    return apply(ROLL, (input,), {"shifts": shifts, "axes": axes})


attach("roll", roll)


def rot90(input, k: int = 1, dims=(0, 1)) -> Tensor:
    """Rotate by 90 degrees ``k`` times in the plane of ``dims`` (from the first towards the second)."""
    dims = _int_list(dims, "rot90", "dims")
    nd = input._data.ndim
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if nd < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {nd}")
    d0, d1 = wrap_dim(dims[0], nd), wrap_dim(dims[1], nd)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k = int(k) % 4
    if k == 1:
        r = flip(input, (d1,)).transpose(d0, d1)
    elif k == 2:
        r = flip(input, (d0, d1))
    elif k == 3:
        r = flip(input, (d0,)).transpose(d0, d1)
    else:
        r = input.clone()
    return rename(r, _ROT90)


_ROT90 = node_class("Rot90Backward0")


attach("rot90", rot90)

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
    from ..tensor import _check_device
    _check_device(device)
    return _tri_indices(row, col, offset, dtype, "tril_indices", True)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None) -> Tensor:
    """Row/column indices (a 2 x N tensor) of the upper triangle of a ``row x col`` matrix."""
    from ..tensor import _check_device
    _check_device(device)
    return _tri_indices(row, col, offset, dtype, "triu_indices", False)


attach("tril_indices", tril_indices, method=False)
attach("triu_indices", triu_indices, method=False)

# ---- diagonals --------------------------------------------------------------------------------------


def _diag_embed_kernel(x, offset, dim1, dim2):
    m = x.shape[-1]
    n = m + abs(offset)
    tmp = np.zeros(x.shape[:-1] + (n, n), dtype=x.dtype)
    i = np.arange(m)
    tmp[..., i + builtins.max(-offset, 0), i + builtins.max(offset, 0)] = x
    return np.ascontiguousarray(np.moveaxis(tmp, (-2, -1), (dim1, dim2)))


DIAG_EMBED = register("diag_embed", _diag_embed_kernel,
                      lambda ctx, g: diagonal(g, ctx.attrs["offset"], ctx.attrs["dim1"], ctx.attrs["dim2"]))


def diag_embed(input, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices (in dims ``dim1``, ``dim2``) whose ``offset`` diagonal is the last dim of ``input``."""
    nd = input._data.ndim + 1
    a, b = wrap_dim(dim1, nd), wrap_dim(dim2, nd)
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return apply(DIAG_EMBED, (input,), {"offset": int(offset), "dim1": a, "dim2": b})


def diag(input, diagonal: int = 0, *, out=None) -> Tensor:
    """1-D input: a square matrix with ``input`` on the given diagonal; 2-D input: that diagonal (a copy)."""
    nd = input._data.ndim
    if nd == 1:
        r = apply(DIAG_EMBED, (input,), {"offset": int(diagonal), "dim1": 0, "dim2": 1})
    elif nd == 2:
        r = rename(_diagonal(input, int(diagonal), 0, 1).clone(), _DIAG_COPY)     # torch's diagonal_copy
    else:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {nd}D")
    if out is not None and isinstance(out, Tensor) and out._dtype is not r._dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {_CPP_NAMES[r._dtype]}, but got "
                           f"{_CPP_NAMES[out._dtype]} instead")
    return r if out is None else _out(r, out)


# C++ scalar type names torch prints in some dtype messages
_CPP_NAMES = {_dt.float32: "float", _dt.float64: "double", _dt.float16: "c10::Half", _dt.bfloat16: "c10::BFloat16",
              _dt.int64: "long int", _dt.int32: "int", _dt.int16: "short int", _dt.int8: "signed char",
              _dt.uint8: "unsigned char", _dt.bool: "bool"}


_diagonal = diagonal
_DIAG_COPY = node_class("DiagonalBackward0_copy")


def diagflat(input, offset: int = 0) -> Tensor:
    """A 2-D matrix with the flattened input on the ``offset`` diagonal."""
    return apply(DIAG_EMBED, (reshape(input, (-1,)),), {"offset": int(offset), "dim1": 0, "dim2": 1})


attach("diag_embed", diag_embed)
attach("diag", diag)
attach("diagflat", diagflat)


def _block_diag_kernel(*xs, dt, shapes):
    rows = builtins.sum(s[0] for s in shapes)
    cols = builtins.sum(s[1] for s in shapes)
    out = np.zeros((rows, cols), dtype=dt)
    r = c = 0
    for x, (h, w) in zip(xs, shapes):
        out[r:r + h, c:c + w] = np.reshape(x, (h, w))
        r += h
        c += w
    return out


def _block_diag_bw(ctx, g):
    grads = []
    r = c = 0
    for i, (h, w) in enumerate(ctx.attrs["shapes"]):
        if ctx.edges[i] is not None:
            grads.append(narrow(narrow(g, 0, r, h), 1, c, w).reshape(ctx.in_shape(i)))
        else:
            grads.append(None)
        r += h
        c += w
    return tuple(grads)


BLOCK_DIAG = register("block_diag", _block_diag_kernel, _block_diag_bw)


def block_diag(*tensors) -> Tensor:
    """A block-diagonal matrix from 0-D, 1-D (a row) and 2-D tensors, promoting dtypes."""
    ts = _varargs_tensors(tensors, "block_diag")
    shapes = []
    for i, t in enumerate(ts):
        nd = t._data.ndim
        if nd > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has {nd} dimensions")
        shp = t._data.shape
        shapes.append((1, 1) if nd == 0 else (1, shp[0]) if nd == 1 else shp)
    if not ts:
        dt = _dt.get_default_dtype()
        return _zeros((1, 0), dt)
    dt = _dt.result_type(*ts)
    return apply(BLOCK_DIAG, tuple(ts), {"dt": dt.np, "shapes": tuple(shapes)})


attach("block_diag", block_diag, method=False)

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

# ---- whole-tensor writes: fill_ / zero_ / copy_ ------------------------------------------------------


def _copy_kernel(dst, src, dt):
    # a fresh array in the destination's shape and dtype (NumPy broadcasting, unsafe cast as torch)
    return np.array(np.broadcast_to(src, dst.shape), dtype=dt, copy=True)


def _copy_bw(ctx, g):
    # the old values are overwritten: no gradient for them; src gets the (broadcast-reduced) gradient
    gd = _zeros(ctx.in_shape(0), g._dtype) if ctx.edges[0] is not None else None
    return gd, (g if ctx.edges[1] is not None else None)


COPY = register("copy_", _copy_kernel, _copy_bw)
COPY.node_name = "torch::autograd::CopyBackwards"


def _fill_kernel(dst, value, dt):
    return np.full(dst.shape, value, dtype=dt)


def _fill_bw(ctx, g):
    gd = _zeros(ctx.in_shape(0), g._dtype) if ctx.edges[0] is not None else None
    return gd, (g.sum() if ctx.edges[1] is not None else None)


FILL = register("fill_", _fill_kernel, _fill_bw)
# torch's fill_ overloads: a Number value (2) or a 0-d Tensor value (3)
FILL.node_name = lambda args, attrs: "FillBackward3" if isinstance(args[1], Tensor) else "FillBackward2"
ZERO = register("zero_", lambda dst: np.zeros(dst.shape, dtype=dst.dtype),
                lambda ctx, g: _zeros(ctx.in_shape(0), g._dtype))


def overwrite(self: Tensor, src, name: str = "copy_") -> Tensor:
    """Write ``src`` (a Tensor, broadcastable to ``self``) into ``self`` in place, with autograd:
    the old values of ``self`` get no gradient, ``src`` gets the gradient of the written region."""
    from .inplace import write_result
    if _plain_write(self, src):
        np.copyto(self._data, src._data, casting="unsafe")      # broadcasts; handles overlapping memory
        self._bump()
        return self
    return write_result(self, lambda s: apply(COPY, (s, src), {"dt": s._dtype.np}), name)


def _plain_write(self: Tensor, src=None) -> bool:
    """True when a write needs no autograd record and no hook sees it: then copy the bytes directly."""
    from ..autograd.grad_mode import GRAD
    from .registry import HOOKS, observed
    from .inplace import _writable
    if (HOOKS and observed()) or (GRAD[0] and (self._rg or (isinstance(src, Tensor) and src._rg))):
        return False
    _writable(self, "copy_")
    return True


def copy_(self, src, non_blocking: bool = False) -> Tensor:
    """Copy ``src`` into ``self`` (broadcasting ``src``, casting to ``self.dtype``)."""
    if not isinstance(src, Tensor):
        from .registry import to_tensor
        src = to_tensor(src)
    shp, sshp = self._data.shape, src._data.shape
    if sshp != shp:
        try:
            bshape = np.broadcast_shapes(shp, sshp)
        except ValueError:
            raise RuntimeError(_size_mismatch(shp, sshp)) from None
        if bshape != shp:
            raise RuntimeError(f"output with shape {fmt_shape(shp)} doesn't match the broadcast shape "
                               f"{fmt_shape(bshape)}")
    _check_no_overlap(self, "copy_")
    return overwrite(self, src, "copy_")


def _size_mismatch(a, b) -> str:
    """torch's message for two shapes that do not broadcast."""
    nd = builtins.max(len(a), len(b))
    a = (1,) * (nd - len(a)) + tuple(a)
    b = (1,) * (nd - len(b)) + tuple(b)
    for i in range(nd):
        if a[i] != b[i] and a[i] != 1 and b[i] != 1:
            return (f"The size of tensor a ({a[i]}) must match the size of tensor b ({b[i]}) at non-singleton "
                    f"dimension {i}")
    return f"shapes {fmt_shape(a)} and {fmt_shape(b)} cannot be broadcast"


def _check_no_overlap(self, name):
    d = self._data
    if d.size == 0:
        return
    if not d.flags.writeable or any(st == 0 and n > 1 for st, n in zip(d.strides, d.shape)):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           "single memory location. Please clone() the tensor before performing the operation.")


def fill_(self, value) -> Tensor:
    """Set every element to ``value`` (a number or a 0-D tensor, which then receives the gradient)."""
    from .inplace import write_result
    if isinstance(value, Tensor):
        if value._data.ndim != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value._data.ndim} dimensions.")
    elif isinstance(value, (bool, int, float, np.number, np.bool_)):
        _check_fits(value, self._dtype, "fill_")
        value = wrap_unsigned(value, self._dtype)
    else:
        raise TypeError(f"fill_() received an invalid combination of arguments - got ({type(value).__name__}), "
                        "but expected one of: (Number value) or (Tensor value)")
    _check_no_overlap(self, "fill_")
    if _plain_write(self, value):
        np.copyto(self._data, value._data if isinstance(value, Tensor) else value, casting="unsafe")
        self._bump()
        return self
    return write_result(self, lambda s: apply(FILL, (s, value), {"dt": s._dtype.np}), "fill_")


def _check_fits(value, dt, name):
    check_scalar_fits(value, dt)


def zero_(self) -> Tensor:
    """Set every element to zero."""
    from .inplace import write_result
    _check_no_overlap(self, "zero_")
    if _plain_write(self):
        self._data[...] = 0
        self._bump()
        return self
    return write_result(self, lambda s: apply(ZERO, (s,)), "zero_")


def fill(input, value) -> Tensor:
    """``torch.fill``: a new tensor shaped like ``input`` filled with ``value``."""
    return fill_(input.clone(), value)


attach("fill_", fill_)
attach("zero_", zero_)
attach("copy_", copy_, function=False)
attach("fill", fill, method=False)
