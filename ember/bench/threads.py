"""Thread-count variants and the competing busy loop for the ``train`` and ``compile`` suites.

``--threads 1,2`` times every ember variant once per thread count, interleaved in one process (labels
``ember.compile@1t``, ``ember.compile@2t``...); switching costs one OpenMP call per step, so it is done
before every call. ``--busy`` runs a competing busy loop (another process, one core: the last CPU this
process may use) for the whole run: with it, ``@2t`` against ``@1t`` shows what a thread on a busy
core costs (the goal: never more than 10% slower than one thread). Below the table, what the machine
gives that many threads at the end of the run (``compute_scaling``): on a shared machine the two-thread
target (1.7x one thread) is only reachable while this figure is well above it (measured here within a
minute: 1.93-1.98x with the cores free, 1.0x at normal priority beside three other busy users).
"""
from __future__ import annotations

import os
import subprocess
import sys

_ACTIVE = {"threads": [1], "busy": None}


def parse(text) -> list:
    """``"1,2"`` -> [1, 2] (positive ints, order kept, duplicates dropped)."""
    if isinstance(text, int):
        return [text]
    out = []
    for part in str(text).split(","):
        n = int(part)
        if n <= 0:
            raise ValueError(f"--threads: expected positive integers, got {text!r}")
        if n not in out:
            out.append(n)
    return out


def configure(threads: list) -> None:
    _ACTIVE["threads"] = list(threads)


def counts() -> list:
    return list(_ACTIVE["threads"])


def set_ember_threads(n: int) -> None:
    """ember's count and the compiled kernels' OpenMP pool (cheap: no threadpoolctl call)."""
    from .. import _settings
    _settings._THREADS["intra"] = n
    from ..compiler import build
    build.omp_set_num_threads(n)


def at(n: int, fn):
    """``fn`` run with ember on ``n`` threads (set before each call)."""
    def run():
        set_ember_threads(n)
        return fn()
    return run


def variants(label: str, make) -> dict:
    """``{label: make()}`` for one thread count, else ``{label@Nt: at(N, make())}`` per count."""
    ns = counts()
    if len(ns) == 1:
        return {label: make()}
    return {f"{label}@{n}t": at(n, make()) for n in ns}


def start_busy() -> str:
    """Start the competing busy loop on the last CPU this process may use; returns a line saying so."""
    try:
        cpu = max(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpu = None
    code = "import os, sys\nif len(sys.argv) > 1: os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass\n"
    args = [sys.executable, "-c", code] + ([str(cpu)] if cpu is not None else [])
    _ACTIVE["busy"] = subprocess.Popen(args)
    import atexit
    atexit.register(stop_busy)
    return f"busy loop: process {_ACTIVE['busy'].pid} spinning on CPU {cpu} for the whole run (--busy)"


def stop_busy() -> None:
    p = _ACTIVE["busy"]
    if p is not None and p.poll() is None:
        p.kill()
        p.wait()
    _ACTIVE["busy"] = None


def compute_scaling(n: int, rounds: int = 15, seconds: float = 0.005):
    """How much more work per second ``n`` threads get done than one on this machine now: the FMA loop
    (gemm.py ``ember_fma_share``: each thread runs short chunks until the same deadline, so a thread
    whose core another process holds does less and nobody waits for it), the ratio of the medians of
    ``rounds`` interleaved runs of ``seconds`` each. The ceiling of a compute-bound step's ``vs @1t``
    while the machine is in this state (2 free cores: about 1.95). None where the loop does not build."""
    import statistics
    try:
        from .gemm import fma_share
        fn = fma_share()
    except Exception:        # (no C compiler, no OpenMP: the gemm suite reports it)
        return None
    fn(n, seconds / 5)
    one, many = [], []
    for _ in range(rounds):
        one.append(fn(1, seconds))
        many.append(fn(n, seconds))
    return statistics.median(many) / statistics.median(one)


def report(results, suite: str, file=None) -> dict:
    """Per case: each ember variant's time per step, its speed-up over its own one-thread run and its
    ratio to jax.jit (above 1: ember faster)."""
    file = file if file is not None else sys.stdout
    by_case: dict = {}
    for r in results:
        if r.suite == suite:
            by_case.setdefault(r.name, {})[r.variant] = r.median
    out = {}
    lines = []
    for name, v in by_case.items():
        jax_t = v.get("jax.jit")
        for label, t in v.items():
            if not label.startswith("ember") or ("@" not in label and jax_t is None):
                continue
            base, _, nt = label.partition("@")
            one = v.get(f"{base}@1t")
            row = {"ms": t * 1e3, "vs_1t": (one / t) if one and nt else None,
                   "vs_jax": (jax_t / t) if jax_t else None}
            out[f"{name}/{label}"] = row
            f = (lambda x: f"{x:8.2f}x" if x is not None else f"{'-':>9s}")
            lines.append(f"{name:18s} {label:20s} {row['ms']:9.3f} ms {f(row['vs_1t'])} {f(row['vs_jax'])}")
    if lines:
        print(f"\n{suite}: threads and jax.jit (speed-up = time ratio inverted; above 1: faster)", file=file)
        print(f"{'case':18s} {'variant':20s} {'time/step':>12s} {'vs @1t':>9s} {'vs jax':>9s}", file=file)
        for ln in lines:
            print(ln, file=file)
        many = [n for n in counts() if n > 1]
        ran = many and any(key.endswith(f"@{max(many)}t") for key in out)
        ceiling = compute_scaling(max(many)) if ran else None
        if ceiling is not None:
            out[f"fma_loop/@{max(many)}t"] = {"ms": None, "vs_1t": ceiling, "vs_jax": None}
            print(f"  this machine now: the FMA loop on {max(many)} threads does {ceiling:.2f}x the work per second "
                  f"of one thread (dynamic shares of 5 ms, medians of interleaved runs): the ceiling of a "
                  f"compute-bound step's vs @1t", file=file)
    return out
