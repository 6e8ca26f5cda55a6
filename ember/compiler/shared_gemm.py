"""Generated graph libraries call ember's GEMM in its own shared library, built once, instead of each
compiling a copy of it.

Why: the GEMM with its work pool (gemm_c.py, pool_c.py) is ~700 lines of C that took ~0.8 s of every
graph build (the small GPT's step: 3.9 s with it, 3.1 s without, gcc -O3), and a process that compiled
several graphs ran a pool per graph. ``ember.compiler.gemm.library()`` already builds the GEMM alone
(``ember_sgemm``, cached on disk like any kernel; eager matmuls use it), so a graph library now holds
:data:`GEMM_STUB_C` in its place: a function pointer, NULL until :func:`bind` sets it to that library's
``ember_sgemm`` after loading, and ``EM_SGEMM_OR(blas, ...)`` calling it (the BLAS statement runs while
the pointer is NULL, on CPUs without the GEMM, and when a packing buffer cannot be allocated, as before).
The pointer is a hidden (not exported) variable of each graph library, set through its exported
``ember_bind_sgemm``, so libraries never share or interpose it; a library split into several
translation units (units.py) defines it in the first.

A cold graph build starts the GEMM library's build in a background thread (:func:`prefetch`), so both C
compilers run at once; :func:`bind` waits for it (``build.compile_source`` lets one thread build a key
while the others wait for that key only). ``ember.compile`` starts it before the first trace, which runs
beside it: the build runs at ``background.BACKGROUND_NICE`` (the trace gets the CPU first) and NumPy's
BLAS, which does the trace's products, on one thread until it ends (``tiers.hold_one_blas_thread``). The
small GPT's cold first three steps: ~2.5 s with both at their defaults, ~1.0 s with both (busy 2 cores,
alternating fresh processes).
"""
from __future__ import annotations

import ctypes
import threading

__all__ = ["GEMM_STUB_C", "uses_gemm", "prefetch", "building", "bind"]

GEMM_STUB_C = r"""/* ember's GEMM, called in its own library (ember.compiler.shared_gemm) */
typedef int (*em_sgemm_fn)(int, long, int, int, long, long, long, const float *, long, long, const float *,
                           long, long, float *, long, long);
#ifndef EM_UNIT_EXTERN
__attribute__((visibility("hidden"))) em_sgemm_fn em_sgemm_ptr = 0;
void ember_bind_sgemm(void *fn) { em_sgemm_ptr = (em_sgemm_fn)fn; }
#else
extern __attribute__((visibility("hidden"))) em_sgemm_fn em_sgemm_ptr;   /* (units.py: defined in unit 0) */
#endif
#define EM_SGEMM_OR(blas, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc) \
  do { if (!em_sgemm_ptr || !em_sgemm_ptr(0, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc)) { blas; } } \
  while (0)
"""

_BIND_SYMBOL = "ember_bind_sgemm"
_PREFETCH: dict = {}        # "thread" -> the background build (started once per process)


def uses_gemm(source: str) -> bool:
    """Whether a generated source calls ember's GEMM (then its library is needed)."""
    return "EM_SGEMM_OR(" in source and _BIND_SYMBOL in source


def _build_in_background() -> None:
    """:func:`prefetch`'s thread: the build at low priority, then the BLAS hold of :func:`prefetch` ends."""
    from . import background, tiers
    try:
        tiers.lower_priority(background.BACKGROUND_NICE)
        _library()
    finally:
        if _PREFETCH.pop("blas_held", False):
            tiers.release_blas_thread()


def _library():
    """The GEMM library's ``ember_sgemm`` address, or None where the CPU has no such GEMM or it does
    not build (then the graphs run the BLAS)."""
    from . import gemm
    try:
        lib, fn, have, _ = gemm.library()
    except Exception:        # (a compile error is the GEMM's own tests' business; the BLAS still works)
        return None
    return ctypes.cast(fn, ctypes.c_void_p).value if have else None


def prefetch() -> None:
    """Load the GEMM library from the cache, or start building it in a background thread (eager matmuls
    run on NumPy's BLAS until it is loaded: :func:`building`), if not done yet."""
    from . import gemm
    if gemm._LIB or "thread" in _PREFETCH:
        return
    try:
        if gemm.library(cached_only=True) is not None:
            return
    except Exception:        # (the build below meets the same error and reports it as before)
        pass
    # (not a daemon: an exit waits for the build, which then lands in the cache instead of leaving a
    # half-built directory there)
    from . import tiers
    t = threading.Thread(target=_build_in_background, name="ember-gemm-build")
    _PREFETCH["thread"] = t
    _PREFETCH["blas_held"] = tiers.hold_one_blas_thread()    # (released by the thread when it ends)
    try:
        t.start()
    except BaseException:
        if _PREFETCH.pop("blas_held", False):
            tiers.release_blas_thread()
        raise


def wait() -> None:
    """Wait for :func:`prefetch`'s background build, if one is running."""
    t = _PREFETCH.get("thread")
    if t is not None:
        t.join()


def building() -> bool:
    """Whether :func:`prefetch`'s background build of the GEMM library is running."""
    t = _PREFETCH.get("thread")
    return t is not None and t.is_alive()


def bind(lib) -> None:
    """Point a loaded graph library (a ``build.CompiledLibrary``) at the GEMM library, if it calls it
    (waiting, passively, for a build of it in progress)."""
    try:
        setter = lib.get(_BIND_SYMBOL, (ctypes.c_void_p,), None)
    except AttributeError:
        return
    setter(_library())
