"""Replaying a captured Program.

Two interpreters, matching torch's debug backends:

- ``replay_eager``: runs each recorded op through ember's dispatcher (``apply``), so autograd records
  as in eager mode (backend="eager": checks capture alone).
- ``Interpreter``: runs the ops' NumPy kernels directly on buffers with no autograd bookkeeping;
  gradients for outputs come from the backward program captured ahead of time (backend="aot_eager").
  The native backend replaces the kernel loop with generated C where it can.

A replay checks each graph break's guard (the value Python read while tracing); when one fails it
raises ``GuardFailure`` after undoing every write it made, so the caller can retrace from the same
state.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor, wrap
from ..autograd.grad_mode import GRAD
from ..autograd.node import Node
from ..ops.registry import apply, apply_view
from .ir import OpNode, WriteNode, SetGradNode, ReadNode, AttrRef, Value, map_struct


class GuardFailure(Exception):
    def __init__(self, message: str):
        super().__init__(message)


def read_value(arr: np.ndarray, dtype, kind: str):
    t = wrap(arr, dtype)
    if kind == "item":
        return Tensor.item(t)
    if kind == "bool":
        return bool(arr.reshape(()))
    if kind == "float":
        return float(arr.reshape(()))
    if kind == "int" or kind == "index":
        return int(arr.reshape(()))
    if kind == "tolist":
        return Tensor.tolist(t)
    return arr


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return a == b


def _check_read(node: ReadNode, arr: np.ndarray):
    if not node.guard:
        return
    if type(arr) is not np.ndarray:
        arr = _host(arr)            # a device value: read on the host, like Tensor.item() does
    now = read_value(arr, node.value.dtype, node.kind)
    if not _same(now, node.seen):
        raise GuardFailure(f"value read at {node.where} ({node.kind}) was {_fmt(node.seen)} when traced, "
                           f"now {_fmt(now)}")


def _fmt(x):
    r = repr(x)
    return r if len(r) < 60 else r[:57] + "..."


class _Undo:
    """Snapshots of buffers and .grad fields a replay changes, restored on a guard failure."""

    def __init__(self):
        self.buffers = []
        self.grads = []

    def buffer(self, arr):
        self.buffers.append((arr, arr.copy() if type(arr) is np.ndarray else copy_data(arr)))

    def grad(self, t):
        self.grads.append((t, t.grad))

    def restore(self):
        for arr, old in reversed(self.buffers):
            if type(arr) is np.ndarray:
                np.copyto(arr, old)
            else:
                from ..devices import opencl
                opencl.copy_(arr, old)
        for t, g in reversed(self.grads):
            t._grad = g


def check_extra_guards(program):
    """Check the guards on Python state, then point ``.grad`` values lifted by access path at the owners'
    current gradients (the guards checked they exist with the traced shape and dtype)."""
    for desc, fn, seen in getattr(program, "extra_guards", ()):
        if fn() != seen:
            raise GuardFailure(f"guard failed: {desc} (was {seen!r} when traced)")
    for v, oref in getattr(program, "grad_rebinds", ()):
        v.ref = oref()._grad


def bind_inputs(program, arg_tensors, slots):
    for v, t in zip(program.args, arg_tensors):
        slots[v.id] = t
    for v in program.lifted:
        slots[v.id] = v.ref
    for v in program.consts:
        slots[v.id] = wrap(const_data(v), v.dtype)


def const_data(v):
    """A fresh copy of a constant's traced value, on the device it was made on."""
    dev = getattr(v, "device", None)
    if dev is None:
        return np.array(v.ref, copy=True)
    from ..devices import opencl
    return opencl.from_numpy(np.asarray(v.ref), dev, op="constant")


def copy_data(d):
    """A fresh copy of a CPU or device array, where it is."""
    if type(d) is np.ndarray:
        return np.array(d, copy=True)
    from ..devices import opencl
    return opencl.copy_(opencl.empty(d.shape, d.dtype, d.device, op="copy"), d)


def _host(d) -> np.ndarray:
    from ..devices import opencl
    return opencl.to_numpy(d)


