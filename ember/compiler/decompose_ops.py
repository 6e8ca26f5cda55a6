"""Decompositions of ember's core ops (ember/ops/*) into primitives.

Each function mirrors its op's NumPy kernel step by step (same compute dtype, same order of
operations), so native results match eager to rounding. A function raises ``Unsupported`` for
instances it does not handle; the op then runs as an extern call.
"""
from __future__ import annotations

import math

import numpy as np

from . import prims as P
from .decompose import decomp, Unsupported, Builder, _npdt
from .prims import PNode


def _out(n, i=0):
    v = n.outputs[i]
    return tuple(v.shape), _npdt(v.dtype)


def _finish(b: Builder, n, r: PNode, i=0) -> PNode:
    shape, dt = _out(n, i)
    r = b.cast(r, dt)
    if r.shape != shape:
        r = b.broadcast_to(r, shape) if r.numel != int(np.prod(shape, dtype=np.int64)) else b.reshape(r, shape)
    return r


def _work(args, dt=None):
    """The compute dtype of an elementwise kernel: its ``dt`` attribute, else NumPy's promotion."""
    if dt is not None:
        return np.dtype(dt)
    ts = [a.dtype for a in args if isinstance(a, PNode)]
    sc = [a for a in args if not isinstance(a, PNode) and a is not None and not isinstance(a, bool)]
    if not ts:
        raise Unsupported("no tensor operand")
    return np.result_type(*ts, *sc)


def _scalar_ok(*xs):
    for x in xs:
        if not isinstance(x, (PNode, int, float, bool, np.number, np.bool_)):
            raise Unsupported(f"operand of type {type(x).__name__}")


# ---- arithmetic ------------------------------------------------------------------------------------------

def _binary(prim):
    def d(b, n, args, at):
        x, y = args[0], args[1]
        _scalar_ok(x, y)
        w = _work((x, y), at.get("dt"))
        alpha = at.get("alpha", 1)
        if alpha != 1:
            y = b.ew("mul", y, alpha, dtype=w) if isinstance(y, PNode) else w.type(y) * w.type(alpha)
        if prim == "div" and w.kind in "iub":
            w = _npdt(n.outputs[0].dtype)
        if prim == "sub" and w.kind == "b":
            raise Unsupported("bool subtraction")
        return [_finish(b, n, b.ew(prim, x, y, dtype=w))]
    return d


for _name, _prim in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("div", "div"), ("maximum", "max"),
                     ("minimum", "min"), ("fmax", "fmax"), ("fmin", "fmin"), ("atan2", "atan2"),
                     ("hypot", "hypot"), ("copysign", "copysign"), ("nextafter", "nextafter"),
                     ("eq", "eq"), ("ne", "ne"), ("lt", "lt"), ("le", "le"), ("gt", "gt"), ("ge", "ge"),
                     ("bitwise_and", "bitand"), ("bitwise_or", "bitor"), ("bitwise_xor", "bitxor"),
                     ("pow", "pow"), ("pow_tensor_scalar", "pow"), ("pow_scalar_tensor", "pow")):
    decomp(_name)(_binary(_prim))


@decomp("fmod", "remainder")
def _fmod(b, n, args, at):
    x, y = args[0], args[1]
    w = _work((x, y), at.get("dt"))
    if w.kind != "f":
        raise Unsupported("integer fmod/remainder (division by zero must raise)")
    prim = "fmod" if n.op.name == "fmod" else "remainder"
    return [_finish(b, n, b.ew(prim, x, y, dtype=w))]


@decomp("xlogy")
def _xlogy(b, n, args, at):
    x, y = args[0], args[1]
    w = _work((x, y), at.get("dt"))
    if w.kind != "f":
        raise Unsupported("xlogy of integers")
    xlog = b.ew("mul", x, b.ew("log", y, dtype=w) if isinstance(y, PNode) else math.log(y) if y > 0 else
                (float("-inf") if y == 0 else float("nan")), dtype=w)
    if not isinstance(x, PNode):
        x = b.full(x, xlog.shape, w)
    if not isinstance(y, PNode):
        y = b.full(y, xlog.shape, w)
    r = b.where(b.ew("isnan", y), float("nan"), b.where(b.ew("eq", x, 0, dtype=w), 0.0, xlog, dtype=w), dtype=w)
    return [_finish(b, n, r)]


