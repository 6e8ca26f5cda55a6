"""Tiered builds of large generated libraries: a quick build now, the optimized one in the background.

Why: a cold compile of the small GPT's training step spends about 2 s of CPU in ``gcc -O3`` (65 kernel
functions), and the step waits for it. ``-O1`` builds the same source in about half that, and its code
runs the step about as fast as the interpreter or faster; the ``-O3`` library is worth having for every
step after the first few, not worth waiting for.

How: :func:`compile_tiered` returns the ``-O3`` library when it is in this process or in the disk cache.
Otherwise it builds (or loads) the same source with :data:`QUICK_FLAGS` added (their ``-O`` wins over
the base ``-O3``; a unit's own flags, such as the entries' ``-O1`` from ``units.py``, still come last),
returns that, and starts the ``-O3`` build in a background thread; the quick library's ``.upgrade`` is a
:class:`Pending` that says when the optimized library is ready. The caller swaps it in at a point of its
choosing (``native.NativeRunner`` does at the start of a call, so a step runs on one library). Both
libraries are ordinary cache entries keyed by their flags (the key covers every flag), so a later
process finds the ``-O3`` one, or, when the first process ended before it landed, the quick one and
builds the ``-O3`` again in the background. A background build that is killed leaves no entry (builds
go to a private directory and are moved into place whole, see build.py).

Same results: both libraries come from one source with the same flags except ``-O``; the generated C
has no reassociation licence (no ``-ffast-math``, ``-ffp-contract=off`` for graphs), so the optimization
level does not change what is computed beyond the order the ``omp simd`` reductions already leave open.

A large graph whose plan is not cached is compiled in the background instead (``background.py``: the
interpreter runs its calls meanwhile); :func:`start` runs that too, and a build inside a background
thread is never tiered (nobody waits for it). Only sources split into several translation units
(``units.split``) are tiered: a small program's
``-O3`` build is cheap and one build is less work than two. ``EMBER_BUILD_TIERS=0`` turns tiering off
(every build is the ``-O3`` one, waited for). The background build runs one compiler fewer than the
cores (at least one), so the steps it overlaps keep a core. Its thread is not a daemon: a process
that ends first waits for it, and the ``-O3`` library lands in the cache for the next run (as the GEMM
library's background build does, ``shared_gemm.prefetch``). :func:`wait_background` waits for the
builds in flight (``build.clear_memory_cache`` does; the bench does before timing steady-state steps).
"""
from __future__ import annotations

import os
import threading
import time

from . import build, cache as _cache, compilers as _compilers
from .logs import log

__all__ = ["QUICK_FLAGS", "STATS", "Pending", "background_builds", "compile_tiered", "enabled", "start",
           "wait_background"]

QUICK_FLAGS = ("-O1",)
# quick builds in use; background -O3 builds landed/failed; graphs compiled in the background landed
# (background.py); ember's fixed libraries built for the next process (eager_kernels.build_later)
STATS = {"quick": 0, "optimized": 0, "failed": 0, "graphs": 0, "support": 0}
_PENDING: list = []          # Pending builds started by this process
_GUARD = threading.Lock()
_IN_BACKGROUND = threading.local()     # .active: a Pending's thread (its builds are the final ones)


def enabled() -> bool:
    return os.environ.get("EMBER_BUILD_TIERS", "1").strip().lower() not in ("0", "false", "no", "off")


