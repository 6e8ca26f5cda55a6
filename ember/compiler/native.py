"""The native backend (``backend="inductor"``): captured programs run as generated C.

``build_runner(program, mode=, name=)`` runs the pipeline below on the forward program and its
ahead-of-time backward, renders both into ONE C source, builds it through ``build.py`` (disk cache
keyed on the source; the kernels are compiled as several translation units at once, ``units.py``;
float32 GEMMs call ember's GEMM library, ``shared_gemm.py``) and returns a :class:`NativeRunner`, a
callable with the contract of ``runtime.Interpreter.__call__`` (``runner(tensors, grad_enabled)``). It returns None when the
program cannot run natively (the reason is logged under ``EMBER_LOGS=kernels``): the caller then
uses the interpreter.

The pipeline, each step a pure function of the previous one's result::

    decompose  Program -> PGraph          (decompose.py: primitives + effects, externs)
    schedule   PGraph  -> Schedule         (schedule.py: buffers, fusion into kernels, memory plan)
    render     Schedule -> C source        (render_c.py)
    build      C source -> shared library  (build.py: cc + disk cache)

The C build happens on the runner's first call whose guards hold (a trace that never replays, like the
first step of a training loop with SGD momentum, whose buffer starts as a copy of the gradient, costs
no compilation); until then, and if the build fails, the interpreter runs the program.

At run time the runner binds the inputs (arguments, parameters and other lifted tensors, constants),
allocates the escaping buffers (outputs, new ``.grad`` tensors, values the backward reads), and calls
one native entry per segment; between segments it runs extern kernels and checks graph-break guards
exactly as the interpreter does (undoing writes on a failed guard). ``EMBER_LOGS=output_code`` prints
the source, ``EMBER_LOGS=kernels`` the kernels with what each fused.
"""
from __future__ import annotations

import time
import weakref

import numpy as np

from ..tensor import wrap
from . import logs
from .build import _data_pointer       # (importing build first also sets OMP_WAIT_POLICY in time)
from . import prims as P
from . import c_externs
from .decompose import decompose, Declined
from .ir import paused_gc
from . import prefault
from .schedule import schedule
from .lower import strided_layout
from .render_c import render_program, Options
from .runtime import attach_node, check_extra_guards, GuardFailure, _check_read, _Undo, Interpreter, \
    build_outputs, output_tensors, _CompiledBackwardOp, CompiledBackward, no_double_backward

_PLACEHOLDER = np.empty(0, dtype=np.uint8)    # slots filled later (extern results) hold this until then
# builds: C compiler runs for compiled programs (support libraries such as the runtime not counted; a
# tiered build counts its quick build, not the -O3 one in the background: tiers.STATS)
STATS = {"programs": 0, "declined": 0, "kernels": 0, "externs": 0, "builds": 0}


# ---- profiler hook (optional) -------------------------------------------------------------------------------

def _record(name, seconds, **fields):
    try:
        from ..profiler import record_event
    except Exception:
        return
    try:
        record_event("compile", name, duration_us=seconds * 1e6, **fields)
    except Exception:
        pass


def _prof_enabled() -> bool:
    from ..profiler.profiler import _ACTIVE
    p = _ACTIVE[0]
    return p is not None and p._recording


# ---- compiling a program ----------------------------------------------------------------------------------------

class Compiled:
    """One program after the pipeline: its schedule, slot layout and (after build) entry points."""

    FIRST_SLOT = 2                   # slot 0: the arena, slot 1: the error record

    def __init__(self, program, pg, sched, prefix):
        self.program = program
        self.pg = pg
        self.sched = sched
        self.prefix = prefix
        self.slots: dict = {}        # buffer id -> slot index (>= 2)
        self.buffers: dict = {}      # buffer id -> Buffer
        self.entries: list = []      # C entry names, one per segment
        for b in pg.buffers:
            self.buffers[b.id] = b
        for b in sched.node_buffer.values():
            self.buffers[b.id] = b
        for e in sched.setgrads:
            if e.grad_buffer is not None:
                self.buffers[e.grad_buffer.id] = e.grad_buffer
        n = self.FIRST_SLOT
        for bid in sorted(self.buffers):
            b = self.buffers[bid]
            if b.kind == "temp" and not b.escapes:
                continue
            self.slots[bid] = n
            n += 1
        self.nslots = n

    def slot_expr(self, buf) -> str:
        if buf.kind == "temp" and not buf.escapes:
            off = buf.data[1] if isinstance(buf.data, tuple) else 0
            return f"(char *)bufs[0] + {off}LL"
        return f"bufs[{self.slots[buf.id]}]"


