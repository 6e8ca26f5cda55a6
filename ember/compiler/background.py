"""Compiling a large captured graph in the background while its first replays run in the interpreter.

Why: a cold compile of the small GPT's training step spends about a second of Python in decompose,
schedule and render, then seconds of C compiler time, and the first replay waited for all of it (the
quick ``-O1`` tier of ``tiers.py`` shortened the wait for the compiler, not the Python, and its code ran a
step slower than the interpreter). The interpreter (``runtime.Interpreter``, backend ``aot_eager``) runs
the same captured program op by op on NumPy, with the trace's semantics, from the first replay on.

How: :func:`wanted` says when a program is worth it: plan-cache misses only (``plan_cache`` asks after
looking; a hit has no pipeline to wait for), programs of at least :data:`MIN_NODES` nodes (forward and
backward; smaller ones keep the synchronous behaviour, their pipeline and build are short), not in
max-autotune mode or with kernel timing (the runner must be the one tuned or timed), and not with
``EMBER_BUILD_TIERS=0`` (which asks for every first replay to wait for the ``-O3`` build). Then a
:class:`BackgroundRunner` forks a child process that runs the pipeline (decompose, schedule, render),
stores the plan in the plan cache and exits (:func:`_fork_pipeline`), and starts one background thread
(``tiers.start``: the pending builds that ``tiers.wait_background`` and ``build.clear_memory_cache`` wait
for) which waits for the child without holding the GIL, loads the plan as a warm process does, and
builds the library directly at ``-O3`` (no quick tier: the interpreter is the quick tier). Where the
process cannot fork or the plan cannot be cached, the thread runs the pipeline itself. The
interpreted calls neither wait for nor build ember's fixed libraries (the eager kernels, the GEMM), as
a trace does (:func:`holding`): NumPy runs those ops meanwhile. Until the library lands each call runs in the interpreter; the first call after it has landed switches,
at the call boundary, and every later call runs the native runner. A pipeline that declined or failed
leaves the interpreter in use, as a synchronous compile would.

Visible, never silent: ``STATS`` counts the calls run in the interpreter while waiting
(``interpreted``) and the switches (``switched``); ``EMBER_LOGS=kernels`` logs the start and the
switch; a runner's ``landed_at``/``switched_at`` (``time.perf_counter``) say when.
``EMBER_BACKGROUND_COMPILE=0`` turns it off (every first replay waits for its library, as before).
Reading an attribute the runner does not have itself (``.kernels``, ``.source``, ``.lib``...) waits
for the background build and reads the native runner's.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import warnings

from . import logs, tiers
from .runtime import Interpreter

__all__ = ["MIN_NODES", "STATS", "BackgroundRunner", "enabled", "wanted"]

# the niceness of the background compile (the forked pipeline, the -O3 build's compilers): the interpreted
# calls beside it get the CPU first (on two cores they shared it with cc and the pipeline's Python), the
# compile takes the rest (all of it while the program waits or sleeps)
BACKGROUND_NICE = 10
MIN_NODES = 1500        # the small GPT's training step (b16, AdamW): 2025 nodes; the MLP's with Adam: 235
STATS = {"started": 0, "interpreted": 0, "switched": 0}


def enabled() -> bool:
    return os.environ.get("EMBER_BACKGROUND_COMPILE", "1").strip().lower() not in ("0", "false", "no", "off")


# ops recorded as one node that stand for many in the pipeline's work: adam_update (ops/fused_optim.py) is
# the ~20 elementwise ops a captured Adam/AdamW parameter update was recorded as before
_WEIGHT = {"adam_update": 20}


def _nodes(program) -> int:
    """The program's size for :data:`MIN_NODES`: its nodes (forward and backward), weighted by ``_WEIGHT``."""
    graphs = list(program.graphs)
    bw = getattr(program, "backward", None)
    if bw is not None:
        graphs += bw.graphs
    n = 0
    for g in graphs:
        n += len(g.nodes)
        for node in g.nodes:
            w = _WEIGHT.get(getattr(getattr(node, "op", None), "name", None))
            if w:
                n += w - 1
    return n


