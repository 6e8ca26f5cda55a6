"""``mode="max-autotune"``: try a few code-generation variants on the real inputs, keep the fastest.

The variants (``VARIANTS``) differ only in code generation, never in results: the OpenMP threshold
(fork a parallel loop above 16K / 64K / 1M iterations, or never), generated loops instead of BLAS for
small matmuls, and the number of BLAS threads (one by default, one per core). Each variant of the program's translation unit is
built (disk-cached like any other; variants whose C source is the default's, or another's, are timed
once), run a few times on the first call's inputs in interleaved rounds, and timed; every buffer the
program writes and every ``.grad`` it assigns is restored after each trial, so tuning has no visible
effect. A variant replaces the default only when ``MARGIN`` (5%) faster, round by round: measured on a
shared 2-core machine, identical programs under different variant names differed by up to 15% in one
tuning run (tuning picked, and taught the defaults, noise). The choice is stored next to the kernel cache (``<cache>/autotune/<key>.json``,
keyed on the default variant's source), so a later process skips the measurement.

Programs whose replay is not repeatable (extern kernels, which may draw random numbers; graph-break
reads) are not tuned: they keep the default variant.

Learned defaults: every choice tuning makes (measured, or read back from the cache) is also tallied per
CPU in ``<cache>/autotune/learned-<cpu>.json``. A compile without tuning starts from the variant that
won most often on this CPU (``learned_defaults()``), once it has won at least ``LEARN_MIN`` programs and
more than the plain defaults did, so after tuning a few programs the default mode chooses as tuning
would without measuring. ``EMBER_LEARNED_DEFAULTS=0`` turns that off.
"""
from __future__ import annotations

import hashlib
import json
import os
import time

import numpy as np

from . import logs
from .render_c import Options

VARIANTS = (
    dict(),
    dict(parallel_min=1 << 62),
    dict(parallel_min=16384),
    dict(parallel_min=65536),
    dict(small_gemm_loops=1 << 16),
    dict(gemm_split_min=1 << 21),
    dict(gemm_split_min=1 << 21, parallel_min=16384),
    dict(blas_threads=os.cpu_count() or 1),
    dict(blas_threads=os.cpu_count() or 1, parallel_min=1 << 62),
    dict(native_gemm=False),                 # the BLAS for every GEMM (gemm.py's kernel off)
)


LEARN_MIN = 2
MARGIN = 0.95               # a variant replaces the default only when at least 5% faster (see tune)


def _learned_path() -> str:
    from .build import _host_fingerprint
    return _path("learned-" + _host_fingerprint())


def _variant_key(i: int) -> str:
    return json.dumps(VARIANTS[i], sort_keys=True)


_TUNED = ("parallel_min", "small_gemm_loops", "gemm_split_min", "blas_threads", "native_gemm")


def _index_of(opts: Options):
    """The VARIANTS entry (over the plain defaults) that ``opts`` is, or None."""
    sig = tuple(getattr(opts, k) for k in _TUNED)
    for j, v in enumerate(VARIANTS):
        ref = Options(blas_available=opts.blas_available, **v)
        if tuple(getattr(ref, k) for k in _TUNED) == sig:
            return j
    return None


def record_choice(opts: Options) -> None:
    """Tally the options tuning chose, on this CPU (see learned_defaults)."""
    i = _index_of(opts)
    if i is None:
        return
    path = _learned_path()
    try:
        with open(path, encoding="utf-8") as f:
            wins = json.load(f)
        if not isinstance(wins, dict):
            wins = {}
    except (OSError, ValueError):
        wins = {}
    k = _variant_key(i)
    wins[k] = int(wins.get(k, 0)) + 1
    try:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(wins, f)
        os.replace(tmp, path)
    except OSError:
        pass


def learned_defaults() -> dict:
    """Option overrides (a VARIANTS entry) that won most often when tuning on this CPU, or {}."""
    if os.environ.get("EMBER_LEARNED_DEFAULTS", "1").strip().lower() in ("0", "false", "no", "off"):
        return {}
    try:
        with open(_learned_path(), encoding="utf-8") as f:
            wins = json.load(f)
        known = {_variant_key(i): VARIANTS[i] for i in range(len(VARIANTS))}
        ranked = sorted(((int(n), k) for k, n in wins.items() if k in known), reverse=True)
    except (OSError, ValueError, TypeError, AttributeError):
        return {}
    if not ranked:
        return {}
    n, k = ranked[0]
    if n < LEARN_MIN or n <= int(wins.get(_variant_key(0), 0)):
        return {}
    return dict(known[k])


def _key(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:32]


def _path(key: str) -> str:
    from .build import cache_dir
    d = os.path.join(cache_dir(), "autotune")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, key + ".json")