def _pipeline(program, name, fwd_values, prefix, cls=Compiled):
    t0 = time.perf_counter()
    pg = decompose(program, fwd_values)
    t1 = time.perf_counter()
    sched = schedule(pg, log_name=f"{name}/{prefix}")
    t2 = time.perf_counter()
    for k in sched.kernels:
        k.name = f"{prefix}_{k.name}"
    _record("compile::decompose", t1 - t0, graph=name)
    _record("compile::schedule", t2 - t1, graph=name)
    return cls(program, pg, sched, prefix)


def _render(parts, options, name):
    """One translation unit for the forward (and backward) programs."""
    from .build import OMP_PRELUDE
    from . import blas as _blas
    bodies = []
    uses_blas = False
    shared = {}
    for c in parts:
        calls = c_externs.prepare(c)      # custom ops whose C kernels the entries call themselves
        src, entries, ub, ksrc = render_program(c.sched, c.slot_expr, c.pg.errors, options, name=c.prefix,
                                                shared=shared, extern_calls=calls, pg=c.pg)
        c.entries = entries
        c.kernel_src = ksrc
        c.timing = options.timing
        uses_blas |= ub
        bodies.append(src)
    head = [f"/* ember.compile({name}): generated by ember.compiler.render_c */", P.C_PRELUDE,
            f"#define EMBER_PARALLEL_MIN {int(options.parallel_min)}LL", OMP_PRELUDE,
            "#ifdef _OPENMP\n#define EM_NTHREADS() omp_get_max_threads()\n#else\n#define EM_NTHREADS() 1\n#endif"]
    if uses_blas:
        head.append(_blas.find_blas().prelude)
        if getattr(options, "native_gemm", False):
            from .shared_gemm import GEMM_STUB_C     # the GEMM itself is in its own library
            head.append(GEMM_STUB_C)
    from . import render_par
    if any(render_par.uses_pool(b) for b in bodies):
        head.append(render_par.POOL_STUB_C)   # parallel loops run on ember's pool (in the GEMM's library)
    from .units import HEAD_END        # (_build_lib splits the kernels after it into parallel builds)
    head.append(HEAD_END)
    return "\n".join(head) + "\n" + "\n".join(bodies), uses_blas


def compile_programs(program, name, options, cls=Compiled):
    """Forward (+ backward) -> list of Compiled (``cls``), C source."""
    with paused_gc():            # (the passes' allocations would make CPython's GC walk the heap again and again)
        bw = program.backward
        fwd_values = {v.ref for v in getattr(bw, "fwd_refs", ())} if bw is not None else set()
        parts = [_pipeline(program, name, fwd_values, "f", cls)]
        if bw is not None:
            try:
                parts.append(_pipeline(bw, name, set(), "b", cls))
            except Declined as d:
                logs.log("kernels", f"{name}: backward runs in the interpreter: {d}")
        t0 = time.perf_counter()
        src, uses_blas = _render(parts, options, name)
        _record("compile::codegen", time.perf_counter() - t0, graph=name)
    return parts, src, uses_blas


