"""Suite ``compile``: what ``ember.compile`` buys on whole training steps, against torch and torch.compile.

Two measurements, both from identical weights and data in every variant:

1. **Steady-state steps/s**, interleaved in this process (the usual harness), four variants per case:
   ``ember`` (eager), ``ember.compile`` (the default backend), ``torch`` (eager) and ``torch.compile``
   (default mode, ``dynamic=False``). Cases: the MLP (``models.mlp``, cross-entropy) with SGD and Adam
   at batch 64 and 512, and the small GPT (``models.gpt``: 4 layers, 128 wide, context 64) at batch 16
   with AdamW. One step is zero_grad, forward, loss, backward and optimizer step, all inside the
   compiled function.
2. **Time to the first compiled step**, each in a fresh subprocess (imports and model construction are
   not counted; capture, code generation, C compilation and the step itself are): *cold* with an empty
   kernel cache (a fresh ``EMBER_CACHE_DIR``; for torch a fresh ``TORCHINDUCTOR_CACHE_DIR``), then
   *warm*, a second fresh process on the same cache directory (it finds the program's plan and library
   there: no decompose/schedule/render, no C build). For ember a third run, *libs*, is cold on a cache
   that holds only ember's fixed libraries (runtime, GEMM, eager kernels; ``python -m
   ember.compiler.prebuild`` fills it, untimed): what a program's first compile costs once ember is
   installed. "3 steps" adds the next two steps: the
   first step finds the optimizer state empty; torch.compile recompiles on the second, ember's first
   trace serves every step (it makes Adam's state before reading it) and builds its C on the first
   replay, the second step. "cpu" is the CPU time of the three steps, the child compilers included:
   on a busy machine it says what the wall time would be on an idle one (less the parallel builds).
   A large graph not in the plan cache is compiled in the background (``compiler/background.py``): the
   replays run in the interpreter until its ``-O3`` library lands (``EMBER_BACKGROUND_COMPILE=0``: they
   wait for a quick ``-O1`` build instead, ``compiler/tiers.py``, while the ``-O3`` one builds in the
   background). Background compilers count in "cpu" only if they ended within the three steps; the cache
   column says when the library landed ("-O3 at", seconds since the compile call, cold/libs) and how
   many of the three steps ran interpreted ("interp."); "steady" is timed on the ``-O3`` library.

torch.compile is guarded: if it raises, or a subprocess exceeds ``TORCH_TIMEOUT`` seconds, the table
says so and the suite goes on without that variant. The whole suite takes about five minutes on two
cores (most of it torch.compile's cold compiles); ``EMBER_BENCH_FIRST_STEP=0`` skips measurement 2,
``EMBER_BENCH_TORCH_COMPILE=0`` the torch.compile variant. With JAX importable a ``jax.jit`` variant runs
the same steps (jax_steps.py); ``--threads 1,2`` times ember.compile on each count (threads.py).

Run: ``python -m ember.bench compile``; the steps/s table comes first, then the speed-up summary and the
first-step table (``--json`` saves both).
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import ember
from . import models as M
from .harness import Case
from . import jax_steps as _jax_steps, threads as _threads

SPECS = [("mlp", 64, "sgd"), ("mlp", 64, "adam"), ("mlp", 512, "sgd"), ("mlp", 512, "adam"),
         ("gpt", 16, "adamw")]
FIRST_STEP_SPECS = [("mlp", 64, "sgd"), ("gpt", 16, "adamw")]
EMBER_TIMEOUT = 300.0        # seconds, one cold ember subprocess
TORCH_TIMEOUT = 240.0        # seconds, one torch.compile subprocess or in-process compile

_STATE: dict = {"first_step": [], "notes": [], "dirs": None}


def case_name(kind: str, batch: int, opt_name: str) -> str:
    return f"{kind}_b{batch}_{opt_name}"


# ---- one training step, for either library ------------------------------------------------------------

def step_function(lib, kind: str):
    """The training step ``step(model, opt, x, y) -> loss`` (detached) for ``kind`` ("mlp" or "gpt")."""
    cross_entropy = lib.nn.functional.cross_entropy
    if kind == "mlp":
        def mlp_step(model, opt, x, y):
            opt.zero_grad()
            loss = cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.detach()
        return mlp_step

    def gpt_step(model, opt, idx, targets):
        opt.zero_grad()
        _, loss = model(idx, targets)
        loss.backward()
        opt.step()
        return loss.detach()
    return gpt_step


def setup(lib, kind: str, batch: int, opt_name: str, weights: dict | None = None):
    """``(model, optimizer, batch)`` for one case, built with ``lib``; ``weights`` (NumPy arrays by
    state_dict key) makes every variant start from the same weights."""
    model = M.mlp(lib) if kind == "mlp" else M.gpt(lib)
    if weights is not None:
        M.load_numpy(lib, model, weights)
    opt = M.optimizer(lib, opt_name, model.parameters())
    data = M.mlp_batch(lib, batch) if kind == "mlp" else M.gpt_batch(lib, batch, block_size=64)
    return model, opt, data


def _reference_weights(kind: str, torch=None) -> dict:
    """The starting weights of a case: torch's initialisation when torch is there (else ember's)."""
    if torch is not None:
        torch.manual_seed(0)
        return M.state_dict_numpy(M.mlp(torch) if kind == "mlp" else M.gpt(torch))
    ember.manual_seed(0)
    return M.state_dict_numpy(M.mlp(ember) if kind == "mlp" else M.gpt(ember))


def _bound(fn, model, opt, data):
    def step():
        return fn(model, opt, *data)
    return step


# ---- guarded torch.compile ------------------------------------------------------------------------------

class _Timeout(Exception):
    pass


def _with_timeout(fn, seconds: float):
    """Run ``fn()``; raise ``_Timeout`` after ``seconds`` (SIGALRM, main thread only; else no limit)."""
    if not hasattr(signal, "setitimer") or signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, None):
        return fn()
    try:
        import threading
        if threading.current_thread() is not threading.main_thread():
            return fn()
    except Exception:
        return fn()

    def alarm(signum, frame):
        raise _Timeout(f"took longer than {seconds:.0f} s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _configure_torch(torch) -> None:
    import logging
    # every case compiles the same step code for new model objects: allow those recompiles
    torch._dynamo.config.recompile_limit = max(64, torch._dynamo.config.recompile_limit)
    torch._dynamo.config.accumulated_recompile_limit = max(1024, torch._dynamo.config.accumulated_recompile_limit)
    try:
        torch._logging.set_logs(dynamo=logging.ERROR, inductor=logging.ERROR)
    except Exception:
        pass


# ---- threads and caches -----------------------------------------------------------------------------------

def _set_native_threads(n: int) -> None:
    """The compiled kernels' OpenMP pool gets the same thread count as ember's BLAS and torch."""
    try:
        from ..compiler import build
        build.omp_set_num_threads(n)
    except Exception:
        pass


def _dirs() -> dict:
    """Private cache directories for this run (removed at exit), so the user's caches are untouched."""
    if _STATE["dirs"] is None:
        root = tempfile.mkdtemp(prefix="ember-bench-compile-")
        atexit.register(shutil.rmtree, root, True)
        _STATE["dirs"] = {"root": root, "ember": os.path.join(root, "ember"),
                          "torch": os.path.join(root, "torchinductor")}
    return _STATE["dirs"]


