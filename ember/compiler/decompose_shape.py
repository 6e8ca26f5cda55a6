"""Decompositions of ember's shape and indexing ops into primitives: views (view, permute, expand,
basic slicing), copies and casts, flip, repeat, tril/triu, masked_fill, copy_/fill_/zero_, cat,
constant padding, gather/index_select, and advanced indexing (index, index_put).

Each function mirrors its op's NumPy kernel step by step (same compute dtype, same order of
operations), so native results match eager to rounding. A function raises ``Unsupported`` for
instances it does not handle; the op then runs as an extern call.
"""
from __future__ import annotations

import math

import numpy as np

from . import prims as P
from .symbolic import SymInt
from .decompose import decomp, Unsupported, _out, _finish
from .prims import PNode


# ---- shapes and views --------------------------------------------------------------------------------------

@decomp("view", "reshape_copy")
def _view(b, n, args, at):
    return [b.reshape(args[0], n.outputs[0].shape)]


@decomp("permute")
def _permute(b, n, args, at):
    return [b.permute(args[0], at["axes"])]


@decomp("expand")
def _expand(b, n, args, at):
    return [b.expand(args[0], n.outputs[0].shape)]


@decomp("clone", "contiguous")
def _clone(b, n, args, at):
    # a copy (NumPy's contiguous also copies what is not contiguous; contiguous inputs never reach here
    # as write targets: see decompose.ALIAS_UNSUPPORTED)
    x = args[0]
    return [b.node("copy", (x,), {}, x.shape, x.dtype)]


@decomp("to_dtype")
def _to_dtype(b, n, args, at):
    x = args[0]
    dt = np.dtype(at["dt"])
    if dt == x.dtype:
        return [b.node("copy", (x,), {}, x.shape, x.dtype)]     # astype copies
    return [b.cast(x, dt)]


