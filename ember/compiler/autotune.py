"""``mode="max-autotune"``: try a few code-generation variants on the real inputs, keep the fastest.

The variants (``VARIANTS``) differ only in code generation, never in results: the OpenMP threshold
(fork a parallel loop above 16K / 64K / 1M iterations, or never), generated loops instead of BLAS for
small matmuls, and the number of BLAS threads (one by default, one per core). Each variant of the program's translation unit is
built (disk-cached like any other; variants whose C source is the default's, or another's, are timed
once; so are variants that differ only in the BLAS's thread count where the program calls the BLAS only
as the fallback of ember's GEMM), run on the first call's inputs in interleaved rounds, and timed; every
buffer the program writes and every ``.grad`` it assigns is restored after each trial, so tuning has no
visible effect.

A variant replaces the default only when clearly faster, judged round by round (its time over the
default's in the same round, which a load change shifts alike): by at least ``MARGIN`` (5%) in the
median of those ratios, *and* faster in so many of the rounds that chance would do it with probability
below ``ALPHA`` (1%) per variant (a sign test). There are at least ``MIN_ROUNDS`` (7) rounds, more while
``ROUND_BUDGET`` seconds (1.5) last, up to ``MAX_ROUNDS`` (41). Why: on a shared 2-core machine (load 5-7)
the paired ratios of identical programs spread over 0.5-1.7 between quartiles; the former rule (5 rounds,
the median alone) chose a non-default variant for 4 of the 5 bench steps, each no faster than the default
in 150 rounds afterwards, and taught those picks to the learned defaults below. The choice is stored next
to the kernel cache (``<cache>/autotune/<key>.json``, keyed on the default variant's source), so a later
process skips the measurement.

Programs whose replay is not repeatable (extern kernels, which may draw random numbers; graph-break
reads) are not tuned: they keep the default variant.

Learned defaults: every choice tuning makes (measured, or read back from the cache) is also tallied per
CPU in ``<cache>/autotune/learned-<cpu>.json``, once per program (its key: a choice read back by every
later process is still one measurement). A compile without tuning starts from the variant that
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
from .cache import replace_private
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
MARGIN = 0.95               # a variant replaces the default only when at least 5% faster (see tune) ...
ALPHA = 0.01                # ... in more rounds than chance would give with this probability (sign test)
MIN_ROUNDS = 7              # timed rounds at least (7 of 7 wins: p = 0.0078 < ALPHA) ...
MAX_ROUNDS = 41             # ... and more while ROUND_BUDGET seconds last, up to this many
ROUND_BUDGET = 1.5


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


def record_choice(opts: Options, program: str | None = None) -> None:
    """Tally the options tuning chose, on this CPU (see learned_defaults). ``program`` (the tuned
    program's key): each program counts once, with its latest choice (a choice read back from the cache
    by every later process is one measurement, not one per process); without it, one more win."""
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
    if program is None:
        wins[k] = int(wins.get(k, 0)) + 1
    else:
        progs = wins.get("programs")
        progs = progs if isinstance(progs, dict) else {}
        if progs.get(program) == k:
            return
        progs[program] = k
        wins["programs"] = progs
    try:
        replace_private(os.path.dirname(path), path, json.dumps(wins).encode(), prefix=".tune-")
    except OSError:
        pass


def _tally(wins: dict) -> dict:
    """Wins per variant key: the plain counts plus one per program whose choice it is."""
    known = {_variant_key(i) for i in range(len(VARIANTS))}
    out = {k: int(n) for k, n in wins.items() if k in known}
    progs = wins.get("programs")
    for k in (progs.values() if isinstance(progs, dict) else ()):
        if k in known:
            out[k] = out.get(k, 0) + 1
    return out


def learned_defaults() -> dict:
    """Option overrides (a VARIANTS entry) that won most often when tuning on this CPU, or {}."""
    if os.environ.get("EMBER_LEARNED_DEFAULTS", "1").strip().lower() in ("0", "false", "no", "off"):
        return {}
    try:
        with open(_learned_path(), encoding="utf-8") as f:
            wins = _tally(json.load(f))
    except (OSError, ValueError, TypeError, AttributeError):
        return {}
    ranked = sorted(((n, k) for k, n in wins.items()), reverse=True)
    if not ranked:
        return {}
    n, k = ranked[0]
    if n < LEARN_MIN or n <= wins.get(_variant_key(0), 0):
        return {}
    return dict(next(v for i, v in enumerate(VARIANTS) if _variant_key(i) == k))


def _sign_test_p(wins: int, n: int) -> float:
    """P(at least ``wins`` of ``n`` fair coin flips come up heads): how likely a variant no faster than the
    default is faster in that many of n rounds."""
    from math import comb
    return sum(comb(n, k) for k in range(wins, n + 1)) / 2.0 ** n


def clear_winner(times: dict) -> int:
    """The variant index to use given ``times`` (index -> seconds per round, the rounds paired, 0 the
    default): the one with the smallest median ratio to the default in the same round, if that median is
    at most MARGIN and it was faster in more rounds than chance explains (ALPHA); else 0."""
    base = np.asarray(times[0], dtype=np.float64)
    best, best_ratio = 0, MARGIN
    for i, v in times.items():
        if i == 0 or len(v) != len(base) or not len(base):
            continue
        ratios = np.asarray(v, dtype=np.float64) / base
        med = float(np.median(ratios))
        if med <= best_ratio and _sign_test_p(int((ratios < 1.0).sum()), len(ratios)) < ALPHA:
            best, best_ratio = i, med
    return best


def _key(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:32]


def _path(key: str) -> str:
    from .build import cache_dir
    d = os.path.join(cache_dir(), "autotune")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, key + ".json")


class Autotuner:
    """Tunes a NativeRunner on its first call (see the module docstring)."""

    def __init__(self, runner, program, name, base: Options, trials: int | None = None):
        self.runner = runner
        self.name = name
        self.base = base
        self.trials = trials         # timed rounds at least (None: MIN_ROUNDS)
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
            record_choice(self._opts(self.choice), key)
            return
        except (OSError, ValueError, KeyError):
            pass
        state = _State(r, arg_tensors)
        cands = self._candidates()
        # interleaved rounds (each round runs every candidate once, in alternating order), so that a load
        # change on a shared machine shifts every candidate alike instead of favouring one block of trials
        times: dict = {i: [] for i, _, _ in cands}
        least = (self.trials or MIN_ROUNDS) if len(cands) > 1 else 1     # (one candidate: nothing to compare)
        t_start = time.perf_counter()
        for t in range(max(least, MAX_ROUNDS) + 1):
            if t > least and (len(cands) < 2 or time.perf_counter() - t_start > ROUND_BUDGET):
                break
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
            best = clear_winner(times)
        self.choice = best
        record_choice(self._opts(best), key)
        self._apply(best)
        logs.log("kernels", f"autotune({self.name}): chose {self._opts(best)!r}")
        try:       # (a unique temporary file: two processes tuning one program never share one)
            replace_private(os.path.dirname(path), path,
                            json.dumps({"choice": best, "timings": self.timings}).encode(), prefix=".tune-")
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
                same = _effective_source(src)
                if same in seen:
                    continue
                lib = _build_lib(src, self.name, uses_blas)
            except Exception as e:     # a variant that fails to build is simply not a candidate
                logs.log("kernels", f"autotune({self.name}): variant {opts!r} failed: {e}")
                continue
            seen.add(same)
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


def _effective_source(src: str) -> str:
    """``src`` as far as what it runs goes: without the BLAS thread-count call when every BLAS call in it
    is the fallback of ember's GEMM (``EM_SGEMM_NT_OR(<blas call>, ...)``, which runs only where ember's
    GEMM cannot: a variant setting another count is then the default program under another name)."""
    lines = src.splitlines()
    direct = any("cblas_" in ln and "EM_SGEMM" not in ln and not ln.lstrip().startswith("#") for ln in lines)
    if direct:
        return src
    return "\n".join(ln for ln in lines if "openblas_set_num_threads(" not in ln)


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