def _case_cache(lib_name: str, case: str) -> str:
    """One kernel cache directory per library and case: the first-step subprocesses fill it, then this
    process compiles the case against it (so its in-process compile is a warm one)."""
    return os.path.join(_dirs()[lib_name], case)


# ---- time to the first compiled step (subprocesses) --------------------------------------------------------

def _import_compilers(lib_name: str) -> None:
    """Import the compiler's modules before the clock starts, as the docstring promises (they load
    lazily on the first compile; under PYTHONDONTWRITEBYTECODE that includes compiling their source)."""
    import importlib
    names = (["torch._dynamo", "torch._inductor.compile_fx"] if lib_name == "torch" else
             ["ember.compiler.native", "ember.compiler.autotune", "ember.compiler.shared_gemm",
              "ember.compiler.plan_cache"])
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:       # (a missing module is the compile's own error to report)
            pass


def _cpu_seconds(resource) -> float:
    """User and system CPU time of this process and of its finished children (the C compilers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def first_step_child(lib_name: str, kind: str, batch: int, opt_name: str, threads: int) -> dict:
    """Inside the subprocess: build a case, compile its step, time the first calls (JSON-able dict)."""
    if lib_name == "torch":
        import torch as lib
        _configure_torch(lib)
        lib.set_num_threads(threads)
    else:
        lib = ember
    ember.set_num_threads(threads)
    _set_native_threads(threads)
    model, opt, data = setup(lib, kind, batch, opt_name, _reference_weights(kind, lib if lib_name == "torch" else None))
    fn = step_function(lib, kind)
    _import_compilers(lib_name)
    import resource
    t0, c0, m0 = time.perf_counter(), _cpu_seconds(resource), time.thread_time()
    compiled = lib.compile(fn, dynamic=False) if lib_name == "torch" else lib.compile(fn)
    ends, losses = [], []
    for _ in range(3):
        losses.append(float(compiled(model, opt, *data)))
        ends.append(time.perf_counter() - t0)       # since the compile call: capture, codegen, build, run
    cpu = _cpu_seconds(resource) - c0
    main_cpu = time.thread_time() - m0     # this thread's own CPU (not the compilers it waited for)
    tiered = []
    if lib_name == "ember":
        # a tiered build's -O3 library may still be building (tiers.py): when it lands (since the compile
        # call), and steady state measured on it
        from ..compiler import background, tiers
        interpreted = background.STATS["interpreted"]      # of the three steps, run while the graph compiled
        tiers.wait_background()
        tiered = [p.done_at - t0 for p in tiers.background_builds() if p.result is not None]
        graphs = [p.done_at - t0 for p in tiers.background_builds() if p.kind == "graphs" and p.result is not None]
    cpu_all = _cpu_seconds(resource) - c0          # (with the background build's compilers)
    after = []
    for _ in range(5):
        t = time.perf_counter()
        compiled(model, opt, *data)
        after.append(time.perf_counter() - t)
    out = {"first": ends[0], "three": ends[2], "cpu_three": cpu, "main_cpu_three": main_cpu, "cpu_with_background": cpu_all, "steady": statistics.median(after), "losses": losses}
    if lib_name == "ember":
        from ..compiler import build, counters, plan_cache
        out["plan_hits"] = plan_cache.STATS["hits"]
        out["disk_hits"] = build.STATS["disk_hits"]
        out["disk_misses"] = build.STATS["disk_misses"]
        out["fallbacks"] = counters["fallbacks"]
        out["optimized_at"] = max(tiered) if tiered else None
        out["interpreted"] = interpreted
        out["compiled_at"] = max(graphs) if graphs else None
    return out


def _spawn_first_step(lib_name, kind, batch, opt_name, cache_dir, threads, timeout) -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env["OMP_NUM_THREADS"] = str(threads)
    if lib_name == "torch":
        env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    else:
        env["EMBER_CACHE_DIR"] = cache_dir
    cmd = [sys.executable, "-m", "ember.bench.compile", "--first-step", lib_name, kind, str(batch), opt_name,
           str(threads)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["exit code %d" % p.returncode])[-1]
        return {"error": f"failed: {last[:160]}"}
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"no result (stdout: {p.stdout[-160:]!r})"}


def _prebuild(cache_dir: str, timeout: float) -> None:
    """Fill ``cache_dir`` with ember's fixed libraries (not timed)."""
    env = {**os.environ, "EMBER_CACHE_DIR": cache_dir}
    try:
        subprocess.run([sys.executable, "-m", "ember.compiler.prebuild"], capture_output=True, env=env,
                       timeout=timeout)
    except subprocess.TimeoutExpired:
        pass