def _slice_span(k: slice, n):
    """(start, step, length) of slice ``k`` over a dimension of size ``n``; with symbolic sizes (SymInt)
    the start and length stay expressions (a positive step; the clamping decisions become guards)."""
    if not any(type(v) is SymInt for v in (k.start, k.stop, n)) or (k.step is not None and k.step <= 0):
        s, e, st = k.indices(n)
        return s, st, len(range(s, e, st))
    st = 1 if k.step is None else int(k.step)

    def clamp(v, default):
        if v is None:
            return default
        if v < 0:
            v = v + n
            return 0 if v < 0 else v
        return n if v > n else v
    s, e = clamp(k.start, 0), clamp(k.stop, n)
    return s, st, ((e - s + st - 1) // st if e > s else 0)


def _basic_key(shape, key):
    """(starts, steps, lengths) over ``shape`` of a basic index (ints, slices, None, Ellipsis)."""
    if not isinstance(key, tuple):
        key = (key,)
    nd = len(shape)
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if any(k is Ellipsis for k in key):
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (nd - consumed) + key[i + 1:]
    key = key + (slice(None),) * (nd - sum(1 for k in key if k is not None))
    starts, steps, lens = [], [], []
    d = 0
    for k in key:
        if k is None:
            continue
        n_d = shape[d]
        if isinstance(k, slice):
            s, st, ln = _slice_span(k, n_d)
            starts.append(s); steps.append(st); lens.append(ln)
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            i = (k if type(k) is SymInt else int(k)) + (n_d if k < 0 else 0)
            starts.append(i); steps.append(1); lens.append(1)
        else:
            raise Unsupported(f"index of type {type(k).__name__}")
        d += 1
    return starts, steps, lens


@decomp("getitem_basic")
def _getitem(b, n, args, at):
    x = args[0]
    starts, steps, lens = _basic_key(x.shape, at["key"])
    r = b.slice(x, starts, steps, lens)
    return [b.reshape(r, n.outputs[0].shape)]


@decomp("slice_backward")
def _slice_backward(b, n, args, at):
    # zeros of the input's shape with g written into the sliced region: a fresh buffer and two writes
    from .decompose import _write
    g = args[0]
    if not isinstance(g, PNode):
        raise Unsupported("slice_backward of a scalar")
    shape, dt = tuple(at["in_shape"]), g.dtype           # the kernel keeps g's dtype
    if not P.native_dtype(dt):
        raise Unsupported("slice_backward dtype")
    starts, steps, lens = _basic_key(shape, at["key"])
    buf = b.buffer("temp", shape, dt)
    _write(b, b.load(buf), b.full(0, shape, dt))
    region = b.slice(b.load(buf), starts, steps, lens)
    _write(b, region, b.reshape(b.cast(g, dt), tuple(lens)))
    return [b.load(buf)]


@decomp("flip")
def _flip(b, n, args, at):
    x = args[0]
    axes = {int(a) % len(x.shape) for a in at["axes"]} if x.shape else set()
    starts = [x.shape[d] - 1 if d in axes else 0 for d in range(len(x.shape))]
    steps = [-1 if d in axes else 1 for d in range(len(x.shape))]
    return [b.slice(x, starts, steps, x.shape)]


@decomp("repeat")
def _repeat(b, n, args, at):
    x = args[0]
    reps = tuple(at["reps"])
    shp = (1,) * (len(reps) - len(x.shape)) + x.shape
    x = b.reshape(x, shp)
    # (r0, s0, r1, s1, ...) broadcast then merged: out[i] = x[i % s]
    inter = []
    for r, s in zip(reps, shp):
        inter += [r, s]
    e = b.expand(b.reshape(x, tuple(v for s in shp for v in (1, s))), tuple(inter))
    return [b.reshape(e, n.outputs[0].shape)]


@decomp("tril", "triu")
def _tri(b, n, args, at):
    x, k = args[0], at["k"]
    if len(x.shape) < 2:
        raise Unsupported("tril/triu of < 2-D")
    nd = len(x.shape)
    i = b.iota(x.shape, nd - 2)
    j = b.iota(x.shape, nd - 1)
    diff = b.ew("sub", j, i)
    keep = b.ew("le", diff, k) if n.op.name == "tril" else b.ew("ge", diff, k)
    zero = False if x.dtype.kind == "b" else 0
    return [_finish(b, n, b.where(keep, x, zero, dtype=x.dtype))]


@decomp("masked_fill")
def _masked_fill(b, n, args, at):
    x, mask = args[0], args[1]
    value = args[2] if len(args) > 2 else at.get("value")
    value = at.get("value", value)
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise Unsupported("masked_fill with an array value")
        value = value.reshape(-1)[0].item()
    return [_finish(b, n, b.where(mask, value, x, dtype=x.dtype))]


@decomp("copy_")
def _copy(b, n, args, at):
    dst, src = args
    dt = np.dtype(at["dt"])
    if not isinstance(src, PNode):
        return [b.full(src, dst.shape, dt)]
    return [b.broadcast_to(b.cast(src, dt), dst.shape)]


@decomp("fill_")
def _fill(b, n, args, at):
    dst, value = args[0], args[1] if len(args) > 1 else at["value"]
    value = at.get("value", value)
    dt = np.dtype(at["dt"])
    if isinstance(value, PNode):
        return [b.broadcast_to(b.reshape(b.cast(value, dt), (1,) * len(dst.shape)) if value.shape == () else
                               b.cast(value, dt), dst.shape)]
    return [b.full(value, dst.shape, dt)]


@decomp("zero_")
def _zero(b, n, args, at):
    return [b.full(0, args[0].shape, args[0].dtype)]


@decomp("cat")
def _cat(b, n, args, at):
    # concatenation as a select over index ranges: out[..., i, ...] = x_k[..., i - start_k, ...]
    axis, dt, keep = at["axis"], np.dtype(at["dt"]), at["keep"]
    xs = [b.cast(args[i], dt) for i in keep]
    shape, _ = _out(n)
    if not xs:
        raise Unsupported("empty cat")
    if len(xs) > 8:
        raise Unsupported("cat of more than 8 tensors")
    iota = b.iota(shape, axis)
    r = None
    start = 0
    parts = []
    for x in xs:
        ln = x.shape[axis]
        # read x through a clamped index so the unselected branches stay in bounds
        idx = b.ew("min", b.ew("max", b.ew("sub", iota, start), 0), max(ln - 1, 0))
        full_idx = idx
        parts.append((start, ln, b.gather(x, full_idx, axis) if ln else None))
        start += ln
    for start, ln, val in reversed(parts):
        if val is None:
            continue
        if r is None:
            r = val
        else:
            r = b.where(b.ew("lt", iota, start + ln), val, r, dtype=dt)
    return [_finish(b, n, r)]


@decomp("constant_pad_nd")
def _pad(b, n, args, at):
    # out[i] = x[i - before] where 0 <= i - before < n along every padded dim, else value
    x = args[0]
    pairs, value = at["pads"], at["value"]
    shape, dt = _out(n)
    nd = len(shape)
    inside = None
    cur = x
    for d, (lo, hi) in enumerate(pairs):
        if lo == 0 and hi == 0:
            continue
        if x.shape[d] == 0:
            raise Unsupported("padding an empty dim")
        tgt = tuple(shape[i] if i == d else cur.shape[i] for i in range(nd))
        io = b.iota(tgt, d)
        src = b.ew("sub", io, lo)
        if lo > 0 or hi > 0:
            full_io = b.iota(shape, d)
            fs = b.ew("sub", full_io, lo)
            ok = b.ew("and", b.ew("ge", fs, 0), b.ew("lt", fs, x.shape[d]))
            inside = ok if inside is None else b.ew("and", inside, ok)
        ci = b.ew("min", b.ew("max", src, 0), x.shape[d] - 1)
        cur = b.gather(cur, ci, d)
    r = cur if inside is None else b.where(inside, cur, value, dtype=dt)
    return [_finish(b, n, r)]


@decomp("gather")
def _gather(b, n, args, at):
    x, index = args[0], args[1]
    dim = at["dim"]
    if not isinstance(index, PNode) or len(x.shape) != len(index.shape):
        raise Unsupported("gather index")
    if any(index.shape[d] > x.shape[d] for d in range(len(x.shape)) if d != dim):
        raise Unsupported("gather index larger than input")
    xs = x
    if index.shape != x.shape:
        # out[i][j] = x[index[i][j]][j]: x is read at the index's positions in the other dims
        xs = b.slice(x, [0] * len(x.shape), [1] * len(x.shape),
                     [x.shape[d] if d == dim else index.shape[d] for d in range(len(x.shape))])
    idx = b.where(b.ew("lt", index, 0), b.ew("add", index, x.shape[dim]), index, dtype=np.int64)
    return [_finish(b, n, b.gather(xs, idx, dim, error=(IndexError, "index {} is out of bounds for dimension "
                                                         f"{dim} with size {x.shape[dim]}")))]


@decomp("index_select")
def _index_select(b, n, args, at):
    x, index = args[0], args[1]
    dim = at["dim"]
    shape, dt = _out(n)
    if not isinstance(index, PNode) or len(index.shape) > 1:
        raise Unsupported("index_select index")
    if len(x.shape) == 0:
        raise Unsupported("index_select of a scalar")
    idx = b.reshape(index, (index.numel,))
    full = [1] * len(shape)
    full[dim] = idx.numel
    ie = b.expand(b.reshape(idx, tuple(full)), shape)
    xs = b.slice(x, [0] * len(x.shape), [1] * len(x.shape), [x.shape[d] if d == dim else shape[d]
                                                           for d in range(len(x.shape))])
    ie = b.where(b.ew("lt", ie, 0), b.ew("add", ie, x.shape[dim]), ie, dtype=np.int64)
    return [_finish(b, n, b.gather(xs, ie, dim, error=(IndexError, "index out of range in self")))]


# ---- advanced indexing (integer index tensors at adjacent positions) ---------------------------------------

def _adv_linear(b, shp, idx, pos):
    """(the advanced dims merged: linear index over them, flattened to 1-D, with -1 where a component is out
    of range (so the gather's / scatter's bound check raises), the broadcast index shape, their size)."""
    if not idx or any(i.dtype == np.bool_ for i in idx):
        raise Unsupported("a boolean mask index")
    if list(pos) != list(range(pos[0], pos[0] + len(pos))):
        raise Unsupported("advanced indices at non-adjacent positions")
    bshape = tuple(P.broadcast_shapes(*[i.shape for i in idx]))
    lin, valid, stride = None, None, 1
    for p, i in reversed(list(zip(pos, idx))):
        size = shp[p]
        ii = b.cast(i, np.int64)
        ii = b.where(b.ew("lt", ii, 0), b.ew("add", ii, size), ii)          # negative indices count from the end
        ok = b.ew("and", b.ew("ge", ii, 0), b.ew("lt", ii, size))
        term = b.ew("mul", ii, stride) if stride != 1 else ii
        lin = term if lin is None else b.ew("add", lin, term)
        valid = ok if valid is None else b.ew("and", valid, ok)
        stride *= size
    lin = b.broadcast_to(lin, bshape)
    if len(idx) > 1:
        lin = b.where(b.broadcast_to(valid, bshape), lin, -1)
    m = math.prod(bshape)
    return b.reshape(lin, (m,)), bshape, stride


def _adv_layout(b, shp, idx, pos):
    """``_adv_linear`` plus the dims before and after the indexed ones: (lin, bshape, size, pre, post)."""
    lin, bshape, a = _adv_linear(b, shp, idx, pos)
    if lin.shape[0] == 0 or 0 in shp:
        raise Unsupported("an empty index or input")
    return lin, bshape, a, shp[:pos[0]], shp[pos[0] + len(pos):]


@decomp("index")
def _index(b, n, args, at):
    x, idx, pos = args[0], list(args[1:]), tuple(at["pos"])
    shp = x.shape
    lin, bshape, a, pre, post = _adv_layout(b, shp, idx, pos)
    p0, k, m = pos[0], len(pos), lin.shape[0]
    xr = b.reshape(x, pre + (a,) + post)
    ishape = pre + (m,) + post
    ii = b.expand(b.reshape(lin, (1,) * len(pre) + (m,) + (1,) * len(post)), ishape)
    msg = f"index {{}} is out of bounds for dimension {p0} with size {shp[p0]}" if k == 1 else \
        "index {} is out of bounds for the indexed dimensions"
    r = b.gather(xr, ii, len(pre), error=(IndexError, msg))
    return [_finish(b, n, b.reshape(r, pre + bshape + post))]


@decomp("index_put")
def _index_put(b, n, args, at):
    """``x[idx] += v`` (accumulate=True, the backward of ``index``): a scatter-add of the rows of ``v``."""
    if not at.get("accumulate"):
        raise Unsupported("index_put without accumulate (the last duplicate wins)")
    x, v, idx, pos = args[0], args[1], list(args[2:]), tuple(at["pos"])
    if not isinstance(v, PNode):
        raise Unsupported("a Python value")
    shp = x.shape
    lin, bshape, a, pre, post = _adv_layout(b, shp, idx, pos)
    m = lin.shape[0]
    npre, npost = math.prod(pre), math.prod(post)
    vv = b.reshape(b.broadcast_to(b.cast(v, x.dtype), pre + bshape + post), (npre, m, npost))
    rows = b.reshape(b.permute(vv, (1, 0, 2)), (m, npre * npost))
    s = b.node("scatter_add", (rows, lin), {"rows": a, "skip": -1}, (a, npre * npost), x.dtype)
    s = b.reshape(b.permute(b.reshape(s, (a, npre, npost)), (1, 0, 2)), shp)
    return [_finish(b, n, b.ew("add", x, s))]