def _build_lib(src, name, uses_blas, tiered=False):
    """The library of ``src``, bound to the GEMM and the pool. ``tiered``: a quick build when the
    optimized one is not cached, with ``.upgrade`` for the optimized one (tiers.py)."""
    from . import build, shared_gemm, tiers
    t0 = time.perf_counter()
    from . import render_par
    gemm = shared_gemm.uses_gemm(src)
    pool = render_par.uses_pool(src)
    if gemm or pool:
        shared_gemm.prefetch()       # its build (when not cached) runs beside this one

    def prepare(lib):
        if gemm:
            shared_gemm.bind(lib)
        if pool:
            render_par.bind(lib)
    from .units import split
    runs = build.thread_compiles()      # (not the background builds of tiers.py)
    how = dict(name=f"ember_{_safe(name)}", link_blas=uses_blas, extra_flags=("-ffp-contract=off",))
    if tiered:
        lib = tiers.compile_tiered(split(src), prepare=prepare, **how)
    else:
        lib = build.compile_source(split(src), **how)
        prepare(lib)
    STATS["builds"] += build.thread_compiles() - runs
    dt = time.perf_counter() - t0
    _record("compile::cache_hit" if lib.cache_hit else "compile::cc", dt, graph=name, key=lib.key[:16])
    return lib


def _safe(name):
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in str(name))[:40] or "graph"


def build_runner(program, mode=None, name="graph"):
    """A native runner for ``program`` (and its AOT backward), or None to use the interpreter."""
    from . import blas as _blas
    try:
        from .autotune import learned_defaults        # what tuning chose most often on this CPU
        opts = Options(blas_available=_blas.blas_available(), **learned_defaults())
        parts, src, uses_blas = compile_programs(program, name, opts)
        STATS["programs"] += 1
        if logs.enabled("output_code"):
            logs.log("output_code", f"ember.compile({name}):\n{src}")
        runner = NativeRunner(program, parts, None, src, name, uses_blas)
    except Declined as d:
        STATS["declined"] += 1
        logs.log("kernels", f"ember.compile({name}): not compiled natively, using the interpreter: {d}")
        return None
    except Exception as e:       # a bug in code generation must not break the user's program
        STATS["declined"] += 1
        import traceback
        import warnings
        logs.log("kernels", f"ember.compile({name}): native compilation failed:\n{traceback.format_exc()}")
        warnings.warn(f"ember.compile({name}): native code generation failed ({type(e).__name__}: {e}); "
                      "running the captured graph in the interpreter instead", RuntimeWarning, stacklevel=3)
        return None
    if mode in ("max-autotune", "max-autotune-no-cudagraphs"):
        from .autotune import Autotuner
        runner.autotuner = Autotuner(runner, program, name, opts)
    _log_kernels(runner)
    return runner


def _log_kernels(runner):
    if not logs.enabled("kernels"):
        return
    lines = [f"ember.compile({runner.name}): {len(runner.kernels)} kernel(s), {runner.extern_count} extern call(s)"]
    for k in runner.kernels:
        lines.append("  " + k.describe())
    for c in runner.parts:
        for seg_kernels, step in c.sched.segments:
            if step is not None and step.kind == "extern":
                e = step.effect
                lines.append(f"  extern {e.op_node.op.name}: {e.reason}")
    logs.log("kernels", "\n".join(lines))


# ---- running ------------------------------------------------------------------------------------------------------

def arena_bytes(c: "Compiled") -> int:
    """The size of the arena a compiled program's runs use."""
    return max(int(c.sched.arena_size), 64)