def wanted(program, mode) -> bool:
    """Whether ``program``'s native runner should be made in the background (module docstring)."""
    if not enabled() or mode in ("max-autotune", "max-autotune-no-cudagraphs") or not tiers.enabled():
        return False
    if os.environ.get("EMBER_KERNEL_TIMING", "").strip() not in ("", "0"):
        return False
    return _nodes(program) >= MIN_NODES


SWITCH_INTERVAL = 0.0005      # seconds; CPython's default is 0.005
_SWITCHES = {"n": 0, "saved": None}
_SWITCHES_GUARD = threading.Lock()


def _short_switches(delta: int) -> None:
    """While a pipeline runs in a background thread (no fork, or a plan that cannot be cached), the GIL
    changes hands after SWITCH_INTERVAL instead of CPython's 5 ms: the interpreted steps release it at
    many NumPy calls, and each time would wait up to a whole interval for the pipeline's thread to give
    it back. (Not measured apart: the forked pipeline, the usual case, takes no GIL of this process.)"""
    with _SWITCHES_GUARD:
        if _SWITCHES["n"] == 0 and delta > 0:
            _SWITCHES["saved"] = sys.getswitchinterval()
            sys.setswitchinterval(min(SWITCH_INTERVAL, _SWITCHES["saved"]))
        _SWITCHES["n"] += delta
        if _SWITCHES["n"] == 0:
            sys.setswitchinterval(_SWITCHES["saved"])


# .on: this thread runs a compiled function's interpreter while its library builds. Like a trace, it
# neither waits for nor builds ember's fixed libraries (the eager kernels, the GEMM): their compilers
# would hold up the steps the interpreter is there to keep going; NumPy runs those ops meanwhile
_HOLD = threading.local()


def holding() -> bool:
    """Whether this thread runs an interpreted call while its graph's library builds (see _HOLD)."""
    return getattr(_HOLD, "on", False)


FORK = True         # the pipeline runs in a forked child process (where os.fork exists)
_DECLINED = 3       # the child's exit code when the pipeline declined the program


def _fork_pipeline(program, key: str, name: str):
    """A child process (its pid, or None when it cannot fork) that runs the pipeline on ``program``
    (decompose, schedule, render: ``native.compile_programs``) and stores the plan under ``key`` in the
    plan cache, with ``build_runner``'s options (the ones ``key`` was made with). Exit code 0: stored.

    Forked by the calling thread at a call boundary (no import or build of its own in progress; the
    other threads, such as the GEMM library's background build, hold nothing the pipeline takes), the
    child runs Python only, no OpenMP region, and leaves with ``os._exit`` (no atexit handler, no
    buffered output of the parent written twice)."""
    if not FORK or not hasattr(os, "fork") or "mpi4py.MPI" in sys.modules:
        return None         # (MPI: Open MPI does not support fork() in a rank; the thread runs it)
    from . import blas as _blas, native, plan_cache
    from .autotune import learned_defaults
    from .render_c import Options
    opts = Options(blas_available=_blas.blas_available(), **learned_defaults())
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    try:
        with warnings.catch_warnings():      # (Python 3.12 warns of fork() in a process with threads)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError as e:
        logs.log("kernels", f"ember.compile({name}): cannot fork for the pipeline ({e}); it runs in a thread")
        return None
    if pid:
        return pid
    code = 2
    try:
        tiers.lower_priority(BACKGROUND_NICE, thread=False)
        parts, src, uses_blas = native.compile_programs(program, name, opts)
        code = 0 if plan_cache.store(program, key, name, parts, src, uses_blas) else 1
    except native.Declined:
        code = _DECLINED
    except BaseException:
        code = 2
        if logs.enabled("kernels"):
            import traceback
            logs.log("kernels", f"ember.compile({name}): the forked pipeline failed:\n{traceback.format_exc()}")
    finally:
        os._exit(code)


