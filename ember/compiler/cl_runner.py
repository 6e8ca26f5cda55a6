"""Running a captured program on an OpenCL device: the device counterpart of ``native.NativeRunner``.

``CLRunner(program)`` runs the compiler's pipeline (decompose -> schedule -> ``render_cl``) on the forward
program and its ahead-of-time backward, renders both into ONE OpenCL program and builds it (binary
cache: ``cl_device.Runtime.build``). A call binds device arrays and enqueues every kernel of a segment
back to back: each launch has its own ``cl.Kernel`` object whose arguments were set when the runner
was built (the arena and constants) or when they last changed (inputs, fresh outputs), so between two
enqueues there is only the comparison that finds an argument unchanged. Nothing waits for the device
unless a step needs the host:

- an ``extern`` step (an op without a decomposition, or one the renderer declined) runs the op's NumPy
  kernel on host copies of its inputs and uploads the results: counted in ``STATS["host_fallbacks"]`` and
  as a CPU fallback of the op (``ember.opencl.fallback_counts()``, one warning per op);
- a kernel with an index check (gather, scatter-add) reads the error record after its segment.

While a profiler listens (``ember.devices.opencl.KERNEL_HOOKS``), each enqueue keeps its event and is
reported as a kernel named after the runner (``eager_add``; ``<name>.<function>`` when a program has
several launches, ``<name>.bwd`` for the backward).

Programs that read tensor values in Python (graph breaks) are refused (:class:`Declined`): their guards
would need the device's values between segments.

Inputs are bound as :class:`cl_device.DeviceArray` s: ``args`` in the order of ``program.args``, ``lifted``
in the order of ``program.lifted`` (parameters, buffers, optimizer state: written in place when the
program writes them; a strided input runs from a contiguous copy, copied back if written; a written
input may not share memory with another input: ValueError). Outputs, new ``.grad`` arrays and the values
the backward reads are fresh device arrays (views of them where the program returns a view).
"""
from __future__ import annotations

from time import perf_counter_ns

import numpy as np

from ..devices import opencl as _ocl_rt
from . import prims as P
from .decompose import decompose, Declined
from .schedule import schedule
from .lower import strided_layout
from .ir import map_struct, Value
from . import render_cl
from .cl_device import DeviceArray, runtime
from . import cl_decomp  # noqa: F401  (registers the device-only decompositions)

STATS = {"programs": 0, "launches": 0, "host_fallbacks": 0}


