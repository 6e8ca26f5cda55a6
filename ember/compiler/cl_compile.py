"""``ember.compile`` on OpenCL device tensors: the runners of a program captured with device values.

A capture with device arguments or parameters is a *device program* (``Program.device``, the device index;
each Value remembers the device it lived on while tracing). :func:`device_runner` gives the runner the
backend asks for:

- ``"inductor"``: :class:`DeviceRunner`, the program and its ahead-of-time backward as generated OpenCL
  kernels (``cl_runner.CLRunner``), built on the first call whose guards hold (a trace that never replays
  costs no build). Outputs are device tensors; the backward is attached as one autograd node, so
  ``loss.backward()`` after a compiled forward runs the compiled backward; parameters and optimizer state
  are written in place. When the code generator declines the program (a graph break: the guards need
  values between kernels; float64 on a device without it; a code generation failure) the program runs
  in :class:`DeviceInterpreter` instead: counted in ``ember.compiler.counters["opencl_declined"]`` with the
  reason in ``counters["opencl_declined_reasons"]``, logged under ``EMBER_LOGS=kernels``.
- ``"aot_eager"``: :class:`DeviceInterpreter`, every recorded op sent through the device dispatcher
  (its generated kernel, or its counted CPU fallback) without autograd bookkeeping; gradients come from
  the captured backward program, run the same way.

Ops without a device kernel inside a generated program run on the host between kernels (copies over and
back): counted in ``cl_runner.STATS["host_fallbacks"]`` and ``ember.opencl.fallback_counts()``.
Tensors a device program reads that were on the CPU while tracing (0-dim scalars such as an optimizer's
step count, a tensor moved with ``.to()`` inside the function) are uploaded per call (and written back
when the program writes them); outputs that were CPU tensors when traced are returned on the CPU.
"""
from __future__ import annotations

import numpy as np

from ..tensor import wrap
from ..autograd.grad_mode import GRAD
from ..devices import opencl as _ocl
from ..devices import dispatch as _dispatch
from ..devices.opencl import DeviceArray
from ..ops import registry as R
from . import logs
from .decompose import Declined
from .ir import OpNode, WriteNode, SetGradNode, AttrRef, Value, map_struct
from .runtime import (Interpreter, GuardFailure, check_extra_guards, _check_read, attach_node, build_outputs,
                      no_double_backward, const_data, copy_data, CompiledBackward, _CompiledBackwardOp)

TO_DEVICE = _dispatch.TO_DEVICE


def _moves_as_copies(program):
    """``program`` (and its backward) with each move between devices (a ``_to_copy`` node: ``.to()``,
    ``.cpu()``, a factory's ``device=`` inside the function) recorded as a clone: where the whole program
    runs on one device, a move is a copy. The original keeps its moves for the op-by-op replays."""
    import copy
    from ..ops.copies import CLONE

    def graphs(p):
        out = []
        for g in p.graphs:
            if any(type(n) is OpNode and n.op is TO_DEVICE for n in g.nodes):
                g = copy.copy(g)
                g.nodes = [copy.copy(n) if type(n) is OpNode and n.op is TO_DEVICE else n for n in g.nodes]
                for n in g.nodes:
                    if type(n) is OpNode and n.op is TO_DEVICE:
                        n.op, n.attrs = CLONE, {}
            out.append(g)
        return out
    new = copy.copy(program)
    new.graphs = graphs(program)
    if program.backward is not None:
        new.backward = copy.copy(program.backward)
        new.backward.graphs = graphs(program.backward)
    return new


def device_runner(program, backend: str, name: str):
    """The runner of a device program for ``backend`` ("inductor" or "aot_eager")."""
    if backend == "inductor":
        return DeviceRunner(program, name)
    return DeviceInterpreter(program)


def _count_decline(name, reason):
    from .api import counters
    counters["opencl_declined"] += 1
    counters["opencl_declined_reasons"].append(f"{name}: {reason}")
    logs.log("kernels", f"ember.compile({name}): not compiled to OpenCL kernels, running the captured graph op "
                        f"by op on the device: {reason}")


# ---- op by op on the device (backend="aot_eager", and what a declined program runs in) ----------------------

def _write(target, src, dtype) -> None:
    """Copy ``src`` (broadcast, converted to the target's dtype) into ``target``, on either device."""
    if type(target) is np.ndarray:
        if type(src) is not np.ndarray:
            src = _ocl.to_numpy(src)
        np.copyto(target, src, casting="unsafe")
        return
    if type(src) is not DeviceArray or src.dtype != target.dtype:
        from ..autograd.grad_mode import no_grad
        with no_grad():
            src = wrap(src).to(_dispatch._device_obj(target.device), dtype)._data
    _ocl.copy_(target, src)