class _Bound:
    """Per-compiled-program run-time data: how each slot is filled."""

    def __init__(self, c: "Compiled", lib):
        self.c = c
        self.fns = [lib.entry(e) for e in c.entries]
        sched = c.sched
        self.arena_size = arena_bytes(c)
        self.arena = prefault.take(self.arena_size)     # (memory touched while the trace ran, prefault.py)
        if self.arena is None:
            self.arena = np.zeros(self.arena_size, dtype=np.uint8)
        self.err = np.zeros(2, dtype=np.int64)
        self.has_checks = bool(c.pg.errors) or any(k.kind == "scatter" for k in sched.kernels)
        self.busy = False
        self.checked = None          # weak references to the input arrays last found not to overlap
        # slot fillers
        self.inputs = []             # (slot, Value, Buffer)
        self.fresh = []              # (slot, shape, dtype)
        self.consts = []             # (slot, ndarray, copy?)
        for vid, buf in c.pg.inputs.items():
            if buf.kind == "const":
                if buf.data is not None:
                    self.consts.append((c.slots[buf.id], buf.data, False))
                else:
                    self.consts.append((c.slots[buf.id], np.asarray(buf.value.ref), True))
            else:
                self.inputs.append((c.slots[buf.id], buf.value, buf))
        # the per-call binding (_bind), resolved once: (slot, argument position or -1, Value, shape, dtype,
        # written) for each input, arguments by position, lifted tensors read through their Value
        arg_pos = {v.id: i for i, v in enumerate(c.program.args)}
        self.bind_plan = [(slot, arg_pos[v.id] if v.kind == "arg" else -1, v, buf.shape, buf.dtype, buf.written)
                          for slot, v, buf in self.inputs]
        self.input_slots = [slot for slot, _, _ in self.inputs]
        self.input_bytes = [buf.nbytes for _, _, buf in self.inputs]
        for bid, slot in c.slots.items():
            b = c.buffers[bid]
            if b.kind in ("out", "temp") and slot not in [s for s, _, _ in self.consts]:
                self.fresh.append((slot, b.shape, b.dtype))
        self.timed = None
        if lib is not None and getattr(c, "timing", False):
            import ctypes
            names = [k.name for ks, _ in sched.segments for k in ks]
            n = max(len(names), 1)
            self.timed = (names, (ctypes.c_double * n).in_dll(lib.lib, f"{c.prefix}_ktime"),
                          (ctypes.c_longlong * n).in_dll(lib.lib, f"{c.prefix}_kcount"))
        # segments: (entry, step effect or None, setgrads after it)
        seqs = []
        for seg_kernels, step in sched.segments:
            seqs.append(step.effect.seq if step is not None else float("inf"))
        self.segments = []
        sg = sorted(sched.setgrads, key=lambda e: e.seq)
        lo = -1
        for i, (seg_kernels, step) in enumerate(sched.segments):
            hi = seqs[i]
            mine = [e for e in sg if lo < e.seq <= hi]
            lo = hi
            self.segments.append((self.fns[i], None if step is None else step.effect, mine))
        self.seg_entries = list(range(len(self.segments)))
        c_externs.bind(self)
        self.run_plan = None         # (segments, their setgrads resolved): made by _run on first use
        self.temp_views = {}
        for bid, b in c.buffers.items():
            if b.kind == "temp" and not b.escapes:
                self.temp_views[bid] = b.data[1]
        self.written_inputs = [(slot, buf) for slot, v, buf in self.inputs if buf.written]
        self.has_writes = bool(self.written_inputs) or any(e.kind == "write" for e in c.pg.items
                                                           if not isinstance(e, P.PNode))

    def temp_array(self, arena, buf):
        off = self.temp_views[buf.id]
        return arena[off:off + buf.nbytes].view(buf.dtype).reshape(buf.shape)


