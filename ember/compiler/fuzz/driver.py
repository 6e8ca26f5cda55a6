"""A fuzz run: :func:`fuzz` generates programs from a seed, checks them in batches, minimises what differs
and counts it all in :class:`Stats`."""
from __future__ import annotations

import time

from .generator import generate
from .minimiser import minimise
from .program import combine
from .repro_script import repro
from .runner import check


class Stats:
    def __init__(self):
        self.programs = 0
        self.calls = 0
        self.differ = 0
        self.invalid = 0
        self.fallback = 0
        self.builds = 0
        self.seconds = 0.0
        self.found = []        # (program, Result, minimised program, minimised Result)
        self.invalid_reasons = []   # (program seeds, what eager raised)
        self.noisy = 0         # values past the tolerance but no further from float64 than eager's (ill-conditioned)

    def summary(self):
        return (f"{self.programs} programs, {self.calls} compiled calls, {self.differ} differ "
                f"({self.builds} compiled functions, {self.fallback} not fully native, {self.invalid} invalid, "
                f"{self.noisy} ill-conditioned values let through, {self.seconds:.1f} s)")


def program_seed(base, i):
    """The generator seed of program ``i`` of a run with seed ``base`` (``--seed base --only i``)."""
    return f"{base}:{i}"


def fuzz(seed, count, batch=6, calls=3, backend="inductor", minimise_found=True, stats=None, log=None,
         max_steps=8, minimise_budget_s=120.0, opt=None):
    """Generate ``count`` programs from ``seed``, check them in batches, minimise what differs."""
    stats = stats or Stats()
    t0 = time.perf_counter()
    progs = [generate(program_seed(seed, i), max_steps) for i in range(count)]
    for k in range(0, len(progs), batch):
        group = progs[k:k + batch]
        whole = combine(group) if len(group) > 1 else group[0]
        res = check(whole, seed, calls, backend, opt=opt)
        stats.builds += 1
        stats.programs += len(group)
        stats.calls += res.calls * len(group)
        stats.fallback += res.fallback
        stats.noisy += res.noisy
        if res.invalid:
            stats.invalid += 1
            stats.invalid_reasons.append(([p.seed for p in group], res.invalid))
            if log:
                log(f"invalid batch {k // batch}: {res.invalid}")
            continue
        if not res.differs:
            continue
        culprits = []
        if len(group) > 1:
            for p in group:
                r = check(p, seed, calls, backend, opt=opt)
                if r.differs:
                    culprits.append((p, r))
        if not culprits:
            culprits = [(whole, res)]
        for p, r in culprits:
            stats.differ += 1
            if log:
                log(f"program {p.seed}: {r.message}")
            if minimise_found:
                m, mr = minimise(p, seed, calls, backend, budget_s=minimise_budget_s, opt=opt)
            else:
                m, mr = p, r
            stats.found.append((p, r, m, mr))
            if log:
                log(repro(m, seed, mr, calls, backend, opt))
    stats.seconds += time.perf_counter() - t0
    return stats
