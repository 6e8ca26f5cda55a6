"""Decompositions used only on the OpenCL device (``decomp_device``): ops that real programs run on a
device and that the CPU keeps as NumPy kernels (the CPU compiler calls those as externs, which on a
device would be a counted CPU fallback with two copies).

Each mirrors its op's NumPy kernel (same compute dtype, same steps), so device results match the CPU
to rounding; an instance it does not handle raises ``Unsupported`` and the op falls back, counted.

- ``norm``: the p-norms behind ``linalg.vector_norm``, ``Tensor.norm``, ``F.normalize`` and
  ``clip_grad_norm_`` (ord 2, 1, inf, -inf, 0 and any other p).
- ``isclose``: ``|a - b| <= atol + rtol * |b|`` with torch's rules for infinities and ``equal_nan``.
- ``roll``: a gather at ``(i - shift) mod n`` per rolled dim.
- ``div_floor`` of floats (``//`` and ``div(rounding_mode='floor')``); integer division stays on the
  host, where a zero divisor raises.
- ``logaddexp``, ``logaddexp2``: the max plus the log of one plus the exp of minus the distance.
- ``count_nonzero``, ``nanmean``.
"""
from __future__ import annotations

import math

import numpy as np

from . import prims as P
from .decompose import decomp_device, Unsupported, _finish, _out


def _axes(x, axis):
    if axis is None:
        return tuple(range(len(x.shape)))
    if isinstance(axis, (int, np.integer)):
        return (int(axis) % max(len(x.shape), 1),) if x.shape else ()
    return tuple(int(a) % len(x.shape) for a in axis) if x.shape else ()


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
