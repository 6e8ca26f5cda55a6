"""Decompositions of ember's reductions into primitives: sum/mean/prod, amax/amin, all/any,
argmax/argmin and max/min with ``dim``, var/std, abs_pow, logsumexp, softmax/log_softmax; and the
two products, matmul and add_scaled (the addmm family).

Each function mirrors its op's NumPy kernel step by step (same compute dtype, same order of
operations), so native results match eager to rounding. A function raises ``Unsupported`` for
instances it does not handle; the op then runs as an extern call.
"""
from __future__ import annotations

import numpy as np

from . import prims as P
from .decompose import decomp, Unsupported, _finish


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


def _softmax_parts_of(b, x, at, op):
    """``softmax_parts`` of a non-empty float32/float64 ``x`` over the op's axis (else Unsupported)."""
    if x.dtype not in (np.dtype(np.float32), np.dtype(np.float64)) or x.numel == 0:
        raise Unsupported(f"{op} dtype/size")
    return softmax_parts(b, x, _axes(x, at["axis"]))


@decomp("softmax")
def _softmax(b, n, args, at):
    _, e, s = _softmax_parts_of(b, args[0], at, "softmax")
    return [_finish(b, n, b.ew("div", e, s))]


@decomp("log_softmax")
def _log_softmax(b, n, args, at):
    sh, _, s = _softmax_parts_of(b, args[0], at, "log_softmax")
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
