"""The OpenCL device as the code generator sees it: one adapter over ``ember.devices.opencl``.

The generated-kernel modules (``render_cl``, ``cl_runner``, ``cl_eager``, ``cl_gemm``'s benchmark) reach
the device only through this module. Storage is the device runtime's
:class:`ember.devices.opencl.DeviceArray` (allocator block + byte offset + shape + element strides +
dtype + device index); programs are built by its ``build`` (memory and on-disk binary cache keyed on
source, options, device and driver version: a second process builds nothing); memory comes from its
caching allocator; everything runs on its one in-order queue of the device.

:func:`runtime` gives a :class:`Runtime` for device ``opencl:N`` with what code generation needs to know
(fp64, CPU or not, compute units, work-group limit) and the few operations the runner uses.
:func:`available` says whether pyopencl imports and a device exists (``import ember`` never needs it).
"""
from __future__ import annotations

import numpy as np

from ..devices import opencl as _ocl
from ..devices.opencl import DeviceArray  # noqa: F401  (the storage type, re-exported)

_RTS: dict = {}


def available() -> bool:
    """True when pyopencl is installed and an OpenCL device exists."""
    return _ocl.is_available()


def unavailable_reason():
    return _ocl.unavailable_reason()


def runtime(device=None) -> "Runtime":
    i = _ocl._index(device)
    rt = _RTS.get(i)
    if rt is None:
        rt = _RTS[i] = Runtime(i)
    return rt


from ..devices.opencl._arrays import _contiguous_strides as _cstrides  # noqa: E402


class Runtime:
    """One OpenCL device for the code generator (a view of ``ember.devices.opencl``'s runtime)."""

    def __init__(self, index: int = 0):
        r = _ocl._runtime(index)
        self.index = index
        self.cl = _ocl.cl
        self.queue = r.queue
        self.context = r.context
        self.device = r.device
        self.fp64 = bool(r.has_fp64)
        cl = self.cl
        self.is_cpu = bool(r.device.type & cl.device_type.CPU)
        self.compute_units = int(r.device.max_compute_units)
        self.max_work_group = int(r.device.max_work_group_size)
        self.local_mem = int(r.device.local_mem_size)
        self._r = r

    # ---- memory -----------------------------------------------------------------------------------------
    def alloc(self, nbytes: int, op=None):
        """A raw allocator block of at least ``nbytes`` (returned to the allocator when dropped)."""
        return self._r.malloc(max(int(nbytes), 1), op)

    def array(self, block, offset, shape, dtype) -> DeviceArray:
        """A contiguous DeviceArray over ``block`` at byte ``offset``."""
        shape = tuple(int(s) for s in shape)
        return DeviceArray(block, int(offset), shape, _cstrides(shape), np.dtype(dtype), self.index)

    def empty(self, shape, dtype, op=None) -> DeviceArray:
        return _ocl.empty(shape, dtype, self.index, op=op)

    def zeros(self, shape, dtype) -> DeviceArray:
        return _ocl.fill_(self.empty(shape, dtype, "zeros"), 0)

    def to_device(self, a, op=None) -> DeviceArray:
        return _ocl.from_numpy(np.asarray(a), self.index, non_blocking=False, op=op)

    def to_host(self, d: DeviceArray) -> np.ndarray:
        return _ocl.to_numpy(d)

    def copy(self, d: DeviceArray) -> DeviceArray:
        """A fresh contiguous copy of ``d``."""
        return _ocl.copy_(self.empty(d.shape, d.dtype, "copy"), d)

    def finish(self) -> None:
        self.queue.finish()

    # ---- programs -----------------------------------------------------------------------------------------
    def build(self, source: str, options: str = ""):
        return _ocl.build(source, options, self.index)
