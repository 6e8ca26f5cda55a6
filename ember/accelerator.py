"""ember.accelerator: torch's device-agnostic accelerator API, answered by ember's OpenCL device.

When an OpenCL device exists (``ember.opencl.is_available()``), it is the accelerator:
``current_accelerator()`` is ``device(type='opencl')``, the memory and synchronisation calls go to
``ember.opencl``. Without one, ``is_available()`` is False, ``current_accelerator()`` is None,
``device_count()`` is 0, and calls that need an accelerator raise RuntimeError as torch does on a
CPU-only build.
"""
from __future__ import annotations

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index", "current_device_idx",
           "set_device_index", "set_device_idx", "synchronize", "empty_cache", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
           "reset_accumulated_memory_stats", "memory_stats", "get_memory_info", "empty_host_cache",
           "current_stream", "set_stream", "device_index"]

_NONE = "Cannot access accelerator device when none is available."
_CURRENT = [0]


def _cl():
    from .devices import opencl
    if not opencl.is_available():
        raise RuntimeError(_NONE)
    return opencl


def is_available() -> bool:
    """Whether an OpenCL device exists."""
    from .devices import opencl
    return opencl.is_available()


def current_accelerator(check_available: bool = False):
    """``device(type='opencl')`` when an OpenCL device exists, else None."""
    from .tensor import device
    return device("opencl") if is_available() else None


def device_count() -> int:
    """The number of OpenCL devices (0 without any)."""
    from .devices import opencl
    return opencl.device_count() if opencl.is_available() else 0


def current_device_index() -> int:
    """The OpenCL device index calls without a device use (0 unless set)."""
    _cl()
    return _CURRENT[0]


def set_device_index(device) -> None:
    """Select the OpenCL device by index (or ``"opencl:N"`` / ``ember.device``)."""
    cl = _cl()
    idx = cl._index(device)
    if not 0 <= idx < cl.device_count():
        raise RuntimeError(f"set_device_index: device index {idx} is out of range ({cl.device_count()} devices)")
    _CURRENT[0] = idx


def synchronize(device=None) -> None:
    """Wait for every command queued on the device."""
    _cl().synchronize(_CURRENT[0] if device is None else device)


def empty_cache() -> None:
    """Return the allocator's cached free blocks to the driver."""
    _cl().empty_cache(_CURRENT[0])


def _dev(device_index):
    """The ``ember.device`` of an accelerator index (the current one when None)."""
    from .tensor import device
    cl = _cl()
    return device("opencl", _CURRENT[0] if device_index is None else cl._index(device_index))


def memory_stats(device_index=None, /):
    """The device allocator's statistics with torch's keys (``ember.memory.memory_stats``)."""
    from . import memory
    return memory.memory_stats(_dev(device_index))


def memory_allocated(device_index=None, /) -> int:
    """Bytes in blocks of live device tensors."""
    return memory_stats(device_index)["allocated_bytes.all.current"]


def max_memory_allocated(device_index=None, /) -> int:
    """The peak of ``memory_allocated`` (since the last ``reset_peak_memory_stats``)."""
    return memory_stats(device_index)["allocated_bytes.all.peak"]


def memory_reserved(device_index=None, /) -> int:
    """Bytes held from the driver, live and cached."""
    return memory_stats(device_index)["reserved_bytes.all.current"]


def max_memory_reserved(device_index=None, /) -> int:
    """The peak of ``memory_reserved``."""
    return memory_stats(device_index)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device_index=None, /) -> None:
    """Set the peaks to the current values."""
    from . import memory
    memory.reset_peak_memory_stats(_dev(device_index))


def reset_accumulated_memory_stats(device_index=None, /) -> None:
    """Zero the running totals (allocations, frees, retries, OOMs)."""
    from . import memory
    memory.reset_accumulated_memory_stats(_dev(device_index))


def get_memory_info(device_index=None, /) -> tuple:
    """``(free, total)`` bytes of the device's global memory (free: what the allocator does not hold)."""
    from . import memory
    return memory.mem_get_info(_dev(device_index))


def empty_host_cache() -> None:
    """Release cached pinned host memory: ember keeps none (pinned tensors are ordinary host arrays)."""


def current_stream(device=None, /):
    """The current ``ember.Stream`` of the accelerator (its default stream unless one was set)."""
    from .events import current_stream as _current
    return _current(_dev(device) if not hasattr(device, "type") else device)


def set_stream(stream, /) -> None:
    """Make ``stream`` the current stream of its device."""
    from .events import set_stream as _set
    _cl()
    _set(stream)


current_device_idx = current_device_index
set_device_idx = set_device_index


class device_index:
    """Context manager selecting an accelerator device for its block; ``device_index(None)`` is a no-op."""

    def __init__(self, device, /):
        self.idx = device
        self.prev = None

    def __enter__(self):
        if self.idx is not None:
            self.prev = current_device_index()
            set_device_index(self.idx)
        return self

    def __exit__(self, *exc):
        if self.prev is not None:
            set_device_index(self.prev)
        return False
