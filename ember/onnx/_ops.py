"""Converters: one captured ember op -> ONNX nodes.

Each converter gets the builder, the captured ``OpNode`` and its counterpart in the second capture
(None unless dynamic axes are exported), reads the op's inputs with ``b.name`` and sets each output it
can provide with ``b.set``. An output left unset (max pooling's indices, an LSTM's saved gate values)
raises only if a later op reads it. ``dynamic`` lists the attributes that may differ between the two
captures because the converter rebuilds them from the run-time shapes (or does not read them).
"""
from __future__ import annotations

import math

import numpy as np

from ..compiler.ir import Value

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


class _Conv:
    __slots__ = ("fn", "dynamic")

    def __init__(self, fn, dynamic):
        self.fn = fn
        self.dynamic = frozenset(dynamic)


CONVERTERS: dict = {}
MIN_OPSET_OF: dict = {}


def conv(*names, dynamic=(), min_opset=None):
    def deco(fn):
        for n in names:
            CONVERTERS[n] = _Conv(fn, dynamic)
            if min_opset:
                MIN_OPSET_OF[n] = min_opset
        return fn
    return deco


# ---- helpers ----------------------------------------------------------------------------------------

def _inp(b, node, i, dt=None):
    """Input ``i`` of the node as an ONNX name, cast to NumPy dtype ``dt`` when given."""
    x = node.inputs[i]
    if isinstance(x, Value):
        n = b.name(x)
        return b.cast(n, x.dtype.np, dt) if dt is not None else n
    if x is None:
        return None
    return b.const(np.asarray(x, dtype=dt if dt is not None else node.outputs[0].dtype.np))


def _out(b, node, name, k=0, natural=None):
    """Set output ``k``; ``natural`` is the dtype the ONNX op produced (cast to the captured dtype)."""
    v = node.outputs[k]
    if natural is not None:
        name = b.cast(name, natural, v.dtype.np)
    b.set(v, name)


def _dt(v):
    return v.dtype.np if isinstance(v, Value) else None


def _is_float(dt) -> bool:
    return np.dtype(dt).kind == "f" or np.dtype(dt).name == "bfloat16"


def _ndim(v) -> int:
    return len(v.shape)


def _scalar(b, value, dt):
    return b.const(np.asarray(value, dtype=dt))


def _rank_axes(axes, nd):
    if axes is None:
        return list(range(nd))
    if isinstance(axes, int):
        axes = (axes,)
    return [a % nd if nd else 0 for a in axes]


# ---- elementwise ------------------------------------------------------------------------------------

_ARITH = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "maximum": "Max", "minimum": "Min",
          "fmax": "Max", "fmin": "Min", "pow": "Pow", "pow_tensor_scalar": "Pow", "pow_scalar_tensor": "Pow",
          "bitwise_and": "BitwiseAnd", "bitwise_or": "BitwiseOr", "bitwise_xor": "BitwiseXor"}
_CMP = {"eq": "Equal", "ne": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}
_LOGIC = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}


def _compute_dt(node):
    dt = node.attrs.get("dt")
    if dt is not None:
        return np.dtype(dt)
    vals = [i.dtype.np for i in node.inputs[:2] if isinstance(i, Value)]
    return np.result_type(*vals) if vals else node.outputs[0].dtype.np


@conv(*_ARITH)
def _arith(b, node, node2):
    name = node.op.name
    dt = _compute_dt(node)
    x, y = _inp(b, node, 0, dt), _inp(b, node, 1, dt)
    if name.startswith("bitwise_"):
        if dt == np.bool_:                  # on bools: the logical ops
            _out(b, node, b.op(_LOGIC["logical_" + name[8:]], [x, y]), natural=dt)
            return
        if b.opset < 18:
            raise _unsupported(b, node, "on integers, ONNX's Bitwise ops need opset >= 18")
    alpha = node.attrs.get("alpha", 1)
    if name in ("add", "sub") and alpha != 1:
        y = b.op("Mul", [y, _scalar(b, alpha, dt)])
    _out(b, node, b.op(_ARITH[name], [x, y]), natural=dt)


@conv(*_CMP)
def _compare(b, node, node2):
    dt = _compute_dt(node)
    r = b.op(_CMP[node.op.name], [_inp(b, node, 0, dt), _inp(b, node, 1, dt)])
    if node.op.name == "ne":
        r = b.op("Not", [r])
    _out(b, node, r, natural=np.bool_)


@conv(*_LOGIC)
def _logic(b, node, node2):
    r = b.op(_LOGIC[node.op.name], [_inp(b, node, 0, np.bool_), _inp(b, node, 1, np.bool_)])
    _out(b, node, r, natural=np.bool_)


@conv("logical_not")
def _not(b, node, node2):
    _out(b, node, b.op("Not", [_inp(b, node, 0, np.bool_)]), natural=np.bool_)


@conv("remainder", "fmod", "div_floor", "div_trunc")
def _divmod(b, node, node2):
    dt = _compute_dt(node)
    x, y = _inp(b, node, 0, dt), _inp(b, node, 1, dt)
    name = node.op.name
    if name == "fmod":
        r = b.op("Mod", [x, y], fmod=1)
    elif not _is_float(dt):
        mod = b.op("Mod", [x, y], fmod=0)                 # Python-style (sign of the divisor)
        if name == "remainder":
            r = mod
        elif name == "div_floor":
            r = b.op("Div", [b.op("Sub", [x, mod]), y])
        else:
            r = b.op("Div", [x, y])
    else:
        q = b.op("Div", [x, y])
        if name == "div_trunc":
            r = b.op("Mul", [b.op("Sign", [q]), b.op("Floor", [b.op("Abs", [q])])])
        else:
            fl = b.op("Floor", [q])
            r = fl if name == "div_floor" else b.op("Sub", [x, b.op("Mul", [fl, y])])
    _out(b, node, r, natural=dt)