@decomp("neg")
def _neg(b, n, args, at):
    x = args[0]
    if x.dtype.kind == "b":
        raise Unsupported("negation of bool")
    return [_finish(b, n, b.ew("neg", x))]


def _unary(prim, via_float=True):
    def d(b, n, args, at):
        x = args[0]
        w = _npdt(n.outputs[0].dtype) if via_float else x.dtype
        if at:
            raise Unsupported(f"{n.op.name} with attributes {sorted(at)}")
        return [_finish(b, n, b.ew(prim, b.cast(x, w), dtype=w))]
    return d


for _name in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
              "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "erf",
              "erfc", "lgamma"):
    decomp(_name)(_unary(_name))
for _name in ("abs", "floor", "ceil", "trunc"):
    decomp(_name)(_unary(_name, via_float=False))


@decomp("bitwise_not")
def _bitnot(b, n, args, at):
    return [_finish(b, n, b.ew("bitnot", args[0]))]


@decomp("logical_not")
def _lnot(b, n, args, at):
    return [_finish(b, n, b.ew("not", args[0]))]


@decomp("logical_and", "logical_or", "logical_xor")
def _logical(b, n, args, at):
    prim = n.op.name.split("_")[1]
    x, y = args
    bx = b.ew("ne", x, 0) if isinstance(x, PNode) else bool(x)
    by = b.ew("ne", y, 0) if isinstance(y, PNode) else bool(y)
    if not isinstance(bx, PNode):
        bx, by = by, bx
    return [_finish(b, n, b.ew(prim, bx, by, dtype=np.bool_))]


@decomp("round")
def _round(b, n, args, at):
    x = args[0]
    dec = at.get("decimals", 0)
    if x.dtype.kind != "f":
        return [_finish(b, n, x)]
    if dec == 0:
        return [_finish(b, n, b.ew("round", x))]
    if dec > 0:
        p = 10.0 ** dec
        return [_finish(b, n, b.ew("div", b.ew("round", b.ew("mul", x, p)), p))]
    p = 10.0 ** -dec
    return [_finish(b, n, b.ew("mul", b.ew("round", b.ew("div", x, p)), p))]


@decomp("deg2rad", "rad2deg")
def _deg(b, n, args, at):
    x = args[0]
    d2r = math.pi / 180.0
    k = d2r if n.op.name == "deg2rad" else 1.0 / d2r
    if x.dtype.kind != "f":
        raise Unsupported("integer input")
    return [_finish(b, n, b.ew("mul", x, k))]


@decomp("square")
def _square(b, n, args, at):
    x = args[0]
    return [_finish(b, n, b.ew("mul", x, x))]


@decomp("sign")
def _sign(b, n, args, at):
    return [_finish(b, n, b.ew("sign", args[0]))]


@decomp("signbit")
def _signbit(b, n, args, at):
    return [_finish(b, n, b.ew("signbit", args[0]))]


@decomp("frac")
def _frac(b, n, args, at):
    x = args[0]
    return [_finish(b, n, b.ew("sub", x, b.ew("trunc", x)))]


@decomp("relu")
def _relu(b, n, args, at):
    x = args[0]
    if x.dtype.kind == "b":
        raise Unsupported("relu of bool")
    return [_finish(b, n, b.ew("max", b.full(0, x.shape, x.dtype), x))]


@decomp("isnan", "isinf", "isfinite")
def _classify(b, n, args, at):
    return [_finish(b, n, b.ew(n.op.name, args[0]))]


@decomp("isposinf", "isneginf")
def _posinf(b, n, args, at):
    x = args[0]
    if x.dtype.kind != "f":
        return [_finish(b, n, b.full(False, x.shape, np.bool_))]
    v = float("inf") if n.op.name == "isposinf" else float("-inf")
    return [_finish(b, n, b.ew("eq", x, v))]


@decomp("isreal")
def _isreal(b, n, args, at):
    return [_finish(b, n, b.full(True, args[0].shape, np.bool_))]


@decomp("nan_to_num")
def _nan_to_num(b, n, args, at):
    x = args[0]
    if x.dtype.kind != "f":
        return [_finish(b, n, x)]
    r = b.where(b.ew("isnan", x), at["nan"], x, dtype=x.dtype)
    r = b.where(b.ew("eq", x, float("inf")), at["posinf"], r, dtype=x.dtype)
    r = b.where(b.ew("eq", x, float("-inf")), at["neginf"], r, dtype=x.dtype)
    return [_finish(b, n, r)]