def replay_eager(program, arg_tensors):
    """backend="eager": every recorded op goes back through the dispatcher (autograd included)."""
    from ..ops.inplace import write_result
    check_extra_guards(program)
    slots = [None] * len(program.values)
    bind_inputs(program, arg_tensors, slots)
    undo = _Undo() if any(g.ended_by is not None for g in program.graphs) else None
    aliases = {}        # alias index -> the tensor (a detach() of a value) standing for it in this replay
    prev = GRAD[0]
    try:
        for g in program.graphs:
            for n in g.nodes:
                if type(n) is OpNode:
                    GRAD[0] = n.grad_enabled and prev
                    args = tuple(slots[i.id] if hasattr(i, "kind") else i for i in n.inputs)
                    if hasattr(n, "aliases"):           # inputs the trace used through x.detach()
                        args = _use_aliases(args, n.inputs, n.aliases, slots, aliases)
                    attrs = {k: (slots[a.value.id]._data if type(a) is AttrRef else a) for k, a in n.attrs.items()}
                    # (an op the trace saw called as a view, on a device, makes a view of the device buffer)
                    if n.op.name == "_to_copy":         # a move between devices (.to, .cpu())
                        from ..devices.dispatch import to_device
                        out = to_device(args[0], attrs["dst"])
                    else:
                        out = (apply_view if getattr(n, "view", False) else apply)(n.op, args, attrs)
                    outs = out if type(out) is tuple else (out,)
                    for v, o in zip(n.outputs, outs):
                        slots[v.id] = o
                elif type(n) is WriteNode:
                    target = slots[n.target.id]
                    if undo is not None:
                        undo.buffer(target._data)
                    src = slots[n.source.id]
                    if hasattr(n, "aliases"):
                        target, src = _use_aliases((target, src), (n.target, n.source), n.aliases, slots, aliases)
                    GRAD[0] = getattr(n, "grad_enabled", True) and prev
                    write_result(target, lambda s, src=src: src, "replay_write")
                elif type(n) is SetGradNode:
                    leaf = slots[n.leaf.id]
                    if undo is not None:
                        undo.grad(leaf)
                    leaf._grad = None if n.source is None else \
                        wrap(copy_data(slots[n.source.id]._data), leaf._dtype)
            if g.ended_by is not None:
                _check_read(g.ended_by, slots[g.ended_by.value.id]._data)
    except GuardFailure:
        GRAD[0] = prev
        if undo is not None:
            undo.restore()
        raise
    finally:
        GRAD[0] = prev
    out_aliases = getattr(program, "output_aliases", None)
    if out_aliases is None:
        return _build(program.outputs, lambda v: slots[v.id])
    it = iter(out_aliases)
    return _build(program.outputs, lambda v: _use_aliases((None,), (v,), [(0, next(it))], slots, aliases)[0])


def _use_aliases(ts, values, uses, slots, aliases) -> tuple:
    """``ts`` (the tensors of ``values``) with those the trace used as a detached alias of the value
    (``uses``: (position, alias index); a None index: not an alias) replaced by that alias: one
    ``detach()`` of the value per alias, made at its first use, so the replay does not differentiate
    through it and in-place writes into it give it (not the value) history, as eagerly."""
    ts = list(ts)
    for i, k in uses:
        if k is None:
            ts[i] = slots[values[i].id]
            continue
        a = aliases.get(k)
        if a is None:
            a = aliases[k] = slots[values[i].id].detach()
        ts[i] = a
    return tuple(ts)


class Interpreter:
    """backend="aot_eager": run kernels on raw buffers; outputs get gradients from the AOT backward."""

    def __init__(self, program):
        self.program = program
        self.has_reads = any(g.ended_by is not None for g in program.graphs)

    def run_slots(self, slots, undo=None):
        for g in self.program.graphs:
            for n in g.nodes:
                if type(n) is OpNode:
                    args = [slots[i.id] if hasattr(i, "kind") else i for i in n.inputs]
                    attrs = n.attrs
                    if n.has_refs:
                        attrs = {k: (slots[a.value.id] if type(a) is AttrRef else a) for k, a in attrs.items()}
                    res = n.op.kernel(*args, **attrs)
                    if n.op.nout == 1:
                        slots[n.outputs[0].id] = res if type(res) is np.ndarray else np.asarray(res)
                    else:
                        for v, r in zip(n.outputs, res):
                            slots[v.id] = r if type(r) is np.ndarray else np.asarray(r)
                elif type(n) is WriteNode:
                    target = slots[n.target.id]
                    if undo is not None:
                        undo.buffer(target)
                    np.copyto(target, slots[n.source.id], casting="unsafe")
                    ref = n.target.ref if n.target.kind == "lifted" else None
                    if ref is not None:
                        ref._bump()
                elif type(n) is SetGradNode:
                    leaf = n.leaf.ref if n.leaf.kind == "lifted" else self._arg_tensor(n.leaf)
                    if undo is not None:
                        undo.grad(leaf)
                    leaf._grad = None if n.source is None else \
                        wrap(np.array(slots[n.source.id], copy=True), leaf._dtype)
            if g.ended_by is not None:
                _check_read(g.ended_by, slots[g.ended_by.value.id])

    def _arg_tensor(self, v):
        return self._args[self.program.args.index(v)]

    def __call__(self, arg_tensors, grad_enabled: bool):
        p = self.program
        check_extra_guards(p)
        self._args = arg_tensors
        slots = [None] * len(p.values)
        for v, t in zip(p.args, arg_tensors):
            slots[v.id] = t._data
        for v in p.lifted:
            slots[v.id] = v.ref._data
        for v in p.consts:
            slots[v.id] = const_data(v)
        undo = _Undo() if self.has_reads else None
        try:
            self.run_slots(slots, undo)
        except GuardFailure:
            undo.restore()
            raise
        out_tensor = output_tensors(p, arg_tensors, slots.__getitem__)
        result = build_outputs(p, out_tensor)
        bw = p.backward
        if bw is not None and grad_enabled:
            diff_outs = [out_tensor(v) for v in bw.grad_outputs_of]
            targets = [arg_tensors[p.args.index(v)] if v.kind == "arg" else v.ref for v in bw.grad_targets]
            self._attach_backward(bw, slots, diff_outs, targets)
        return result

    def _attach_backward(self, bw, slots, diff_outs, targets):
        """Link the outputs to the ahead-of-time backward program (run on the forward's slots)."""
        _attach_backward(bw, slots, diff_outs, targets)