class NativeRunner:
    """``runner(arg_tensors, grad_enabled)``: runs the compiled program (the Interpreter's contract).

    ``kernels`` lists the generated kernels (forward then backward) and ``kernel_count`` counts them;
    ``source`` is the C translation unit; ``extern_count`` the extern kernel calls per run.
    """

    def __init__(self, program, parts, lib, source, name, uses_blas=False):
        self.program = program
        self.parts = parts
        self.lib = None
        self.source = source
        self.name = name
        self.uses_blas = uses_blas
        self.fwd = self.bwd = None
        self.failed = None
        self._upgrade = None         # tiers.Pending: the optimized build of a quick library in use
        if lib is not None:
            self.use_library(lib, source)
        self.kernels = [k for c in parts for k in c.sched.kernels]
        self.kernel_count = len(self.kernels)
        self.extern_count = sum(1 for c in parts for _, st in c.sched.segments if st is not None
                                and st.kind == "extern")
        self._interp = None
        self.autotuner = None
        self.has_reads = any(g.ended_by is not None for g in program.graphs)
        p = program
        self.lifted_bumps = {}
        from .ir import WriteNode
        for g in p.graphs:
            for n in g.nodes:
                if isinstance(n, WriteNode) and n.target.kind == "lifted":
                    self.lifted_bumps[n.target.id] = self.lifted_bumps.get(n.target.id, 0) + 1
        self.arg_index = {v.id: i for i, v in enumerate(p.args)}
        self._bumps = [(p.values[vid], n) for vid, n in self.lifted_bumps.items()]
        STATS["kernels"] += self.kernel_count
        STATS["externs"] += self.extern_count

    @property
    def interp(self):
        """The interpreter this runner falls back on (made on first use)."""
        if self._interp is None:
            self._interp = Interpreter(self.interp_program())
        return self._interp

    def interp_program(self):
        return self.program

    def use_library(self, lib, source) -> None:
        """Run from ``lib`` (the first build, or another build of the same schedule: an autotuning variant)."""
        self.lib = lib
        self.source = source
        self._upgrade = getattr(lib, "upgrade", None)
        if self.fwd is None:
            self.fwd = _Bound(self.parts[0], lib)
            self.bwd = _Bound(self.parts[1], lib) if len(self.parts) > 1 else None
            return
        for b in (self.fwd, self.bwd):
            if b is not None:
                b.fns = [lib.entry(e) for e in b.c.entries]
                b.segments = [(b.fns[i],) + seg[1:] for i, seg in zip(b.seg_entries, b.segments)]

    def build(self) -> bool:
        """Compile the C source (or load it from the disk cache); False when that failed (then the
        interpreter runs this program)."""
        if self.lib is not None:
            return True
        if self.failed is not None:
            return False
        try:
            # tiered (tiers.py) unless a library swap would lose what the runner reads from its library:
            # the tuner's choice, the kernel timing tables
            tiered = self.autotuner is None and not getattr(self.parts[0], "timing", False)
            self.use_library(_build_lib(self.source, self.name, self.uses_blas, tiered=tiered), self.source)
            return True
        except Exception as e:
            import traceback
            import warnings
            self.failed = e
            logs.log("kernels", f"ember.compile({self.name}): C build failed:\n{traceback.format_exc()}")
            warnings.warn(f"ember.compile({self.name}): building the generated C failed ({type(e).__name__}: {e}); "
                          "running the captured graph in the interpreter instead", RuntimeWarning, stacklevel=4)
            return False

    def _take_upgrade(self) -> None:
        lib, self._upgrade = self._upgrade.result, None
        if lib is not None:          # (None: the optimized build failed; the quick one stays)
            self.use_library(lib, self.source)

    def kernel_times(self):
        """``[(kernel name, description, calls, seconds)]`` summed over the runs so far, slowest first;
        only when built with ``EMBER_KERNEL_TIMING=1`` (else an empty list)."""
        rows = []
        desc = {k.name: k.describe() for k in self.kernels}
        for b in (self.fwd, self.bwd):
            if b is None or b.timed is None:
                continue
            names, times, counts = b.timed
            for i, nm in enumerate(names):
                rows.append((nm, desc.get(nm, nm), int(counts[i]), float(times[i])))
        rows.sort(key=lambda r: -r[3])
        return rows

    # ---- the call --------------------------------------------------------------------------------------
    def __call__(self, arg_tensors, grad_enabled: bool):
        p = self.program
        check_extra_guards(p)
        if self.lib is None and not self.build():
            # built lazily, on the first call whose guards hold: a trace that never replays (say, the
            # first step of a training loop, before the optimizer state exists) costs no C compilation
            return self.interp(arg_tensors, grad_enabled)
        if self._upgrade is not None and self._upgrade.ready():
            self._take_upgrade()     # the optimized library landed: this call and the next run on it
        if self.autotuner is not None and not self.autotuner.done:
            self.autotuner.tune(arg_tensors)
        fb = self.fwd
        arrays = [_PLACEHOLDER] * fb.c.nslots
        copied = _bind(fb, arrays, arg_tensors, self.arg_index)
        if copied is None:
            # inputs overlap in memory and the program writes: the interpreter keeps NumPy's aliasing
            return self.interp(arg_tensors, grad_enabled)
        undo = None
        if self.has_reads:
            undo = _Undo()
            for slot, buf in fb.written_inputs:
                undo.buffer(arrays[slot])
        arena = fb.arena
        if fb.busy:
            arena = np.zeros(fb.arena_size, dtype=np.uint8)    # re-entered: a private arena
        fb.busy = True
        try:
            arrays[0] = arena
            vals = _run(fb, arrays, arena, self, arg_tensors, undo)
        except GuardFailure:
            if undo is not None:
                undo.restore()
            raise
        finally:
            if arena is fb.arena:
                fb.busy = False
        for slot, orig in copied:
            np.copyto(orig, arrays[slot])
        for v, n in self._bumps:
            ref = v.ref             # read per call: a .grad lifted by access path is rebound each replay
            vc = ref._vc            # (Tensor._bump, n times at once: the version counter is a shared list)
            if vc is None:
                ref._vc = [n]
            else:
                vc[0] += n
        out_tensor = output_tensors(p, arg_tensors, vals)
        result = build_outputs(p, out_tensor)
        bw = p.backward
        if bw is not None and grad_enabled:
            diff_outs = [out_tensor(v) for v in bw.grad_outputs_of]
            targets = [arg_tensors[p.args.index(v)] if v.kind == "arg" else v.ref for v in bw.grad_targets]
            fwd_slots = _FwdSlots({vid: vals(vid) for vid in fb.c.pg.fwd_needed})
            if self.bwd is not None:
                op = _NativeBackwardOp(self, bw, fwd_slots, len(diff_outs))
            else:
                op = _CompiledBackwardOp(bw, fwd_slots, len(diff_outs))
            attach_node(op, diff_outs, targets)
        return result