@decomp("clamp")
def _clamp(b, n, args, at):
    x, lo, hi = args[0], args[1], args[2]
    w = _work((x,), at.get("dt"))
    r = b.cast(x, w)
    if lo is not None:
        r = b.ew("max", r, lo, dtype=w)
    if hi is not None:
        r = b.ew("min", r, hi, dtype=w)
    return [_finish(b, n, r)]


def _mask(b, x, lo, hi, mode):
    if mode == "self":
        m = None
        if lo is not None:
            m = b.ew("ge", x, lo)
        if hi is not None:
            h = b.ew("le", x, hi)
            m = h if m is None else b.ew("and", m, h)
        return m if m is not None else b.full(True, x.shape, np.bool_)
    if mode == "min":
        m = b.ew("lt", x, lo)
        return m if hi is None else b.ew("and", m, b.ew("lt", lo, hi) if isinstance(lo, PNode) else b.ew("gt", hi, lo))
    if mode == "max":
        m = b.ew("gt", x, hi)
        return m if lo is None else b.ew("or", m, b.ew("lt", hi, lo) if isinstance(hi, PNode) else b.ew("gt", lo, hi))
    if mode == "in":
        return b.ew("not", b.ew("or", b.ew("lt", x, lo), b.ew("gt", x, hi)))
    if mode == "pos":
        return b.ew("not", b.ew("le", x, 0))
    if mode == "finite":
        return b.ew("isfinite", x)
    if mode == "nonzero":
        return b.ew("ne", x, 0)
    if mode == "abs_gt":
        return b.ew("gt", b.ew("abs", x), lo)
    raise Unsupported(f"mask mode {mode}")


@decomp("where_mask")
def _where_mask(b, n, args, at):
    v, x, lo, hi = args[:4]
    m = _mask(b, x, lo, hi, at["mode"])
    return [_finish(b, n, b.where(m, v, at.get("fill", 0.0), dtype=v.dtype))]


@decomp("where")
def _where(b, n, args, at):
    c, x, y = args
    w = np.dtype(at["dt"]) if at.get("dt") is not None else _npdt(n.outputs[0].dtype)
    return [_finish(b, n, b.where(c, x, y, dtype=w))]


@decomp("lerp")
def _lerp(b, n, args, at):
    a, e, w = args
    if a.dtype.kind != "f" or not P.native_dtype(a.dtype):
        raise Unsupported("lerp dtype")
    diff = b.ew("sub", e, a)
    if isinstance(w, PNode):
        lo = b.ew("add", a, b.ew("mul", w, diff))
        hi = b.ew("sub", e, b.ew("mul", diff, b.ew("sub", 1, w, dtype=w.dtype)))
        r = b.where(b.ew("lt", b.ew("abs", w), 0.5), lo, hi)
    else:
        if abs(w) < 0.5:
            r = b.ew("add", a, b.ew("mul", diff, w))
        else:
            r = b.ew("sub", e, b.ew("mul", diff, 1 - w))
    return [_finish(b, n, r)]


@decomp("addcmul", "addcdiv")
def _addc(b, n, args, at):
    a, t1, t2 = args
    w = _work((a,), at.get("dt"))
    a, t1, t2 = b.cast(a, w), b.cast(t1, w), b.cast(t2, w)
    prim = "mul" if n.op.name == "addcmul" else "div"
    v = at["value"]
    scaled = b.ew("mul", t1, v, dtype=w)
    return [_finish(b, n, b.ew("add", a, b.ew(prim, scaled, t2, dtype=w), dtype=w))]


@decomp("logit")
def _logit(b, n, args, at):
    x = args[0]
    if x.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise Unsupported("logit dtype")
    eps = at.get("eps")
    if eps is not None:
        x = b.ew("min", b.ew("max", x, eps), 1.0 - eps)
    return [_finish(b, n, b.ew("log", b.ew("div", x, b.ew("sub", 1.0, x, dtype=x.dtype))))]


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
            s, e, st = k.indices(n_d)
            starts.append(s); steps.append(st); lens.append(len(range(s, e, st)))
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            i = int(k) + (n_d if k < 0 else 0)
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


# ---- reductions ----------------------------------------------------------------------------------------------

def _axes(x, axis):
    if axis is None:
        return tuple(range(len(x.shape)))
    if isinstance(axis, (int, np.integer)):
        return (int(axis) % max(len(x.shape), 1),) if x.shape else ()
    return tuple(int(a) % len(x.shape) for a in axis) if x.shape else ()


