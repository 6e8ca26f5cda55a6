"""Suite ``autotune``: the default ``ember.compile`` against ``mode="max-autotune"`` on the compile suite's steps.

The goal (issue 16, item 6): the default chooses as well as tuning does, without tuning. Per case (the
MLP with SGD and Adam at batch 64 and 512, the small GPT at batch 16 with AdamW, from identical weights
and data) two variants are timed interleaved in this process, steady state: ``ember.compile`` (the
default) and ``max-autotune``. Both compile on a fresh private kernel cache made for this suite, so
neither tuning choices stored by earlier runs (``<cache>/autotune/<key>.json``) nor the defaults learned
from them (``learned-<cpu>.json``) leak in: the default is what a new user gets; tuning measures afresh.

The report prints, per case, the time per step of each, their ratio (above 1: tuning is faster), the
seconds the tuned compile's first steps took (building every variant and timing them), and per tuned
program the variant chosen (``{}``: the default's options) with the tuner's median time of each variant
timed. Run: ``python -m ember.bench autotune`` (``--threads 2`` for two threads, ``--busy`` for a
competing busy loop).
"""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import time

import ember
from .harness import Case
from . import compile as _compile

SPECS = [("mlp", 64, "sgd"), ("mlp", 64, "adam"), ("mlp", 512, "sgd"), ("mlp", 512, "adam"), ("gpt", 16, "adamw")]
MODES = {"ember.compile": None, "max-autotune": "max-autotune"}
UPGRADE_WAIT = 120.0          # seconds, at most, for a tiered build's optimized library to land

_STATE: dict = {"cases": {}}


def _runners(compiled) -> list:
    """The native runners behind a compiled function (one per trace entry that has one)."""
    out = []
    for e in getattr(compiled, "entries", []):
        call = getattr(e, "runner", None)
        r = getattr(call, "native", None)
        if r is not None:
            out.append(r)
    return out


def _settle(step, compiled) -> float:
    """Run the first three steps (compiling, tuning), wait for tiered builds' optimized libraries, then one
    more step (which takes them up): every variant runs the same four steps. Seconds of the first three."""
    t0 = time.perf_counter()
    for _ in range(3):
        step()
    first = time.perf_counter() - t0
    deadline = time.perf_counter() + UPGRADE_WAIT
    while time.perf_counter() < deadline and any(
            getattr(r, "_upgrade", None) is not None and not r._upgrade.ready() for r in _runners(compiled)):
        time.sleep(0.05)
    step()
    return first


def _choices(compiled) -> list:
    """Per tuned program: (name, the variant chosen, {variant: median seconds})."""
    from ..compiler import autotune
    out = []
    for r in _runners(compiled):
        t = getattr(r, "autotuner", None)
        if t is None or not t.done:
            continue
        chosen = autotune.VARIANTS[t.choice] if t.choice is not None else None
        out.append((t.name, chosen, dict(t.timings), repr(t._opts(0))))
    return out


def make_case(kind: str, batch: int, opt_name: str) -> Case:
    name = _compile.case_name(kind, batch, opt_name)
    weights = _compile._reference_weights(kind)
    variants, info = {}, {"first_steps": {}, "choices": []}
    for label, mode in MODES.items():
        model, opt, data = _compile.setup(ember, kind, batch, opt_name, weights)
        fn = _compile.step_function(ember, kind)
        compiled = ember.compile(fn, mode=mode) if mode else ember.compile(fn)
        step = _compile._bound(compiled, model, opt, data)
        info["first_steps"][label] = _settle(step, compiled)
        if mode:
            info["choices"] = _choices(compiled)
        variants[label] = step
    _STATE["cases"][name] = info
    return Case(name, "autotune", variants, number=0, unit="ms", per="step")


def _fresh_cache() -> str:
    root = tempfile.mkdtemp(prefix="ember-bench-autotune-")
    atexit.register(shutil.rmtree, root, True)
    return root


def cases(name_filter=None) -> list:
    _STATE["cases"].clear()
    old = os.environ.get("EMBER_CACHE_DIR")
    os.environ["EMBER_CACHE_DIR"] = _fresh_cache()
    try:
        out = []
        for kind, batch, opt_name in SPECS:
            if name_filter and name_filter not in _compile.case_name(kind, batch, opt_name):
                continue
            if sys.stderr.isatty():
                print(f"\r\033[K  autotune suite: compiling and tuning {_compile.case_name(kind, batch, opt_name)}",
                      end="", file=sys.stderr, flush=True)
            out.append(make_case(kind, batch, opt_name))
        if sys.stderr.isatty():
            print(file=sys.stderr)
        return out
    finally:
        # (background builds keep the root they started with; later suites get the user's cache back)
        if old is None:
            os.environ.pop("EMBER_CACHE_DIR", None)
        else:
            os.environ["EMBER_CACHE_DIR"] = old


def _fields(opts_repr: str) -> dict:
    """``{"parallel_min": "1048576", ...}`` from an ``Options(...)`` repr."""
    inner = opts_repr[opts_repr.find("(") + 1:opts_repr.rfind(")")]
    return dict(p.strip().split("=", 1) for p in inner.split(",") if "=" in p)


def _short(opts_repr: str, default_repr: str) -> str:
    """The options of a variant that differ from the default's ("default" when none do)."""
    mine, base = _fields(opts_repr), _fields(default_repr)
    diff = [f"{k}={v}" for k, v in mine.items() if base.get(k) != v]
    return ", ".join(diff) or "default"


def report(results, file=None) -> dict:
    file = file if file is not None else sys.stdout
    by_case: dict = {}
    for r in results:
        if r.suite == "autotune":
            by_case.setdefault(r.name, {})[r.variant] = r
    if not by_case:
        return {}
    print("\nautotune: default ember.compile vs mode=\"max-autotune\" (fresh cache each; ratio = default / tuned "
          "time, above 1: tuning faster)", file=file)
    print(f"{'case':18s} {'default':>11s} {'tuned':>11s} {'ratio':>7s} {'tuning (first 3 steps)':>24s}", file=file)
    out = {}
    for name, v in by_case.items():
        d, t = v.get("ember.compile"), v.get("max-autotune")
        if d is None or t is None:
            continue
        info = _STATE["cases"].get(name, {})
        first = info.get("first_steps", {})
        ratio = d.median / t.median
        print(f"{name:18s} {d.median * 1e3:8.3f} ms {t.median * 1e3:8.3f} ms {ratio:6.2f}x "
              f"{first.get('max-autotune', float('nan')):9.2f} s (default {first.get('ember.compile', float('nan')):.2f} s)",
              file=file)
        for prog, chosen, timings, default in info.get("choices", []):
            print(f"    {prog}: chose {chosen or 'the default'}; the tuner's median per variant:", file=file)
            for opts, sec in sorted(timings.items(), key=lambda kv: kv[1]):
                print(f"        {sec * 1e3:9.3f} ms  {_short(opts, default)}", file=file)
        out[name] = {"default_ms": d.median * 1e3, "tuned_ms": t.median * 1e3, "default_over_tuned": ratio,
                     "first_steps_s": first, "choices": [(c[0], c[1]) for c in info.get("choices", [])]}
    return out