def measure_first_steps(torch, threads: int, progress=None, name_filter=None) -> list:
    """Cold then warm first-step times, for ember.compile and torch.compile, per FIRST_STEP_SPECS."""
    rows = []
    libs = ["ember"] + (["torch"] if torch is not None else [])
    for kind, batch, opt_name in FIRST_STEP_SPECS:
        if name_filter and name_filter not in case_name(kind, batch, opt_name):
            continue
        for lib_name in libs:
            cache = _case_cache(lib_name, case_name(kind, batch, opt_name))
            timeout = TORCH_TIMEOUT if lib_name == "torch" else EMBER_TIMEOUT
            row = {"case": case_name(kind, batch, opt_name), "library": f"{lib_name}.compile"}
            # ember: "libs" is a cold compile on a cache holding only ember's fixed libraries (the runtime,
            # the GEMM, the eager kernels: python -m ember.compiler.prebuild, untimed), i.e. the program's
            # own cost once ember is installed; "cold" builds those libraries as well
            phases = ("cold", "libs", "warm") if lib_name == "ember" else ("cold", "warm")
            for phase in phases:
                if progress:
                    progress(f"first step: {row['library']} {row['case']} ({phase})")
                if phase != "cold" and "error" in row.get("cold", {}):
                    row[phase] = {"error": "skipped (cold run failed)"}
                    continue
                where = cache
                if phase == "libs":
                    where = cache + "-libs"
                    _prebuild(where, timeout)
                row[phase] = _spawn_first_step(lib_name, kind, batch, opt_name, where, threads, timeout)
            rows.append(row)
    return rows