@decomp("sum", "nansum")
def _sum(b, n, args, at):
    x = args[0]
    dt = at.get("dtype")
    if dt is None and x.dtype.kind in "biu":
        dt = np.int64
    if x.dtype.kind == "f" and not P.native_dtype(x.dtype):
        raise Unsupported("sum of half floats")
    if n.op.name == "nansum" and x.dtype.kind == "f":
        x = b.where(b.ew("isnan", x), 0, x, dtype=x.dtype)
    return [_finish(b, n, b.reduce("sum", x, _axes(x, at["axis"]), at["keepdims"], dt))]


@decomp("mean")
def _mean(b, n, args, at):
    x = args[0]
    dt = at.get("dtype")
    if dt is not None:
        x = b.cast(x, dt)
    if x.dtype.kind != "f":
        raise Unsupported("mean of integers")
    axes = _axes(x, at["axis"])
    cnt = 1
    for a in axes:
        cnt *= x.shape[a]
    s = b.reduce("sum", x, axes, at["keepdims"])
    return [_finish(b, n, b.ew("div", s, cnt, dtype=x.dtype))]


@decomp("prod")
def _prod(b, n, args, at):
    x = args[0]
    dt = at.get("dtype")
    if dt is None and x.dtype.kind in "biu":
        dt = np.int64
    return [_finish(b, n, b.reduce("prod", x, _axes(x, at["axis"]), at["keepdims"], dt))]


@decomp("amax", "amin")
def _amax(b, n, args, at):
    x = args[0]
    axes = _axes(x, at["axis"])
    if any(x.shape[a] == 0 for a in axes):
        raise Unsupported("max of an empty dim")
    return [_finish(b, n, b.reduce("max" if n.op.name == "amax" else "min", x, axes, at["keepdims"]))]


@decomp("all", "any")
def _all(b, n, args, at):
    x = args[0]
    any_ = n.op.name == "any" or at.get("any_", False)
    m = b.ew("ne", x, 0) if x.dtype.kind != "b" else x
    r = b.reduce("max" if any_ else "min", m, _axes(x, at["axis"]), at["keepdims"])
    return [_finish(b, n, r)]


@decomp("argmax", "argmin")
def _argmax(b, n, args, at):
    x = args[0]
    op = n.op.name
    axis = at["axis"]
    if axis is None:
        r = b.reduce(op, b.reshape(x, (x.numel,)), (0,), False)
        return [_finish(b, n, b.reshape(r, (1,) * len(x.shape)) if at["keepdims"] else r)]
    if not x.shape:
        return [_finish(b, n, b.full(0, (), np.int64))]
    return [_finish(b, n, b.reduce(op, x, _axes(x, axis), at["keepdims"]))]


@decomp("max_dim", "min_dim")
def _max_dim(b, n, args, at):
    x = args[0]
    if not x.shape:
        raise Unsupported("max of a 0-d tensor")
    axes = _axes(x, at["axis"])
    large = n.op.name == "max_dim"
    idx = b.reduce("argmax" if large else "argmin", x, axes, True)
    val = b.gather(x, b.expand(idx, idx.shape), axes[0]) if len(axes) == 1 else None
    if val is None:
        raise Unsupported("max_dim over several dims")
    if not at["keepdims"]:
        keep_shape = tuple(s for d, s in enumerate(x.shape) if d not in axes)
        val, idx = b.reshape(val, keep_shape), b.reshape(idx, keep_shape)
    return [_finish(b, n, val, 0), _finish(b, n, idx, 1)]


@decomp("var", "std")
def _var(b, n, args, at):
    x = args[0]
    if x.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise Unsupported("var of this dtype")
    axes = _axes(x, at["axis"])
    cnt = 1
    for a in axes:
        cnt *= x.shape[a]
    if cnt == 0:
        raise Unsupported("var over an empty dim")
    m = b.ew("div", b.reduce("sum", x, axes, True), cnt)
    d = b.ew("sub", x, m)
    ss = b.reduce("sum", b.ew("mul", d, d), axes, at["keepdims"])
    r = b.ew("div", ss, float(max(cnt - at["correction"], 0)), dtype=x.dtype)
    if n.op.name == "std" or at.get("sqrt"):
        r = b.ew("sqrt", r)
    return [_finish(b, n, r)]