_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
          "neg": "Neg", "abs": "Abs", "sin": "Sin", "cos": "Cos", "tan": "Tan", "asin": "Asin", "acos": "Acos",
          "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh",
          "erf": "Erf", "floor": "Floor", "ceil": "Ceil", "reciprocal": "Reciprocal", "sign": "Sign",
          "round": "Round", "clone": "Identity", "contiguous": "Identity", "hardswish": "HardSwish",
          "bitwise_not": "BitwiseNot"}


def _unary_in(b, node):
    """The input, cast to the output dtype when a float result comes from an integer input."""
    x = node.inputs[0]
    out_dt = node.outputs[0].dtype.np
    n = b.name(x)
    if _is_float(out_dt) and x.dtype.np != out_dt:
        n = b.cast(n, x.dtype.np, out_dt)
    return n, out_dt


@conv(*_UNARY)
def _unary(b, node, node2):
    if node.op.name == "round" and node.attrs.get("decimals", 0):
        x, dt = _unary_in(b, node)
        s = _scalar(b, 10.0 ** node.attrs["decimals"], dt)
        _out(b, node, b.op("Div", [b.op("Round", [b.op("Mul", [x, s])]), s]))
        return
    x, dt = _unary_in(b, node)
    op = _UNARY[node.op.name]
    if op == "BitwiseNot" and node.inputs[0].dtype.np == np.bool_:
        op = "Not"
    elif op == "BitwiseNot" and b.opset < 18:
        raise _unsupported(b, node, "on integers, ONNX's BitwiseNot needs opset >= 18")
    _out(b, node, b.op(op, [x]))


@conv("rsqrt", "square", "log1p", "expm1", "log2", "log10", "exp2", "silu", "mish", "log_sigmoid",
      "hardsigmoid", "isnan", "isinf", "isfinite", "frac", "trunc", "sinc", "deg2rad", "rad2deg")