# ---- the cases ---------------------------------------------------------------------------------------------

def _progress(msg: str) -> None:
    if sys.stderr.isatty():
        print(f"\r\033[K  compile suite: {msg}", end="", file=sys.stderr, flush=True)


def _warm(label, step, n=3, timeout=None) -> tuple:
    """Run the first ``n`` steps of a variant (compiling it); returns (losses, seconds of the first)."""
    losses, first = [], None
    for i in range(n):
        t = time.perf_counter()
        loss = _with_timeout(step, timeout) if (timeout and i == 0) else step()
        if i == 0:
            first = time.perf_counter() - t
        losses.append(float(loss))
    return losses, first


def _note_once(text: str) -> None:
    if text not in _STATE["notes"]:
        _STATE["notes"].append(text)
        print(text)


def make_case(kind: str, batch: int, opt_name: str, torch=None, torch_ok: bool = True) -> Case:
    """One case with the four variants, all from identical weights and data, compiled and warmed up."""
    name = case_name(kind, batch, opt_name)
    weights = _reference_weights(kind, torch)
    # compile against the cache the first-step subprocesses filled for this case (if they ran)
    os.environ["EMBER_CACHE_DIR"] = _case_cache("ember", name)
    if torch is not None:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = _case_cache("torch", name)
    variants = {}
    model, opt, data = setup(ember, kind, batch, opt_name, weights)
    variants["ember"] = _bound(step_function(ember, kind), model, opt, data)

    def compiled():
        model, opt, data = setup(ember, kind, batch, opt_name, weights)
        return _bound(ember.compile(step_function(ember, kind)), model, opt, data)
    variants.update(_threads.variants("ember.compile", compiled))
    if _jax_steps.available():
        model, opt, data = setup(ember, kind, batch, opt_name, weights)
        variants["jax.jit"] = _jax_steps.make_step(kind, opt_name, weights, [d.numpy() for d in data])
    else:
        _note_once("jax.jit baseline skipped: JAX is not installed (pip install \"jax[cpu]\")")
    if torch is not None:
        model, opt, data = setup(torch, kind, batch, opt_name, weights)
        variants["torch"] = _bound(step_function(torch, kind), model, opt, data)
        if torch_ok and os.environ.get("EMBER_BENCH_TORCH_COMPILE", "1") == "0":
            _note_once("torch.compile skipped (EMBER_BENCH_TORCH_COMPILE=0)")
        elif torch_ok:
            model, opt, data = setup(torch, kind, batch, opt_name, weights)
            variants["torch.compile"] = _bound(torch.compile(step_function(torch, kind), dynamic=False),
                                               model, opt, data)
        else:
            _STATE["notes"].append(f"{name}: torch.compile skipped (its first-step run failed or timed out)")
    # compile now (so the harness times steady state) and check every variant does the same arithmetic
    losses = {}
    for label in list(variants):
        _progress(f"{name}: first steps of {label}")
        try:
            losses[label], first = _warm(label, variants[label],
                                         timeout=TORCH_TIMEOUT if label == "torch.compile" else None)
        except Exception as e:                     # torch.compile failing must not stop the suite
            if label != "torch.compile":
                raise
            _STATE["notes"].append(f"{name}: torch.compile dropped: {type(e).__name__}: {str(e)[:200]}")
            del variants[label]
            continue
        if "compile" in label:
            _STATE["notes"].append(f"{name}: {label}: first step in this process {first:.2f} s")
    base = losses.get("torch", losses["ember"])
    for label, ls in losses.items():
        if not np.allclose(ls, base, rtol=1e-4, atol=1e-6):
            _STATE["notes"].append(f"{name}: WARNING {label} losses {ls} differ from {base}")
    return Case(name, "compile", variants, number=0, unit="ms", per="step")


