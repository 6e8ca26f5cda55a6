"""ember.backends.mkl: Intel MKL (ember does not link it directly; NumPy's BLAS does the work)."""
from __future__ import annotations


def is_available() -> bool:
    """False: ember does not use MKL itself."""
    return False