@decomp("abs_pow")
def _abs_pow(b, n, args, at):
    x, p = args[0], at["p"]
    if x.dtype.kind != "f":
        raise Unsupported("abs_pow of integers")
    r = b.ew("pow", b.ew("abs", x), p)
    if p < 0:
        r = b.where(b.ew("eq", x, 0), 0, r, dtype=x.dtype)
    return [_finish(b, n, r)]


@decomp("logsumexp")
def _logsumexp(b, n, args, at):
    x = args[0]
    if x.dtype not in (np.dtype(np.float32), np.dtype(np.float64)) or x.numel == 0:
        raise Unsupported("logsumexp dtype/size")
    axes = _axes(x, at["axis"])
    m = b.reduce("max", x, axes, True)
    m = b.where(b.ew("isfinite", m), m, 0, dtype=x.dtype)
    s = b.reduce("sum", b.ew("exp", b.ew("sub", x, m)), axes, True)
    r = b.ew("add", b.ew("log", s), m)
    if not at["keepdims"]:
        r = b.reshape(r, tuple(s_ for d, s_ in enumerate(x.shape) if d not in axes))
    return [_finish(b, n, r)]


def softmax_parts(b, x, axes):
    """(x - max, exp(x - max), sum of exp) over ``axes`` (keepdims), NumPy's order of operations."""
    m = b.reduce("max", x, axes, True)
    s = b.ew("sub", x, m)
    e = b.ew("exp", s)
    return s, e, b.reduce("sum", e, axes, True)


@decomp("softmax")
def _softmax(b, n, args, at):
    x = args[0]
    if x.dtype not in (np.dtype(np.float32), np.dtype(np.float64)) or x.numel == 0:
        raise Unsupported("softmax dtype/size")
    _, e, s = softmax_parts(b, x, _axes(x, at["axis"]))
    return [_finish(b, n, b.ew("div", e, s))]


@decomp("log_softmax")
def _log_softmax(b, n, args, at):
    x = args[0]
    if x.dtype not in (np.dtype(np.float32), np.dtype(np.float64)) or x.numel == 0:
        raise Unsupported("log_softmax dtype/size")
    sh, _, s = softmax_parts(b, x, _axes(x, at["axis"]))
    return [_finish(b, n, b.ew("sub", sh, b.ew("log", s)))]


# ---- linear algebra ------------------------------------------------------------------------------------------

@decomp("matmul")
def _matmul(b, n, args, at):
    a, c = args
    return [_finish(b, n, b.matmul(a, c))]


@decomp("add_scaled")
def _add_scaled(b, n, args, at):
    inp, prod = args
    beta, alpha = at["beta"], at["alpha"]
    dt = prod.dtype
    if dt.kind != "f":
        raise Unsupported("add_scaled of integers")
    r = prod if alpha == 1 else b.ew("mul", prod, alpha)
    if beta == 0:
        return [_finish(b, n, b.broadcast_to(r, prod.shape))]
    r = b.ew("add", r, inp if beta == 1 else b.ew("mul", inp, beta))
    return [_finish(b, n, r)]


# ---- advanced indexing (integer index tensors at adjacent positions) ---------------------------------------

def _adv_linear(b, shp, idx, pos):
    """(the advanced dims merged: linear index over them, flattened to 1-D, with -1 where a component is out
    of range (so the gather's / scatter's bound check raises), the broadcast index shape, their size)."""
    if not idx or any(i.dtype == np.bool_ for i in idx):
        raise Unsupported("a boolean mask index")
    if list(pos) != list(range(pos[0], pos[0] + len(pos))):
        raise Unsupported("advanced indices at non-adjacent positions")
    bshape = tuple(np.broadcast_shapes(*[i.shape for i in idx]))
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
    m = int(np.prod(bshape, dtype=np.int64))
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
    npre, npost = int(np.prod(pre, dtype=np.int64)), int(np.prod(post, dtype=np.int64))
    vv = b.reshape(b.broadcast_to(b.cast(v, x.dtype), pre + bshape + post), (npre, m, npost))
    rows = b.reshape(b.permute(vv, (1, 0, 2)), (m, npre * npost))
    s = b.node("scatter_add", (rows, lin), {"rows": a, "skip": -1}, (a, npre * npost), x.dtype)
    s = b.reshape(b.permute(b.reshape(s, (a, npre, npost)), (1, 0, 2)), shp)
    return [_finish(b, n, b.ew("add", x, s))]