def _unary_composite(b, node, node2):
    x, dt = _unary_in(b, node)
    one = _scalar(b, 1, dt) if _is_float(dt) or np.dtype(dt).kind in "iu" else None
    name = node.op.name
    if name == "rsqrt":
        r = b.op("Reciprocal", [b.op("Sqrt", [x])])
    elif name == "square":
        r = b.op("Mul", [x, x])
    elif name == "log1p":
        r = b.op("Log", [b.op("Add", [x, one])])
    elif name == "expm1":
        r = b.op("Sub", [b.op("Exp", [x]), one])
    elif name in ("log2", "log10"):
        r = b.op("Div", [b.op("Log", [x]), _scalar(b, math.log(2 if name == "log2" else 10), dt)])
    elif name == "exp2":
        r = b.op("Pow", [_scalar(b, 2, dt), x])
    elif name == "silu":
        r = b.op("Mul", [x, b.op("Sigmoid", [x])])
    elif name == "mish":
        r = b.op("Mul", [x, b.op("Tanh", [b.op("Softplus", [x])])])
    elif name == "log_sigmoid":
        r = b.op("Neg", [b.op("Softplus", [b.op("Neg", [x])])])
    elif name == "hardsigmoid":
        r = b.op("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5)
    elif name in ("isnan", "isinf", "isfinite"):
        src = node.inputs[0]
        if not _is_float(src.dtype.np):
            r = b.op("Equal", [x, x]) if name == "isfinite" else b.op("Not", [b.op("Equal", [x, x])])
        elif name == "isnan":
            r = b.op("IsNaN", [x])
        elif name == "isinf":
            r = b.op("IsInf", [x])
        else:
            r = b.op("Not", [b.op("Or", [b.op("IsNaN", [x]), b.op("IsInf", [x])])])
        _out(b, node, r, natural=np.bool_)
        return
    elif name in ("frac", "trunc"):
        t = b.op("Mul", [b.op("Sign", [x]), b.op("Floor", [b.op("Abs", [x])])])
        r = t if name == "trunc" else b.op("Sub", [x, t])
    elif name == "sinc":
        px = b.op("Mul", [x, _scalar(b, math.pi, dt)])
        zero = b.op("Equal", [x, _scalar(b, 0, dt)])
        safe = b.op("Where", [zero, one, px])
        r = b.op("Where", [zero, one, b.op("Div", [b.op("Sin", [safe]), safe])])
    else:
        f = math.pi / 180 if name == "deg2rad" else 180 / math.pi
        r = b.op("Mul", [x, _scalar(b, f, dt)])
    _out(b, node, r)


@conv("gelu")
def _gelu(b, node, node2):
    x, dt = _unary_in(b, node)
    approx = node.attrs.get("approximate", "none")
    if b.opset >= 20:
        _out(b, node, b.op("Gelu", [x], approximate=approx))
        return
    half, one = _scalar(b, 0.5, dt), _scalar(b, 1.0, dt)
    if approx == "tanh":
        x3 = b.op("Mul", [b.op("Mul", [x, x]), x])
        inner = b.op("Add", [x, b.op("Mul", [x3, _scalar(b, 0.044715, dt)])])
        t = b.op("Tanh", [b.op("Mul", [inner, _scalar(b, math.sqrt(2 / math.pi), dt)])])
    else:
        t = b.op("Erf", [b.op("Mul", [x, _scalar(b, 1 / math.sqrt(2), dt)])])
    _out(b, node, b.op("Mul", [b.op("Mul", [x, half]), b.op("Add", [one, t])]))


@conv("leaky_relu")
def _leaky(b, node, node2):
    x, _ = _unary_in(b, node)
    _out(b, node, b.op("LeakyRelu", [x], alpha=float(node.attrs["negative_slope"])))


@conv("elu")
def _elu(b, node, node2):
    x, dt = _unary_in(b, node)
    a = node.attrs
    alpha, scale, in_scale = float(a["alpha"]), float(a["scale"]), float(a["input_scale"])
    if scale == 1.0 and in_scale == 1.0:
        _out(b, node, b.op("Elu", [x], alpha=alpha))
        return
    neg = b.op("Mul", [b.op("Sub", [b.op("Exp", [b.op("Mul", [x, _scalar(b, in_scale, dt)])]), _scalar(b, 1, dt)]),
                       _scalar(b, alpha * scale, dt)])
    pos = b.op("Mul", [x, _scalar(b, scale, dt)])
    _out(b, node, b.op("Where", [b.op("Greater", [x, _scalar(b, 0, dt)]), pos, neg]))


@conv("hardtanh")
def _hardtanh(b, node, node2):
    x, dt = _unary_in(b, node)
    a = node.attrs
    lo = a.get("min_val", node.inputs[1] if len(node.inputs) > 1 else -1.0)
    hi = a.get("max_val", node.inputs[2] if len(node.inputs) > 2 else 1.0)
    _out(b, node, b.op("Clip", [x, _scalar(b, lo, dt), _scalar(b, hi, dt)]))


@conv("softplus")
def _softplus(b, node, node2):
    x, dt = _unary_in(b, node)
    beta, thr = float(node.attrs.get("beta", 1.0)), float(node.attrs.get("threshold", 20.0))
    bx = b.op("Mul", [x, _scalar(b, beta, dt)]) if beta != 1.0 else x
    sp = b.op("Softplus", [bx])
    if beta != 1.0:
        sp = b.op("Div", [sp, _scalar(b, beta, dt)])
    _out(b, node, b.op("Where", [b.op("Greater", [bx, _scalar(b, thr, dt)]), x, sp]))


@conv("softshrink", "hardshrink")
def _shrink(b, node, node2):
    x, _ = _unary_in(b, node)
    lam = float(node.attrs["lambd"])
    _out(b, node, b.op("Shrink", [x], lambd=lam, bias=lam if node.op.name == "softshrink" else 0.0))


@conv("threshold")
def _threshold(b, node, node2):
    x, dt = _unary_in(b, node)
    a = node.attrs
    th = a.get("threshold", node.inputs[1] if len(node.inputs) > 1 else None)
    val = a.get("value", node.inputs[2] if len(node.inputs) > 2 else None)
    _out(b, node, b.op("Where", [b.op("Greater", [x, _scalar(b, th, dt)]), x, _scalar(b, val, dt)]))


@conv("clamp")
def _clamp(b, node, node2):
    out_dt = node.outputs[0].dtype.np
    dt = np.dtype(node.attrs.get("dt") or out_dt)
    r = _inp(b, node, 0, dt)
    lo, hi = node.inputs[1], node.inputs[2]
    if lo is not None:
        r = b.op("Max", [r, _inp(b, node, 1, dt)])
    if hi is not None:
        r = b.op("Min", [r, _inp(b, node, 2, dt)])
    _out(b, node, r, natural=dt)


@conv("softmax", "log_softmax")
def _softmax(b, node, node2):
    x, _ = _unary_in(b, node)
    _out(b, node, b.op("Softmax" if node.op.name == "softmax" else "LogSoftmax", [x], axis=int(node.attrs["axis"])))


@conv("to_dtype")
def _to_dtype(b, node, node2):
    x = node.inputs[0]
    _out(b, node, b.cast(b.name(x), x.dtype.np, node.outputs[0].dtype.np))


@conv("where")
def _where(b, node, node2):
    dt = np.dtype(node.attrs.get("dt") or node.outputs[0].dtype.np)
    r = b.op("Where", [_inp(b, node, 0, np.bool_), _inp(b, node, 1, dt), _inp(b, node, 2, dt)])
    _out(b, node, r, natural=dt)


@conv("masked_fill")
def _masked_fill(b, node, node2):
    x = node.inputs[0]
    dt = x.dtype.np
    r = b.op("Where", [_inp(b, node, 1, np.bool_), _inp(b, node, 2, dt), b.name(x)])
    _out(b, node, r, natural=dt)


@conv("lerp")
def _lerp(b, node, node2):
    dt = node.outputs[0].dtype.np
    a, e, w = (_inp(b, node, i, dt) for i in range(3))
    _out(b, node, b.op("Add", [a, b.op("Mul", [w, b.op("Sub", [e, a])])]))


@conv("addcmul", "addcdiv")
def _addc(b, node, node2):
    dt = np.dtype(node.attrs.get("dt") or node.outputs[0].dtype.np)
    a, t1, t2 = (_inp(b, node, i, dt) for i in range(3))
    val = node.attrs.get("value", node.inputs[3] if len(node.inputs) > 3 else 1)
    p = b.op("Mul" if node.op.name == "addcmul" else "Div", [t1, t2])
    _out(b, node, b.op("Add", [a, b.op("Mul", [p, _scalar(b, val, dt)])]), natural=dt)


@conv("add_scaled")
def _add_scaled(b, node, node2):
    dt = node.outputs[0].dtype.np
    inp, prod = _inp(b, node, 0, dt), _inp(b, node, 1, dt)
    beta = node.attrs.get("beta", node.inputs[2] if len(node.inputs) > 2 else 1)
    alpha = node.attrs.get("alpha", node.inputs[3] if len(node.inputs) > 3 else 1)
    if beta != 1:
        inp = b.op("Mul", [inp, _scalar(b, beta, dt)])
    if alpha != 1:
        prod = b.op("Mul", [prod, _scalar(b, alpha, dt)])
    _out(b, node, b.op("Add", [inp, prod]) if beta != 0 else prod)


# ---- reductions -------------------------------------------------------------------------------------

_REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin",
           "prod": "ReduceProd", "logsumexp": "ReduceLogSumExp"}


