"""Device-only decompositions of ``sort``, ``argsort``, ``topk``, ``kthvalue``, ``median`` and
``cummax``/``cummin`` by ranking (no sorting network).

Element i's place in the (stable) sorted order is its rank: how many elements sort before it (strictly
smaller -- larger when descending, NaN counting as the largest value -- or equal and earlier). Ranks
are one masked sum over an (L, L) view of the sorted dim; the position of rank r is another, and the
values are a gather at those positions. Quadratic work in the length of the dim, no host step: for the
lengths models sort (top-k over a vocabulary row, a few thousand) one kernel each beats a CPU round
trip. Longer dims (up to ``MAX_LONG_SORT``) are sorted in passes (``_order_long``): blocks of ``BLOCK``
ranked that way, then log2(blocks) merge levels, each a binary search per element and a scatter. On
the CPU these ops stay extern (NumPy sorts in n log n).

kthvalue and median pick a position of the sorted order (median's per slice: torch's lower median, or
the first NaN). cummax/cummin look back from each position over a window (one arg-max/min over an
(L, L) view: quadratic too).
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
    if x.numel == 0:
        raise Unsupported("sorting an empty tensor")
    if x.dtype.kind not in "fiub":
        raise Unsupported(f"sorting {x.dtype}")
    if L > MAX_SORT:
        return _order_long(b, x, ax, descending)
    lead, rest = x.shape[:ax], x.shape[ax + 1:]
    wide = lead + (L, L) + rest                      # (..., i, j, ...)
    xi = b.expand(b.reshape(x, lead + (L, 1) + rest), wide)
    xj = b.expand(b.reshape(x, lead + (1, L) + rest), wide)
    i, j = b.iota(wide, ax), b.iota(wide, ax + 1)
    rank = b.reduce("sum", b.where(_before(b, xj, xi, j, i, descending), 1, 0, dtype=_I64), (ax + 1,))
    # (..., r, i, ...): the i whose rank is r
    rk = b.expand(b.reshape(rank, lead + (1, L) + rest), wide)
    return b.reduce("sum", b.where(b.ew("eq", rk, i), j, 0, dtype=_I64), (ax + 1,))


# ---- longer dims: sorted blocks, then merges -------------------------------------------------------------

BLOCK = 64               # block length ranked directly before merging (a power of two)
MAX_LONG_SORT = 1 << 22  # longest dim sorted by merging on the device


def _kv_before(b, kj, pj, ki, pi, L, descending):
    """Whether (key ``kj``, position ``pj``) sorts before (``ki``, ``pi``): the key order, ties by
    position (stable); positions >= L are padding, after everything."""
    pad_j, pad_i = b.ew("ge", pj, L), b.ew("ge", pi, L)
    real = _before(b, kj, ki, pj, pi, descending)
    pads = b.ew("or", b.ew("and", pad_i, b.ew("not", pad_j)), b.ew("and", b.ew("and", pad_j, pad_i), b.ew("lt", pj, pi)))
    return b.where(b.ew("or", pad_j, pad_i), pads, real, dtype=np.bool_)


def _scattered(b, values, target, n):
    """``out[target[i]] = values[i]`` for a permutation ``target`` of range(n) (a scatter-add into zeros)."""
    return b.node("scatter_add", (b.reshape(values, (n, 1)), b.reshape(target, (n,))), {"rows": n, "skip": -1},
                  (n, 1), values.dtype)


def _order_long(b, x, ax, descending):
    """The sorted order along a long ``ax``: blocks of ``BLOCK`` ranked by masked sums, then merged in
    pairs (each element's place in the merged run is its place in its own run plus, by binary search,
    how many elements of the other run sort before it; positions and keys are written there by
    scatters), log2(blocks) merge levels. Keys are (value, position), so every comparison is strict and
    the sort is stable."""
    L = x.shape[ax]
    if L > MAX_LONG_SORT:
        raise Unsupported(f"sorting a dim of {L} elements on the device (up to {MAX_LONG_SORT})")
    nd = len(x.shape)
    perm = tuple(d for d in range(nd) if d != ax) + (ax,)
    xt = b.permute(x, perm) if perm != tuple(range(nd)) else x
    if xt.dtype.kind == "b":
        xt = b.cast(xt, np.uint8)
    outer = xt.shape[:-1]
    R = int(np.prod(outer, dtype=np.int64))
    x2 = b.reshape(xt, (R, L))
    nb = 1
    while nb * BLOCK < L:
        nb *= 2
    P = nb * BLOCK
    pos = b.iota((R, P), 1)
    keys = b.gather(x2, b.ew("min", pos, L - 1), 1)                     # (R, P): padded keys
    # 1. each block of BLOCK positions sorted by rank: (R, nb, i, j)
    wide = (R, nb, BLOCK, BLOCK)
    k4 = b.reshape(keys, (R, nb, BLOCK))
    ki, kj = (b.expand(b.reshape(k4, (R, nb, BLOCK, 1)), wide), b.expand(b.reshape(k4, (R, nb, 1, BLOCK)), wide))
    base = b.ew("mul", b.iota(wide, 1), BLOCK)
    gi, gj = b.ew("add", base, b.iota(wide, 2)), b.ew("add", base, b.iota(wide, 3))
    rank = b.reduce("sum", b.where(_kv_before(b, kj, gj, ki, gi, L, descending), 1, 0, dtype=_I64), (3,))
    target = b.ew("add", b.ew("mul", b.iota((R, nb, BLOCK), 0), P), b.ew("add", b.ew("mul", b.iota((R, nb, BLOCK), 1),
                                                                                          BLOCK), rank))
    cur = b.reshape(_scattered(b, b.reshape(pos, (R, nb, BLOCK)), target, R * P), (R, P))
    ckey = b.reshape(_scattered(b, k4, target, R * P), (R, P))
    # 2. merges of runs of length m into 2m
    m = BLOCK
    while m < P:
        pairs = P // (2 * m)
        shp = (R, pairs, 2 * m)
        c3, k3 = b.reshape(cur, shp), b.reshape(ckey, shp)
        at = b.iota(shp, 2)
        side = b.cast(b.ew("ge", at, m), _I64)                 # 0: first run, 1: second
        own = b.ew("sub", at, b.ew("mul", side, m))            # place in its own run
        other = b.ew("mul", b.ew("sub", 1, side), m)           # where the other run starts
        cnt = b.full(0, shp, _I64)
        bit = m
        while bit >= 1:
            cand = b.ew("add", cnt, bit)
            q = b.ew("add", other, b.ew("sub", b.ew("min", cand, m), 1))
            ok = b.ew("and", b.ew("le", cand, m),
                      _kv_before(b, b.gather(k3, q, 2), b.gather(c3, q, 2), k3, c3, L, descending))
            cnt = b.where(ok, cand, cnt, dtype=_I64)
            bit //= 2
        target = b.ew("add", b.ew("add", b.ew("mul", b.iota(shp, 0), P),
                                  b.ew("mul", b.iota(shp, 1), 2 * m)), b.ew("add", own, cnt))
        cur = b.reshape(_scattered(b, c3, target, R * P), (R, P))
        ckey = b.reshape(_scattered(b, k3, target, R * P), (R, P))
        m *= 2
    out = b.slice(cur, (0, 0), (1, 1), (R, L)) if P != L else cur
    out = b.reshape(out, outer + (L,))
    if perm != tuple(range(nd)):
        out = b.permute(out, tuple(int(i) for i in np.argsort(perm)))
    return out


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


# ---- selections by rank: kthvalue, median; running max/min ----------------------------------------------

def _picked(b, n, x, ax, pos, keepdims, outs=2):
    """The values and indices at sorted positions ``pos`` (int64, size 1 along ``ax``) of ``x``."""
    order = _order(b, x, ax, False)
    idx = b.gather(order, pos, ax)
    vals = b.gather(x, idx, ax)
    if not keepdims:
        shape = tuple(s for d, s in enumerate(idx.shape) if d != ax)
        vals, idx = b.reshape(vals, shape), b.reshape(idx, shape)
    return [_finish(b, n, vals, 0)] + ([_finish(b, n, idx, 1)] if outs == 2 else [])


def _kept(x, ax):
    return tuple(1 if d == ax else s for d, s in enumerate(x.shape))


def _selection(b, n, x, at, position):
    """kthvalue/median_dim: the values and indices at sorted position ``position(x, ax)`` along ``axis``."""
    if len(x.shape) == 0:
        raise Unsupported(f"0-d {n.op.name}")
    ax = at["axis"] % len(x.shape)
    return _picked(b, n, x, ax, position(x, ax), at["keepdims"])


@decomp_device("kthvalue")
def _kthvalue(b, n, args, at):
    return _selection(b, n, args[0], at, lambda x, ax: b.full(at["k"] - 1, _kept(x, ax), _I64))


def _median_pos(b, x, ax, ignore_nan):
    """torch's lower-median position in the stable sorted order (NaN last), per slice (size 1 at ``ax``)."""
    L = x.shape[ax]
    if x.dtype.kind != "f":
        return b.full((L - 1) // 2, _kept(x, ax), _I64)
    nans = b.reduce("sum", b.cast(b.ew("isnan", x), _I64), (ax,), keepdims=True)
    if ignore_nan:
        valid = b.ew("sub", L, nans)
        return b.where(b.ew("gt", valid, 0), _floordiv2(b, b.ew("sub", valid, 1)), 0, dtype=_I64)
    return b.where(b.ew("gt", nans, 0), b.ew("sub", L, nans), (L - 1) // 2, dtype=_I64)


def _floordiv2(b, v):
    """v // 2 for a non-negative int64 node."""
    h = b.cast(b.ew("floor", b.ew("mul", b.cast(v, np.float32), 0.5)), _I64)
    return b.ew("sub", h, b.cast(b.ew("gt", b.ew("mul", h, 2), v), _I64))


@decomp_device("median_dim")
def _median_dim(b, n, args, at):
    return _selection(b, n, args[0], at, lambda x, ax: _median_pos(b, x, ax, at.get("ignore_nan", False)))


@decomp_device("median")
def _median_all(b, n, args, at):
    x = args[0]
    if x.numel == 0:
        raise Unsupported("median of an empty tensor")
    flat = b.reshape(x, (x.numel,))
    return _picked(b, n, flat, 0, _median_pos(b, flat, 0, at.get("ignore_nan", False)), False, outs=1)


def _running(b, n, x, largest):
    """cummax/cummin: for output i, the window x[i - m] (m = 0..L-1; m > i filled with the value that
    never wins); the first arg-max/min over m is the LATEST position holding the running value (torch
    moves the index to ties and NaNs), and the value is a gather there."""
    nd = len(x.shape)
    if nd == 0:
        raise Unsupported("0-d cummax")
    ax = n.attrs["axis"] % nd
    L = x.shape[ax]
    if x.numel == 0 or L > MAX_SORT:
        raise Unsupported(f"cummax/cummin over {L} elements on the device (up to {MAX_SORT})")
    key = b.cast(x, np.uint8) if x.dtype.kind == "b" else x
    if key.dtype.kind == "f":
        fill = -np.inf if largest else np.inf
    elif key.dtype.kind in "iu":
        info = np.iinfo(key.dtype)
        fill = int(info.min if largest else info.max)
    else:
        raise Unsupported(f"cummax/cummin of {x.dtype}")
    lead, rest = x.shape[:ax], x.shape[ax + 1:]
    wide = lead + (L, L) + rest                              # (..., i, m, ...)
    src = b.ew("sub", b.iota(wide, ax), b.iota(wide, ax + 1))
    ok = b.ew("ge", src, 0)
    flat = lead + (L * L,) + rest
    vals = b.gather(key, b.reshape(b.ew("max", src, 0), flat), ax)
    win = b.where(ok, b.reshape(vals, wide), fill, dtype=key.dtype)
    m = b.reduce("argmax" if largest else "argmin", win, (ax + 1,))
    idx = b.ew("sub", b.iota(m.shape, ax), m)
    return [_finish(b, n, b.gather(x, idx, ax), 0), _finish(b, n, idx, 1)]


@decomp_device("cummax")
def _cummax(b, n, args, at):
    return _running(b, n, args[0], True)


@decomp_device("cummin")
def _cummin(b, n, args, at):
    return _running(b, n, args[0], False)
