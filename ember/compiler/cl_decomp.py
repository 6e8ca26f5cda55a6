"""Decompositions used only on the OpenCL device (``decomp_device``): ops that real programs run on a
device and that the CPU keeps as NumPy kernels (the CPU compiler calls those as externs, which on a
device would be a counted CPU fallback with two copies).

Each mirrors its op's NumPy kernel (same compute dtype, same steps), so device results match the CPU
to rounding; an instance it does not handle raises ``Unsupported`` and the op falls back, counted.

- ``norm``: the p-norms behind ``linalg.vector_norm``, ``Tensor.norm``, ``F.normalize`` and
  ``clip_grad_norm_`` (ord 2, 1, inf, -inf, 0 and any other p).
- ``isclose``: ``|a - b| <= atol + rtol * |b|`` with torch's rules for infinities and ``equal_nan``.
- ``roll``: a gather at ``(i - shift) mod n`` per rolled dim.
- ``einsum`` of one or two operands without repeated letters: a reduction, or one batched matmul
  between permutes (attention scores written as einsum, bilinear forms).
- ``div_floor`` of floats (``//``, ``div(rounding_mode="floor")``); integer division stays on the host,
  where a zero divisor raises.
"""
from __future__ import annotations

import math

import numpy as np

from .decompose import decomp_device, Unsupported, _finish
from .decompose_reduce import _axes


def _native_float(x, what):
    if x.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise Unsupported(f"{what} of {x.dtype} (float32/float64 run on the device)")


@decomp_device("norm")
def _norm(b, n, args, at):
    x = args[0]
    _native_float(x, "norm")
    p, axes, keep = float(at["ord"]), _axes(x, at["axis"]), at["keepdims"]
    a = b.ew("abs", x)
    if p == 2:
        r = b.ew("sqrt", b.reduce("sum", b.ew("mul", a, a), axes, keep))
    elif p == math.inf:
        r = b.reduce("max", a, axes, keep)
    elif p == -math.inf:
        r = b.reduce("min", a, axes, keep)
    elif p == 0:
        r = b.reduce("sum", b.cast(b.ew("ne", a, 0), x.dtype), axes, keep)
    elif p == 1:
        r = b.reduce("sum", a, axes, keep)
    else:
        r = b.ew("pow", b.reduce("sum", b.ew("pow", a, p), axes, keep), 1.0 / p)
    return [_finish(b, n, r)]


@decomp_device("isclose")
def _isclose(b, n, args, at):
    x, y = args[0], args[1]
    if not (hasattr(x, "shape") and hasattr(y, "shape")) or x.dtype != y.dtype:
        raise Unsupported("isclose of a scalar or of mixed dtypes")
    rtol, atol = float(at["rtol"]), float(at["atol"])
    floating = x.dtype.kind == "f"
    if floating:
        _native_float(x, "isclose")
    close = b.ew("eq", x, y)
    if at["equal_nan"] and floating:
        close = b.ew("or", close, b.ew("and", b.ew("isnan", x), b.ew("isnan", y)))
    if rtol == 0 and atol == 0:
        return [_finish(b, n, close)]
    if not floating:
        cdt = np.dtype(at["cast_dt"])
        x, y = b.cast(x, cdt), b.cast(y, cdt)
    allowed = b.ew("add", b.ew("abs", b.ew("mul", y, rtol)), atol)        # atol + |rtol * y|, as the kernel
    actual = b.ew("abs", b.ew("sub", x, y))
    ok = b.ew("and", b.ew("isfinite", actual), b.ew("le", actual, allowed))
    return [_finish(b, n, b.ew("or", close, ok))]


@decomp_device("roll")
def _roll(b, n, args, at):
    x = args[0]
    r = x
    for shift, axis in zip(at["shifts"], at["axes"]):
        size = x.shape[axis]
        if size == 0:
            continue
        s = int(shift) % size
        if s == 0:
            continue
        # out[i] = x[(i - s) mod size] = x[i + size - s] for i < s, else x[i - s]
        io = b.iota(r.shape, axis)
        src = b.where(b.ew("lt", io, s), b.ew("add", io, size - s), b.ew("sub", io, s), dtype=np.int64)
        r = b.gather(r, src, axis)
    return [_finish(b, n, r)]


@decomp_device("einsum")
def _einsum(b, n, args, at):
    """One or two operands without repeated letters: letters summed in one operand only are reduced
    first; two operands become one batched matmul (batch letters, then each side's free letters, the
    contracted letters between them), permuted to the output's order."""
    subs, out = at["subs"], at["out"]
    if len(args) not in (1, 2) or any(len(set(s)) != len(s) for s in subs):
        raise Unsupported("einsum of more than two operands or with a repeated letter")
    xs = list(args)
    for x in xs:
        _native_float(x, "einsum")
    if len(xs) == 2 and xs[0].dtype != xs[1].dtype:
        raise Unsupported("einsum of mixed dtypes")
    subs = list(subs)
    for k, (x, s) in enumerate(zip(xs, subs)):         # reduce the letters no one else needs
        others = set(out).union(*[set(t) for j, t in enumerate(subs) if j != k])
        drop = tuple(i for i, c in enumerate(s) if c not in others)
        if drop:
            xs[k] = b.reduce("sum", x, drop, False)
            subs[k] = "".join(c for c in s if c in others)
    if len(xs) == 1:
        x, s = xs[0], subs[0]
        return [_finish(b, n, b.permute(x, tuple(s.index(c) for c in out)))]
    (A, sa), (B, sb) = zip(xs, subs)
    size = dict(zip(sa, A.shape))
    size.update(zip(sb, B.shape))
    batch = [c for c in sa if c in sb and c in out]
    contr = [c for c in sa if c in sb and c not in out]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]

    def prod(cs):
        return math.prod(size[c] for c in cs)
    nb, m, k, nn = prod(batch), prod(left), prod(contr), prod(right)
    A3 = b.reshape(b.permute(A, tuple(sa.index(c) for c in batch + left + contr)), (nb, m, k))
    B3 = b.reshape(b.permute(B, tuple(sb.index(c) for c in batch + contr + right)), (nb, k, nn))
    r = b.reshape(b.matmul(A3, B3), tuple(size[c] for c in batch + left + right))
    order = batch + left + right
    return [_finish(b, n, b.permute(r, tuple(order.index(c) for c in out)))]


@decomp_device("div_floor")
def _div_floor(b, n, args, at):
    """Floor division of floats (NumPy's floor_divide, the prim's C form); integers stay on the host,
    where a zero divisor raises."""
    x, y = args[0], args[1]
    ts = [a for a in (x, y) if hasattr(a, "shape")]
    w = np.dtype(at["dt"]) if at.get("dt") is not None else np.result_type(*[t.dtype for t in ts])
    if w not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise Unsupported("integer floor division (a zero divisor must raise)")
    return [_finish(b, n, b.ew("floordiv", x, y, dtype=w))]