@conv(*_REDUCE)
def _reduce(b, node, node2):
    x = node.inputs[0]
    out_dt = node.outputs[0].dtype.np
    n = b.cast(b.name(x), x.dtype.np, out_dt)
    axes = _rank_axes(node.attrs.get("axis"), _ndim(x))
    if not axes and _ndim(x) == 0:
        _out(b, node, b.op("Identity", [n]))
        return
    _out(b, node, b.reduce(_REDUCE[node.op.name], n, axes, bool(node.attrs.get("keepdims", False))))


@conv("max_dim", "min_dim")
def _max_dim(b, node, node2):
    x = b.name(node.inputs[0])
    axis = int(node.attrs["axis"]) % max(_ndim(node.inputs[0]), 1)
    keep = bool(node.attrs["keepdims"])
    red = "ReduceMax" if node.op.name == "max_dim" else "ReduceMin"
    _out(b, node, b.reduce(red, x, [axis], keep))
    _out(b, node, b.op("ArgMax" if node.op.name == "max_dim" else "ArgMin", [x], axis=axis, keepdims=int(keep)), 1)


@conv("argmax", "argmin")
def _argmax(b, node, node2):
    x = b.name(node.inputs[0])
    axis = node.attrs.get("axis")
    keep = bool(node.attrs.get("keepdims", False))
    op = "ArgMax" if node.op.name == "argmax" else "ArgMin"
    if axis is None or (isinstance(axis, tuple) and len(axis) != 1):
        flat = b.op("Reshape", [x, b.ints([-1])])
        r = b.op(op, [flat], axis=0, keepdims=0)
        if keep:
            r = b.op("Reshape", [r, b.ints([1] * _ndim(node.inputs[0]))])
    else:
        axis = axis[0] if isinstance(axis, tuple) else axis
        r = b.op(op, [x], axis=int(axis) % _ndim(node.inputs[0]), keepdims=int(keep))
    _out(b, node, r)


def _count(b, x, axes):
    """Number of elements over ``axes`` of Value ``x`` as a float tensor (from its run-time shape if needed)."""
    dt = x.dtype.np
    pairs = b.shape(x)
    if all(pairs[a][0] == pairs[a][1] for a in axes):
        return None, float(np.prod([pairs[a][0] for a in axes]))
    sizes = b.op("Gather", [b.op("Shape", [b.name(x)]), b.ints(axes)], axis=0)
    return b.cast(b.reduce("ReduceProd", sizes, [0], False), np.int64, dt), None


@conv("var", "std")
def _var(b, node, node2):
    x = node.inputs[0]
    dt = x.dtype.np
    n = b.name(x)
    axes = _rank_axes(node.attrs.get("axis"), _ndim(x))
    corr = float(node.attrs.get("correction", 1))
    keep = bool(node.attrs.get("keepdims", False))
    d = b.op("Sub", [n, b.reduce("ReduceMean", n, axes, True)])
    ss = b.reduce("ReduceSum", b.op("Mul", [d, d]), axes, keep)
    cnt_t, cnt = _count(b, x, axes)
    if cnt_t is None:
        v = b.op("Div", [ss, _scalar(b, max(cnt - corr, 0.0), dt)])
    else:
        v = b.op("Div", [ss, b.op("Sub", [cnt_t, _scalar(b, corr, dt)])])
    if node.op.name == "std" or node.attrs.get("sqrt"):
        v = b.op("Sqrt", [v])
    _out(b, node, v)


@conv("norm")
def _norm(b, node, node2):
    x = node.inputs[0]
    dt = node.outputs[0].dtype.np
    n = b.cast(b.name(x), x.dtype.np, dt)
    axes = _rank_axes(node.attrs.get("axis"), _ndim(x))
    keep = bool(node.attrs.get("keepdims", False))
    p = node.attrs.get("ord", 2)
    p = 2.0 if p is None or p == "fro" else p
    if p == 2:
        r = b.reduce("ReduceL2", n, axes, keep)
    elif p == 1:
        r = b.reduce("ReduceL1", n, axes, keep)
    elif p == float("inf"):
        r = b.reduce("ReduceMax", b.op("Abs", [n]), axes, keep)
    elif p == float("-inf"):
        r = b.reduce("ReduceMin", b.op("Abs", [n]), axes, keep)
    elif p == 0:
        nz = b.cast(b.op("Not", [b.op("Equal", [n, _scalar(b, 0, dt)])]), np.bool_, dt)
        r = b.reduce("ReduceSum", nz, axes, keep)
    else:
        s = b.reduce("ReduceSum", b.op("Pow", [b.op("Abs", [n]), _scalar(b, p, dt)]), axes, keep)
        r = b.op("Pow", [s, _scalar(b, 1.0 / p, dt)])
    _out(b, node, r)


