"""Device-only decompositions of the index accumulations ``scatter_add`` and ``index_add`` (the
derivatives of ``gather`` and ``index_select``) into the ``scatter_add`` primitive.

Both become ``out = x + zeros.index_add_(0, flat_index, src)`` over flattened views: the target of
each source element is computed from ``iota`` s (its coordinates) with the index tensor's value in
place of the scattered dim, so the primitive's row-wise accumulation does the rest. On the CPU they
stay extern (``np.add.at`` is as good as generated C).
"""
from __future__ import annotations

import numpy as np

from .decompose import decomp_device, Unsupported, _finish, _out

_I64 = np.dtype(np.int64)


def _native(x):
    if x.dtype.kind not in "fiu":
        raise Unsupported(f"accumulation in {x.dtype}")


def _accumulate(b, x, flat_index, src):
    """``x`` (any shape) plus ``src`` (R,) summed into its flat positions ``flat_index`` (R,)."""
    rows = x.numel
    r = b.node("scatter_add", (b.reshape(src, (src.numel, 1)), flat_index), {"rows": rows, "skip": -1},
               (rows, 1), x.dtype)
    return b.ew("add", x, b.reshape(r, x.shape))


@decomp_device("scatter_add")
def _scatter_add(b, n, args, at):
    x, index, src = args
    _native(x)
    d = at["dim"] % max(len(x.shape), 1)
    shp = index.shape
    if index.numel == 0 or x.numel == 0 or len(shp) != len(x.shape):
        raise Unsupported("empty or rank-changing scatter_add")
    if tuple(src.shape) != tuple(shp):
        src = b.slice(src, (0,) * len(shp), (1,) * len(shp), shp)
    flat = None
    stride = 1
    for ax in reversed(range(len(shp))):
        coord = b.cast(index, _I64) if ax == d else b.iota(shp, ax)
        term = b.ew("mul", coord, stride) if stride != 1 else coord
        flat = term if flat is None else b.ew("add", flat, term)
        stride *= x.shape[ax]
    src = b.cast(src, x.dtype)
    return [_finish(b, n, _accumulate(b, x, b.reshape(flat, (index.numel,)), src))]


@decomp_device("index_add")
def _index_add(b, n, args, at):
    x, index, src = args
    _native(x)
    nd = len(x.shape)
    if nd == 0 or index.numel == 0 or x.numel == 0:
        raise Unsupported("0-d or empty index_add")
    d = at["dim"] % nd
    alpha = at["alpha"]
    src = b.cast(src, x.dtype)
    if alpha != 1:
        src = b.ew("mul", src, alpha, dtype=x.dtype)
    sshape = src.shape
    idx = b.reshape(b.cast(index, _I64), tuple(index.numel if ax == d else 1 for ax in range(nd)))
    flat = None
    stride = 1
    for ax in reversed(range(nd)):
        coord = b.broadcast_to(idx, sshape) if ax == d else b.iota(sshape, ax)
        term = b.ew("mul", coord, stride) if stride != 1 else coord
        flat = term if flat is None else b.ew("add", flat, term)
        stride *= x.shape[ax]
    return [_finish(b, n, _accumulate(b, x, b.reshape(flat, (src.numel,)), src))]
