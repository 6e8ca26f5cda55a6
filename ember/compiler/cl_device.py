"""The OpenCL device as the code generator sees it: one place between it and pyopencl.

The device runtime proper (``ember.devices.opencl``: caching allocator, events, the device tensors'
storage) is written separately; until it is in the tree, the generated-kernel modules (``render_cl``,
``cl_runner``, ``cl_eager``) reach the device only through this module, so switching is this file.

What it gives:

- :class:`DeviceArray`: a strided view into a device memory block (``block``: a ``cl.Buffer``, ``offset``
  in bytes, ``shape``, element ``strides``, NumPy ``dtype``).
- :func:`runtime` -> :class:`Runtime` (the first GPU/accelerator/CPU device found, or the one
  ``EMBER_OPENCL_DEVICE="<platform index>:<device index>"`` names): allocation from a memory pool,
  host <-> device copies, and :meth:`Runtime.build`, which builds a program once per (source, options,
  device, driver) and keeps its binary on disk (``<ember cache>/kernels/cl-<key>.bin``, the same trust
  checks as the C kernel cache): a second process builds nothing.
- :func:`available`: whether pyopencl imports and a device exists (``import ember`` never needs it).
"""
from __future__ import annotations

import hashlib
import os

import numpy as np

from . import logs

CACHE_SCHEMA = 1
STATS = {"builds": 0, "binary_hits": 0, "memory_hits": 0}
_RT = None
_UNAVAILABLE = None


def available() -> bool:
    """True when pyopencl is installed and an OpenCL device exists."""
    try:
        runtime()
        return True
    except Exception:
        return False


def runtime() -> "Runtime":
    global _RT, _UNAVAILABLE
    if _RT is None:
        if _UNAVAILABLE is not None:
            raise RuntimeError(_UNAVAILABLE)
        try:
            _RT = Runtime()
        except Exception as e:
            _UNAVAILABLE = f"no OpenCL device: {type(e).__name__}: {e}"
            raise RuntimeError(_UNAVAILABLE) from e
    return _RT


class DeviceArray:
    """A strided view of device memory: ``block`` (cl.Buffer), byte ``offset``, ``shape``, element
    ``strides``, ``dtype`` (NumPy)."""

    __slots__ = ("block", "offset", "shape", "strides", "dtype")

    def __init__(self, block, offset, shape, strides, dtype):
        self.block = block
        self.offset = int(offset)
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.dtype = np.dtype(dtype)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    @property
    def elem_offset(self) -> int:
        return self.offset // self.dtype.itemsize

    def is_contiguous(self) -> bool:
        return self.strides == _cstrides(self.shape) or self.numel <= 1

    def view(self, shape, strides, elem_offset=0) -> "DeviceArray":
        """Another view of the same block, ``elem_offset`` elements past this one's start."""
        return DeviceArray(self.block, self.offset + elem_offset * self.dtype.itemsize, shape, strides,
                           self.dtype)

    def __repr__(self):
        return f"DeviceArray({self.dtype.name}{list(self.shape)}, strides={self.strides}, offset={self.offset})"


def _cstrides(shape) -> tuple:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


