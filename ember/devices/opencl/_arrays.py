"""``DeviceArray``, the storage of a device tensor (a view of an allocator :class:`Block`), and
``empty``.
"""
from __future__ import annotations

import numpy as np

from ._device_runtime import Block, _runtime
from .._strided import StridedInfo

_ITEM_TYPES = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong", 16: "ulong2"}


def _contiguous_strides(shape) -> tuple:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


class DeviceArray(StridedInfo):
    """The storage of a device tensor: ``block`` + byte ``offset`` + ``shape`` + element ``strides``
    + NumPy ``dtype`` + device index. Views share the block (see the module docstring)."""

    __slots__ = ("block", "offset", "shape", "strides", "dtype", "device", "__weakref__")

    def __init__(self, block: Block, offset: int, shape, strides, dtype, device: int):
        self.block = block
        self.offset = offset
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.device = device

    @property
    def buffer(self):
        """The ``cl.Buffer`` (pass it with ``element_offset`` to kernels)."""
        return self.block.buffer

    @property
    def element_offset(self) -> int:
        return self.offset // self.dtype.itemsize

    def _extent(self) -> tuple:
        """(lowest, highest + 1) element index reached, relative to the block start."""
        lo = hi = self.offset // self.dtype.itemsize
        for n, s in zip(self.shape, self.strides):
            if n == 0:
                return lo, lo
            if s < 0:
                lo += (n - 1) * s
            else:
                hi += (n - 1) * s
        return lo, hi + 1

    def view(self, offset: int, shape, strides, dtype=None) -> "DeviceArray":
        """A DeviceArray on the same block: ``offset`` in bytes from the block start, ``strides`` in
        elements of ``dtype`` (default: this array's)."""
        dt = self.dtype if dtype is None else np.dtype(dtype)
        shape, strides = tuple(int(n) for n in shape), tuple(int(s) for s in strides)
        if len(shape) != len(strides):
            raise RuntimeError(f"mismatch in length of strides and shape: {len(strides)} strides for "
                               f"{len(shape)} dims")
        if any(n < 0 for n in shape):
            raise RuntimeError(f"negative dimension in shape {list(shape)}")
        if offset < 0 or offset % dt.itemsize:
            raise ValueError(f"view: byte offset {offset} must be a non-negative multiple of the item size "
                             f"{dt.itemsize} ({dt.name})")
        out = DeviceArray(self.block, int(offset), shape, strides, dt, self.device)
        lo, hi = out._extent()
        if lo < 0 or hi * dt.itemsize > self.block.nbytes:
            raise RuntimeError(f"setStorage: sizes {list(shape)}, strides {list(strides)}, storage offset "
                               f"{offset // dt.itemsize}, and itemsize {dt.itemsize} requiring a storage size "
                               f"of {hi * dt.itemsize} are out of bounds for storage of size {self.block.nbytes}")
        return out

    def __repr__(self):
        return (f"DeviceArray(shape={self.shape}, strides={self.strides}, dtype={self.dtype.name}, "
                f"offset={self.offset}, device='opencl:{self.device}')")


def _check_dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.itemsize not in _ITEM_TYPES or dt.kind not in "biufcV" or dt.hasobject:
        raise TypeError(f"can't store NumPy dtype {dt} on an OpenCL device: the supported item types are "
                        "bool, integers, floating point (incl. float16 and bfloat16) and complex")
    return dt


def empty(shape, dtype, device=None, *, op=None) -> DeviceArray:
    """An uninitialised C-contiguous DeviceArray (``op`` names the caller in out-of-memory errors)."""
    dt = _check_dtype(dtype)
    shape = tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(shape)}")
    rt = _runtime(device)
    n = 1
    for s in shape:
        n *= s
    return DeviceArray(rt.malloc(n * dt.itemsize, op), 0, shape, _contiguous_strides(shape), dt, rt.index)
