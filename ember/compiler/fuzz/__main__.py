"""The command line: ``python -m ember.compiler.fuzz --seed 7 --count 200`` (see the package docstring)."""
from __future__ import annotations

import argparse
import sys

from . import __doc__
from .driver import fuzz, program_seed
from .generator import generate
from .minimiser import minimise
from .repro_script import repro
from .runner import check


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m ember.compiler.fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--batch", type=int, default=6, help="programs compiled together as one function")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8, help="most steps per program")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--no-minimise", action="store_true")
    ap.add_argument("--opt", default=None, help="C optimisation level for the builds, e.g. -O0 (default -O3)")
    ap.add_argument("--only", type=int, default=None, help="only program i of the seed")
    ap.add_argument("--show", action="store_true", help="print the programs")
    a = ap.parse_args(argv)
    log = lambda s: print(s, flush=True)   # noqa: E731
    if a.only is not None:
        p = generate(program_seed(a.seed, a.only), a.steps)
        if a.show:
            print(p.source())
            print("SPECS =", p.specs())
        r = check(p, a.seed, a.calls, a.backend, opt=a.opt)
        print(r.invalid or r.message or "same")
        if r.differs and not a.no_minimise:
            m, mr = minimise(p, a.seed, a.calls, a.backend, log=log, opt=a.opt)
            print(repro(m, a.seed, mr, a.calls, a.backend, a.opt))
        return 1 if r.differs else 0
    if a.show:
        for i in range(a.count):
            p = generate(program_seed(a.seed, i), a.steps)
            print(f"# program {i}\n{p.source()}")
    st = fuzz(a.seed, a.count, a.batch, a.calls, a.backend, not a.no_minimise, log=log, max_steps=a.steps,
              opt=a.opt)
    print(st.summary())
    return 1 if st.differ else 0


if __name__ == "__main__":
    sys.exit(main())
