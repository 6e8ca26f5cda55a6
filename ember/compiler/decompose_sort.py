"""Device-only decompositions of ``sort``, ``argsort`` and ``topk`` by ranking (no sorting network).

Element i's place in the (stable) sorted order is its rank: how many elements sort before it (strictly
smaller -- larger when descending, NaN counting as the largest value -- or equal and earlier). Ranks
are one masked sum over an (L, L) view of the sorted dim; the position of rank r is another, and the
values are a gather at those positions. Quadratic work in the length of the dim, no host step: for the
lengths models sort (top-k over a vocabulary row, a few thousand) one kernel each beats a CPU round
trip. Longer dims stay CPU fallbacks; on the CPU these ops stay extern (NumPy sorts in n log n).
"""
from __future__ import annotations

import numpy as np

from .decompose import decomp_device, Unsupported, _finish

MAX_SORT = 2048          # longest sorted dim ranked on the device

_I64 = np.dtype(np.int64)


def _before(b, xj, xi, j, i, descending):
    """Whether x[j] sorts before x[i] (stable; NaN is the largest value, as in torch)."""
    if xi.dtype.kind == "f":
        nj, ni = b.ew("isnan", xj), b.ew("isnan", xi)
        if descending:
            strict = b.ew("or", b.ew("gt", xj, xi), b.ew("and", nj, b.ew("not", ni)))
        else:
            strict = b.ew("or", b.ew("lt", xj, xi), b.ew("and", ni, b.ew("not", nj)))
        equal = b.ew("or", b.ew("eq", xj, xi), b.ew("and", nj, ni))
    else:
        strict = b.ew("gt" if descending else "lt", xj, xi)
        equal = b.ew("eq", xj, xi)
    return b.ew("or", strict, b.ew("and", equal, b.ew("lt", j, i)))


def _order(b, x, ax, descending):
    """int64 positions (along ``ax``) of the sorted order of ``x``."""
    L = x.shape[ax]
    if x.numel == 0 or L > MAX_SORT:
        raise Unsupported(f"sorting a dim of {L} elements on the device (ranked up to {MAX_SORT})")
    if x.dtype.kind not in "fiub":
        raise Unsupported(f"sorting {x.dtype}")
    lead, rest = x.shape[:ax], x.shape[ax + 1:]
    wide = lead + (L, L) + rest                      # (..., i, j, ...)
    xi = b.expand(b.reshape(x, lead + (L, 1) + rest), wide)
    xj = b.expand(b.reshape(x, lead + (1, L) + rest), wide)
    i, j = b.iota(wide, ax), b.iota(wide, ax + 1)
    rank = b.reduce("sum", b.where(_before(b, xj, xi, j, i, descending), 1, 0, dtype=_I64), (ax + 1,))
    # (..., r, i, ...): the i whose rank is r
    rk = b.expand(b.reshape(rank, lead + (1, L) + rest), wide)
    return b.reduce("sum", b.where(b.ew("eq", rk, i), j, 0, dtype=_I64), (ax + 1,))


def _sorted(b, n, x, ax, descending, k=None):
    if len(x.shape) == 0:
        raise Unsupported("0-d sort")
    ax %= len(x.shape)
    idx = _order(b, x, ax, descending)
    if k is not None and k != x.shape[ax]:
        shape = tuple(k if d == ax else s for d, s in enumerate(x.shape))
        idx = b.slice(idx, (0,) * len(shape), (1,) * len(shape), shape)
    return b.gather(x, idx, ax), idx


@decomp_device("sort")
def _sort(b, n, args, at):
    vals, idx = _sorted(b, n, args[0], at["axis"], at.get("descending", False))
    return [_finish(b, n, vals, 0), _finish(b, n, idx, 1)]


@decomp_device("topk")
def _topk(b, n, args, at):
    vals, idx = _sorted(b, n, args[0], at["axis"], at.get("largest", True), at["k"])
    return [_finish(b, n, vals, 0), _finish(b, n, idx, 1)]


@decomp_device("argsort")
def _argsort(b, n, args, at):
    _, idx = _sorted(b, n, args[0], at["axis"], at.get("descending", False))
    return [_finish(b, n, idx)]
