"""The thread policy: how many threads ember's kernels use, and how they wait.

``ember.get_num_threads()`` defaults to the cores this process may run on (``os.sched_getaffinity``),
as torch does, or to ``EMBER_NUM_THREADS`` / ``OMP_NUM_THREADS`` when set. That one number governs:

- the compiled kernels' OpenMP pool (parallel loops and ember's GEMM, compiler/gemm.py), whose idle
  threads sleep (``OMP_WAIT_POLICY=PASSIVE``, set here before any OpenMP runtime loads);
- eager float32 matmuls large enough to pay for threads, which run ember's GEMM on that pool
  (ops/linalg_products.py);
- NumPy's BLAS (through ``threadpoolctl``) once ``ember.set_num_threads(n)`` is called.

At import NumPy's BLAS is left at one thread unless the environment asks otherwise (``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` or ``EMBER_NUM_THREADS``). Its OpenBLAS pool spin-waits:
measured on this project's 2-core machine with other processes running, a 256x512x512 float32 matmul took
3.4 ms on one BLAS thread and 13-28 ms on two. ember's own pool sleeps instead, and it takes work items
dynamically, so a thread whose core is busy does less of the work rather than holding the others up.
"""
from __future__ import annotations

import os

_VARS = ("EMBER_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def affinity_count() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _env_int(name: str) -> int | None:
    v = os.environ.get(name, "").split(",")[0].strip()
    try:
        return max(1, int(v)) if v else None
    except ValueError:
        return None


def default_threads() -> int:
    """``get_num_threads()`` at import: ``EMBER_NUM_THREADS``, else ``OMP_NUM_THREADS``, else the cores."""
    for name in _VARS[:2]:
        n = _env_int(name)
        if n is not None:
            return n
    return affinity_count()


def default_blas_threads() -> int | None:
    """The NumPy BLAS thread count applied at import, or None to leave the BLAS as the environment set it."""
    n = _env_int("EMBER_NUM_THREADS")
    if n is not None:
        return n
    if any(os.environ.get(k) for k in _VARS[1:]):
        return None
    return 1


def apply_default() -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # read when libgomp loads (see compiler/build.py)
    from . import _settings
    _settings._THREADS["intra"] = default_threads()
    nb = default_blas_threads()
    if nb is not None:
        _settings.limit_blas(nb)
