"""Rearranging: flip/fliplr/flipud, roll and rot90, and the diagonals (diag, diag_embed, diagflat,
block_diag).

Their derivatives are ember ops (a flip for flip, a roll back for roll, slices of the gradient for
block_diag), so double backward works; rot90 and diagflat are compositions.
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from .registry import register, apply, attach, node_class, rename
from ._util import wrap_dim
from .shape import reshape, narrow, diagonal
from ._shape_util import _int_list, _out, _varargs_tensors, _zeros


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