def _run_op(n, args, attrs):
    """One recorded op through the device dispatcher (or NumPy for CPU data), without autograd."""
    op = n.op
    if op is TO_DEVICE:
        return _dispatch.to_device(args[0], attrs["dst"])
    if getattr(n, "view", False):
        R.VIEW_CALL[0] = op
        try:
            return R.apply_unhooked(op, args, attrs)
        finally:
            R.VIEW_CALL[0] = None
    return R.apply_unhooked(op, args, attrs)


class DeviceInterpreter(Interpreter):
    """``runtime.Interpreter`` for device programs: each op goes to the device dispatcher."""

    def run_slots(self, slots, undo=None):
        prev = GRAD[0]
        GRAD[0] = False
        try:
            for g in self.program.graphs:
                for n in g.nodes:
                    if type(n) is OpNode:
                        args = tuple(wrap(slots[i.id], i.dtype) if isinstance(i, Value) else i for i in n.inputs)
                        attrs = n.attrs
                        if n.has_refs:
                            attrs = {k: (slots[a.value.id] if type(a) is AttrRef else a) for k, a in attrs.items()}
                        res = _run_op(n, args, attrs)
                        if n.op.nout == 1:
                            slots[n.outputs[0].id] = res._data
                        else:
                            for v, r in zip(n.outputs, res):
                                slots[v.id] = r._data
                    elif type(n) is WriteNode:
                        target = slots[n.target.id]
                        if undo is not None:
                            undo.buffer(target)
                        _write(target, slots[n.source.id], n.target.dtype)
                        if n.target.kind == "lifted":
                            n.target.ref._bump()
                    elif type(n) is SetGradNode:
                        leaf = n.leaf.ref if n.leaf.kind == "lifted" else self._arg_tensor(n.leaf)
                        if undo is not None:
                            undo.grad(leaf)
                        leaf._grad = None if n.source is None else wrap(copy_data(slots[n.source.id]), leaf._dtype)
                if g.ended_by is not None:
                    _check_read(g.ended_by, slots[g.ended_by.value.id])
        finally:
            GRAD[0] = prev

    def _attach_backward(self, bw, slots, diff_outs, targets):
        attach_node(_DeviceBackwardOp(bw, slots, len(diff_outs)), diff_outs, targets)


class _DeviceBackwardOp(_CompiledBackwardOp):
    """The AOT backward program, op by op on the device."""

    def zeros(self, v):
        z = np.zeros(v.shape, dtype=v.dtype.np)
        dev = getattr(v, "device", None)
        return z if dev is None else _ocl.from_numpy(z, dev, op="zeros")

    def const(self, v):
        return const_data(v)

    def run(self, bw, slots):
        DeviceInterpreter(bw).run_slots(slots)

    def result(self, data, dtype):
        return wrap(data, dtype)


# ---- generated OpenCL kernels (backend="inductor") ---------------------------------------------------------