class _Part:
    """One program (forward or backward) on the device: its schedule, launches and fixed buffers."""

    def __init__(self, program, fwd_values, renderer, name, label=None):
        self.program = program
        self.label = label or name
        pg = self.pg = decompose(program, fwd_values, device=True)
        for x in pg.items:
            if not isinstance(x, P.PNode) and x.kind == "read":
                raise Declined("the program reads tensor values in Python (a graph break)")
        self.sched = schedule(pg, log_name=name)
        self.segments = renderer.render_schedule(self.sched, pg.errors)
        buffers = {b.id: b for b in pg.buffers}
        for b in self.sched.node_buffer.values():
            buffers[b.id] = b
        for e in self.sched.setgrads:
            if e.grad_buffer is not None:
                buffers[e.grad_buffer.id] = e.grad_buffer
        self.buffers = buffers
        self.inputs = [(buf, v) for vid, buf in pg.inputs.items() if buf.kind != "const"
                       for v in [buf.value]]
        self.consts = [buf for buf in pg.inputs.values() if buf.kind == "const"]
        self.fresh = [b for b in buffers.values() if b.kind == "out" or (b.kind == "temp" and b.escapes)]
        self.arena_temps = [b for b in buffers.values() if b.kind == "temp" and not b.escapes]
        self.has_checks = any(ln.check for ls, _ in self.segments for ln in ls)
        self.written_inputs = [buf for buf, v in self.inputs if buf.written]
        self.checked = None         # the input addresses last found not to overlap

    def bind(self, rt, prg):
        """Per-launch kernel objects with the fixed arguments set; the arena; baked constants."""
        cl = rt.cl
        self.rt = rt
        self.arena = rt.alloc(max(int(self.sched.arena_size), 64), "compiled program arena")
        # (the Block is kept: dropping it would hand its buffer to the next allocation)
        self.err_block = rt.alloc(16, "compiled program error record") if self.has_checks else None
        self.err = None if self.err_block is None else self.err_block.buffer
        fixed = {}
        for b in self.arena_temps:
            off = b.data[1] if isinstance(b.data, tuple) else 0
            fixed[b.id] = rt.array(self.arena, off, b.shape, b.dtype)
        self.per_call_consts = []
        for b in self.consts:
            if b.data is not None:
                fixed[b.id] = rt.to_device(b.data)
            else:
                self.per_call_consts.append(b)
        self.fixed = fixed
        self.plan = []
        n_launches = sum(len(ls) for ls, _ in self.segments)
        for launches, step in self.segments:
            seg = []
            for ln in launches:
                k = cl.Kernel(prg, ln.fn)
                # typed scalar arguments: set_args packs them in C (an untyped np.int64 costs ~9 us)
                k.set_scalar_arg_dtypes([None, np.int64] * len(ln.bufs) + ([None] if ln.check else []) +
                                        ([] if ln.bufs or ln.check else [np.int64]))
                args = []
                varying = []
                for i, b in enumerate(ln.bufs):
                    d = fixed.get(b.id)
                    if d is not None:
                        args += [d.block.buffer, d.element_offset]
                    else:
                        args += [None, 0]
                        varying.append((2 * i, b.id))
                if ln.check:
                    args.append(self.err)
                elif not ln.bufs:
                    args.append(0)
                if not varying:
                    k.set_args(*args)
                seg.append((k, ln.gsize, ln.lsize, varying, args))
            checked = any(ln.check for ln in launches)
            # kernel names for profiling hooks: the program's name, plus the function when it has several
            labels = [self.label if n_launches == 1 else f"{self.label}.{ln.fn}" for ln in launches]
            self.plan.append((seg, None if step is None else step.effect, checked, labels))

    # ---- a call ---------------------------------------------------------------------------------------
    def run(self, bound: dict) -> dict:
        """Run every segment over ``bound`` (buffer id -> DeviceArray for the inputs); returns the
        buffer map (inputs, fresh buffers, extern results)."""
        rt = self.rt
        cl = rt.cl
        q = rt.queue
        arrs = dict(self.fixed)
        arrs.update(bound)
        for b in self.per_call_consts:
            arrs[b.id] = rt.to_device(np.asarray(b.value.ref))
        for b in self.fresh:
            arrs[b.id] = rt.empty(b.shape, b.dtype)
        if self.err is not None:
            cl.enqueue_fill_buffer(q, self.err, np.zeros(1, np.int64), 0, 16)
        enqueue = cl.enqueue_nd_range_kernel
        hooks = _ocl_rt.KERNEL_HOOKS
        for seg, step, checked, labels in self.plan:
            # the arguments of the segment's launches first, then the enqueues back to back
            for k, gs, ls, varying, args in seg:
                if varying:
                    for ai, bid in varying:
                        d = arrs[bid]
                        args[ai] = d.block.buffer
                        args[ai + 1] = d.element_offset
                    k.set_args(*args)
            if hooks:
                for (k, gs, ls, varying, args), label in zip(seg, labels):
                    host_ns = perf_counter_ns()
                    _ocl_rt._note_kernel(rt._r, label, enqueue(q, k, gs, ls), host_ns)
            else:
                for k, gs, ls, varying, args in seg:
                    enqueue(q, k, gs, ls)
            STATS["launches"] += len(seg)
            if checked:
                self._check_errors()
            if step is not None:
                self._extern(step, arrs)
        return arrs

    def _check_errors(self):
        e = np.zeros(2, np.int64)
        self.rt.cl.enqueue_copy(self.rt.queue, e, self.err, is_blocking=True)
        if e[0]:
            from .native import _raise_native_error
            _raise_native_error(_ErrCtx(self.pg), e)

    def view(self, n, arrs) -> DeviceArray:
        """The device array of primitive value ``n``: its buffer, or a strided view of its root's."""
        sched = self.sched
        b = sched.node_buffer.get(n.id)
        if b is not None:
            return _shaped(arrs[b.id], n.shape)

        def is_leaf(x):
            return x.op == "load" or x.id in sched.mat
        lay = strided_layout(n, is_leaf)
        if lay is None:
            raise RuntimeError(f"ember.compile: internal: no device array for t{n.id}")
        leaf, strides, off = lay
        buf = leaf.buffer if leaf.op == "load" else sched.node_buffer[leaf.id]
        base = arrs[buf.id]
        return base.view(base.offset + off * base.dtype.itemsize, n.shape, strides)

    def _extern(self, e, arrs):
        """Host fallback: the op's NumPy kernel on host copies; results uploaded. An op with a device
        kernel (a custom op's registered "opencl" kernel) runs on the device arrays instead."""
        rt = self.rt
        if getattr(e.op_node.op, "device_kernel", None) is not None:
            from ..library import run_device_extern
            arrs.update(run_device_extern(e, lambda a: self.view(a, arrs), rt.copy))
            return
        STATS["host_fallbacks"] += 1
        # never silent, like an eager op without a device kernel: ember.opencl.fallback_counts(), a warning
        _ocl_rt.record_fallback(e.op_node.op.name, f"in compiled program {self.label}: {e.reason}", device=rt.index)

        from .native import run_extern
        for buf, r in zip(e.outs, run_extern(e, lambda a: rt.to_host(self.view(a, arrs)))):
            arrs[buf.id] = rt.to_device(r)

    def escaping(self, n, arrs) -> DeviceArray:
        """``view(n)``, copied out of the arena if it lies there (the planner should not let it)."""
        d = self.view(n, arrs)
        if d.block is self.arena:
            d = self.rt.copy(d)
        return d