class Runtime:
    """Context, in-order queue, memory pool and program builder of one OpenCL device."""

    def __init__(self):
        import pyopencl as cl
        import pyopencl.tools as cltools
        self.cl = cl
        want = os.environ.get("EMBER_OPENCL_DEVICE", "").strip()
        plats = cl.get_platforms()
        dev = None
        if want:
            pi, _, di = want.partition(":")
            dev = plats[int(pi)].get_devices()[int(di or 0)]
        else:
            for kind in (cl.device_type.GPU, cl.device_type.ACCELERATOR, cl.device_type.ALL):
                for p in plats:
                    try:
                        ds = p.get_devices(kind)
                    except cl.Error:
                        ds = []
                    if ds:
                        dev = ds[0]
                        break
                if dev is not None:
                    break
        if dev is None:
            raise RuntimeError("no OpenCL device")
        self.device = dev
        self.ctx = cl.Context([dev])
        self.queue = cl.CommandQueue(self.ctx)
        self.pool = cltools.MemoryPool(cltools.ImmediateAllocator(self.queue))
        ext = dev.extensions.split()
        self.fp64 = "cl_khr_fp64" in ext or bool(getattr(dev, "double_fp_config", 0))
        self.fp16 = "cl_khr_fp16" in ext
        self.is_cpu = bool(dev.type & cl.device_type.CPU)
        self.compute_units = int(dev.max_compute_units)
        self.max_work_group = int(dev.max_work_group_size)
        self.local_mem = int(dev.local_mem_size)
        self.key = "|".join(str(x) for x in (dev.platform.name, dev.platform.version, dev.name, dev.version,
                                             dev.driver_version, CACHE_SCHEMA))
        self._programs: dict = {}

    # ---- memory -----------------------------------------------------------------------------------------
    def alloc(self, nbytes: int):
        return self.pool.allocate(max(int(nbytes), 16))

    def empty(self, shape, dtype) -> DeviceArray:
        dt = np.dtype(dtype)
        shape = tuple(int(s) for s in shape)
        n = dt.itemsize
        for s in shape:
            n *= s
        return DeviceArray(self.alloc(n), 0, shape, _cstrides(shape), dt)

    def to_device(self, a) -> DeviceArray:
        a = np.asarray(a, order="C")          # (ascontiguousarray would make a 0-d array 1-d)
        d = self.empty(a.shape, a.dtype)
        if a.nbytes:
            self.cl.enqueue_copy(self.queue, d.block, a, is_blocking=False)
        return d

    def write(self, d: DeviceArray, a) -> None:
        """Copy host array ``a`` into contiguous device array ``d``."""
        a = np.asarray(a, dtype=d.dtype, order="C")
        if a.nbytes:
            self.cl.enqueue_copy(self.queue, d.block, a, dst_offset=d.offset, is_blocking=True)

    def to_host(self, d: DeviceArray) -> np.ndarray:
        """A NumPy copy of ``d`` (any strides: the span it covers is read, then viewed)."""
        isz = d.dtype.itemsize
        if d.numel == 0:
            return np.empty(d.shape, d.dtype)
        lo = sum(min(0, (n - 1) * s) for n, s in zip(d.shape, d.strides))
        hi = sum(max(0, (n - 1) * s) for n, s in zip(d.shape, d.strides))
        span = np.empty(hi - lo + 1, dtype=d.dtype)
        self.cl.enqueue_copy(self.queue, span, d.block, src_offset=d.offset + lo * isz, is_blocking=True)
        if d.is_contiguous():
            return span.reshape(d.shape)
        v = np.lib.stride_tricks.as_strided(span[-lo:], shape=d.shape, strides=[s * isz for s in d.strides])
        return np.array(v)

    def copy(self, d: DeviceArray) -> DeviceArray:
        """A fresh contiguous copy of contiguous ``d`` (device to device)."""
        if not d.is_contiguous():
            raise ValueError("copy of a non-contiguous device array")
        out = self.empty(d.shape, d.dtype)
        if d.nbytes:
            self.cl.enqueue_copy(self.queue, out.block, d.block, src_offset=d.offset, dst_offset=0,
                                 byte_count=d.nbytes)
        return out

    def zeros(self, shape, dtype) -> DeviceArray:
        d = self.empty(shape, dtype)
        if d.nbytes:
            self.cl.enqueue_fill_buffer(self.queue, d.block, np.zeros(1, np.uint8), 0, d.nbytes)
        return d

    def finish(self) -> None:
        self.queue.finish()

    # ---- programs -----------------------------------------------------------------------------------------
    def build(self, source: str, options: str = ""):
        """The built ``cl.Program`` of ``source``: from memory, from the on-disk binary cache, or built
        (and its binary stored)."""
        cl = self.cl
        key = hashlib.sha256("\0".join((self.key, options, source)).encode()).hexdigest()
        prg = self._programs.get(key)
        if prg is not None:
            STATS["memory_hits"] += 1
            return prg
        path = _cache_path(key)
        if path is not None and os.path.exists(path):
            try:
                from .build import _why_untrusted
                why = _why_untrusted(path, "the OpenCL binary", directory=False)
                if why is None:
                    with open(path, "rb") as f:
                        binary = f.read()
                    prg = cl.Program(self.ctx, [self.device], [binary]).build(options=options)
                    STATS["binary_hits"] += 1
                else:
                    logs.log("kernels", f"OpenCL binary cache: not loading {path}: {why}")
            except Exception as e:      # a stale or foreign binary: build from source
                logs.log("kernels", f"OpenCL binary cache: {path} did not load ({e}); building from source")
                prg = None
        if prg is None:
            prg = cl.Program(self.ctx, source).build(options=options, cache_dir=False)
            STATS["builds"] += 1
            if path is not None:
                try:
                    binary = prg.get_info(cl.program_info.BINARIES)[0]
                    tmp = f"{path}.{os.getpid()}.tmp"
                    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "wb") as f:
                        f.write(binary)
                    os.replace(tmp, path)
                except OSError as e:
                    logs.log("kernels", f"OpenCL binary cache: cannot store {path}: {e}")
        self._programs[key] = prg
        return prg


def _cache_path(key):
    from .build import _kernels_dir
    d, why = _kernels_dir()
    if d is None:
        logs.log("kernels", f"OpenCL binary cache off: {why}")
        return None
    return os.path.join(d, f"cl-{key[:40]}.bin")
