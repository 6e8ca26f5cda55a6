"""The captured program: values, op nodes, in-place writes, grad assignments and value reads.

A ``Program`` is what one trace of a user function recorded, in order. It is split into ``graphs``
at every point where Python read a tensor's value (a graph break); each ``Graph`` is a straight-line
list of instructions over numbered ``Value`` slots:

- ``OpNode``:   outputs = registered op (kernel) applied to inputs and attrs
- ``WriteNode``: copy a value into the buffer of another (an in-place write: ``x.add_(y)``, ``out=``)
- ``SetGradNode``: give a leaf tensor a fresh ``.grad`` holding a value (autograd accumulation)
- ``ReadNode``: the graph break itself: Python read a value (``.item()``, ``bool()``); the value seen
  at trace time becomes a guard checked on replay

Value kinds: ``arg`` (a tensor passed to the function, by position path), ``lifted`` (a tensor that
existed before the call and was used by reference: parameters, buffers, optimizer state),
``const`` (a tensor made during the trace outside any op, e.g. ``ember.zeros``; replayed as a fresh
copy of its value), ``node`` (an op output).
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
from typing import Any


@contextlib.contextmanager
def paused_gc(kept: bool = False):
    """No automatic cyclic garbage collection inside the block (restored after it; nested blocks fine).

    The compiler's passes (decompose, schedule, render) allocate hundreds of thousands of small
    objects that live until the pass ends; each allocation burst makes CPython walk the generations,
    and with a model and its trace in memory that walk was 30-45% of the small GPT step's
    decompose-and-schedule CPU time (measured: 0.33 -> 0.19 s for schedule). Cycles made meanwhile are
    collected by the next collection after the block.

    ``kept=True`` is for a block whose objects outlive it (a trace, a plan loaded from the cache): at its
    end every object the collector tracks is moved to the oldest generation without a walk
    (``gc.freeze()`` then ``gc.unfreeze()``), so the allocations of the block trigger no collection
    that walks them, and they count towards no full collection either (a full one, over every object
    of the process, came right after the trace or the plan load: 25-160 ms of a warm compile's first
    steps here). Cycles that were young then wait for the next full collection. Skipped when the
    program keeps objects frozen itself (``gc.get_freeze_count()``), which unfreezing would undo."""
    was = gc.isenabled()
    if was:
        gc.disable()
    try:
        yield
    finally:
        if was:
            if kept and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


@dataclasses.dataclass(eq=False)
class Value:
    id: int
    kind: str                       # arg | lifted | const | node | grad_in
    shape: tuple
    dtype: Any                      # ember dtype
    ref: Any = None                 # arg: path; lifted: the tensor; const: ndarray snapshot
    requires_grad: bool = False

    def __repr__(self):
        return f"%{self.id}"


@dataclasses.dataclass(eq=False)
class AttrRef:
    """An op attribute that is the buffer of a traced value (resolved at replay, never baked in)."""
    value: Value

    def __repr__(self):
        return f"ref({self.value})"


@dataclasses.dataclass(eq=False)
class OpNode:
    op: Any                         # OpDef
    inputs: list                    # Value or Python constant, one per positional arg
    attrs: dict
    outputs: list                   # Values
    where: str = ""                 # user file:line
    phase: str = "forward"          # forward | backward | optimizer
    grad_enabled: bool = True

    @property
    def has_refs(self) -> bool:
        return any(type(a) is AttrRef for a in self.attrs.values())

    def __repr__(self):
        ins = ", ".join(repr(i) if isinstance(i, Value) else _short(i) for i in self.inputs)
        outs = ", ".join(repr(o) for o in self.outputs)
        attrs = ", ".join(f"{k}={_short(v)}" for k, v in self.attrs.items())
        sig = " ".join(f"{o.dtype.name}{list(o.shape)}" for o in self.outputs)
        return f"{outs} = {self.op.name}({ins}{', ' if attrs and ins else ''}{attrs})  # {sig}"


@dataclasses.dataclass(eq=False)
class WriteNode:
    target: Value
    source: Value

    def __repr__(self):
        return f"write {self.target} <- {self.source}"


@dataclasses.dataclass(eq=False)
class SetGradNode:
    leaf: Value
    source: Value

    def __repr__(self):
        return f"{self.leaf}.grad = {self.source}"


@dataclasses.dataclass(eq=False)
class ReadNode:
    value: Value
    kind: str                       # item | bool | tolist | numpy | float | int | index | print
    seen: Any                       # what Python got at trace time
    where: str = ""
    guard: bool = True

    def __repr__(self):
        return f"read {self.kind}({self.value}) == {_short(self.seen)}  # graph break at {self.where}"


@dataclasses.dataclass
class Graph:
    nodes: list = dataclasses.field(default_factory=list)
    ended_by: Any = None            # the ReadNode that closed this graph (None for the last)

    def ops(self) -> list:
        return [n.op.name for n in self.nodes if isinstance(n, OpNode)]


@dataclasses.dataclass
class Program:
    values: list
    graphs: list
    outputs: Any                    # output structure with Values in place of tensors
    args: list                      # Values of kind arg
    lifted: list                    # Values of kind lifted
    consts: list
    break_reasons: list             # BreakReason
    backward: "Program | None" = None
    grad_outputs: list = dataclasses.field(default_factory=list)   # Values of kind grad_in (backward only)
    grad_targets: list = dataclasses.field(default_factory=list)   # Values (args/lifted) receiving grads

    def format(self, title: str = "graph", pass_name: str = "capture") -> str:
        lines = [f"===== {title} (produced by pass: {pass_name}) ====="]
        for v in self.args:
            lines.append(f"  {v} = arg{v.ref}  # {v.dtype.name}{list(v.shape)}{' requires_grad' if v.requires_grad else ''}")
        for v in self.lifted:
            lines.append(f"  {v} = lifted  # {v.dtype.name}{list(v.shape)}")
        for v in self.consts:
            lines.append(f"  {v} = const  # {v.dtype.name}{list(v.shape)}")
        for gi, g in enumerate(self.graphs):
            lines.append(f"  --- graph {gi} ---")
            for n in g.nodes:
                lines.append("  " + repr(n))
            if g.ended_by is not None:
                lines.append("  " + repr(g.ended_by))
        try:
            out = repr(self.outputs)
        except Exception:                   # an object whose repr needs real tensors (a distribution)
            out = f"<{type(self.outputs).__name__}>"
        lines.append(f"  return {out}")
        return "\n".join(lines)


@dataclasses.dataclass
class BreakReason:
    reason: str
    filename: str
    lineno: int
    suggestion: str

    def __str__(self):
        return f"{self.filename}:{self.lineno}: {self.reason}. Suggestion: {self.suggestion}"


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


_PLAIN = (str, bytes, int, float, complex, bool, type(None), type)


def map_struct(x, is_leaf, fn, _depth=0):
    """Rebuild nested tuples/namedtuples/lists/dicts with ``fn`` applied to every leaf ``is_leaf`` accepts.

    Other objects whose attributes hold leaves (a ``torch.distributions`` object built from a model's
    outputs, a dataclass of outputs) are shallow-copied with those attributes mapped, so every replay
    returns a new object over its own tensors; modules and objects without leaves are returned as they are."""
    if is_leaf(x):
        return fn(x)
    if _depth > 6 or isinstance(x, _PLAIN):
        return x
    d = _depth + 1
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*[map_struct(i, is_leaf, fn, d) for i in x])
    if isinstance(x, (list, tuple)):
        return type(x)(map_struct(i, is_leaf, fn, d) for i in x)
    if isinstance(x, dict):
        return {k: map_struct(v, is_leaf, fn, d) for k, v in x.items()}
    attrs = getattr(x, "__dict__", None)
    if not attrs or callable(x) or hasattr(x, "parameters"):
        return x                        # functions, modules, optimizers: not rebuilt
    mapped = {k: map_struct(v, is_leaf, fn, d) for k, v in attrs.items()}
    if all(mapped[k] is attrs[k] for k in attrs):
        return x
    import copy
    y = copy.copy(x)
    y.__dict__.update(mapped)
    return y


def flat_values(x) -> list:
    """The Values in a nested structure (a program's outputs), in order."""
    out = []
    map_struct(x, lambda v: isinstance(v, Value), out.append)
    return out