class _FwdSlots:
    __slots__ = ("d",)

    def __init__(self, d):
        self.d = d

    def __getitem__(self, vid):
        return self.d[vid]


def _bind_fixed(b, arrays):
    """Constants (a fresh copy where the program writes them) and new scratch buffers into their slots."""
    for slot, data, copy in b.consts:
        arrays[slot] = np.array(data, copy=True) if copy else data
    for slot, shape, dt in b.fresh:
        arrays[slot] = np.empty(shape, dtype=dt)


def _bind(fb: _Bound, arrays, arg_tensors, arg_index):
    """Fill input slots; returns [(slot, original array)] of non-contiguous inputs copied for the run,
    or None when two inputs share memory in a program that writes. (The serial part of every compiled
    call, before its kernels: on two threads it does not shrink, so it is kept to plain loops over
    ``fb.bind_plan``.)"""
    copied = []
    for slot, pos, v, shape, dtype, written in fb.bind_plan:
        if pos >= 0:
            a = arg_tensors[pos]._data
        elif v.kind == "lifted":
            a = v.ref._data
        else:
            raise RuntimeError(f"ember.compile: internal: unbound input of kind {v.kind}")
        if a.shape != shape or a.dtype != dtype:
            raise GuardFailure(f"guard failed: a tensor the compiled code reads changed shape or dtype: now "
                               f"{tuple(a.shape)} {a.dtype}, compiled for {shape} {dtype}")
        if not a.flags.c_contiguous:
            c = np.ascontiguousarray(a)
            if written:
                copied.append((slot, a))
            a = c
        arrays[slot] = a
    _bind_fixed(fb, arrays)
    if fb.has_checks:
        fb.err[0] = 0
        fb.err[1] = 0
    arrays[1] = fb.err
    if fb.has_writes and len(fb.inputs) > 1 and not _same_inputs(fb, arrays):
        # inputs must not overlap when the program writes (kernels assume distinct buffers)
        ins = [arrays[slot] for slot in fb.input_slots]
        spans = sorted((p, p + n) for p, n in zip(map(_data_pointer, ins), fb.input_bytes) if n)
        for (s0, e0), (s1, e1) in zip(spans, spans[1:]):
            if s1 < e0:
                return None
        fb.checked = [weakref.ref(a) for a in ins]
    return copied


