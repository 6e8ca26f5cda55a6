"""Device-only decomposition of ``binary_cross_entropy_with_logits`` (its derivative is written in ember
ops already). On the CPU it stays extern; ``binary_cross_entropy`` stays a fallback on the device too:
its kernel checks that the probabilities lie in [0, 1] and raises, which needs the host.
"""
from __future__ import annotations

import numpy as np

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
    return int(np.prod(np.broadcast_shapes(*[tuple(a.shape) for a in args if a is not None]), dtype=np.int64))