class Autotuner:
    """Tunes a NativeRunner on its first call (see the module docstring)."""

    def __init__(self, runner, program, name, base: Options, trials: int = 5):
        self.runner = runner
        self.name = name
        self.base = base
        self.trials = trials
        self.done = False
        self.choice = None
        self.timings: dict = {}

    def tune(self, arg_tensors) -> None:
        self.done = True
        r = self.runner
        if r.lib is None and not r.build():
            return
        if r.extern_count or r.has_reads:
            logs.log("kernels", f"autotune({self.name}): not tuned (extern calls or graph breaks); default variant")
            return
        key = _key(r.source)
        path = _path(key)
        try:
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
            self.choice = int(saved["choice"])
            self.timings = saved.get("timings", {})
            if self.choice:
                self._apply(self.choice)
            logs.log("kernels", f"autotune({self.name}): cached choice {self._opts(self.choice)!r}")
            record_choice(self._opts(self.choice))
            return
        except (OSError, ValueError, KeyError):
            pass
        state = _State(r, arg_tensors)
        cands = self._candidates()
        # interleaved rounds (each round runs every candidate once, in alternating order), so that a load
        # change on a shared machine shifts every candidate alike instead of favouring one block of trials
        times: dict = {i: [] for i, _, _ in cands}
        for t in range(self.trials + 1):
            for i, lib, src in (cands if t % 2 else cands[::-1]):
                r.use_library(lib, src)
                t0 = time.perf_counter()
                r(arg_tensors, False)
                dt = time.perf_counter() - t0
                state.restore()
                if t:
                    times[i].append(dt)
        meds = {i: float(np.median(v)) for i, v in times.items()}
        for i, med in meds.items():
            self.timings[repr(self._opts(i))] = med
            logs.log("kernels", f"autotune({self.name}): {self._opts(i)!r}: {med * 1e3:.3f} ms")
        best = min(meds, key=meds.get) if meds else 0
        if 0 in meds:
            # the default stays unless another variant is clearly faster, judged round by round (the
            # median of its time over the default's in the same round, which a load change shifts alike):
            # measured here on a shared machine, variants of identical code differed by up to 15% in one
            # tuning run, so "winners" by less were noise, and learned_defaults() would learn them
            ratio = {i: float(np.median(np.divide(times[i], times[0]))) for i in times}
            best = min(ratio, key=ratio.get)
            if ratio[best] > MARGIN:
                best = 0
        self.choice = best
        record_choice(self._opts(best))
        self._apply(best)
        logs.log("kernels", f"autotune({self.name}): chose {self._opts(best)!r}")
        try:
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                json.dump({"choice": best, "timings": self.timings}, f)
            os.replace(path + ".tmp", path)
        except OSError:
            pass

    def _candidates(self) -> list:
        """``(index, library, source)`` of the variants worth timing: built, and each a different C
        source (a variant whose options change nothing in this program, e.g. a BLAS setting where ember's
        GEMM runs every product, is the same program under another name: timing it would let noise pick
        a name)."""
        from .native import _render, _build_lib
        out, seen = [], set()
        for i in range(len(VARIANTS)):
            opts = self._opts(i)
            if not opts.blas_available and any(k in VARIANTS[i] for k in ("small_gemm_loops", "blas_threads",
                                                                       "gemm_split_min")):
                continue
            try:
                src, uses_blas = _render(self.runner.parts, opts, self.name)
                if src in seen:
                    continue
                lib = _build_lib(src, self.name, uses_blas)
            except Exception as e:     # a variant that fails to build is simply not a candidate
                logs.log("kernels", f"autotune({self.name}): variant {opts!r} failed: {e}")
                continue
            seen.add(src)
            out.append((i, lib, src))
        return out

    def _opts(self, i) -> Options:
        kw = dict(parallel_min=self.base.parallel_min, use_blas=self.base.use_blas,
                  small_gemm_loops=self.base.small_gemm_loops, blas_available=self.base.blas_available,
                  blas_threads=self.base.blas_threads, gemm_split_min=self.base.gemm_split_min,
                  native_gemm=self.base.native_gemm)
        kw.update(VARIANTS[i])
        return Options(**kw)

    def _apply(self, i) -> None:
        from .native import _render, _build_lib
        r = self.runner
        src, uses_blas = _render(r.parts, self._opts(i), self.name)
        lib = _build_lib(src, self.name, uses_blas)
        r.use_library(lib, src)


class _State:
    """Snapshots of everything a run of the program may change, to undo trial runs."""

    def __init__(self, runner, arg_tensors):
        self.buffers = []
        self.grads = []
        fb = runner.fwd
        for slot, v, buf in fb.inputs:
            if buf.written:
                a = arg_tensors[runner.arg_index[v.id]]._data if v.kind == "arg" else v.ref._data
                self.buffers.append((a, a.copy()))
        for e in fb.c.sched.setgrads:
            leaf = e.leaf.ref if e.leaf.kind == "lifted" else arg_tensors[runner.arg_index[e.leaf.id]]
            self.grads.append((leaf, leaf._grad))

    def restore(self) -> None:
        for a, old in self.buffers:
            np.copyto(a, old)
        for leaf, g in self.grads:
            leaf._grad = g
