"""C externs: a custom op whose CPU kernel is C is called from the generated native program.

A custom op (``ember.library.custom_op``) has no decomposition, so the schedule makes it an extern
step between two native segments, which by default runs the op's Python kernel (NumPy arrays in and
out). When that kernel is a thin wrapper around ``ember.utils.cpp_extension`` functions -- it
allocates its outputs and calls C functions on its inputs' and outputs' data -- the program can call
the C functions itself:

1. **Recording** (``Recorder``, while ``ember.compile`` captures): the op's kernel runs once anyway;
   the C calls it makes are recorded (``cpp_extension.CALL_RECORDERS``) with their converted
   arguments, and any ember op it runs is noted. The result is a *plan* -- per call, the C function and
   for each parameter ``("in", i)`` (the data of input ``i``), ``("out", j)`` (of output ``j``) or
   ``("const", value)`` -- kept on the op under the inputs' shapes, dtypes and the attributes. No plan
   is kept when the kernel ran ember ops, wrote an input, passed a pointer that is neither an input's
   nor an output's data, or left an output unwritten by C: those kernels keep their Python extern.
2. **Rendering** (``prepare``): for an extern step with a plan whose inputs are whole contiguous
   buffers, the segment's C entry ends with the calls, through function pointers read from slots the
   runner fills (addresses are not baked into the source, so cached builds stay valid across
   processes), and then calls the next segment's entry itself: the native program runs on through the
   op without returning to Python.
3. **Binding** (``bind``): the runner allocates the op's outputs with the program's other fresh
   buffers, fills the function-pointer slots and merges the chained segments, so the Python loop calls
   one entry where there were two.

Scalars are the values of the recorded call (the program is specialised to its shapes and attributes
like everything else). ``STATS["c_calls"]`` counts the extern steps turned into native calls.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

from . import prims as P

STATS = {"c_calls": 0}
ENABLED = [True]     # False: every extern runs from Python (to measure what native calls save)


def _key(shapes, dtypes, attrs) -> tuple:
    return (tuple(tuple(int(n) for n in s) for s in shapes), tuple(np.dtype(d).str for d in dtypes),
            repr(sorted(attrs.items())))


class Recorder:
    """Records the C calls and ember ops of one run of a custom op's CPU kernel (see the docstring)."""

    def __init__(self):
        self.calls = []
        self.ops = 0

    def __call__(self, fn, cargs):
        self.calls.append((fn, list(cargs)))

    def op_hook(self, op, args, attrs, run):
        self.ops += 1
        return run()

    def __enter__(self):
        from ..utils import cpp_extension
        from ..ops import registry
        cpp_extension.CALL_RECORDERS.append(self)
        registry.HOOKS.insert(0, self.op_hook)
        return self

    def __exit__(self, *exc):
        from ..utils import cpp_extension
        from ..ops import registry
        cpp_extension.CALL_RECORDERS.remove(self)
        registry.HOOKS.remove(self.op_hook)

    def keep(self, opdef, arrays, attrs, datas) -> None:
        """Store the plan on ``opdef.c_plans`` (or forget a stale one) for these inputs and attributes."""
        key = _key([a.shape for a in arrays], [a.dtype for a in arrays], attrs)
        opdef.c_plans[key] = self._plan(arrays, datas)

    def _plan(self, arrays, datas):
        if self.ops or not self.calls or any(a.size == 0 or not a.flags.c_contiguous for a in (*arrays, *datas)):
            return None
        ins = {a.__array_interface__["data"][0]: i for i, a in enumerate(arrays)}
        outs = {d.__array_interface__["data"][0]: j for j, d in enumerate(datas)}
        if len(ins) != len(arrays) or len(outs) != len(datas) or set(ins) & set(outs):
            return None
        plan, written = [], set()
        for fn, cargs in self.calls:
            spec = []
            for p, v in zip(fn.params, cargs):
                if p.pointer:
                    if v in outs:
                        spec.append(("out", outs[v]))
                        if not p.const:
                            written.add(outs[v])
                    elif v in ins and p.const:
                        spec.append(("in", ins[v]))
                    else:
                        return None
                elif isinstance(v, float) and not math.isfinite(v):
                    return None
                else:
                    spec.append(("const", v))
            plan.append((fn, spec))
        return plan if written == set(range(len(datas))) else None


