"""Default thread policy for NumPy's BLAS.

Measured on the 2-core machines ember is developed on: OpenBLAS with two threads spin-waits between
calls, and when the cores are shared with anything else (another process, torch's own threads) a
64x128 training step went from 0.5 ms (one thread) to 8 ms (two), and large matmuls ran slower too.
So unless the user chose a thread count (``EMBER_NUM_THREADS``, ``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS`` or ``MKL_NUM_THREADS``), ember runs NumPy's BLAS on one thread.
``ember.set_num_threads(n)`` changes it at any time; ember's generated C kernels use their own
OpenMP pool with passive waiting.
"""
from __future__ import annotations

import os

_VARS = ("EMBER_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def default_threads() -> int | None:
    """The thread count ember applies at import, or None to leave the BLAS alone."""
    v = os.environ.get("EMBER_NUM_THREADS")
    if v:
        return max(1, int(v))
    if any(os.environ.get(k) for k in _VARS[1:]):
        return None
    return 1


def apply_default() -> None:
    n = default_threads()
    if n is None:
        return
    try:
        from ._settings import set_num_threads
        set_num_threads(n)
    except Exception:      # threadpoolctl missing or no BLAS found: keep NumPy's default
        pass
