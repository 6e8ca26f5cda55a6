"""ember's own float32 GEMM, emitted into generated C (the C text is in gemm_c.py).

Why: the BLAS ember links (OpenBLAS from scipy-openblas32) runs its own pthread pool whose idle threads
spin; on cores shared with anything else a two-thread call was measured 4-10x slower than one thread.
ember's GEMM runs on its own work pool (pool_c.py: passive waiting, work taken dynamically) and its
tile is about as fast as the BLAS kernels, faster on small batched products (``python -m ember.bench gemm``).

Where it runs: ``render_special.emit_gemm`` calls ``EM_SGEMM_OR`` for float32 GEMMs of at least
``MIN_WORK`` multiply-adds (all batches together) on CPUs with AVX-512 or AVX2+FMA (decided when the
generated C is compiled with ``-march=native``: the kernel cache is keyed on the CPU; checked again at run
time with cpuid and XCR0). Elsewhere, and when its buffers cannot be allocated, the same call site runs
the BLAS. ``EMBER_NATIVE_GEMM=0`` turns it
off; ``mode="max-autotune"`` also times the BLAS variant. The thread count is OpenMP's
(``ember.set_num_threads``), fewer for small GEMMs: one below ``EM_GEMM_PAR_MIN`` (8M multiply-adds),
then one per 4M; a quarter of that while the pool's threads poll between jobs (gemm_c.py
``em_gemm_threads``); a small C over a long K (weight gradients) is split along K (gemm_ksplit_c.py).
Every thread count gives the one-thread bits. Accuracy: fused
multiply-adds in K order within blocks of ``EM_KC`` (the tests compare against NumPy at 1e-5 relative).

``library()`` builds the GEMM alone with exported entry points; ``sgemm(a, b, ...)`` calls it on NumPy
arrays (tests and eager matmuls use it) and ``sgemm_call`` prepares such a call (the bench times it).
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

from .gemm_c import SGEMM_C, LIBRARY_C
# the thread settings, a dict ember.set_num_threads updates in place: read at each call, imported once
from .._settings import _THREADS
from . import shared_gemm

__all__ = ["MIN_WORK", "SGEMM_C", "enabled", "library", "available", "simd_width", "sgemm", "sgemm_call"]

MIN_WORK = 1 << 15          # nb*M*N*K below this: the BLAS (a call's fixed cost is about 1 us)


def enabled() -> bool:
    return os.environ.get("EMBER_NATIVE_GEMM", "1") not in ("0", "")


_LIB: list = []


_ARGS = (ctypes.c_int, ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_long,
         ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_long, ctypes.c_long,
         ctypes.c_void_p, ctypes.c_long, ctypes.c_long)
_ACC: list = []             # ember_sgemm_acc (the same arguments and the accumulate flag)


def library(cached_only: bool = False):
    """The GEMM built as a library of its own: ``(lib, ember_sgemm, has the CPU its tile?, vector width)``
    (``ember_sgemm`` is what graph libraries call, see shared_gemm.py; ``ember_sgemm_acc`` adds a flag).
    ``cached_only=True``: None instead of building it when it is not in the kernel cache."""
    if not _LIB:
        from . import build
        from . import prims as P
        src = "\n".join([P.C_PRELUDE, build.OMP_PRELUDE, SGEMM_C, LIBRARY_C])
        lib = build.compile_source(src, name="ember_sgemm", cached_only=cached_only)
        if lib is None:
            return None
        fn = lib.get("ember_sgemm", _ARGS, ctypes.c_int)
        _ACC.append(lib.get("ember_sgemm_acc", _ARGS + (ctypes.c_int,), ctypes.c_int))
        have = lib.get("ember_have_sgemm", (), ctypes.c_int)()
        width = lib.get("ember_simd_width", (), ctypes.c_int)()
        _LIB.append((lib, fn, bool(have), int(width)))
    return _LIB[0]


def available() -> bool:
    """True when this CPU runs ember's GEMM (AVX-512 or AVX2+FMA)."""
    return library()[2]


def simd_width() -> int:
    """Floats per vector register of the compiled tile: 16 (AVX-512), 8 (AVX2) or 0 (not compiled)."""
    return library()[3]