def _input_expr(c, a):
    """The C expression of extern argument node ``a`` when it is a whole contiguous buffer, else None."""
    if not isinstance(a, P.PNode):
        return None
    b = c.sched.node_buffer.get(a.id)
    if b is None and a.op == "load":
        b = a.buffer
    if b is None or tuple(b.shape) != tuple(a.shape):
        return None
    return b, c.slot_expr(b)


def _literal(p, v) -> str:
    if p.kind == "float":
        return f"({p.cname}){float(v).hex()}"
    if p.kind == "bool":
        return "1" if v else "0"
    return f"({p.cname}){int(v)}LL"


def prepare(c) -> dict:
    """``{segment index: [C lines]}`` for the extern steps of compiled program ``c`` that run as native
    calls; notes on ``c`` what ``bind`` needs (``c.c_externs``: segment -> (fn-pointer slots, output
    buffers)). Adds a slot per C function called. Decided once per program: a later rendering (an
    autotuning variant) gets the same lines, so every library built for ``c`` matches ``bind``."""
    done = getattr(c, "c_extern_lines", None)
    if done is not None:
        return done
    lines_of, c.c_externs = {}, {}
    c.c_extern_lines = lines_of
    if not ENABLED[0]:
        return lines_of
    segs = c.sched.segments
    for si, (kernels, step) in enumerate(segs):
        if step is None or step.kind != "extern" or si + 1 >= len(segs):
            continue
        e = step.effect
        plans = getattr(e.op_node.op, "c_plans", None)
        if not plans:
            continue
        if any(isinstance(v, P.PNode) for v in e.attrs.values()):
            continue
        args = [_input_expr(c, a) for a in e.args]
        if any(x is None for x in args):
            continue
        try:
            key = _key([a.shape for a in e.args], [b.dtype for b, _ in args], dict(e.attrs))
        except (TypeError, ValueError):
            continue
        plan = plans.get(key)
        if plan is None or len(e.outs) != len({j for _, spec in plan for kind, j in spec if kind == "out"}):
            continue
        lines, fn_slots = [], []
        for fn, spec in plan:
            slot = c.nslots
            c.nslots += 1
            fn_slots.append((slot, fn))
            ptypes = ", ".join("void *" if p.pointer else p.cname for p in fn.params) or "void"
            ret = fn.ret.cname if fn.ret is not None else "void"
            vals = []
            for p, (kind, v) in zip(fn.params, spec):
                if kind == "in":
                    vals.append(args[v][1])
                elif kind == "out":
                    vals.append(c.slot_expr(e.outs[v]))
                else:
                    vals.append(_literal(p, v))
            lines.append(f"  (({ret} (*)({ptypes}))(*(void **)bufs[{slot}]))({', '.join(vals)});"
                         f"  /* {fn.__name__}: {e.op_node.op.name} */")
        lines_of[si] = lines
        c.c_externs[si] = (fn_slots, list(e.outs))
    return lines_of


def bind(fb) -> None:
    """Adjust a ``native._Bound`` for the native calls ``prepare`` rendered: outputs allocated with the
    fresh buffers, function-pointer slots filled, each chained segment merged into the one before it."""
    c = fb.c
    chained = getattr(c, "c_externs", None)
    if not chained:
        return
    for si, (fn_slots, outs) in chained.items():
        for slot, fn in fn_slots:
            addr = ctypes.cast(fn.fn, ctypes.c_void_p).value
            fb.consts.append((slot, np.array([addr], dtype=np.uintp), False))
        for b in outs:
            fb.fresh.append((c.slots[b.id], b.shape, b.dtype))
    segs, entries = [], []
    for i, seg in enumerate(fb.segments):
        if segs and (i - 1) in chained:
            fn, _, setgrads = segs[-1]
            segs[-1] = (fn, seg[1], setgrads + seg[2])     # entry i-1 calls entry i itself
        else:
            segs.append(seg)
            entries.append(i)
    fb.segments = segs
    fb.seg_entries = entries
    STATS["c_calls"] += len(chained)

