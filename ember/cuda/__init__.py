"""ember.cuda: the ``torch.cuda`` surface programs probe, for a framework without a GPU.

``is_available()`` is False and ``device_count()`` is 0, so code written as
``device = "cuda" if ember.cuda.is_available() else "cpu"`` picks the CPU. Seeding, ``synchronize``
and ``empty_cache`` are accepted no-ops (there is nothing to seed, wait for or free); queries that
need a device (``current_device``, ``get_device_name``, ...) raise a clear error.
"""
from __future__ import annotations

from . import amp  # noqa: F401

__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all", "seed", "seed_all", "synchronize",
           "current_device", "empty_cache", "get_device_name", "get_device_capability", "get_device_properties",
           "set_device", "is_initialized", "init", "is_bf16_supported", "memory_allocated", "max_memory_allocated",
           "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats", "ipc_collect", "amp", "device",
           "get_arch_list", "mem_get_info", "initial_seed", "get_rng_state", "set_rng_state",
           "get_rng_state_all", "set_rng_state_all", "current_stream", "Stream", "Event", "OutOfMemoryError"]

_NO_CUDA = "ember was built without CUDA support: it computes on the CPU only (use device='cpu')"


def _no_cuda(fn: str):
    # torch raises AssertionError("Torch not compiled with CUDA enabled") for these
    raise AssertionError(f"ember.cuda.{fn}(): {_NO_CUDA}")


# the same class as ember.OutOfMemoryError, so ``except ember.cuda.OutOfMemoryError`` catches ember's limit errors
from ..memory import OutOfMemoryError  # noqa: E402


def is_available() -> bool:
    """Always False: ember has no CUDA backend."""
    return False


def device_count() -> int:
    """Always 0."""
    return 0


def is_initialized() -> bool:
    return False


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def manual_seed(seed: int) -> None:
    """Accepted and ignored (no CUDA generators exist), as torch does without CUDA."""
    int(seed)


def manual_seed_all(seed: int) -> None:
    """Accepted and ignored (no CUDA generators exist), as torch does without CUDA."""
    int(seed)


def seed() -> None:
    """No-op (no CUDA generators)."""


def seed_all() -> None:
    """No-op (no CUDA generators)."""


def synchronize(device=None) -> None:
    """No-op: ember's CPU ops finish before they return, so there is nothing to wait for.

    (torch without CUDA raises here; ember accepts it so CPU timing code that synchronizes runs.)"""


def empty_cache() -> None:
    """No-op: there is no CUDA caching allocator."""


def ipc_collect() -> None:
    _no_cuda("ipc_collect")


def init() -> None:
    _no_cuda("init")


def current_device() -> int:
    """Raises: there is no current CUDA device."""
    _no_cuda("current_device")


def set_device(device) -> None:
    """Raises: there are no CUDA devices."""
    _no_cuda("set_device")


def get_device_name(device=None) -> str:
    """Raises: there are no CUDA devices."""
    _no_cuda("get_device_name")


def get_device_capability(device=None):
    _no_cuda("get_device_capability")


def get_device_properties(device=None):
    _no_cuda("get_device_properties")


def mem_get_info(device=None):
    _no_cuda("mem_get_info")


def initial_seed() -> int:
    _no_cuda("initial_seed")


def get_rng_state(device="cuda"):
    _no_cuda("get_rng_state")


def set_rng_state(new_state, device="cuda") -> None:
    _no_cuda("set_rng_state")


def get_rng_state_all() -> list:
    return []


def set_rng_state_all(new_states) -> None:
    """No-op (no devices)."""


def current_stream(device=None):
    _no_cuda("current_stream")


def get_arch_list() -> list:
    return []


def memory_allocated(device=None) -> int:
    """0: no CUDA memory is ever allocated."""
    return 0


def max_memory_allocated(device=None) -> int:
    return 0


def memory_reserved(device=None) -> int:
    return 0


def max_memory_reserved(device=None) -> int:
    return 0


def reset_peak_memory_stats(device=None) -> None:
    """No-op (no CUDA memory statistics)."""


class device:
    """Context manager ``ember.cuda.device(i)``: accepted for ``None``/negative indices (no-ops), as
    torch does; entering it for a real index raises, since there are no CUDA devices."""

    def __init__(self, device):
        self.idx = -1 if device is None else (device.index if hasattr(device, "index") else int(device))

    def __enter__(self):
        if self.idx is not None and self.idx >= 0:
            _no_cuda("device")
        return self

    def __exit__(self, *exc):
        return False


class Stream:
    """ember.cuda.Stream: unavailable (no CUDA)."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError(f"ember.cuda.Stream requires CUDA support: {_NO_CUDA}")


class Event:
    """ember.cuda.Event: unavailable (no CUDA)."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError(f"ember.cuda.Event requires CUDA support: {_NO_CUDA}")