def _operand(x: np.ndarray, rows: int, cols: int):
    """(transposed?, leading dimension) of a 2-D view whose last or first stride is one element and whose
    rows (or columns) do not overlap; None for other layouts (expanded, overlapping, negative strides),
    which the caller copies."""
    s0, s1 = (s // x.itemsize for s in x.strides[-2:])
    if (s1 == 1 or cols == 1) and (s0 >= cols or rows == 1):
        return 0, max(s0, cols, 1)
    if (s0 == 1 or rows == 1) and (s1 >= rows or cols == 1):
        return 1, max(s1, rows, 1)
    return None


def sgemm(a: np.ndarray, b: np.ndarray, threads: int = 0, out: np.ndarray | None = None,
          accumulate: bool = False, exact_threads: bool = False) -> np.ndarray:
    """``a @ b`` for float32 arrays of shape (M, K) / (K, N) or batches (nb, M, K) / (nb, K, N) through
    ember's GEMM on up to ``threads`` threads (0: OpenMP's setting; fewer for small products, see the
    module text; ``exact_threads=True``: that many whatever the size, for tests of the split). Each
    matrix may be transposed (a view); other layouts are copied. ``out`` (C-contiguous float32) receives
    the result; ``accumulate=True`` adds the product to it instead.
    Raises RuntimeError where the CPU has no such GEMM."""
    run, c = sgemm_call(a, b, threads, out, accumulate, exact_threads)
    run()
    return c if a.ndim == 3 else c[0]


def sgemm_call(a: np.ndarray, b: np.ndarray, threads: int = 0, out: np.ndarray | None = None,
               accumulate: bool = False, exact_threads: bool = False):
    """``(run, c)``: ``run()`` computes ``sgemm(a, b, ...)`` into ``c`` (shape (nb, M, N)) with one foreign
    call whose arguments are worked out here once (the bench times ``run``, as generated code calls it)."""
    have = library()[2]
    fn = _ACC[0]
    if not have:
        raise RuntimeError("ember.compiler.gemm.sgemm: this CPU has neither AVX-512 nor AVX2+FMA")
    if a.dtype != np.float32 or b.dtype != np.float32:
        raise TypeError(f"sgemm: expected float32 operands, got {a.dtype} and {b.dtype}")
    batched = a.ndim == 3
    a3 = a if batched else a[None]
    b3 = b if batched else b[None]
    nb, M, K = a3.shape
    nb2, K2, N = b3.shape
    if nb2 != nb or K2 != K:
        raise ValueError(f"sgemm: shapes {a.shape} and {b.shape} do not multiply")
    ops = []
    for x, r, c in ((a3, M, K), (b3, K, N)):
        lay = _operand(x[0], r, c) if nb else (0, max(c, 1))
        if lay is None or (nb > 1 and (x.strides[0] % x.itemsize or x.strides[0] < 0)):
            x = np.ascontiguousarray(x)
            lay = (0, max(c, 1))
        ops.append((x, lay, x.strides[0] // x.itemsize if nb > 1 else 0))
    (a3, (ta, lda), sa), (b3, (tb, ldb), sb) = ops
    if accumulate and out is None:
        raise ValueError("sgemm: accumulate=True needs out (the matrix to add the product to)")
    if out is not None and (out.dtype != np.float32 or not out.flags.c_contiguous or out.size != nb * M * N):
        raise ValueError(f"sgemm: out must be a C-contiguous float32 array of {nb * M * N} elements, got "
                         f"{out.dtype} of shape {out.shape}")
    c = np.empty((nb, M, N), np.float32) if out is None else out.reshape(nb, M, N)
    nt = -abs(int(threads)) if exact_threads and threads else int(threads)   # (< 0: exactly, gemm_c.py)
    args = (nt, nb, ta, tb, M, N, K, a3.ctypes.data, lda, sa, b3.ctypes.data, ldb, sb,
            c.ctypes.data, max(N, 1), M * N, int(bool(accumulate)))

    def run(_alive=(a3, b3)):         # the default keeps the (possibly copied) operands alive
        if not fn(*args):
            raise MemoryError("sgemm: could not allocate the packing buffers")
        return c
    return run, c


EAGER_SMALL = 1 << 14       # below this NumPy (OpenBLAS runs such products on one thread anyway)
_F32 = np.dtype(np.float32)


def eager_matmul(a: np.ndarray, b: np.ndarray):
    """``a @ b`` through ember's GEMM on ``ember.get_num_threads()`` threads, or None where NumPy's BLAS
    should run: one thread asked for (and NumPy's BLAS on one thread), not float32, a broadcasting batch,
    too small (see _threads.py: NumPy's BLAS pool synchronizes by spinning, ember's sleeps)."""
    nt = _THREADS["intra"]
    if nt <= 1 and _THREADS["blas"] <= 1:
        return None
    if a.dtype != _F32 or b.dtype != _F32 or a.ndim != b.ndim or not 2 <= a.ndim <= 3:
        return None
    if a.ndim == 3 and a.shape[0] != b.shape[0]:
        return None
    nb = a.shape[0] if a.ndim == 3 else 1
    work = nb * a.shape[-2] * a.shape[-1] * b.shape[-1]
    if work < EAGER_SMALL or a.shape[-1] != b.shape[-2]:
        return None
    if not _LIB and shared_gemm.building():
        # a first compile's trace does not wait for the library's build (NumPy's BLAS runs it); eager code
        # does, so that an eager product never changes kernels (and bits) partway through a process
        from .background import holding
        from .capture import Tracer
        if Tracer.active is not None or holding():
            return None
        shared_gemm.wait()
    try:
        if not available():
            return None
    except Exception:          # no C compiler: NumPy's BLAS
        return None
    # small products run on one thread (gemm_c.py em_gemm_threads), which keeps them off NumPy's BLAS
    # pool (set to nt threads by set_num_threads), whose spinning synchronization costs more than they do
    return sgemm(a, b, threads=max(nt, 1))
