"""ember.backends.mps: Apple's Metal backend (not available in ember)."""
from __future__ import annotations


def is_available() -> bool:
    """False: ember computes on the CPU only."""
    return False


def is_built() -> bool:
    """False: ember is not built with MPS."""
    return False


def is_macos13_or_newer(minor: int = 0) -> bool:
    return False
