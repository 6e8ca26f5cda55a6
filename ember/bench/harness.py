"""Benchmark harness: interleaved A/B timing in one process, medians and spread.

Each case has named variants (``ember``, ``torch``, ...), all doing the same work. Rounds alternate
between variants so that machine noise hits them alike; each sample times ``number`` calls and
reports seconds per call. Results are medians with the interquartile range, never single runs.
"""
from __future__ import annotations

import dataclasses
import gc
import platform
import statistics
import sys
import time
from typing import Callable


@dataclasses.dataclass
class Case:
    """One benchmark: a name, a suite, and ``variants`` mapping a label to a zero-argument callable."""
    name: str
    suite: str
    variants: dict
    number: int = 0          # calls per sample; 0 = calibrate to ~20 ms
    unit: str = "us"         # how to print per-call times
    per: str = "call"        # what one call is (call, step, ...)


@dataclasses.dataclass
class Result:
    name: str
    suite: str
    variant: str
    samples: list             # seconds per call
    unit: str = "us"
    per: str = "call"

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def iqr(self) -> tuple:
        s = sorted(self.samples)
        n = len(s)
        return (s[n // 4], s[(3 * n) // 4]) if n >= 4 else (s[0], s[-1])

    def to_dict(self) -> dict:
        return {"name": self.name, "suite": self.suite, "variant": self.variant, "samples": self.samples,
                "median": self.median, "unit": self.unit, "per": self.per}

    @classmethod
    def from_dict(cls, d: dict) -> "Result":
        samples = d.get("samples") or [d["median"]]
        return cls(d["name"], d["suite"], d["variant"], list(samples), d.get("unit", "us"), d.get("per", "call"))


def save_results(path: str, results: list, **extra) -> None:
    """Write ``results`` with machine and version information (``--json``)."""
    import json
    doc = {"machine": machine_info(), **extra, "results": [r.to_dict() for r in results]}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def load_results(path: str) -> tuple:
    """``(machine_info, [Result, ...])`` from a file written by ``save_results``."""
    import json
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or "results" not in doc:
        raise ValueError(f"{path}: not an ember benchmark file (expected a JSON object with 'results')")
    return doc.get("machine", {}), [Result.from_dict(d) for d in doc["results"]]


def _calibrate(fn: Callable, target: float = 0.02) -> int:
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= target or n >= 1 << 20:
            return max(1, int(n * target / max(dt, 1e-9)))
        n *= 4


def run_case(case: Case, repeat: int = 15, warmup: int = 2) -> list[Result]:
    """Time every variant of ``case``, interleaved round by round."""
    fns = case.variants
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    number = case.number or min(_calibrate(fn) for fn in fns.values())
    samples = {k: [] for k in fns}
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for r in range(repeat):
            order = list(fns.items()) if r % 2 == 0 else list(reversed(list(fns.items())))
            for label, fn in order:
                t0 = time.perf_counter()
                for _ in range(number):
                    fn()
                samples[label].append((time.perf_counter() - t0) / number)
            gc.collect()
    finally:
        if gc_was:
            gc.enable()
    return [Result(case.name, case.suite, k, v, case.unit, case.per) for k, v in samples.items()]


def machine_info() -> dict:
    import numpy
    import ember
    info = {"python": sys.version.split()[0], "platform": platform.platform(), "machine": platform.machine(),
            "processor": platform.processor(), "numpy": numpy.__version__, "ember": ember.__version__,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    try:
        import os
        info["cpus"] = os.cpu_count()
    except Exception:
        pass
    try:
        import torch
        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    except Exception:
        info["torch"] = None
    return info


_SCALE = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}


def fmt_time(sec: float, unit: str) -> str:
    return f"{sec * _SCALE[unit]:10.2f} {unit}"


def fmt_rate(sec: float, per: str) -> str:
    """Calls per second: "1,234.5 step/s"."""
    return f"{1.0 / sec:,.1f} {per}/s" if sec > 0 else "-"


def print_results(results: list[Result], baseline: str = "torch", file=None) -> None:
    """A table: case, variant, median per call (IQR), rate (calls or steps per second), and the ratio
    of times to the baseline variant (below 1: faster than the baseline)."""
    file = file if file is not None else sys.stdout
    by_case: dict = {}
    for r in results:
        by_case.setdefault((r.suite, r.name), []).append(r)
    vw = max([10] + [len(r.variant) for r in results])     # variant column wide enough for every label
    print(f"{'case':36s} {'variant':{vw}s} {'median':>14s} {'IQR':>23s} {'rate':>18s} {'vs ' + baseline:>10s}",
          file=file)
    for (suite, name), rs in by_case.items():
        base = next((r for r in rs if r.variant == baseline), None)
        for r in rs:
            lo, hi = r.iqr
            ratio = f"{r.median / base.median:9.2f}x" if base is not None and r is not base else ""
            print(f"{suite + '/' + name:36s} {r.variant:{vw}s} {fmt_time(r.median, r.unit):>14s} "
                  f"[{lo * _SCALE[r.unit]:8.2f}, {hi * _SCALE[r.unit]:8.2f}] {fmt_rate(r.median, r.per):>18s} "
                  f"{ratio:>10s}", file=file)