def lower_priority(nice: int, thread: bool = True) -> None:
    """Run the calling thread (``thread=False``: the whole process, e.g. a forked child) and the compilers
    it starts at niceness ``nice``, so that builds beside a program's steps take the CPU the steps leave
    (Linux: a thread's niceness is its own, inherited by the processes it starts; elsewhere nothing)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id() if thread else 0, nice)
    except (AttributeError, OSError):
        pass


# ---- NumPy's BLAS on one thread while builds run beside the program's steps ----------------------------
# Held by the GEMM library's background build (shared_gemm.prefetch: it runs beside the first trace, whose
# products are NumPy's) and by the interpreted calls of a graph compiled in the background (background.py).
# On two cores a second BLAS thread meets the compilers there: OpenBLAS threads synchronize by spinning,
# and the small GPT's cold trace took 1.3-1.5 s with two BLAS threads against ~0.3-0.7 s with one. (OpenBLAS
# blocks a product differently on one thread, so its last bits may differ from two threads', as with any
# set_num_threads change; ember's default is one BLAS thread, where nothing changes.) Counted, so that
# holders ending in any order (on any thread) restore the limit once, when the last one releases.
_BLAS_HOLD = {"n": 0, "limiter": None}
_BLAS_GUARD = threading.Lock()


def _blas_one_wanted() -> bool:
    return os.environ.get("EMBER_BACKGROUND_BLAS_ONE", "1").strip().lower() not in ("0", "false", "no", "off")


def hold_one_blas_thread() -> bool:
    """Limit NumPy's BLAS to one thread until the matching :func:`release_blas_thread` (True: held, call
    it; False: not limited, by ``EMBER_BACKGROUND_BLAS_ONE=0`` or without ``threadpoolctl``)."""
    if not _blas_one_wanted():
        return False
    with _BLAS_GUARD:
        if _BLAS_HOLD["n"] == 0:
            try:
                import threadpoolctl
                _BLAS_HOLD["limiter"] = threadpoolctl.threadpool_limits(limits=1, user_api="blas")
            except Exception:          # (no threadpoolctl or no BLAS found: nothing to limit)
                return False
        _BLAS_HOLD["n"] += 1
        return True


def release_blas_thread() -> None:
    """End one :func:`hold_one_blas_thread`; the last one restores the BLAS's thread count: the one
    ``ember.set_num_threads`` set meanwhile, else the one in force before the first hold."""
    with _BLAS_GUARD:
        _BLAS_HOLD["n"] -= 1
        if _BLAS_HOLD["n"] > 0:
            return
        limiter, _BLAS_HOLD["limiter"] = _BLAS_HOLD["limiter"], None
        try:
            from .. import _settings
            n = _settings._THREADS.get("blas") or 0
            if n > 0 and _settings._LIMITER:
                import threadpoolctl
                threadpoolctl.threadpool_limits(limits=n, user_api="blas")
            elif limiter is not None:
                limiter.restore_original_limits()
        except Exception:
            pass


class Pending:
    """The optimized library being built in a background thread: ``ready()``, ``wait(timeout)``,
    ``result`` (a prepared ``build.CompiledLibrary``, or None when the build failed: ``error``)."""

    def __init__(self, name: str, make, kind: str = "optimized"):
        self.name = name
        self.kind = kind                       # the STATS entry counting it when it lands
        self.result = None
        self.error = None
        self.seconds = self.done_at = None
        self._done = threading.Event()
        self._root = _cache.cache_dir()         # (the environment may name another cache by the time it runs)
        self._thread = threading.Thread(target=self._run, args=(make,), name=f"ember-build-{name}")

    def _run(self, make):
        t = time.perf_counter()
        _compilers._BACKGROUND.active = True          # one compiler fewer than the cores
        _IN_BACKGROUND.active = True                  # no quick build in here: nobody waits for it
        _cache._THREAD.root = self._root
        try:
            self.result = make()
            STATS[self.kind] += 1
        except BaseException as e:               # (the quick library stays in use)
            self.error = e
            STATS["failed"] += 1
            log("kernels", f"build {self.name}: background build failed ({type(e).__name__}: {e}); "
                           "the quick build (or the interpreter) stays in use")
        finally:
            self.done_at = time.perf_counter()
            self.seconds = self.done_at - t
            self._done.set()

    def ready(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)


def compile_tiered(units, *, name: str, prepare=None, **kw):
    """``build.compile_source(units, name=name, **kw)``, tiered as the module docstring says.

    ``prepare(lib)`` runs on each library before it is returned or marked ready (binding support
    libraries, say); for the background build it runs in the background thread."""
    def final():
        lib = build.compile_source(units, name=name, **kw)
        if prepare is not None:
            prepare(lib)
        return lib
    if isinstance(units, str) or len(units) < 2 or not enabled() or getattr(_IN_BACKGROUND, "active", False):
        return final()
    lib = build.compile_source(units, name=name, cached_only=True, **kw)
    if lib is None:
        quick = build.compile_source(units, name=name,
                                     **{**kw, "extra_flags": tuple(kw.get("extra_flags", ())) + QUICK_FLAGS})
        pending = getattr(quick, "upgrade", None)
        if pending is None or (pending.ready() and pending.result is None):
            STATS["quick"] += 1
            log("kernels", f"build {name}: quick build in use, -O3 building in the background")
            quick.upgrade = pending = start(name, final)
        lib = quick
    if prepare is not None:
        prepare(lib)
    return lib


def start(name: str, make, kind: str = "optimized") -> Pending:
    """A :class:`Pending` running ``make()`` in a new background thread, kept for :func:`wait_background`
    (``kind``: the STATS entry that counts it when it lands)."""
    pending = Pending(name, make, kind)
    with _GUARD:
        _PENDING.append(pending)
    pending._thread.start()
    return pending


def background_builds() -> list:
    """The background builds this process started (``Pending``), oldest first."""
    with _GUARD:
        return list(_PENDING)


def wait_background(timeout: float | None = None) -> bool:
    """Wait for the background builds started so far, and those they start (a landed graph starts the
    eager kernels' build, ``eager_kernels.build_later``); False if one is still running at ``timeout``."""
    end = None if timeout is None else time.monotonic() + timeout
    waited = 0
    while True:
        with _GUARD:
            pending = _PENDING[waited:]
        if not pending:
            return True
        for p in pending:
            if not p.wait(None if end is None else max(0.0, end - time.monotonic())):
                return False
        waited += len(pending)