def _ocl_copy(dst, src):
    from ..devices.opencl import copy_
    copy_(dst, src)


def _check_overlap(part, bound):
    """A written input may not share memory with another input: the C backend runs such a call in its
    interpreter; here the caller is told (ValueError) and can run it eagerly."""
    spans = []
    for buf, v in part.inputs:
        d = bound[buf.id]
        if d.nbytes:
            lo, hi = d._extent()
            isz = d.dtype.itemsize
            spans.append((id(d.block), lo * isz, hi * isz, buf.written, v))
    for i, (b1, lo1, hi1, w1, v1) in enumerate(spans):
        for b2, lo2, hi2, w2, v2 in spans[i + 1:]:
            if b1 == b2 and (w1 or w2) and lo1 < hi2 and lo2 < hi1:
                raise ValueError(f"ember.compile(OpenCL): inputs {v1} and {v2} share memory and the program "
                                 "writes one of them")


class _ErrCtx:
    def __init__(self, pg):
        self.pg = pg


def _shaped(d: DeviceArray, shape) -> DeviceArray:
    shape = tuple(shape)
    if d.shape == shape:
        return d
    return DeviceArray(d.block, d.offset, shape, _cstr(shape), d.dtype, d.device)


def _cstr(shape):
    from .lower import cstrides
    return cstrides(shape)


class CLResult:
    """What a forward call produced: ``outputs`` (the program's output structure, DeviceArrays in place
    of tensors), ``grads`` (leaf Value -> DeviceArray or None: the ``.grad`` arrays the program set, in
    order), and ``saved`` (what ``CLRunner.backward`` reads)."""

    __slots__ = ("outputs", "grads", "saved")

    def __init__(self, outputs, grads, saved):
        self.outputs = outputs
        self.grads = grads
        self.saved = saved


