"""ember.cpu: the ``torch.cpu`` device module (the CPU is ember's one device) and ``ember.cpu.amp``."""
from __future__ import annotations

from . import amp  # noqa: F401

__all__ = ["is_available", "device_count", "current_device", "synchronize", "set_device", "is_initialized", "amp"]


def is_available() -> bool:
    """Always True."""
    return True


def device_count() -> int:
    """Always 1."""
    return 1


def current_device() -> str:
    """``"cpu"``."""
    return "cpu"


def is_initialized() -> bool:
    return True


def synchronize(device=None) -> None:
    """No-op: CPU ops finish before they return."""


def set_device(device) -> None:
    """Accepted and ignored, as in torch (there is one CPU device)."""
