"""Decompositions of ember's elementwise ops (ember/ops: elementwise, unary, binary, compare) into
primitives: arithmetic, unary math, logical ops, rounding, classification, clamp and the gradient
masks, where, lerp, addcmul/addcdiv, logit.

Each function mirrors its op's NumPy kernel step by step (same compute dtype, same order of
operations), so native results match eager to rounding. A function raises ``Unsupported`` for
instances it does not handle; the op then runs as an extern call.
"""
from __future__ import annotations

import math

import numpy as np

from . import prims as P
from .decompose import decomp, Unsupported, _npdt, _finish
from .prims import PNode


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
