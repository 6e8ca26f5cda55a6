"""Elementwise ops: arithmetic, comparisons, logic, unary math, activations, clamp, softmax, where and
the fused multiply-adds.
"""
from __future__ import annotations

import math

import numpy as np

from ...compiler.ir import Value
from ._registry import conv, _inp, _out, _is_float, _scalar, _unsupported


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
    _out(b, node, b.op("Where", [b.op("LessOrEqual", [x, _scalar(b, th, dt)]), _scalar(b, val, dt), x]))


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
