"""``ember.compiler.explain(fn)(*args)``: what ember.compile does with a call, as a report.

It traces the call exactly as ``ember.compile`` would (same tracer, same rules), so its counts agree
with what compiling does: graphs, graph breaks with their reasons and locations in the user's code,
and the ops of each graph.
"""
from __future__ import annotations

import dataclasses

from .capture import Tracer
from .api import _paths
from .dynamic import plan, describe
from .dynamic_capture import SymState


@dataclasses.dataclass
class ExplainOutput:
    graph_count: int
    graph_break_count: int
    break_reasons: list
    ops_per_graph: list
    graphs: list
    compiled: bool
    out: object = None
    dynamic: str = ""           # symbolic sizes and their guards (dynamic=True, mark_dynamic, automatic)

    def __str__(self) -> str:
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}",
                 f"Op count: {sum(len(o) for o in self.ops_per_graph)}"]
        if not self.compiled:
            lines.append("This call cannot be compiled; it runs eagerly (see the break reasons).")
        lines.append("Break reasons:")
        for i, r in enumerate(self.break_reasons, 1):
            lines.append(f"  {i}. {r.reason}\n     at {r.filename}:{r.lineno}\n     suggestion: {r.suggestion}")
        if not self.break_reasons:
            lines.append("  (none)")
        if self.dynamic:
            lines.append(f"Dynamic sizes: {self.dynamic}")
        lines.append("Ops per graph:")
        for i, ops in enumerate(self.ops_per_graph):
            lines.append(f"  graph {i}: " + (", ".join(ops) if ops else "(empty)"))
        return "\n".join(lines)


def explain(fn):
    """Return a function that traces ``fn(*args, **kwargs)`` and reports on it."""
    target = getattr(fn, "fn", fn)
    cf = getattr(fn, "_compiled", fn)

    def run(*args, **kwargs):
        tracer = Tracer()
        # the sizes ember.compile would make symbolic for this call (dynamic=True, mark_dynamic, sizes
        # that already changed between calls of the compiled function)
        dims, ranges = plan(getattr(cf, "dynamic", None), getattr(cf, "auto_dims", set()), _paths(args, kwargs))
        if dims:
            tracer.sym = SymState(dims, ranges)
        with tracer:
            for t, p in _paths(args, kwargs):
                tracer.add_arg(t, p)
            out = target(*args, **kwargs)
            tracer.check_mutations()
        compiled = tracer.unsupported is None
        graphs = tracer.graphs
        ops = [g.ops() for g in graphs]
        return ExplainOutput(graph_count=len(graphs) if compiled else 0,
                             graph_break_count=len(tracer.reasons),
                             break_reasons=list(tracer.reasons), ops_per_graph=ops, graphs=graphs,
                             compiled=compiled, out=out,
                             dynamic=describe(tracer.sym, dims) if tracer.sym is not None else "")
    return run