def no_double_backward() -> None:
    """A compiled backward runs kernels on raw buffers: it records no graph of its own, so it cannot serve
    ``create_graph=True`` (higher-order gradients). Say so instead of returning gradients without history."""
    if GRAD[0]:
        raise RuntimeError("ember.compile: the backward of a compiled function cannot build a graph for "
                           "higher-order gradients (backward or autograd.grad with create_graph=True: gradient "
                           "penalties, Hessians, PINN residuals). Call that function eagerly (not compiled), "
                           "or compile the whole step including the autograd.grad calls")


class CompiledBackward:
    """Base of the OpDef-like adapters of compiled backwards: the autograd engine calls
    ``backward(node, *grads)`` of a subclass (the interpreter's, the native and the device runners')."""

    name = "compiled_backward"
    node_name = "CompiledFunctionBackward"
    save = ""
    nondiff_outputs = ()
    differentiable = True


class _CompiledBackwardOp(CompiledBackward):
    """The AOT backward program, run by the interpreter."""

    def __init__(self, program, fwd_slots, nout):
        self.program = program
        self.fwd_slots = fwd_slots
        self.nout = nout

    def backward(self, node, *grads):
        no_double_backward()
        bw = self.program
        slots = [None] * len(bw.values)
        for v, g in zip(bw.grad_outputs, grads):
            slots[v.id] = self.zeros(v) if g is None else g._data
        for v in bw.fwd_refs:
            slots[v.id] = self.fwd_slots[v.ref]
        for v in bw.lifted:
            slots[v.id] = v.ref._data
        for v in bw.consts:
            slots[v.id] = self.const(v)
        self.run(bw, slots)
        # one gradient per edge (inputs of the node are the grad targets)
        return tuple(None if v is None else self.result(slots[v.id], v.dtype) for v in bw.outputs)

    # where the device runner's backward differs: the arrays it makes and the interpreter it runs
    def zeros(self, v):
        return np.zeros(v.shape, dtype=v.dtype.np)

    def const(self, v):
        return np.array(v.ref, copy=True)

    def run(self, bw, slots):
        Interpreter(bw).run_slots(slots)

    def result(self, data, dtype):
        return wrap(np.asarray(data), dtype)


def attach_node(op, diff_outs, targets) -> Node:
    """Give ``diff_outs`` one autograd node whose backward is ``op`` (an AOT-compiled backward), with an
    edge per target tensor that requires grad. Shared by the interpreter and the native runner.
    The node's class is named by ``op.node_name`` (``CompiledFunctionBackward``, as under torch.compile)."""
    from ..autograd.node import node_class
    node = node_class(op.node_name)(op, None, {}, len(diff_outs))
    edges, meta = [], []
    for t in targets:
        if t._rg:
            fn = t.grad_fn
            edges.append((fn, t._output_nr) if fn is not None else t)
            meta.append((t._data.shape, t._dtype))
        else:
            edges.append(None)
            meta.append(None)
    node.edges = edges
    node.in_meta = meta
    node.ctx_data = {"out_meta": [(o._data.shape, o._dtype) for o in diff_outs]}
    for i, o in enumerate(diff_outs):
        o._rg = True
        o.grad_fn = node
        o._output_nr = i
    return node


def _attach_backward(bw, fwd_slots, diff_outs, targets):
    attach_node(_CompiledBackwardOp(bw, fwd_slots, len(diff_outs)), diff_outs, targets)


def output_tensors(program, arg_tensors, array_of):
    """``out_tensor(value)`` for a finished run: an argument or lifted tensor is itself; any other value is
    wrapped once around ``array_of(value.id)`` (the same tensor when it comes out twice)."""
    outs = {}

    def out_tensor(v):
        if v.kind == "arg":
            return arg_tensors[program.args.index(v)]
        if v.kind == "lifted":
            return v.ref
        t = outs.get(v.id)
        if t is None:
            t = outs[v.id] = wrap(array_of(v.id), v.dtype)
        return t
    return out_tensor


def build_outputs(program, fn):
    """The program's output structure with ``fn(value)`` for each Value; an output the function returned
    through ``detach()`` is a new tensor sharing the value's memory, without its history, as eagerly."""
    det = getattr(program, "output_detached", None)
    if not det:
        return _build(program.outputs, fn)
    it = iter(det)
    return _build(program.outputs, lambda v: fn(v).detach() if next(it) else fn(v))


def _build(struct, fn):
    """Rebuild an output structure with ``fn`` applied to every Value in it."""
    return map_struct(struct, lambda v: isinstance(v, Value), fn)