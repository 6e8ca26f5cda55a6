"""Device-only decompositions of ``binary_cross_entropy_with_logits`` and ``binary_cross_entropy`` (their
derivatives are written in ember ops already). On the CPU they stay extern.

``binary_cross_entropy`` raises torch's RuntimeError when an input or target lies outside [0, 1] (or is
NaN): the kernel checks every element with the bounds-checked gather's error flag (an element out of
range gathers index 1 from a one-element tensor of ones), which the runner reads after the launch, so
the check needs no separate pass on the host.
"""
from __future__ import annotations

import math

import numpy as np

from . import prims as P
from .decompose import decomp_device, Unsupported, _finish

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


@decomp_device("binary_cross_entropy_with_logits")
def _bce_with_logits(b, n, args, at):
    x, t, w, pw = args
    ts = [a for a in (x, t, w, pw) if a is not None]
    if any(not hasattr(a, "dtype") or a.dtype not in (_F32, _F64) for a in ts):
        raise Unsupported("only float32/float64 are computed natively")
    dt = np.result_type(*[a.dtype for a in ts])
    x, t = b.cast(x, dt), b.cast(t, dt)
    # log sigmoid(x) without overflow: min(x, 0) - log1p(exp(-|x|))
    log_sig = b.ew("sub", b.ew("min", x, 0.0), b.ew("log1p", b.ew("exp", b.ew("neg", b.ew("abs", x)))))
    if pw is not None:
        log_sig = b.ew("mul", log_sig, b.ew("add", b.ew("mul", b.ew("sub", b.cast(pw, dt), 1.0), t), 1.0))
    loss = b.ew("sub", b.ew("mul", b.ew("sub", 1.0, t, dtype=dt), x), log_sig)
    if w is not None:
        loss = b.ew("mul", loss, b.cast(w, dt))
    red = at["reduction"]
    if red != "none":
        if loss.numel == 0:
            raise Unsupported("empty reduction")
        loss = b.reduce("sum", loss, tuple(range(len(loss.shape))))
        if red == "mean":
            loss = b.ew("div", loss, float(_count(args)))
    return [_finish(b, n, loss)]


def _count(args) -> int:
    """Elements averaged by reduction="mean": the broadcast shape of the operands."""
    return math.prod(P.broadcast_shapes(*[tuple(a.shape) for a in args if a is not None]))


def _in_unit_range(b, v, what):
    """``v`` (flattened) times ones gathered at index 0 where 0 <= v <= 1 and at the out-of-range index 1
    elsewhere: the gather's error flag raises torch's RuntimeError for ``what``."""
    ok = b.ew("and", b.ew("ge", v, 0.0), b.ew("le", v, 1.0))
    idx = b.cast(b.ew("not", ok), np.int64)
    ones = b.gather(b.full(1.0, (1,), v.dtype), idx, 0,
                    error=(RuntimeError, f"all elements of {what} should be between 0 and 1"))
    return b.ew("mul", v, ones)


@decomp_device("binary_cross_entropy")
def _bce(b, n, args, at):
    x, t, w = args
    ts = [a for a in (x, t, w) if a is not None]
    if any(not hasattr(a, "dtype") or a.dtype not in (_F32, _F64) for a in ts):
        raise Unsupported("only float32/float64 are computed natively")
    if x.numel == 0:
        raise Unsupported("empty input")
    shape, dt = tuple(x.shape), x.dtype
    x = _in_unit_range(b, b.reshape(x, (x.numel,)), "input")
    t = _in_unit_range(b, b.reshape(b.cast(t, dt), (x.numel,)), "target")
    # torch clamps each log at -100 so that x = 0 or 1 gives a finite loss
    pos = b.ew("mul", t, b.ew("max", b.ew("log", x), -100.0))
    neg = b.ew("mul", b.ew("sub", 1.0, t, dtype=dt), b.ew("max", b.ew("log1p", b.ew("neg", x)), -100.0))
    loss = b.reshape(b.ew("neg", b.ew("add", pos, neg)), shape)
    if w is not None:
        loss = b.ew("mul", loss, b.cast(w, dt))
    red = at["reduction"]
    if red != "none":
        loss = b.reduce("sum", loss, tuple(range(len(shape))))
        if red == "mean":
            loss = b.ew("div", loss, float(_count(args)))
    return [_finish(b, n, loss)]
