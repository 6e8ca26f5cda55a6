"""Device-only decompositions of ``cumsum`` (and so of its derivative, a reversed cumsum), ``cumprod`` and
``logcumsumexp``.

A scan is not a primitive; on a device it is written as a masked sum, ``out[i] = sum_j x[j] * (j <= i)``
over an (L, L) view of the scanned dim: quadratic work, but one reduction kernel with no host step,
which beats a CPU round trip for the lengths models scan (sequence positions, a few thousand).

Longer scans are blocked (a block scan with carries): the dim is padded to ``nb`` blocks of ``BLOCK``,
each block is scanned by the masked sum, the blocks' totals are scanned the same way (recursively, so
any length works) and each block adds the sum of the blocks before it. Work is about ``BLOCK`` per
element per level, in a few reduction kernels. cumprod is the same with products (masked entries 1).
On the CPU these stay extern (NumPy's scan is linear).
"""
from __future__ import annotations

from .decompose import decomp_device, Unsupported, _finish, _out

MAX_SCAN = 2048          # longest scanned dim done as one masked sum on the device
BLOCK = 64               # block length of longer scans


_IDENTITY = {"sum": 0, "prod": 1}
_COMBINE = {"sum": "add", "prod": "mul"}


def _masked_scan(b, x, ax, op):
    """Inclusive scan of ``x`` along ``ax`` as one masked reduction over an (L, L) view."""
    L = x.shape[ax]
    wide = x.shape[:ax] + (L, L) + x.shape[ax + 1:]          # (..., i: output, j: input, ...)
    xe = b.expand(b.reshape(x, x.shape[:ax] + (1, L) + x.shape[ax + 1:]), wide)
    keep = b.ew("le", b.iota(wide, ax + 1), b.iota(wide, ax))
    return b.reduce(op, b.where(keep, xe, _IDENTITY[op], dtype=x.dtype), (ax + 1,))


def _scan(b, x, ax, op):
    """Inclusive scan along ``ax``: one masked reduction, or blocks plus the scan of their totals."""
    L = x.shape[ax]
    if L <= MAX_SCAN:
        return _masked_scan(b, x, ax, op)
    lead, rest = x.shape[:ax], x.shape[ax + 1:]
    nb = -(-L // BLOCK)
    P = nb * BLOCK
    if P != L:                                               # pad with the identity to whole blocks
        pshape = lead + (P,) + rest
        pos = b.iota(pshape, ax)
        x = b.where(b.ew("lt", pos, L), b.gather(x, b.ew("min", pos, L - 1), ax), _IDENTITY[op], dtype=x.dtype)
    inner = _masked_scan(b, b.reshape(x, lead + (nb, BLOCK) + rest), ax + 1, op)
    nd = len(inner.shape)
    starts = tuple(BLOCK - 1 if d == ax + 1 else 0 for d in range(nd))
    totals = b.reshape(b.slice(inner, starts, (1,) * nd, lead + (nb, 1) + rest), lead + (nb,) + rest)
    # the combination of the blocks before each block: the scan of the totals, shifted by one block
    before = _scan(b, totals, ax, op)
    k = b.iota(totals.shape, ax)
    carry = b.where(b.ew("gt", k, 0), b.gather(before, b.ew("max", b.ew("sub", k, 1), 0), ax), _IDENTITY[op],
                    dtype=x.dtype)
    out = b.ew(_COMBINE[op], inner, b.expand(b.reshape(carry, lead + (nb, 1) + rest), inner.shape))
    out = b.reshape(out, lead + (P,) + rest)
    if P != L:
        out = b.slice(out, (0,) * len(out.shape), (1,) * len(out.shape), lead + (L,) + rest)
    return out


def _flip(b, x, ax):
    nd = len(x.shape)
    return b.slice(x, tuple(x.shape[ax] - 1 if d == ax else 0 for d in range(nd)),
                   tuple(-1 if d == ax else 1 for d in range(nd)), x.shape)


def _scan_op(b, n, x, at, op):
    shape, dt = _out(n)
    nd = len(x.shape)
    if nd == 0:
        return [_finish(b, n, b.cast(x, dt))]
    ax = at["axis"] % nd
    L = x.shape[ax]
    if L == 0 or x.numel == 0:
        raise Unsupported("empty scan")
    xc = b.cast(x, dt)
    if at.get("reverse", False):
        return [_finish(b, n, _flip(b, _scan(b, _flip(b, xc, ax), ax, op), ax))]
    return [_finish(b, n, _scan(b, xc, ax, op))]


@decomp_device("cumsum")
def _cumsum(b, n, args, at):
    return _scan_op(b, n, args[0], at, "sum")


@decomp_device("cumprod")
def _cumprod(b, n, args, at):
    return _scan_op(b, n, args[0], at, "prod")


@decomp_device("logcumsumexp")
def _logcumsumexp(b, n, args, at):
    """``log(sum_{j<=i} exp(x_j))`` as two masked reductions over the (L, L) view: the running max ``M``,
    then ``M + log(sum_{j<=i} exp(x_j - M))`` (stable; all ``-inf`` gives ``-inf``, a ``+inf`` gives
    ``+inf``, NaN propagates). Dims up to ``MAX_SCAN``."""
    x = args[0]
    shape, dt = _out(n)
    nd = len(x.shape)
    if x.dtype.kind != "f" or x.dtype != dt or nd == 0 or x.numel == 0:
        raise Unsupported("logcumsumexp of 0-d, empty or non-float32/64 input")
    ax = at["axis"] % nd
    L = x.shape[ax]
    if L > MAX_SCAN:
        raise Unsupported(f"logcumsumexp over {L} > {MAX_SCAN} elements")
    wide = x.shape[:ax] + (L, L) + x.shape[ax + 1:]
    xe = b.expand(b.reshape(x, x.shape[:ax] + (1, L) + x.shape[ax + 1:]), wide)
    keep = b.ew("le", b.iota(wide, ax + 1), b.iota(wide, ax))
    m = b.reduce("max", b.where(keep, xe, -float("inf"), dtype=dt), (ax + 1,), keepdims=True)
    shift = b.where(b.ew("isinf", m), 0.0, m, dtype=dt)
    s = b.reduce("sum", b.where(keep, b.ew("exp", b.ew("sub", xe, b.expand(shift, wide))), 0.0, dtype=dt), (ax + 1,))
    shift = b.reshape(shift, x.shape)
    m = b.reshape(m, x.shape)
    out = b.ew("add", b.ew("log", s), shift)
    out = b.where(b.ew("and", b.ew("isinf", m), b.ew("gt", m, 0)), float("inf"), out, dtype=dt)
    return [_finish(b, n, out)]
