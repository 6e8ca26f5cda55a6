"""Device-only decomposition of ``cumsum`` (and so of its derivative, a reversed cumsum).

A scan is not a primitive; on a device it is written as a masked sum, ``out[i] = sum_j x[j] * (j <= i)``
over an (L, L) view of the scanned dim: quadratic work, but one reduction kernel with no host step,
which beats a CPU round trip for the lengths models scan (sequence positions, a few thousand at most).
Longer scans stay CPU fallbacks. On the CPU cumsum stays extern (NumPy's scan is linear).
"""
from __future__ import annotations

from .decompose import decomp_device, Unsupported, _finish, _out

MAX_SCAN = 2048          # longest scanned dim done as a masked sum on the device


@decomp_device("cumsum")
def _cumsum(b, n, args, at):
    x = args[0]
    shape, dt = _out(n)
    nd = len(x.shape)
    if nd == 0:
        return [_finish(b, n, b.cast(x, dt))]
    ax = at["axis"] % nd
    L = x.shape[ax]
    if L == 0 or x.numel == 0:
        raise Unsupported("empty cumsum")
    if L > MAX_SCAN:
        raise Unsupported(f"cumsum over {L} > {MAX_SCAN} elements (a quadratic masked sum on the device)")
    xc = b.cast(x, dt)
    wide = x.shape[:ax] + (L, L) + x.shape[ax + 1:]          # (..., i: output, j: input, ...)
    xe = b.expand(b.reshape(xc, x.shape[:ax] + (1, L) + x.shape[ax + 1:]), wide)
    i, j = b.iota(wide, ax), b.iota(wide, ax + 1)
    keep = b.ew("ge", j, i) if at.get("reverse", False) else b.ew("le", j, i)
    return [_finish(b, n, b.reduce("sum", b.where(keep, xe, 0, dtype=dt), (ax + 1,)))]