@conv("all", "any")
def _all_any(b, node, node2):
    x = node.inputs[0]
    n = b.cast(b.cast(b.name(x), x.dtype.np, np.bool_), np.bool_, np.int64)
    axes = _rank_axes(node.attrs.get("axis"), _ndim(x))
    keep = bool(node.attrs.get("keepdims", False))
    is_any = node.op.name == "any" or node.attrs.get("any_")
    r = b.reduce("ReduceMax" if is_any else "ReduceMin", n, axes, keep) if axes else n
    _out(b, node, b.cast(r, np.int64, np.bool_))


@conv("cumsum")
def _cumsum(b, node, node2):
    x = node.inputs[0]
    dt = node.outputs[0].dtype.np
    n = b.cast(b.name(x), x.dtype.np, dt)
    axis = int(node.attrs["axis"]) % max(_ndim(x), 1)
    _out(b, node, b.op("CumSum", [n, b.const(np.array(axis, np.int64))],
                       reverse=int(bool(node.attrs.get("reverse", False)))))


@conv("topk")
def _topk(b, node, node2):
    x = node.inputs[0]
    a = node.attrs
    axis = int(a["axis"]) % _ndim(x)
    vals, idx = b.op("TopK", [b.name(x), b.ints([int(a["k"])])], n_out=2, axis=axis,
                     largest=int(bool(a.get("largest", True))), sorted=1)
    _out(b, node, vals)
    _out(b, node, idx, 1)


@conv("sort")
def _sort(b, node, node2):
    x = node.inputs[0]
    axis = int(node.attrs["axis"]) % _ndim(x)
    k1, k2 = b.shape(x)[axis]
    b.node = node
    k = b.shape_tensor([(k1, k2)], "the sorted dim")
    vals, idx = b.op("TopK", [b.name(x), k], n_out=2, axis=axis,
                     largest=int(bool(node.attrs.get("descending", False))), sorted=1)
    _out(b, node, vals)
    _out(b, node, idx, 1)


# ---- shapes and indexing ----------------------------------------------------------------------------

@conv("view", "reshape_copy", dynamic=("shape",))
def _reshape(b, node, node2):
    pairs = b.attr_pairs(node2, "shape")
    shp = b.shape_tensor(pairs, "the target shape", infer_one=True)
    _out(b, node, b.op("Reshape", [b.name(node.inputs[0]), shp]))


@conv("permute")
def _permute(b, node, node2):
    _out(b, node, b.op("Transpose", [b.name(node.inputs[0])], perm=[int(a) for a in node.attrs["axes"]]))


@conv("expand", dynamic=("shape",))
def _expand(b, node, node2):
    x = node.inputs[0]
    pairs = b.attr_pairs(node2, "shape")
    xin = b.shape(x)
    off = len(pairs) - len(xin)
    fixed = []
    for i, (a1, a2) in enumerate(pairs):
        j = i - off
        if a1 != a2 and j >= 0 and xin[j] == (a1, a2):
            fixed.append((1, 1))                # the input already has this (dynamic) size
        else:
            fixed.append((a1, a2))
    shp = b.shape_tensor(fixed, "the expanded shape")
    _out(b, node, b.op("Expand", [b.name(x), shp]))


@conv("cat", dynamic=("sizes",))
def _cat(b, node, node2):
    dt = np.dtype(node.attrs.get("dt") or node.outputs[0].dtype.np)
    ins = [b.cast(b.name(v), v.dtype.np, dt) for v in node.inputs if isinstance(v, Value)]
    _out(b, node, b.op("Concat", ins, axis=int(node.attrs["axis"])), natural=dt)


def _expand_key(key, nd):
    key = list(key) if isinstance(key, tuple) else [key]
    real = sum(1 for k in key if k is not None and k is not Ellipsis)
    pos = next((i for i, k in enumerate(key) if k is Ellipsis), None)
    fill = [slice(None)] * (nd - real)
    if pos is None:
        return key + fill
    return key[:pos] + fill + key[pos + 1:]


@conv("getitem_basic", dynamic=("key",))
def _getitem(b, node, node2):
    x = node.inputs[0]
    nd = _ndim(x)
    k1 = _expand_key(node.attrs["key"], nd)
    k2 = _expand_key(node2.attrs["key"], nd) if node2 is not None else k1
    if len(k1) != len(k2):
        raise ValueError("ember.onnx.export: an index changes with the size of a dynamic axis")
    starts, ends, axes, steps, squeeze, unsq = [], [], [], [], [], []
    d = 0
    out_pos = 0
    for i1, i2 in zip(k1, k2):
        if i1 is None:
            unsq.append(out_pos)
            out_pos += 1
            continue
        if isinstance(i1, slice):
            step = 1 if i1.step is None else int(i1.step)
            s1 = i1.start if i1.start is not None else (0 if step > 0 else -1)
            s2 = i2.start if i2.start is not None else (0 if step > 0 else -1)
            e1 = i1.stop if i1.stop is not None else (INT64_MAX if step > 0 else INT64_MIN)
            e2 = i2.stop if i2.stop is not None else (INT64_MAX if step > 0 else INT64_MIN)
            if not (i1.start in (None, 0) and i1.stop is None and step == 1 and i2.start in (None, 0)
                    and i2.stop is None):
                starts.append((int(s1), int(s2)))
                ends.append((int(e1), int(e2)))
                axes.append(d)
                steps.append(step)
            out_pos += 1
        else:
            i1, i2 = int(i1), int(i2)
            starts.append((i1, i2))
            ends.append((i1 + 1, i2 + 1) if i1 != -1 else (INT64_MAX, INT64_MAX))
            axes.append(d)
            steps.append(1)
            squeeze.append(d)
        d += 1
    r = b.name(x)
    if axes:
        b.node = node
        st = b.shape_tensor(starts, "a slice start")
        en = b.shape_tensor(ends, "a slice end")
        r = b.op("Slice", [r, st, en, b.ints(axes), b.ints(steps)])
    if squeeze:
        r = b.squeeze(r, squeeze)
    if unsq:
        r = b.unsqueeze(r, unsq)
    if r == b.name(x):
        r = b.op("Identity", [r])
    _out(b, node, r)


