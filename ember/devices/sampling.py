"""Random sampling ops on the device with the CPU's random stream: ``bernoulli`` (probabilities in a
tensor) and ``bernoulli_p`` (one probability).

Random numbers are drawn on the host by the op's generator, exactly as the CPU kernels draw them (same
seed, same numbers on either device, run after run); what runs on the device is the rest: the uniform
draws are copied over and compared with the device's probabilities (no copy of the probabilities to
the host, no CPU fallback; a float32 probability is compared with the largest float32 not above each
float64 draw, which decides ``u < p`` exactly as the CPU's float64 comparison does). ``bernoulli_p`` reads only its input's shape: its 0/1 result is made on
the host and copied over, like any other draw of a tensor factory on the device.

Registered in ``dispatch.KERNELS`` by :func:`install` (called when the device dispatcher activates).
"""
from __future__ import annotations

import numpy as np

from ..tensor import wrap
from ..random import _gen
from ..autograd.grad_mode import no_grad
from . import opencl as _cl


def _bernoulli(op, args, attrs):
    p = args[0]
    if type(p) is not _cl.DeviceArray or p.dtype not in (np.float32, np.float64):
        return None
    u = _gen(attrs["gen"]).random(p.shape)                       # the CPU kernel's draw (float64), in its order
    if p.dtype == np.float32:
        # u < P for a float32 P exactly when floor32(u) < P (floor32: the largest float32 <= u)
        w = u.astype(np.float32)
        w = np.where(w > u, np.nextafter(w, np.float32(-np.inf)), w).astype(np.float32)
    else:
        w = u
    from .. import dtypes as _dt
    with no_grad():
        ud = wrap(_cl.from_numpy(np.ascontiguousarray(w), p.device, op=op.name))
        return (ud < wrap(p)).to(_dt.from_numpy_dtype(np.dtype(attrs["dt"])))._data


def _bernoulli_p(op, args, attrs):
    x, p = args[0], args[1]
    if type(x) is not _cl.DeviceArray:
        return None
    r = (_gen(attrs["gen"]).random(x.shape) < p).astype(x.dtype)
    return _cl.from_numpy(r, x.device, op=op.name)


def install(kernels: dict) -> None:
    kernels.update({"bernoulli": _bernoulli, "bernoulli_p": _bernoulli_p})
