"""``ember.devices.cpu``: the host "device", with the same storage interface as
:mod:`ember.devices.opencl` so that code moving data between devices needs no special case.

A CPU storage is a NumPy array. ``from_numpy`` shares memory with its argument (as
``torch.from_numpy`` does); ``to_numpy`` returns the array itself; ``empty`` does not initialise.
There is one CPU device (index 0) and all work is synchronous.
"""
from __future__ import annotations

import numpy as np

__all__ = ["is_available", "device_count", "get_device_name", "synchronize", "empty", "from_numpy",
           "to_numpy", "copy_"]


def is_available() -> bool:
    """Always True."""
    return True


def device_count() -> int:
    """Always 1."""
    return 1


def _check(device) -> None:
    if device not in (None, 0, "cpu", "cpu:0") and getattr(device, "type", None) != "cpu":
        raise RuntimeError(f"ember.devices.cpu: invalid device {device!r}; there is one CPU device, 'cpu'")


def get_device_name(device=None) -> str:
    _check(device)
    return "cpu"


def synchronize(device=None) -> None:
    """Nothing to wait for: CPU work finishes before the call that queued it returns."""
    _check(device)


def empty(shape, dtype, device=None, *, op=None) -> np.ndarray:
    """An uninitialised C-contiguous array (``op`` is accepted for interface parity)."""
    _check(device)
    return np.empty(tuple(shape), dtype=np.dtype(dtype))


def from_numpy(arr, device=None, non_blocking: bool = False, *, op=None) -> np.ndarray:
    """``arr`` as an ndarray, sharing memory with it."""
    _check(device)
    return np.asarray(arr)


def to_numpy(storage) -> np.ndarray:
    """The array itself (no copy)."""
    return storage


def copy_(dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    """Copy ``src`` into ``dst`` (broadcasting ``src``); returns ``dst``."""
    np.copyto(dst, src, casting="unsafe")
    return dst