@conv("flip")
def _flip(b, node, node2):
    axes = _rank_axes(node.attrs["axes"], _ndim(node.inputs[0]))
    n = len(axes)
    _out(b, node, b.op("Slice", [b.name(node.inputs[0]), b.ints([-1] * n), b.ints([INT64_MIN] * n), b.ints(axes),
                                 b.ints([-1] * n)]))


@conv("repeat")
def _repeat(b, node, node2):
    x = node.inputs[0]
    reps = [int(r) for r in node.attrs["reps"]]
    n = b.name(x)
    extra = len(reps) - _ndim(x)
    if extra > 0:
        n = b.unsqueeze(n, list(range(extra)))
    _out(b, node, b.op("Tile", [n, b.ints(reps)]))


@conv("tril", "triu")
def _tri(b, node, node2):
    k = int(node.attrs.get("k", 0))
    _out(b, node, b.op("Trilu", [b.name(node.inputs[0]), b.const(np.array(k, np.int64))],
                       upper=int(node.op.name == "triu")))


@conv("constant_pad_nd")
def _pad(b, node, node2):
    x = node.inputs[0]
    pads = node.attrs["pads"]
    flat = [int(p[0]) for p in pads] + [int(p[1]) for p in pads]
    val = _scalar(b, node.attrs.get("value", 0), x.dtype.np)
    _out(b, node, b.op("Pad", [b.name(x), b.ints(flat), val], mode="constant"))


@conv("embedding")
def _embedding(b, node, node2):
    w, idx = node.inputs[0], node.inputs[1]
    _out(b, node, b.op("Gather", [b.name(w), b.cast(b.name(idx), idx.dtype.np, np.int64)], axis=0))


@conv("index_select")
def _index_select(b, node, node2):
    x, idx = node.inputs[0], node.inputs[1]
    axis = int(node.attrs["dim"]) % max(_ndim(x), 1)
    _out(b, node, b.op("Gather", [b.name(x), b.cast(b.name(idx), idx.dtype.np, np.int64)], axis=axis))


@conv("gather")
def _gather(b, node, node2):
    x, idx = node.inputs[0], node.inputs[1]
    axis = int(node.attrs["dim"]) % max(_ndim(x), 1)
    _out(b, node, b.op("GatherElements", [b.name(x), b.cast(b.name(idx), idx.dtype.np, np.int64)], axis=axis))


# ---- linear algebra and networks ----------------------------------------------------------------------

@conv("matmul")
def _matmul(b, node, node2):
    dt = node.outputs[0].dtype.np
    _out(b, node, b.op("MatMul", [_inp(b, node, 0, dt), _inp(b, node, 1, dt)]))


@conv("einsum")
def _einsum(b, node, node2):
    subs = node.attrs["subs"]
    out = node.attrs.get("out")
    eq = ",".join(subs) + "->" + out if isinstance(subs, (list, tuple)) else str(subs)
    ins = [b.name(v) for v in node.inputs if isinstance(v, Value)]
    _out(b, node, b.op("Einsum", ins, equation=eq))


@conv("linear")
def _linear(b, node, node2):
    x, w, bias = node.inputs[0], node.inputs[1], node.inputs[2]
    wv = b.const_value(w)
    if _ndim(x) == 2 and _ndim(w) == 2:
        ins = [b.name(x), b.name(w)] + ([b.name(bias)] if bias is not None else [])
        _out(b, node, b.op("Gemm", ins, transB=1))
        return
    if wv is not None and _ndim(w) == 2:
        wt = b.initializer(np.ascontiguousarray(wv.T), b.name(w) + "_t")
    else:
        wt = b.op("Transpose", [b.name(w)])
    r = b.op("MatMul", [b.name(x), wt])
    if bias is not None:
        r = b.op("Add", [r, b.name(bias)])
    _out(b, node, r)


@conv("conv2d")
def _conv2d(b, node, node2):
    x, w, bias = node.inputs[:3]
    a = node.attrs
    pt, pb, pl, pr = (int(p) for p in a["pad"])
    kh, kw = w.shape[2], w.shape[3]
    ins = [b.name(x), b.name(w)] + ([b.name(bias)] if bias is not None else [])
    _out(b, node, b.op("Conv", ins, kernel_shape=[kh, kw], strides=list(a["stride"]), pads=[pt, pl, pb, pr],
                       dilations=list(a["dil"]), group=int(a["groups"])))


@conv("conv_transpose2d", dynamic=("out_hw",))
def _conv_t(b, node, node2):
    y, w, bias = node.inputs[:3]
    a = node.attrs
    pt, pb, pl, pr = (int(p) for p in a["pad"])
    kh, kw = w.shape[2], w.shape[3]
    s, d = list(a["stride"]), list(a["dil"])
    H, W = y.shape[2], y.shape[3]
    oh, ow = a["out_hw"]
    opad = [oh - ((H - 1) * s[0] + d[0] * (kh - 1) + 1 - pt - pb), ow - ((W - 1) * s[1] + d[1] * (kw - 1) + 1 - pl - pr)]
    ins = [b.name(y), b.name(w)] + ([b.name(bias)] if bias is not None else [])
    _out(b, node, b.op("ConvTranspose", ins, kernel_shape=[kh, kw], strides=s, pads=[pt, pl, pb, pr], dilations=d,
                       group=int(a["groups"]), output_padding=[int(p) for p in opad]))