def cases(name_filter=None) -> list[Case]:
    """The suite's cases (only those whose name contains ``name_filter``, when given)."""
    _STATE["notes"].clear()
    _STATE["first_step"] = []
    try:
        import torch
        _configure_torch(torch)
    except Exception:
        torch = None
    threads = ember.get_num_threads()
    _set_native_threads(threads)
    if os.environ.get("EMBER_BENCH_FIRST_STEP", "1") != "0":
        _STATE["first_step"] = measure_first_steps(torch, threads, _progress, name_filter)
    failed = {r["case"] for r in _STATE["first_step"] if r["library"] == "torch.compile" and "error" in r["cold"]}
    out = []
    for kind, batch, opt_name in SPECS:
        if name_filter and name_filter not in case_name(kind, batch, opt_name):
            continue
        out.append(make_case(kind, batch, opt_name, torch, torch_ok=case_name(kind, batch, opt_name) not in failed))
    from . import compile_dynamic
    out.extend(compile_dynamic.cases(name_filter))     # one dynamic build vs a static build per length
    _progress("timing")
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return out


# ---- the report --------------------------------------------------------------------------------------------

def _fmt_s(x) -> str:
    return f"{x:8.2f} s" if x is not None else f"{'-':>10s}"


def report(results, file=None) -> dict:
    """Print the speed-up summary and the first-step table after the harness's table; returns both as a
    JSON-able dict (saved by ``--json``)."""
    file = file if file is not None else sys.stdout
    mine = [r for r in results if r.suite == "compile"]
    by_case: dict = {}
    for r in mine:
        # with --threads 1,2 the summary table shows the variant on the most threads as ember.compile
        label = "ember.compile" if r.variant == f"ember.compile@{max(_threads.counts())}t" else r.variant
        by_case.setdefault(r.name, {})[label] = r.median
    summary = {}
    if by_case:
        print("\ncompile: steps/s and speed-up (time ratio inverted: above 1 is faster)", file=file)
        print(f"{'case':18s} {'ember':>9s} {'ember.cmp':>10s} {'torch':>9s} {'torch.cmp':>10s}   "
              f"{'cmp/ember':>9s} {'ember.cmp/torch':>15s} {'torch.cmp/torch':>15s} {'ember.cmp/torch.cmp':>19s}",
              file=file)
        for name, v in by_case.items():
            rate = {k: 1.0 / t for k, t in v.items()}

            def ratio(a, b):
                return v[b] / v[a] if a in v and b in v else None
            row = {"steps_per_s": rate, "compiled_vs_ember": ratio("ember.compile", "ember"),
                   "compiled_vs_torch": ratio("ember.compile", "torch"),
                   "torch_compiled_vs_torch": ratio("torch.compile", "torch"),
                   "compiled_vs_torch_compiled": ratio("ember.compile", "torch.compile")}
            summary[name] = row

            def r(k):
                return f"{rate[k]:9.1f}" if k in rate else f"{'-':>9s}"

            def x(val, w):
                return f"{val:{w - 1}.2f}x" if val is not None else f"{'-':>{w}s}"
            print(f"{name:18s} {r('ember')} {r('ember.compile'):>10s} {r('torch')} {r('torch.compile'):>10s}   "
                  f"{x(row['compiled_vs_ember'], 9)} {x(row['compiled_vs_torch'], 15)} "
                  f"{x(row['torch_compiled_vs_torch'], 15)} {x(row['compiled_vs_torch_compiled'], 19)}", file=file)
    rows = _STATE["first_step"]
    if rows:
        print("\ncompile: time to the first compiled step, fresh process (cold: empty cache; warm: same cache "
              "again;\n3 steps: the first three; torch.compile retraces once the optimizer state exists)",
              file=file)
        print("(ember: \"libs 3\" is cold with ember's fixed libraries already built, python -m "
              "ember.compiler.prebuild;\n\"plan\": the warm run skipped decompose/schedule/render)", file=file)
        print(f"{'case':18s} {'library':14s} {'cold 1st':>10s} {'cold 3':>10s} {'libs 3':>10s} {'warm 1st':>10s} "
              f"{'warm 3':>10s} {'steady':>10s} {'cpu cold/libs/warm 3':>22s}  cache", file=file)
        for row in rows:
            cold, warm = row["cold"], row["warm"]
            if "error" in cold:
                print(f"{row['case']:18s} {row['library']:14s} cold run {cold['error']}", file=file)
                continue
            libs = row.get("libs", {})
            cache = ""
            if "disk_misses" in cold:
                at = ", -O3 at " + "/".join(f"{r['optimized_at']:.1f}" if r.get("optimized_at") else "-"
                                            for r in (cold, libs)) + " s" if cold.get("optimized_at") else ""
                if cold.get("interpreted") or libs.get("interpreted"):
                    at += ", interp. " + "/".join(str(r.get("interpreted", "-")) for r in (cold, libs))
                cache = (f"cold: {cold['disk_misses']} built{at}; warm: " +
                         (f"{warm['disk_hits']} loaded, {warm['disk_misses']} built"
                          + (", plan" if warm.get("plan_hits") else "") if "error" not in warm else "-"))
            wf = warm.get("first") if "error" not in warm else None
            w3 = warm.get("three") if "error" not in warm else None
            l3 = libs.get("three") if "error" not in libs else None
            steady = f"{cold['steady'] * 1e3:7.1f} ms"
            cpu = "/".join(f"{r['cpu_three']:.2f}" if "cpu_three" in r else "-" for r in (cold, libs, warm))
            print(f"{row['case']:18s} {row['library']:14s} {_fmt_s(cold['first'])} {_fmt_s(cold['three'])} "
                  f"{_fmt_s(l3)} {_fmt_s(wf)} {_fmt_s(w3)} {steady:>10s} {cpu + ' s':>22s}  {cache}", file=file)
            if "error" in warm:
                print(f"{'':33s} warm run {warm['error']}", file=file)
    notes = _STATE["notes"]
    if notes:
        print("\nnotes:", file=file)
        for n in notes:
            print(f"  {n}", file=file)
    threads = _threads.report(results, "compile", file=file)
    return {"speedups": summary, "first_step": rows, "notes": list(notes), "threads": threads}


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--first-step":
        _, _, lib_name, kind, batch, opt_name, threads = sys.argv
        print(json.dumps(first_step_child(lib_name, kind, int(batch), opt_name, int(threads))))
    else:
        print("usage: python -m ember.bench compile   (this module's own entry point is for its subprocesses)",
              file=sys.stderr)
        sys.exit(2)
