"""ember.accelerator: torch's device-agnostic accelerator API, for a framework with no accelerator.

``is_available()`` is False, ``current_accelerator()`` is None and ``device_count()`` is 0; calls that
need an accelerator raise RuntimeError as torch does on a CPU-only build.
"""
from __future__ import annotations

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index", "current_device_idx",
           "set_device_index", "set_device_idx", "synchronize", "empty_cache", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
           "device_index"]

_NONE = "Cannot access accelerator device when none is available."


def is_available() -> bool:
    """Always False: ember computes on the CPU only."""
    return False


def current_accelerator(check_available: bool = False):
    """None: there is no accelerator."""
    return None


def device_count() -> int:
    """Always 0."""
    return 0


def _none(*args, **kwargs):
    raise RuntimeError(_NONE)


def current_device_index() -> int:
    """Raises RuntimeError: there is no accelerator device."""
    _none()


def set_device_index(device) -> None:
    """Raises RuntimeError: there is no accelerator device."""
    _none()


def synchronize(device=None) -> None:
    """Raises RuntimeError: there is no accelerator device."""
    _none()


def empty_cache() -> None:
    """Raises RuntimeError: there is no accelerator device."""
    _none()


def memory_allocated(device_index=None) -> int:
    _none()


def max_memory_allocated(device_index=None) -> int:
    _none()


def memory_reserved(device_index=None) -> int:
    _none()


def max_memory_reserved(device_index=None) -> int:
    _none()


def reset_peak_memory_stats(device_index=None) -> None:
    _none()


current_device_idx = current_device_index
set_device_idx = set_device_index


class device_index:
    """Context manager selecting an accelerator device; ``device_index(None)`` is a no-op, any index
    raises RuntimeError (no accelerator)."""

    def __init__(self, device, /):
        self.idx = device

    def __enter__(self):
        if self.idx is not None:
            _none()
        return self

    def __exit__(self, *exc):
        return False