@conv("max_pool2d")
def _max_pool(b, node, node2):
    a = node.attrs
    p = [int(v) for v in a["p"]]
    _out(b, node, b.op("MaxPool", [b.name(node.inputs[0])], kernel_shape=list(a["k"]), strides=list(a["s"]),
                       pads=p + p, dilations=list(a["d"]), ceil_mode=int(bool(a["ceil"]))))
    # output 1 (torch-style per-plane indices) is left unset: ONNX's indices count over the whole tensor


@conv("avg_pool2d")
def _avg_pool(b, node, node2):
    a = node.attrs
    if a.get("div"):
        raise _unsupported(b, node, "avg_pool2d with divisor_override")
    p = [int(v) for v in a["p"]]
    _out(b, node, b.op("AveragePool", [b.name(node.inputs[0])], kernel_shape=list(a["k"]), strides=list(a["s"]),
                       pads=p + p, ceil_mode=int(bool(a["ceil"])), count_include_pad=int(bool(a["cip"]))))


@conv("adaptive_max_pool2d")
def _adaptive_max(b, node, node2):
    if tuple(node.attrs["out_hw"]) != (1, 1):
        raise _unsupported(b, node, "adaptive_max_pool2d to a size other than 1x1")
    _out(b, node, b.op("GlobalMaxPool", [b.name(node.inputs[0])]))


def _unsupported(b, node, what):
    from ._export import UnsupportedOperatorError
    return UnsupportedOperatorError(f"ember.onnx.export: op '{node.op.name}' ({what}) has no ONNX mapping at opset "
                                    f"{b.opset}")


@conv("sdpa_softmax")
def _sdpa_softmax(b, node, node2):
    x, bias = node.inputs[0], node.inputs[1]
    dt = x.dtype.np
    s = b.name(x)
    scale = float(node.attrs.get("scale", 1.0))
    if scale != 1.0:
        s = b.op("Mul", [s, _scalar(b, scale, dt)])
    if bias is not None:
        s = b.op("Add", [s, b.cast(b.name(bias), bias.dtype.np, dt)])
    _out(b, node, b.op("Softmax", [s], axis=-1))


# normalization: norm_stats gives mean and variance of x seen in a canonical shape; the normalize op applies
# them. LayerNormalization / BatchNormalization when the pattern allows, else the formula.

@conv("norm_stats", dynamic=("shape",))
def _norm_stats(b, node, node2):
    x = node.inputs[0]
    dt = x.dtype.np
    xc = b.op("Reshape", [b.name(x), b.shape_tensor(b.attr_pairs(node2, "shape"), "the statistics' view",
                                                    infer_one=True)])
    if _is_float(dt) and dt != np.float32 and dt.itemsize < 4:
        xc = b.cast(xc, dt, np.float32)
    axes = list(node.attrs["axes"])
    if node.attrs.get("center", True):
        mean = b.reduce("ReduceMean", xc, axes, True)
        d = b.op("Sub", [xc, mean])
        _out(b, node, mean, 0)
        _out(b, node, b.reduce("ReduceMean", b.op("Mul", [d, d]), axes, True), 1)
    else:
        _out(b, node, b.reduce("ReduceMean", b.op("Mul", [xc, xc]), axes, True), 1)


def _from_stats(b, node, v, x):
    """True when Value ``v`` is an output of a norm_stats node over ``x``."""
    p = b.producer.get(v.id) if isinstance(v, Value) else None
    return p is not None and p.op.name == "norm_stats" and p.inputs[0] is x


@conv("native_layer_norm", "native_batch_norm", "native_group_norm", "rms_norm",
      dynamic=("shape", "sshape"))
def _normalize(b, node, node2):
    x, w, bias, mean, var = node.inputs[:5]
    a = node.attrs
    eps = float(a["eps"])
    dt = x.dtype.np
    nd = _ndim(x)
    center = a.get("center", True)
    if node.op.name == "native_layer_norm" and b.opset >= 17 and center and tuple(a["axes"]) == (1,) \
            and _from_stats(b, node, mean, x) and _from_stats(b, node, var, x):
        D = int(a["shape"][1])
        k = next((k for k in range(nd + 1) if int(np.prod(x.shape[k:])) == D), None)
        if k is not None and k < nd and (w is None or tuple(w.shape) == tuple(x.shape[k:])):
            scale = b.name(w) if w is not None else b.const(np.ones(x.shape[k:], dt))
            ins = [b.name(x), scale] + ([b.name(bias)] if bias is not None else [])
            _out(b, node, b.op("LayerNormalization", ins, axis=k, epsilon=eps))
            return
    if node.op.name == "native_batch_norm" and a.get("const") and center and nd >= 2 and mean is not None \
            and tuple(mean.shape) == (x.shape[1],):
        C = x.shape[1]
        scale = b.name(w) if w is not None else b.const(np.ones(C, dt))
        shift = b.name(bias) if bias is not None else b.const(np.zeros(C, dt))
        _out(b, node, b.op("BatchNormalization", [b.name(x), scale, shift, b.name(mean), b.name(var)], epsilon=eps))
        return
    # the formula, in the canonical shape
    xc = b.op("Reshape", [b.name(x), b.shape_tensor(b.attr_pairs(node2, "shape"), "the normalized view",
                                                    infer_one=True)])
    sshape = b.shape_tensor(b.attr_pairs(node2, "sshape"), "the statistics' shape", infer_one=True)
    cdt = np.float32 if dt.itemsize < 4 and _is_float(dt) else dt
    xc = b.cast(xc, dt, cdt)
    v = b.op("Reshape", [b.cast(b.name(var), var.dtype.np, cdt), sshape])
    if center:
        m = b.op("Reshape", [b.cast(b.name(mean), mean.dtype.np, cdt), sshape])
        xc = b.op("Sub", [xc, m])
    y = b.op("Div", [xc, b.op("Sqrt", [b.op("Add", [v, _scalar(b, eps, cdt)])])])
    wshape = b.ints(a["wshape"])
    if w is not None:
        y = b.op("Mul", [y, b.op("Reshape", [b.cast(b.name(w), w.dtype.np, cdt), wshape])])
    if bias is not None:
        y = b.op("Add", [y, b.op("Reshape", [b.cast(b.name(bias), bias.dtype.np, cdt), wshape])])
    y = b.op("Reshape", [y, b.op("Shape", [b.name(x)])])
    _out(b, node, y, natural=cdt)


