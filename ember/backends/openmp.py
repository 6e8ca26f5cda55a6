"""ember.backends.openmp: OpenMP (ember's ops do not use it)."""
from __future__ import annotations


def is_available() -> bool:
    """False: ember's ops do not use OpenMP."""
    return False