class DeviceRunner:
    """``runner(arg_tensors, grad_enabled)`` with ``runtime.Interpreter``'s contract, running a device program
    as generated OpenCL kernels (``cl_runner.CLRunner``); see the module docstring. ``cl`` is the CLRunner
    once built (``cl.source``, ``cl.launches``, ``cl.extern_count``), ``declined`` the reason it is not."""

    def __init__(self, program, name="graph"):
        self.program = program
        self.name = name
        self.cl = None
        self.declined = None
        self.interp = DeviceInterpreter(program)
        p = program
        self.arg_index = {v.id: i for i, v in enumerate(p.args)}
        self.bumps = []                     # lifted Values written by the program, with their write counts
        written = {}
        for g in p.graphs:
            for n in g.nodes:
                if type(n) is WriteNode and n.target.kind in ("lifted", "arg"):
                    written[n.target.id] = written.get(n.target.id, 0) + 1
        self.written = written
        self.bumps = [(v, written[v.id]) for v in p.lifted if v.id in written]
        # outputs in the order map_struct visits them (CLRunner returns the same structure)
        self.out_values = []
        map_struct(p.outputs, lambda v: isinstance(v, Value), lambda v: self.out_values.append(v) or v)
        if p.graphs and any(g.ended_by is not None for g in p.graphs):
            self._decline("the program reads tensor values in Python (a graph break): its guards need the "
                          "values between kernels")

    def _decline(self, reason):
        self.declined = reason
        _count_decline(self.name, reason)

    def build(self) -> bool:
        if self.cl is not None:
            return True
        if self.declined is not None:
            return False
        from .cl_runner import CLRunner
        from .cl_device import runtime
        try:
            self.cl = CLRunner(_moves_as_copies(self.program), name=self.name, rt=runtime(self.program.device))
        except Declined as d:
            self._decline(str(d))
            return False
        except Exception as e:           # a bug in code generation must not break the user's program
            import traceback
            import warnings
            logs.log("kernels", f"ember.compile({self.name}): OpenCL code generation failed:\n"
                                f"{traceback.format_exc()}")
            warnings.warn(f"ember.compile({self.name}): OpenCL code generation failed ({type(e).__name__}: {e}); "
                          "running the captured graph op by op on the device instead", RuntimeWarning, stacklevel=4)
            self._decline(f"code generation failed: {type(e).__name__}: {e}")
            return False
        from .api import counters
        counters["opencl_programs"] += 1
        if logs.enabled("output_code"):
            logs.log("output_code", f"ember.compile({self.name}) (OpenCL):\n{self.cl.source}")
        logs.log("kernels", f"ember.compile({self.name}): {self.cl.launches} OpenCL kernel launch(es) per call, "
                            f"{self.cl.extern_count} host step(s)")
        return True

    def _dev(self, t, uploads):
        """The DeviceArray of tensor ``t``; a CPU tensor is uploaded (noted in ``uploads`` for write-back)."""
        d = t._data
        if type(d) is DeviceArray:
            return d
        c = _ocl.from_numpy(np.ascontiguousarray(d), self.program.device, op="compiled input")
        uploads.append((t, c))
        return c

    def __call__(self, arg_tensors, grad_enabled: bool):
        p = self.program
        check_extra_guards(p)
        if self.cl is None and not self.build():
            return self.interp(arg_tensors, grad_enabled)
        uploads = []
        args = [self._dev(t, uploads) for t in arg_tensors]
        lifted = [self._dev(v.ref, uploads) for v in p.lifted]
        try:
            res = self.cl(args, lifted, grad_enabled)
        except ValueError as e:
            if "share memory" in str(e):
                # inputs overlap and the program writes one: op by op keeps the aliasing, as eager does
                return self.interp(arg_tensors, grad_enabled)
            raise GuardFailure(f"guard failed: a tensor the compiled code reads changed: {e}") from e
        for t, c in uploads:
            if self.written and any(t is x for x in self._written_tensors(arg_tensors)):
                np.copyto(t._data, _ocl.to_numpy(c), casting="unsafe")
        for v, k in self.bumps:
            ref = v.ref
            for _ in range(k):
                ref._bump()
        for leaf_v, d in res.grads.items():
            leaf = leaf_v.ref if leaf_v.kind == "lifted" else arg_tensors[self.arg_index[leaf_v.id]]
            leaf._grad = None if d is None else wrap(d, leaf._dtype)
        arrays = []
        map_struct(res.outputs, lambda x: isinstance(x, DeviceArray), lambda x: arrays.append(x) or x)
        by_id = {}
        for v, d in zip(self.out_values, arrays):
            by_id.setdefault(v.id, d)
        outs = {}

        def out_tensor(v):
            if v.kind == "arg":
                return arg_tensors[self.arg_index[v.id]]
            if v.kind == "lifted":
                return v.ref
            t = outs.get(v.id)
            if t is None:
                d = by_id[v.id]
                if getattr(v, "device", None) is None:
                    d = _ocl.to_numpy(d)        # a CPU tensor when traced: returned on the CPU
                t = outs[v.id] = wrap(d, v.dtype)
            return t
        result = build_outputs(p, out_tensor)
        bw = p.backward
        if bw is not None and grad_enabled and self.cl.bwd is not None:
            diff_outs = [out_tensor(v) for v in bw.grad_outputs_of]
            targets = [arg_tensors[self.arg_index[v.id]] if v.kind == "arg" else v.ref for v in bw.grad_targets]
            attach_node(_CLBackwardOp(self, res, len(diff_outs)), diff_outs, targets)
        return result

    def _written_tensors(self, arg_tensors):
        p = self.program
        for v in p.args:
            if v.id in self.written:
                yield arg_tensors[self.arg_index[v.id]]
        for v in p.lifted:
            if v.id in self.written:
                yield v.ref


class _CLBackwardOp(CompiledBackward):
    """The AOT backward as generated OpenCL kernels (``CLRunner.backward``) over the forward's saved values."""

    def __init__(self, runner, result, nout):
        self.runner = runner
        self.result = result
        self.nout = nout

    def backward(self, node, *grads):
        no_double_backward()
        r = self.runner
        bw = r.program.backward
        uploads = []
        gs = [None if g is None else r._dev(g, uploads) for g in grads]
        lifted = [r._dev(v.ref, uploads) for v in bw.lifted]
        out = r.cl.backward(self.result, gs, lifted)
        return tuple(None if v is None or d is None else wrap(d, v.dtype) for v, d in zip(bw.outputs, out))