def _from_child(pid: int, program, key: str, name: str):
    """Wait for the child of :func:`_fork_pipeline`; ``(True, NativeRunner or None)`` when it planned
    (None: declined), ``(False, None)`` when the pipeline must run here after all."""
    from . import native, plan_cache
    try:
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
    except OSError:
        code = -1
    if code == _DECLINED:
        native.STATS["declined"] += 1
        logs.log("kernels", f"ember.compile({name}): not compiled natively (declined), using the interpreter")
        return True, None
    plan = plan_cache.load(program, key, name) if code == 0 else None
    if plan is not None:
        try:
            runner = native.NativeRunner(program, plan[0], None, plan[1], name, plan[2])
            native.STATS["programs"] += 1
            native._log_kernels(runner)
            return True, runner
        except Exception as e:
            logs.log("kernels", f"ember.compile({name}): the forked pipeline's plan not used: {type(e).__name__}: {e}")
    logs.log("kernels", f"ember.compile({name}): the forked pipeline gave no plan (exit {code}); it runs here")
    return False, None


def _forget_plan(key: str, name: str) -> None:
    """Remove the plan the child stored: its C did not build (plan_cache keeps only plans that built)."""
    from . import plan_cache
    d = plan_cache._plans_dir()
    if d is not None:
        try:
            os.unlink(plan_cache._path(d, key, name))
        except OSError:
            pass


class BackgroundRunner:
    """``runner(arg_tensors, grad_enabled)``, the NativeRunner contract: the interpreter until ``make()``
    (run in a background thread: a NativeRunner or None) and its library build have landed, then it."""

    def __init__(self, program, name: str, make, key=None):
        self.program = program
        self.name = name
        self.native = None               # the NativeRunner, once landed (None: declined or failed)
        self.interpreted = 0             # calls run in the interpreter while the build ran
        self.landed_at = self.switched_at = None
        self._interp = Interpreter(program)
        self._lock = threading.Lock()
        STATS["started"] += 1
        logs.log("kernels", f"ember.compile({name}): compiling in the background; the interpreter runs the "
                            "calls until the library lands")
        child = _fork_pipeline(program, key, name) if key is not None else None
        self._pending = tiers.start(f"graph-{name}", lambda: self._make(make, child, key), kind="graphs")

    def _make(self, make, child, key):
        tiers.lower_priority(BACKGROUND_NICE)
        runner, planned = None, False
        if child is not None:
            planned, runner = _from_child(child, self.program, key, self.name)
        if not planned:
            _short_switches(+1)
            try:
                runner = make()
            finally:
                _short_switches(-1)
        if runner is not None and planned:
            from . import plan_cache
            if runner.build():
                plan_cache._note_arenas(self.name, runner)   # (the child stored the plan: prefault.py's note)
            else:
                _forget_plan(key, self.name)  # (the build failed, was logged and warned; the runner interprets)
        elif runner is not None:
            runner.build()
        self.landed_at = time.perf_counter()
        from .._native import eager_kernels     # (its trace ran NumPy for them: for the next process)
        eager_kernels.build_later()
        return runner

    def _land(self):
        with self._lock:
            p = self._pending
            if p is not None:
                p.wait()
                self.native, self._pending = p.result, None
                self.switched_at = time.perf_counter()
                STATS["switched"] += 1
                if p.error is not None:
                    logs.log("kernels", f"ember.compile({self.name}): the background compile failed "
                                        f"({type(p.error).__name__}: {p.error}); the interpreter stays in use")
                else:
                    logs.log("kernels", f"ember.compile({self.name}): switching to the compiled library after "
                                        f"{self.interpreted} interpreted call(s)"
                             + ("" if self.native is not None else " (declined: the interpreter stays in use)"))
        return self.native

    def ready(self) -> bool:
        p = self._pending
        return p is None or p.ready()

    def __call__(self, arg_tensors, grad_enabled: bool):
        p = self._pending
        if p is not None and not p.ready():
            self.interpreted += 1
            STATS["interpreted"] += 1
            was, _HOLD.on = holding(), True
            # NumPy's BLAS on one thread beside the background compilers (tiers.hold_one_blas_thread)
            held = tiers.hold_one_blas_thread()
            try:
                return self._interp(arg_tensors, grad_enabled)
            finally:
                _HOLD.on = was
                if held:
                    tiers.release_blas_thread()
        native = self.native if p is None else self._land()
        if native is None:
            return self._interp(arg_tensors, grad_enabled)
        return native(arg_tensors, grad_enabled)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        native = self._land()
        if native is None:
            raise AttributeError(f"ember.compile({self.name}): no native runner (declined or failed), so no {name!r}")
        return getattr(native, name)
