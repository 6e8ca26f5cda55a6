"""Device-only decompositions of ``scatter_add``, ``index_add`` and ``scatter`` (the derivatives of
``gather``, ``index_select`` and ``sort``/``topk``) into the ``scatter_add`` primitive, and of
``scatter_reduce`` as a masked reduction.

The accumulations become ``out = x + zeros.index_add_(0, flat_index, src)`` over flattened views: the
target of each source element is computed from ``iota`` s (its coordinates) with the index tensor's
value in place of the scattered dim, so the primitive's row-wise accumulation does the rest.
``scatter`` (overwrite) keeps NumPy's rule for repeated targets, the last write wins: an element is
written only when no later element has the same target (a quadratic masked count up to
``MAX_SCATTER`` elements; longer, a stable sort of the targets, the last of each run winning), and
positions nobody writes keep ``x``. On the CPU these stay extern
(NumPy's ``add.at`` / fancy assignment are as good as generated C).
"""
from __future__ import annotations

import numpy as np

from .decompose import decomp_device, Unsupported, _finish

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


def _scatter_targets(b, x, index, d):
    """Flat positions in ``x`` of the elements of ``index`` (scattered along ``d``), shape (R,)."""
    shp = index.shape
    flat = None
    stride = 1
    for ax in reversed(range(len(shp))):
        coord = b.cast(index, _I64) if ax == d else b.iota(shp, ax)
        term = b.ew("mul", coord, stride) if stride != 1 else coord
        flat = term if flat is None else b.ew("add", flat, term)
        stride *= x.shape[ax]
    return b.reshape(flat, (index.numel,))


def _scatter_args(b, x, index, src, at):
    _native(x)
    d = at["dim"] % max(len(x.shape), 1)
    shp = index.shape
    if index.numel == 0 or x.numel == 0 or len(shp) != len(x.shape):
        raise Unsupported("empty or rank-changing scatter")
    if not hasattr(src, "shape"):
        src = b.full(src, shp, x.dtype)
    elif tuple(src.shape) != tuple(shp):
        src = b.slice(src, (0,) * len(shp), (1,) * len(shp), shp)
    return d, b.cast(src, x.dtype)


@decomp_device("scatter_add")
def _scatter_add(b, n, args, at):
    x, index, src = args
    d, src = _scatter_args(b, x, index, src, at)
    return [_finish(b, n, _accumulate(b, x, _scatter_targets(b, x, index, d), src))]


MAX_SCATTER = 4096       # longest index of an overwriting scatter done by a quadratic count


@decomp_device("scatter")
def _scatter(b, n, args, at):
    x, index, src = args
    if at.get("reduce") is not None:          # the legacy reduce: scatter_reduce's sum/prod with self
        d, src = _scatter_args(b, x, index, src, at)
        return [_finish(b, n, _reduced(b, x, index, src, d, "sum" if at["reduce"] == "add" else "prod", True))]
    d, src = _scatter_args(b, x, index, src, at)
    R = index.numel
    t = _scatter_targets(b, x, index, d)
    src = b.reshape(src, (R,))
    if R > MAX_SCATTER:
        # longer: a stable sort of the targets; the last of each run of equal targets wins
        from .decompose_sort import _order
        order = _order(b, t, 0, False)
        t = b.gather(t, order, 0)
        src = b.gather(src, order, 0)
        nxt = b.gather(t, b.ew("min", b.ew("add", b.iota((R,), 0), 1), R - 1), 0)
        wins = b.ew("or", b.ew("eq", b.iota((R,), 0), R - 1), b.ew("ne", nxt, t))
    else:
        ti, tj = b.expand(b.reshape(t, (R, 1)), (R, R)), b.expand(b.reshape(t, (1, R)), (R, R))
        later = b.ew("and", b.ew("eq", ti, tj), b.ew("gt", b.iota((R, R), 1), b.iota((R, R), 0)))
        wins = b.ew("eq", b.reduce("sum", b.where(later, 1, 0, dtype=_I64), (1,)), 0)      # (R,)
    zero = b.full(0, x.shape, x.dtype)
    vals = _accumulate(b, zero, t, b.where(wins, src, 0, dtype=x.dtype))
    hits = _accumulate(b, b.full(0, x.shape, _I64), t, b.where(wins, 1, 0, dtype=_I64))
    return [_finish(b, n, b.where(b.ew("gt", hits, 0), vals, x, dtype=x.dtype))]


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


MAX_SCATTER_REDUCE = 1 << 22     # most (target, source) pairs of a scatter_reduce compared on the device


@decomp_device("scatter_reduce")
def _scatter_reduce(b, n, args, at):
    """``scatter_reduce`` as a masked reduction: for each target position along ``dim`` and each source
    position, whether the index sends the source there (a compare over an (X, J) view: quadratic in
    the scattered dim's lengths), then sum/prod/max/min over the sources and the combination with
    ``x`` (``include_self``); ``mean`` divides by the count. Other dims of ``index`` must be ``x``'s."""
    x, index, src = args
    d, src = _scatter_args(b, x, index, src, at)
    return [_finish(b, n, _reduced(b, x, index, src, d, at["reduce"], at["include_self"]))]


def _reduced(b, x, index, src, d, red, incl):
    if red == "mean" and x.dtype.kind != "f":
        raise Unsupported("integer scatter_reduce mean (a floor division)")
    shp = index.shape
    if any(s != t for ax, (s, t) in enumerate(zip(shp, x.shape)) if ax != d):
        raise Unsupported("an index smaller than the input outside the scattered dim")
    X, J = x.shape[d], shp[d]
    wide = shp[:d] + (X, J) + shp[d + 1:]
    if int(np.prod(wide, dtype=np.int64)) > MAX_SCATTER_REDUCE:
        raise Unsupported(f"scatter_reduce comparing {X} targets with {J} sources (a quadratic mask)")

    def spread(v):
        return b.expand(b.reshape(v, shp[:d] + (1, J) + shp[d + 1:]), wide)
    hit = b.ew("eq", spread(b.cast(index, _I64)), b.iota(wide, d))
    vals = spread(src)
    count = b.reduce("sum", b.where(hit, 1, 0, dtype=_I64), (d + 1,))
    if red in ("sum", "mean"):
        r, combine = b.reduce("sum", b.where(hit, vals, 0, dtype=x.dtype), (d + 1,)), "add"
    elif red == "prod":
        r, combine = b.reduce("prod", b.where(hit, vals, 1, dtype=x.dtype), (d + 1,)), "mul"
    else:
        big = np.inf if x.dtype.kind == "f" else int(np.iinfo(x.dtype).max if red == "amin" else np.iinfo(x.dtype).min)
        fill = -big if (red == "amax" and x.dtype.kind == "f") else big
        combine = "max" if red == "amax" else "min"
        r = b.reduce(combine, b.where(hit, vals, fill, dtype=x.dtype), (d + 1,))
    has = b.ew("gt", count, 0)
    if incl:
        out = b.ew(combine, x, r, dtype=x.dtype)
        if red == "mean":
            out = b.ew("div", out, b.cast(b.ew("add", count, 1), x.dtype))
    else:
        out = b.ew("div", r, b.cast(b.ew("max", count, 1), x.dtype)) if red == "mean" else r
        out = b.where(has, out, x, dtype=x.dtype)
    return out