# recurrent layers: ONNX's LSTM / GRU / RNN with one direction; torch's gate blocks reordered to ONNX's

def _gates(b, v, order, nblocks):
    """Weights ``v`` (blocks of rows in torch's gate order) reordered to ONNX's, with a leading direction axis."""
    arr = b.const_value(v)
    if arr is not None:
        blocks = np.split(arr, nblocks, axis=0)
        return b.initializer(np.concatenate([blocks[i] for i in order], 0)[None], b.name(v) + "_onnx")
    H = v.shape[0] // nblocks
    idx = np.concatenate([np.arange(i * H, (i + 1) * H) for i in order])
    return b.unsqueeze(b.op("Gather", [b.name(v), b.ints(idx)], axis=0), [0])


def _rnn_bias(b, b_ih, b_hh, order, nblocks, hidden, dt):
    """ONNX's bias ``[1, 2 * nblocks * hidden]``: input biases then hidden biases, gates reordered."""
    present = [v for v in (b_ih, b_hh) if v is not None]
    if all(b.const_value(v) is not None for v in present):
        arrs = []
        for v in (b_ih, b_hh):
            if v is None:
                arrs.append(np.zeros(nblocks * hidden, dt))
            else:
                blocks = np.split(b.const_value(v), nblocks)
                arrs.append(np.concatenate([blocks[i] for i in order]))
        return b.initializer(np.concatenate(arrs)[None], "rnn_bias")
    parts = [b.const(np.zeros((1, nblocks * hidden), dt)) if v is None else _gates(b, v, order, nblocks)
             for v in (b_ih, b_hh)]
    return b.op("Concat", parts, axis=1)


def _rnn_common(b, node):
    a = node.attrs
    if a.get("batch_sizes") is not None:
        raise _unsupported(b, node, "a packed sequence")
    return "reverse" if a.get("reverse") else "forward"


@conv("lstm_layer")
def _lstm(b, node, node2):
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = node.inputs[:7]
    w_hr = node.inputs[7] if len(node.inputs) > 7 else None
    if w_hr is not None:
        raise _unsupported(b, node, "LSTM with proj_size")
    direction = _rnn_common(b, node)
    H = w_hh.shape[1]
    order = (0, 3, 1, 2)                       # torch i, f, g, o -> ONNX i, o, f, c
    W, R = _gates(b, w_ih, order, 4), _gates(b, w_hh, order, 4)
    B = _rnn_bias(b, b_ih, b_hh, order, 4, H, x.dtype.np)
    y, _, yc = b.op("LSTM", [b.name(x), W, R, B, "", b.unsqueeze(b.name(h0), [0]), b.unsqueeze(b.name(c0), [0])],
                    n_out=3, hidden_size=H, direction=direction)
    _out(b, node, b.squeeze(y, [1]), 0)
    _out(b, node, b.squeeze(yc, [0]), 1)


@conv("gru_layer")
def _gru(b, node, node2):
    x, h0, w_ih, w_hh, b_ih, b_hh = node.inputs[:6]
    direction = _rnn_common(b, node)
    H = w_hh.shape[1]
    order = (1, 0, 2)                          # torch r, z, n -> ONNX z, r, h
    W, R = _gates(b, w_ih, order, 3), _gates(b, w_hh, order, 3)
    B = _rnn_bias(b, b_ih, b_hh, order, 3, H, x.dtype.np)
    y, _ = b.op("GRU", [b.name(x), W, R, B, "", b.unsqueeze(b.name(h0), [0])], n_out=2, hidden_size=H,
                direction=direction, linear_before_reset=1)
    _out(b, node, b.squeeze(y, [1]), 0)


@conv("rnn_layer")
def _rnn(b, node, node2):
    x, h0, w_ih, w_hh, b_ih, b_hh = node.inputs[:6]
    direction = _rnn_common(b, node)
    H = w_hh.shape[1]
    act = "Relu" if node.attrs.get("nonlinearity") == "relu" else "Tanh"
    W, R = _gates(b, w_ih, (0,), 1), _gates(b, w_hh, (0,), 1)
    B = _rnn_bias(b, b_ih, b_hh, (0,), 1, H, x.dtype.np)
    y, _ = b.op("RNN", [b.name(x), W, R, B, "", b.unsqueeze(b.name(h0), [0])], n_out=2, hidden_size=H,
                direction=direction, activations=[act])
    _out(b, node, b.squeeze(y, [1]), 0)