def _same_inputs(fb: _Bound, arrays) -> bool:
    """Whether every input slot holds the very array the last overlap check passed (still alive, so still
    at the same address with the same size: the shapes were just checked): a training step binds the same
    parameters and state every call, and this skips reading their addresses again."""
    last = fb.checked
    if last is None:
        return False
    for r, slot in zip(last, fb.input_slots):
        if r() is not arrays[slot]:
            return False
    return True


def _run(fb: _Bound, arrays, arena, runner, arg_tensors, undo):
    """Run every segment; returns ``vals(value id) -> ndarray`` for outputs and saved values."""
    c = fb.c
    plan = fb.run_plan
    if plan is None or plan[0] is not fb.segments:
        plan = fb.run_plan = (fb.segments, [(fn, step, [_setgrad_plan(c, e, runner.arg_index) for e in setgrads])
                                            for fn, step, setgrads in fb.segments])
    for fn, step, setgrads in plan[1]:
        fn(tuple(arrays))
        if fb.has_checks and fb.err[0]:
            _raise_native_error(c, fb.err)
        for lifted, pos, slot, shape in setgrads:
            leaf = lifted.ref if lifted is not None else arg_tensors[pos]
            if undo is not None:
                undo.grad(leaf)
            if slot < 0:
                leaf._grad = None
            else:
                g = arrays[slot]
                if g.shape != shape:
                    g = g.reshape(shape)
                leaf._grad = wrap(g, leaf._dtype)
        if step is None:
            continue
        if step.kind == "extern":
            _extern(c, fb, step, arrays, arena)
        elif step.kind == "read":
            _check_read(step.read_node, _array_of(c, fb, step.source, arrays, arena))

    def vals(vid):
        n = c.pg.outputs.get(vid)
        if n is None:
            n = c.pg.fwd_needed[vid]
        a = _array_of(c, fb, n, arrays, arena)
        # the planner gives escaping values fresh arrays; this bounds check keeps a planning slip from
        # handing out memory the next call (or a later kernel) overwrites
        return a.copy() if np.may_share_memory(a, arena) else a
    return vals


def _setgrad_plan(c, e, arg_index) -> tuple:
    """A ``.grad`` a segment sets, resolved for the call: (the lifted Value or None, else the argument
    position; the gradient's slot, -1 to set None; its shape)."""
    lifted = e.leaf if e.leaf.kind == "lifted" else None
    pos = -1 if lifted is not None else arg_index[e.leaf.id]
    if e.source is None:
        return lifted, pos, -1, None
    return lifted, pos, c.slots[e.grad_buffer.id], tuple(e.source.shape)


def _raise_native_error(c, err):
    code, value = int(err[0]), int(err[1])
    err[0] = 0
    if code > 0 and code <= len(c.pg.errors):
        exc, msg = c.pg.errors[code - 1]
        raise exc(msg.format(value))
    raise IndexError("index out of range in self")


def _buffer_array(c, fb, buf, arrays, arena):
    if buf.kind == "temp" and not buf.escapes:
        return fb.temp_array(arena, buf)
    return arrays[c.slots[buf.id]]


def _array_of(c, fb, n, arrays, arena):
    """The ndarray holding a node's value: its buffer, or a strided view of its root buffer."""
    sched = c.sched
    b = sched.node_buffer.get(n.id)
    if b is not None:
        return _buffer_array(c, fb, b, arrays, arena)

    def is_leaf(x):
        return x.op == "load" or x.id in sched.mat
    lay = strided_layout(n, is_leaf)
    if lay is None:
        raise RuntimeError(f"ember.compile: internal: no array for t{n.id}")
    leaf, strides, off = lay
    buf = leaf.buffer if leaf.op == "load" else sched.node_buffer[leaf.id]
    base = _buffer_array(c, fb, buf, arrays, arena)
    flat = base.reshape(-1)
    if tuple(strides) == tuple(_cstr(n.shape)) and off == 0 and tuple(n.shape) == base.shape:
        return base
    isz = base.dtype.itemsize
    start = flat[off:] if flat.size else flat
    return np.lib.stride_tricks.as_strided(start, shape=n.shape, strides=tuple(s * isz for s in strides))


