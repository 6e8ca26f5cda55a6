"""``cat`` of many tensors on the OpenCL device as one copy per input into its slice of the result.

The generated ``cat`` kernel reads every input in one kernel (a select over index ranges) and takes at
most 8 of them; a longer list (the per-parameter norms ``clip_grad_norm_`` stacks, a list of batch
outputs joined after a loop) is written here with the runtime's copies instead: each input (cast to
the result's dtype first when it differs) goes into its slice of the result with ``copy_`` (a buffer
copy, or the strided-copy kernel for a strided input or slice). Shorter lists keep the one-kernel form.

Registered in ``dispatch.KERNELS`` by :func:`install` (called when the device dispatcher activates).
"""
from __future__ import annotations

import numpy as np

from . import opencl as _cl

_ONE_KERNEL_MAX = 8          # the generated kernel's limit (compiler/decompose_shape.py)


def _cat(op, args, attrs):
    keep = attrs["keep"]
    if len(keep) <= _ONE_KERNEL_MAX:
        return None
    xs = [args[i] for i in keep]
    if any(type(x) is not _cl.DeviceArray for x in xs):
        return None
    dt = np.dtype(attrs["dt"])
    axis = attrs["axis"]
    dev = xs[0].device
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    out = _cl.empty(tuple(shape), dt, dev, op=op.name)
    step = out.strides[axis] * dt.itemsize
    start = 0
    for x in xs:
        if x.dtype != dt:
            x = _cast(x, dt)
        n = x.shape[axis]
        if n:
            part = out.view(out.offset + start * step, x.shape, out.strides)
            _cl.copy_(part, x)
        start += n
    return out


def _cast(x, dt):
    """``x`` converted to ``dt`` on the device (the cast op's generated kernel)."""
    from ..tensor import wrap
    from ..autograd.grad_mode import no_grad
    from .. import dtypes as _dt
    with no_grad():
        return wrap(x).to(_dt.from_numpy_dtype(dt))._data


def install(kernels: dict) -> None:
    kernels.update({"cat": _cat})