class CLRunner:
    """A captured program (and its ahead-of-time backward) compiled to OpenCL; see the module docstring.

    ``runner(args, lifted)`` -> :class:`CLResult`; ``runner.backward(result, grad_outputs, lifted)`` ->
    gradients (DeviceArrays or None) in the order of ``program.backward.grad_targets``. ``source`` is
    the OpenCL C, ``launches`` the number of kernel launches per forward call, ``extern_count`` the host
    fallback steps. Raises ``decompose.Declined`` when the program cannot run on the device (a graph
    break, float64 without device support; with ``require_native``, any host step)."""

    def __init__(self, program, name="graph", rt=None, require_native=False, target=None):
        self.rt = rt = rt or runtime()
        self.program = program
        self.name = name
        # ``target`` (a render_cl.Device) overrides what rendering assumes of the device: tests run the
        # GPU-style kernels on a CPU device with it
        renderer = render_cl.Renderer(target or render_cl.Device.of(rt))
        bw = program.backward
        fwd_values = {v.ref for v in getattr(bw, "fwd_refs", ())} if bw is not None else set()
        try:
            self.fwd = _Part(program, fwd_values, renderer, f"{name}/cl_f", name)
            self.bwd = _Part(bw, set(), renderer, f"{name}/cl_b", f"{name}.bwd") if bw is not None else None
        except render_cl.Unsupported as e:
            raise Declined(str(e)) from e
        if require_native:
            for part in (self.fwd, self.bwd):
                for _, st in (part.segments if part is not None else ()):
                    if st is not None:
                        raise Declined(f"{st.effect.op_node.op.name} runs on the host: {st.effect.reason}")
        self.source = renderer.source()
        prg = rt.build(self.source, renderer.options())
        for part in (self.fwd, self.bwd):
            if part is not None:
                part.bind(rt, prg)
        self.launches = sum(len(ls) for ls, _ in self.fwd.segments)
        self.extern_count = sum(1 for _, st in self.fwd.segments if st is not None)
        self.arg_pos = {v.id: i for i, v in enumerate(program.args)}
        self.lifted_pos = {v.id: i for i, v in enumerate(program.lifted)}
        self.bw_lifted_pos = {v.id: i for i, v in enumerate(bw.lifted)} if bw is not None else {}
        STATS["programs"] += 1

    def eager_launcher(self):
        """A lean call for a one-op eager program: ``launch(inputs) -> [outputs]`` binds the (contiguous)
        input arrays and fresh output arrays straight into the kernels' arguments and enqueues them. None
        when the program needs the general path: a backward, several segments, a host step, an index
        check, per-call constants, or outputs that are views or inputs. The caller takes the general
        path while a profiler listens (``KERNEL_HOOKS``): this one reports no kernels."""
        part = self.fwd
        if self.bwd is not None or len(part.plan) != 1 or part.per_call_consts or part.err is not None:
            return None
        seg, step, checked, _ = part.plan[0]
        if step is not None or checked:
            return None
        slot = {}                                   # buffer id -> index in inputs + fresh arrays
        for buf, v in part.inputs:
            if v.kind != "arg":
                return None
            slot[buf.id] = self.arg_pos[v.id]
        n_in = len(self.program.args)
        fresh = []
        for j, b in enumerate(part.fresh):
            slot[b.id] = n_in + j
            shape = tuple(int(x) for x in b.shape)
            dt = np.dtype(b.dtype)
            fresh.append((int(np.prod(shape, dtype=np.int64)) * dt.itemsize, shape, _cstr(shape), dt))
        outs = []
        for v in self.program.outputs or ():
            if not isinstance(v, Value):
                return None
            n = part.pg.outputs[v.id]
            b = part.sched.node_buffer.get(n.id)
            if b is None or b.id not in slot or slot[b.id] < n_in or tuple(b.shape) != tuple(n.shape):
                return None
            outs.append(slot[b.id])
        plan = [(k, gs, ls, [(ai, slot[bid]) for ai, bid in varying], args) for k, gs, ls, varying, args in seg]
        q = self.rt.queue
        enqueue = self.rt.cl.enqueue_nd_range_kernel
        malloc = self.rt._r.malloc
        dev = self.rt.index
        n_launches = len(seg)
        name = self.name

        def launch(inputs):
            vals = list(inputs)
            for nbytes, shape, strides, dt in fresh:
                vals.append(DeviceArray(malloc(nbytes, name), 0, shape, strides, dt, dev))
            for k, gs, ls, varying, args in plan:
                if varying:
                    for ai, si in varying:
                        d = vals[si]
                        args[ai] = d.block.buffer
                        args[ai + 1] = d.offset // d.dtype.itemsize
                    k.set_args(*args)
                enqueue(q, k, gs, ls)
            STATS["launches"] += n_launches
            return [vals[i] for i in outs]
        return launch

    def _bind(self, part, args, lifted, lifted_pos, extra=None) -> tuple:
        """(buffer id -> DeviceArray of every input, [(strided input, its contiguous copy)] to copy back
        after the run). A strided input runs from a contiguous copy; inputs the program writes must not
        share memory with other inputs (kernels assume distinct buffers)."""
        bound = {}
        back = []
        for buf, v in part.inputs:
            if v.kind == "arg":
                d = args[self.arg_pos[v.id]]
            elif v.kind == "lifted":
                d = lifted[lifted_pos[v.id]]
            else:
                d = extra(v, buf)
            if not isinstance(d, DeviceArray):
                raise TypeError(f"ember.compile(OpenCL): input {v} is a {type(d).__name__}, not a DeviceArray")
            if d.shape != buf.shape or d.dtype != buf.dtype:
                raise ValueError(f"ember.compile(OpenCL): input {v} is {d.dtype}{list(d.shape)}, compiled for "
                                 f"{buf.dtype}{list(buf.shape)}")
            if not d.is_contiguous():
                c = self.rt.copy(d)
                if buf.written:
                    back.append((d, c))
                d = c
            bound[buf.id] = d
        if part.written_inputs and len(bound) > 1:
            key = tuple((id(d.block), d.offset) for d in bound.values())
            if key != part.checked:
                _check_overlap(part, bound)
                part.checked = key
        return bound, back

    def _run(self, part, bound_back):
        bound, back = bound_back
        arrs = part.run(bound)
        for orig, c in back:
            _ocl_copy(orig, c)
        return arrs

    def __call__(self, args, lifted=(), grad_enabled=True) -> CLResult:
        p = self.program
        part = self.fwd
        arrs = self._run(part, self._bind(part, args, lifted, self.lifted_pos))
        pg = part.pg

        def out(v):
            if v.kind == "arg":
                return args[self.arg_pos[v.id]]
            if v.kind == "lifted":
                return lifted[self.lifted_pos[v.id]]
            return part.escaping(pg.outputs[v.id], arrs)
        outputs = map_struct(p.outputs, lambda v: isinstance(v, Value), out)
        grads = {}
        for e in part.sched.setgrads:
            if e.source is None or e.grad_buffer is None:
                grads[e.leaf] = None
            else:
                grads[e.leaf] = _shaped(arrs[e.grad_buffer.id], e.source.shape)
        saved = None
        if self.bwd is not None and grad_enabled:
            saved = {vid: part.escaping(n, arrs) for vid, n in pg.fwd_needed.items()}
        return CLResult(outputs, grads, saved)

    def backward(self, result: CLResult, grad_outputs, lifted=()) -> list:
        """Gradients of ``program.backward.grad_targets`` given the gradients of the differentiable
        outputs (``grad_outputs``, DeviceArrays or None for zeros, in the order of
        ``program.backward.grad_outputs``); ``lifted`` in the order of ``program.backward.lifted``."""
        if self.bwd is None:
            raise RuntimeError("ember.compile(OpenCL): this program has no compiled backward")
        bw = self.program.backward
        rt = self.rt
        part = self.bwd
        gpos = {v.id: i for i, v in enumerate(bw.grad_outputs)}

        def extra(v, buf):
            if v.kind == "grad_in":
                g = grad_outputs[gpos[v.id]]
                return rt.zeros(buf.shape, buf.dtype) if g is None else g
            if v.kind == "fwd":
                return result.saved[v.ref]
            raise RuntimeError(f"ember.compile(OpenCL): internal: unbound backward input of kind {v.kind}")
        arrs = self._run(part, self._bind(part, (), lifted, self.bw_lifted_pos, extra))
        res = []
        for v in bw.outputs:
            res.append(None if v is None else part.escaping(part.pg.outputs[v.id], arrs))
        return res
