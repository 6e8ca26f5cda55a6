"""Command line for the benchmark suite (see ember/bench/__init__.py)."""
from __future__ import annotations

import argparse
import importlib
import inspect
import sys

from . import SUITES
from .harness import run_case, print_results, save_results, Result
from .._progress import Progress


def _set_threads(n: int) -> None:
    import ember
    ember.set_num_threads(n)
    from ..compiler import build
    build.omp_set_num_threads(n)
    try:
        import torch
        torch.set_num_threads(n)
    except ImportError:
        pass
    print(f"threads: ember {ember.get_num_threads()}, torch {n} (set with --threads)")


def _run(args) -> int:
    from . import threads as _threads
    counts = _threads.parse(args.threads)
    _threads.configure(counts)
    args.threads = max(counts)
    _set_threads(args.threads)
    if len(counts) > 1:
        print(f"ember variants on {', '.join(map(str, counts))} threads, interleaved (label@Nt); "
              f"torch on {args.threads}")
    if args.busy:
        print(_threads.start_busy())
    suites = args.suites or ["overhead"]
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        print(f"unknown suite(s): {', '.join(unknown)}; available: {', '.join(SUITES)}", file=sys.stderr)
        return 2
    cases = []
    measured: list[Result] = []
    for s in suites:
        mod = importlib.import_module(f"{__package__}.{s}")
        if hasattr(mod, "results"):      # suites that measure by themselves (distributed, device)
            extra = {"quick": True} if args.quick and "quick" in inspect.signature(mod.results).parameters else {}
            measured.extend(mod.results(repeat=args.repeat, name_filter=args.filter, threads=args.threads, **extra))
        # suites whose cases are costly to build (compile) take the filter, to build only those
        params = inspect.signature(mod.cases).parameters
        kw = {"name_filter": args.filter} if "name_filter" in params else {}
        if args.quick and "quick" in params:
            kw["quick"] = True
        cases.extend(mod.cases(**kw))
    if args.filter:
        cases = [c for c in cases if args.filter in c.name]
    results: list[Result] = list(measured)
    # a bar on a terminal (or with --progress); nothing in a log, where the results table says it all
    with Progress(len(cases), "bench", unit="case", per_epoch=False, force=args.progress) as bar:
        for c in cases:
            bar.update(0, f"{c.suite}/{c.name}")
            results.extend(run_case(c, repeat=args.repeat))
            bar.update(1)
    print_results(results)
    reports = {}
    for s in suites:                     # optional per-suite summaries (see ember/bench/__init__.py)
        report = getattr(importlib.import_module(f"{__package__}.{s}"), "report", None)
        if report is not None:
            reports[s] = report(results)
    if args.json:
        save_results(args.json, results, suites=suites, repeat=args.repeat, filter=args.filter,
                     **({"reports": reports} if reports else {}))
        print(f"saved {args.json}")
    if args.plot:
        from .plot import plot_versus
        plot_versus(results, args.plot)
        print(f"saved {args.plot}")
    return 0


def _compare(args) -> int:
    from .plot import compare_files
    return compare_files(args.old, args.new, args.plot, variant=args.variant)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "compare":
        p = argparse.ArgumentParser(prog="python -m ember.bench compare")
        p.add_argument("old")
        p.add_argument("new")
        p.add_argument("--plot", default=None, help="write a PNG of relative performance")
        p.add_argument("--variant", default="ember", help="which variant to compare (default ember)")
        return _compare(p.parse_args(argv[1:]))
    p = argparse.ArgumentParser(prog="python -m ember.bench")
    p.add_argument("suites", nargs="*", help=f"suites to run: {', '.join(SUITES)}")
    p.add_argument("--repeat", type=int, default=15, help="samples per variant")
    p.add_argument("--json", default=None, help="save results (with machine info) to this file")
    p.add_argument("--plot", default=None, help="PNG of ember vs baseline per case")
    p.add_argument("--filter", default=None, help="only cases whose name contains this")
    p.add_argument("--progress", action="store_true", help="force the progress bar")
    p.add_argument("--quick", action="store_true", help="smaller sizes, for CI (suites that have a quick mode)")
    p.add_argument("--threads", default="1",
                   help="intra-op threads for BOTH ember and torch (default 1: equal counts keep the comparison "
                        "fair); a list like 1,2 times ember's variants on each count, interleaved (train, compile)")
    p.add_argument("--busy", action="store_true",
                   help="run a competing busy loop on one core during the run (what a busy core costs threads)")
    return _run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