def _cstr(shape):
    from .lower import cstrides
    return cstrides(shape)


def run_extern(e, resolve) -> list:
    """An extern step's NumPy kernel on its arguments (``resolve(node)`` gives a node's array): its results
    as C-contiguous arrays of the output buffers' dtypes, checked against the shapes the program was
    specialised for. The native runner and the OpenCL runner (on host copies) both run externs so."""
    args = [resolve(a) if isinstance(a, P.PNode) else a for a in e.args]
    attrs = {k: resolve(v) if isinstance(v, P.PNode) else v for k, v in e.attrs.items()}
    op = e.op_node.op
    if _prof_enabled():
        from ..profiler import record_range
        with record_range("kernel", "ember::" + op.name, extern=True):     # (the op by name, as in eager)
            res = op.kernel(*args, **attrs)
    else:
        res = op.kernel(*args, **attrs)
    out = []
    for buf, r in zip(e.outs, (res,) if op.nout == 1 else res):
        r = np.asarray(r)
        if r.shape != buf.shape:
            raise RuntimeError(f"ember.compile: {op.name} returned shape {r.shape} where the compiled code was "
                               f"specialised for {buf.shape}")
        if r.dtype != buf.dtype or not r.flags.c_contiguous:
            r = np.ascontiguousarray(r, dtype=buf.dtype)
        out.append(r)
    return out


def _extern(c, fb, e, arrays, arena):
    for buf, r in zip(e.outs, run_extern(e, lambda a: _array_of(c, fb, a, arrays, arena))):
        if np.may_share_memory(r, arena):
            r = r.copy()
        arrays[c.slots[buf.id]] = r


# ---- the backward ----------------------------------------------------------------------------------------------------

class _NativeBackwardOp(CompiledBackward):
    """The native backward program."""

    def __init__(self, runner, bw, fwd_slots, nout):
        self.runner = runner
        self.program = bw
        self.fwd_slots = fwd_slots
        self.nout = nout

    def backward(self, node, *grads):
        no_double_backward()
        bw = self.program
        bb = self.runner.bwd
        c = bb.c
        arrays = [_PLACEHOLDER] * c.nslots
        for slot, v, buf in bb.inputs:
            kind = v.kind
            if kind == "grad_in":
                g = grads[bw.grad_outputs.index(v)]
                a = np.zeros(buf.shape, dtype=buf.dtype) if g is None else g._data
            elif kind == "fwd":
                a = self.fwd_slots[v.ref]
            else:
                a = v.ref._data
            if a.dtype != buf.dtype:
                a = a.astype(buf.dtype)
            if not a.flags.c_contiguous or a.shape != buf.shape:
                a = np.ascontiguousarray(np.broadcast_to(a, buf.shape))
            arrays[slot] = a
        _bind_fixed(bb, arrays)
        if bb.has_checks:
            bb.err[:] = 0
        arrays[1] = bb.err
        arena = bb.arena
        if bb.busy:
            arena = np.zeros(bb.arena_size, dtype=np.uint8)
        bb.busy = True
        try:
            arrays[0] = arena
            for fn, step, setgrads in bb.segments:
                fn(tuple(arrays))
                if bb.has_checks and bb.err[0]:
                    _raise_native_error(c, bb.err)
                if step is not None and step.kind == "extern":
                    _extern(c, bb, step, arrays, arena)
            res = []
            for v in bw.outputs:
                if v is None:
                    res.append(None)
                    continue
                n = c.pg.outputs[v.id]
                a = _array_of(c, bb, n, arrays, arena)
                if np.may_share_memory(a, arena):
                    a = a.copy()
                res.append(wrap(np.asarray(a), v.dtype))
        finally:
            if arena is bb.arena:
                bb.busy = False
        return tuple(res)


