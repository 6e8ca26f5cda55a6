"""``ember.compile``: guards, the trace cache, recompiles, fallbacks, and the debug backends.

A call flattens its arguments into a *signature* (for each tensor: shape, dtype, requires_grad,
contiguity; for each other value: the value itself), adds grad mode and the ``training`` flags and
parameter identities of a compiled module: these are the guards, kept as data. A cache entry whose
signature equals the call's runs its compiled program; otherwise the function is traced again and
``EMBER_LOGS=recompiles`` names the first guard that differed. After ``recompile_limit`` entries the
function runs eagerly for new signatures, with one warning naming the guard that keeps changing.
"""
from __future__ import annotations

import functools
import inspect
import threading
import time
import warnings
import contextlib
import weakref

import numpy as np

from ..tensor import Tensor
from ..autograd.grad_mode import GRAD
from .capture import Tracer, UnsupportedTrace, GraphBreakError, _map_struct
from . import user_api as _user_api, python_guards as _python_guards
from .runtime import Interpreter, GuardFailure, check_extra_guards, replay_eager
from . import logs
from .._layout import SparseLayoutError
from ..nn.parameter import _UninitializedUseError
from . import dynamic as _dynamic
from .dynamic_capture import SymState

class _Counters(dict):
    """Counters of the compile layer; disk cache hits/misses are read live from the build layer."""

    _LIVE = {"disk_hits": "disk_hits", "disk_misses": "disk_misses", "c_compiles": "compiles"}

    def __getitem__(self, key):
        if key in self._LIVE:
            try:
                from .build import STATS
                return STATS[self._LIVE[key]]
            except ImportError:
                return 0
        return dict.__getitem__(self, key)

    def snapshot(self) -> dict:
        return {k: self[k] for k in list(self.keys()) + list(self._LIVE)}

    def __repr__(self):
        return repr(self.snapshot())


counters = _Counters({"captures": 0, "graph_breaks": 0, "recompiles": 0, "recompile_reasons": [], "fallbacks": 0,
            "fallback_reasons": [], "cache_hits": 0, "guard_failures": 0,
            "replays": 0, "dynamic_fallbacks": 0, "dynamic_fallback_reasons": [], "opencl_programs": 0, "opencl_declined": 0, "opencl_declined_reasons": []})

_ALL = weakref.WeakSet()     # weak registry of compiled functions, for reset()
recompile_limit = 8
BACKENDS = ("inductor", "aot_eager", "eager")


def _flatten(x, path, out):
    """Collect (path, value) pairs for tensors and guardable leaves in call arguments."""
    if isinstance(x, Tensor):
        out.append((path, x))
    elif isinstance(x, (list, tuple)):
        out.append((path, ("seq", type(x).__name__, len(x))))
        for i, v in enumerate(x):
            _flatten(v, path + (i,), out)
    elif isinstance(x, dict):
        out.append((path, ("dict", tuple(x.keys()))))
        for k, v in x.items():
            _flatten(v, path + (k,), out)
    else:
        out.append((path, x))


def _tensor_key(t: Tensor):
    d = t._data
    # for a leaf that requires grad, whether its .grad is None (a captured backward sets or adds to it)
    if type(d) is np.ndarray:
        return (d.shape, t._dtype, t._rg, d.flags.c_contiguous, t._rg and t._grad is None)
    # a device tensor: the device is a guard too (a CPU entry never replays for it, nor the reverse)
    return (d.shape, t._dtype, t._rg, d.is_contiguous(), t._rg and t._grad is None, f"opencl:{d.device}")


def _describe(path, key) -> str:
    name = "args" + "".join(f"[{p!r}]" for p in path)
    if isinstance(key, tuple) and len(key) in (5, 6) and hasattr(key[1], "np"):
        return (f"{name}: shape={tuple(key[0])}, dtype={key[1]}, requires_grad={key[2]}, contiguous={key[3]}"
                + (f", grad is None={key[4]}" if key[2] else "")
                + f", device={key[5] if len(key) == 6 else 'cpu'}")
    return f"{name} == {key!r}"


class _Entry:
    __slots__ = ("sig", "program", "runner", "kind")

    def __init__(self, sig, program, runner, kind):
        self.sig = sig
        self.program = program
        self.runner = runner
        self.kind = kind          # "compiled" | "eager" (refused trace)


class _AtFirstReplay:
    """A trace's native runner, made at the trace's first replay (its guards matched a later call): a
    trace that never replays (a step whose state differs from the second call on, a signature seen once)
    runs no decompose, schedule, render or C build. Reading an attribute (``.native``) makes it at once."""

    __slots__ = ("make", "entry", "lock")

    def __init__(self, make, entry):
        self.make = make
        self.entry = entry
        self.lock = threading.Lock()

    def runner(self):
        with self.lock:
            e = self.entry
            if e.runner is self:
                e.runner = self.make(e.program)
            return e.runner

    def __call__(self, tensors):
        check_extra_guards(self.entry.program)      # (GuardFailure: a retrace, and nothing was made)
        return self.runner()(tensors)

    def __getattr__(self, name):
        return getattr(self.runner(), name)


class CompiledFunction:
    """The callable ``ember.compile`` returns for a function."""

    def __init__(self, fn, *, fullgraph=False, dynamic=None, mode=None, backend="inductor", options=None,
                 module=None):
        if isinstance(backend, str) and backend not in BACKENDS:
            raise ValueError(f"ember.compile: unknown backend {backend!r}; supported: {', '.join(BACKENDS)}")
        if mode not in (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
            raise ValueError(f"ember.compile: unknown mode {mode!r}; supported: default, reduce-overhead, "
                             "max-autotune, max-autotune-no-cudagraphs")
        if dynamic not in (None, True, False):
            raise ValueError(f"ember.compile: dynamic must be None, True or False, got {dynamic!r}")
        self.dynamic = dynamic
        self.auto_dims: set = set()    # (arg path, dim) whose size changed between calls (automatic dynamic)
        self.dyn_failed = False        # symbolic programs disagreed with real traces: sizes stay static
        self.dyn_failures = 0
        self.fn = fn
        self.fullgraph = fullgraph
        self.mode = mode
        self.backend = backend
        self.module = module
        self.entries: list = []
        self.warned = False
        self.last_failed_guard = None
        functools.update_wrapper(self, fn)
        _ALL.add(self)

    # ---- guards ---------------------------------------------------------------------------------
    def _signature(self, args, kwargs):
        flat = []
        _flatten(args, (), flat)
        if kwargs:
            _flatten(kwargs, ("kw",), flat)
        tensors = []
        sig = []
        for path, v in flat:
            if isinstance(v, Tensor):
                tensors.append(v)
                sig.append((path, _tensor_key(v)))
            else:
                try:
                    hash(v)
                    sig.append((path, v))
                except TypeError:
                    sig.append((path, ("id", id(v))))
        sig.append((("grad_mode",), GRAD[0]))
        m = self.module
        if m is not None:
            sig.append((("module", "training"), tuple(mm.training for mm in m.modules())))
            sig.append((("module", "parameters"), tuple((id(p), p._data.shape, p._dtype, p._rg)
                                                         for p in m.parameters())))
        return tuple(sig), tensors

    def _first_difference(self, sig, other) -> str:
        for (p1, k1), (p2, k2) in zip(sig, other):
            if p1 != p2 or k1 != k2 and _dynamic.bind(((p1, k1),), ((p2, k2),)) is None:
                return f"guard failed: {_describe(p2, k2)}; traced with {_describe(p1, k1)}"
        return f"guard failed: number of arguments changed ({len(other)} vs {len(sig)})"

    def _closest_difference(self, sig) -> str:
        """Name the first failing guard of the entry that matched the most guards."""
        best, best_n = None, -1
        for e in self.entries:
            n = next((i for i, (a, b) in enumerate(zip(e.sig, sig)) if a != b and _dynamic.bind((a,), (b,)) is None),
                     len(sig))
            if n > best_n:
                best, best_n = e, n
        return self._first_difference(best.sig, sig)

    # ---- calling --------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if Tracer.active is not None or _user_api.STANCE[0] == "force_eager":
            # called while another compiled function traces: its ops join that trace (torch inlines a
            # compiled callee into the caller's graph); set_stance("force_eager"): run as written
            return self.fn(*args, **kwargs)
        try:
            sig, tensors = self._signature(args, kwargs)
        except (NotImplementedError, ValueError) as e:
            # a sparse COO argument (ember.sparse) is not capturable, and a lazy module's first call
            # materializes its parameters: such calls run eagerly (torch graph-breaks / initializes first)
            if not isinstance(e, (SparseLayoutError, _UninitializedUseError)):
                raise
            logs.log("graph_breaks", f"ember.compile({self.__name__}): runs eagerly ({type(e).__name__})")
            return self.fn(*args, **kwargs)
        matched = False
        # newest entries first: a retrace for new Python state supersedes older ones
        pending = None
        for e in reversed(self.entries):
            if e.kind == "dynamic":
                env = e.match(sig)
                if env is None:
                    continue
                if e.needs_check(env):
                    pending = (e, env)          # trusted only after a trace at a second size agrees
                    continue
                matched = True
                try:
                    counters["replays"] += 1
                    return e.run(tensors, env)
                except GuardFailure as gf:
                    counters["guard_failures"] += 1
                    self.last_failed_guard = str(gf)
                    logs.log("guards", f"ember.compile({self.__name__}): {gf}")
                    if e.broken:
                        self.dyn_failed = True
                        logs.log("dynamic", f"ember.compile({self.__name__}): sizes stay static: {e.broken}")
                continue
            if e.sig != sig:
                continue
            matched = True
            if e.kind == "eager":
                return self.fn(*args, **kwargs)
            try:
                counters["replays"] += 1
                if _prof_enabled():
                    from ..profiler import record_range
                    with record_range("kernel", f"kernel::{self.__name__}", backend=self.backend):
                        return e.runner(tensors)
                return e.runner(tensors)
            except GuardFailure as gf:
                counters["guard_failures"] += 1
                self.last_failed_guard = str(gf)
                logs.log("guards", f"ember.compile({self.__name__}): {gf}")
        if self.entries:
            reason = self.last_failed_guard if matched else self._closest_difference(sig)
            self.last_failed_guard = reason
            logs.log("recompiles", f"ember.compile({self.__name__}): recompiling: {reason}")
        if len(self.entries) >= recompile_limit:
            if not self.warned:
                self.warned = True
                warnings.warn(f"ember.compile({self.__name__}): hit recompile_limit ({recompile_limit}); running "
                              f"eagerly from now on for new inputs. Last {self.last_failed_guard}", stacklevel=2)
            counters["fallbacks"] += 1
            return self.fn(*args, **kwargs)
        return self._trace_and_run(sig, tensors, args, kwargs, pending)

    def _symbolic_dims(self, sig, args, kwargs):
        """The symbolic dimensions for a new trace of this call (see dynamic.plan)."""
        if self.dyn_failed or self.dynamic is False:
            return {}, {}
        if self.dynamic is None and self.entries:
            new = _dynamic.changed_dims(sig, self.entries) - self.auto_dims
            if new:
                self.auto_dims |= new
                logs.log("dynamic", f"ember.compile({self.__name__}): automatic dynamic: sizes changed at "
                         + ", ".join(f"args{''.join(f'[{q!r}]' for q in p)}.size({d})" for p, d in sorted(new, key=repr)))
        return _dynamic.plan(self.dynamic, self.auto_dims, _paths(args, kwargs))

    def _trace_and_run(self, sig, tensors, args, kwargs, pending=None):
        if self.entries:
            counters["recompiles"] += 1
            counters["recompile_reasons"].append(self.last_failed_guard)
        counters["captures"] += 1
        t0 = time.perf_counter()
        if self.backend == "inductor" and not self.entries:
            _prefetch_gemm()
            _prefault_arena(self.__name__)
        tracer = Tracer(fullgraph=self.fullgraph)
        dims, ranges = self._symbolic_dims(sig, args, kwargs)
        if dims:
            tracer.sym = SymState(dims, ranges)
        if self.module is not None:
            tracer._module_called(self.module, ())     # (its forward is called directly: no module hook)
        py_guard = _python_guards.function_guard(self.fn)
        if py_guard is not None:
            tracer.extra_guards.append(py_guard)
        with _profile_range("capture", self.__name__):
            with tracer:
                for path_t in _paths(args, kwargs):
                    tracer.add_arg(*path_t)
                try:
                    result = self.fn(*args, **kwargs)
                except GraphBreakError:
                    raise
                tracer.check_mutations()
                program = tracer.program(result) if tracer.unsupported is None else None
        counters["graph_breaks"] += len([r for r in tracer.reasons])
        if tracer.unsupported is not None:
            self._fall_back(tracer, sig, "this call")
            return result
        if self.backend != "eager" and GRAD[0]:
            with _profile_range("autodiff", self.__name__):
                self._aot_backward(tracer, program, result)
            if tracer.unsupported is not None:
                self._fall_back(tracer, sig, "the backward")
                return result
        if logs.enabled("graph"):
            logs.log("graph", program.format(f"ember.compile({self.__name__})", "capture"))
        if tracer.sym is not None:
            _dynamic.check_constraints(self.__name__, _param_names(self.fn), tracer.sym, dims, _paths(args, kwargs))
            program = self._add_symbolic(sig, dims, program, tracer.sym, pending)
            if program is None:                 # a verification trace that confirmed the pending entry
                return result
        entry = _Entry(sig, program, None, "compiled")
        if self.backend == "inductor" and getattr(program, "device", None) is None:
            entry.runner = _AtFirstReplay(self._make_runner, entry)
        else:
            entry.runner = self._make_runner(program)
        self.entries.append(entry)
        logs.log("recompiles" if len(self.entries) > 1 else "graph",
                 f"ember.compile({self.__name__}): captured {len(program.graphs)} graph(s), "
                 f"{sum(len(g.nodes) for g in program.graphs)} nodes in {time.perf_counter() - t0:.3f}s")
        return result

    def _add_symbolic(self, sig, dims, program, state, pending):
        """File a symbolic trace: confirm a pending entry, or add a dynamic entry (trusted when an earlier
        trace at another size agrees with it). Returns None when filed, else the concrete program of this
        size to cache as a static entry (the symbolic program did not agree with a real trace)."""
        name = self.__name__
        program.sym = state
        logs.log("dynamic", f"ember.compile({name}): symbolic trace: {_dynamic.describe(state, dims)}")
        if state.guards:
            logs.log("guards", f"ember.compile({name}): size guards: " + "; ".join(map(repr, state.guards)))
        if pending is not None:
            e, env = pending
            why = _dynamic.verify(e.program, env, program)
            if not why:
                weak = _dynamic.inconclusive(e.program, env)
                if weak:
                    logs.log("dynamic", f"ember.compile({name}): agrees at {_dynamic.fmt_env(env)}, but {weak}: "
                                        "checked again at another size")
                    return None
                e.agreed(env)
                self._log_agreement(e, env)
                return None
            return self._give_up(program, state, f"at {_dynamic.fmt_env(env)}: {why}")
        # (device programs: an OpenCL program per size, no native build shared by all sizes)
        on_device = getattr(program, "device", None) is not None
        shared = None if on_device else _dynamic.shared_builder(self.backend, self.__name__)
        entry = _dynamic.DynamicEntry(_dynamic.pattern(sig, dims), program, state, self._size_runner, shared,
                                      build_at_once=on_device)
        why = None
        # the newest earlier traces at other sizes first (older ones may predate Python state, such as an
        # optimizer's, that this trace saw); each symbol needs one trace where its value differs
        for e in reversed(self.entries):
            if e.kind != "compiled":
                continue
            env = _dynamic.bind(entry.sig, e.sig)
            if env is None or not entry.needs_check(env) or not all(g.holds(env) for g in state.guards):
                continue                        # (a trace outside this one's guards is no evidence)
            diff = _dynamic.verify(program, env, e.program)
            if diff:
                why = why or f"at {_dynamic.fmt_env(env)}: {diff}"
                continue
            weak = _dynamic.inconclusive(program, env)
            if weak:
                logs.log("dynamic", f"ember.compile({name}): agrees at {_dynamic.fmt_env(env)}, but {weak}: "
                                    "checked again at another size")
                continue
            entry.agreed(env)
            self._log_agreement(entry, env)
            if entry.verified:
                break
        if why is not None and not entry.checked:
            return self._give_up(program, state, why)
        self.entries.append(entry)
        return None

    def _log_agreement(self, e, env):
        left = sorted(set(e.state.values) - e.checked)
        logs.log("dynamic", f"ember.compile({self.__name__}): the symbolic program agrees with the trace at "
                            f"{_dynamic.fmt_env(env)}" + (": one entry serves all sizes its guards accept" if not left
                                                          else f"; {', '.join(left)} still to check at another size"))

    def _give_up(self, program, state, why):
        # (a size that coincided with another at the symbolic trace can mislead it: one more try, at the
        # next new size, before sizes stay static)
        self.dyn_failures += 1
        self.dyn_failed = self.dyn_failures >= 2
        counters["dynamic_fallbacks"] += 1
        counters["dynamic_fallback_reasons"].append(why)
        logs.log("dynamic", f"ember.compile({self.__name__}): sizes stay static (each size compiles on its "
                            f"own): the symbolic program differs from a real trace {why}")
        return _dynamic.instantiate(program, state.values)

    def _size_runner(self, program, native: bool):
        """The runner of a dynamic entry's program evaluated at one size: the interpreter for a size seen
        once, the backend's runner (the native build for inductor) for a size seen again; a device
        program's runner at once (``cl_compile.device_runner``: generated OpenCL built for this size)."""
        if native or self.backend == "eager" or getattr(program, "device", None) is not None:
            return self._make_runner(program)       # (a device program: its OpenCL build at this size)
        interp = _dynamic.CheckedInterpreter(program)
        return lambda tensors: interp(tensors, GRAD[0])

    def _fall_back(self, tracer, sig, what):
        """``what`` (this call, the backward) cannot be compiled: raise under fullgraph, else count and log
        it and remember that calls of this signature run eagerly."""
        if self.fullgraph:
            raise GraphBreakError(f"ember.compile(fullgraph=True): {tracer.unsupported}")
        counters["fallbacks"] += 1
        counters["fallback_reasons"].append(str(tracer.unsupported))
        logs.log("recompiles", f"ember.compile({self.__name__}): cannot compile {what}, running eagerly: "
                               f"{tracer.unsupported}")
        self.entries.append(_Entry(sig, None, None, "eager"))

    def _aot_backward(self, tracer, program, result):
        """Capture the backward of the outputs that require grad, ahead of time."""
        from ..autograd.engine import grad as _grad
        from ..ops.creation import zeros_like
        outs = []
        _map_struct(result, lambda t: outs.append(t) or t)
        # outputs whose graph a backward inside the function already freed cannot be backpropagated again
        # (eagerly that raises "backward through the graph a second time"): no backward is captured for them
        diff = [t for t in outs if isinstance(t, Tensor) and t._rg and t.grad_fn is not None
                and not getattr(t.grad_fn, "released", False)]
        if not diff:
            return
        targets = [v for v in program.args + program.lifted if v.requires_grad]
        if not targets:
            return
        if any(id(t) not in tracer.t2v for t in diff):
            # (d = v.detach(); d.add_(y); return d: the compiled forward has one value for v and d)
            tracer.refuse("an output is a detach() of a traced tensor that an in-place write gave autograd "
                          "history of its own", "return a clone() of the tensor instead of writing into a detach()")
            return
        target_tensors = [v.ref if v.kind == "lifted" else _arg_by_value(tracer, v) for v in targets]
        bt = Tracer()
        bt.parent = tracer
        bt.phase = "backward"
        with bt:
            placeholders = []
            bt.sym = tracer.sym
            for t in diff:
                g = zeros_like(t)
                placeholders.append(bt._new_value("grad_in", g))
                if bt.sym is not None:
                    placeholders[-1].sym = getattr(tracer.t2v[id(t)], "sym", None)
            try:
                with _targets_unhooked(target_tensors):
                    grads = _grad(diff, target_tensors,
                                  grad_outputs=[bt.keep[-len(diff) + i] for i in range(len(diff))],
                                  retain_graph=True, allow_unused=True)
            except RuntimeError as e:
                # an output made from a tensor whose graph a backward inside the function freed
                # (loss.backward(); return loss * n): eagerly its backward raises this too, so no
                # backward is captured (as for the freed outputs themselves)
                if "backward through the graph a second time" not in str(e):
                    raise
                return
            bt.check_mutations()
        if bt.unsupported is not None or any(g.ended_by is not None for g in bt.graphs):
            # a backward that cannot be replayed makes the whole call eager (outputs keep eager autograd)
            if tracer.unsupported is None:
                tracer.unsupported = bt.unsupported or UnsupportedTrace(
                    "the backward of the outputs reads tensor values in Python", ("<backward>", 0),
                    "call backward inside the compiled function")
                tracer.reasons.extend(bt.reasons)
            return
        bw = bt.program(list(grads))
        bw.grad_outputs = placeholders
        bw.outputs = [None if g is None else bt.value_of(g) for g in grads]
        bw.grad_targets = targets
        bw.grad_outputs_of = [tracer.t2v[id(t)] for t in diff]
        program.backward = bw
        logs.log("graph", bw.format(f"ember.compile({self.__name__}) backward", "aot_autodiff"))

    def _make_runner(self, program):
        if self.backend == "eager":
            return lambda tensors: replay_eager(program, tensors)
        if getattr(program, "device", None) is not None:
            # device tensors: generated OpenCL kernels (inductor) or the op-by-op device replay
            from .cl_compile import device_runner
            r = device_runner(program, self.backend, self.__name__)
            call = lambda tensors: r(tensors, GRAD[0])  # noqa: E731
            call.device_runner = r       # (DeviceRunner: .cl is the CLRunner once built, .declined why not)
            return call
        interp = Interpreter(program)
        if self.backend == "inductor":
            try:
                from .plan_cache import native_runner     # native.build_runner through the plan cache
            except ImportError:
                native_runner = None
            if native_runner is not None:
                r = native_runner(program, self.mode, self.__name__)
                if r is not None:
                    call = lambda tensors: r(tensors, GRAD[0])  # noqa: E731
                    call.native = r          # the NativeRunner (kernel list/count, source) for tests and tools
                    return call
        return lambda tensors: interp(tensors, GRAD[0])

    def reset(self):
        self.entries.clear()
        self.warned = False
        self.auto_dims = set()
        self.dyn_failed = False
        self.dyn_failures = 0


@contextlib.contextmanager
def _targets_unhooked(targets):
    """The AOT backward stops at the inputs and parameters: their own gradient hooks (register_hook,
    retain_grad) run when the engine hands the compiled backward's results on to them at replay, so they
    must not be traced into the backward as well (they would apply twice)."""
    saved = []
    for t in targets:
        fn = t.grad_fn
        if fn is None:
            if t._hooks:
                saved.append((t, "_hooks", t._hooks))
                t._hooks = None
        elif fn.tensor_hooks and t._output_nr in fn.tensor_hooks:
            saved.append((fn, t._output_nr, fn.tensor_hooks.pop(t._output_nr)))
    try:
        yield
    finally:
        for owner, key, hooks in saved:
            if key == "_hooks":
                owner._hooks = hooks
            else:
                owner.tensor_hooks[key] = hooks


def _arg_by_value(tracer, v):
    for t in tracer.keep:
        if tracer.t2v.get(id(t)) is v:
            return t
    raise RuntimeError("internal: argument tensor not found")


def _param_names(fn) -> list:
    """The positional parameter names of ``fn`` (empty when Python cannot tell)."""
    try:
        return [n for n, p in inspect.signature(fn).parameters.items()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _paths(args, kwargs):
    flat = []
    _flatten(args, (), flat)
    if kwargs:
        _flatten(kwargs, ("kw",), flat)
    return [(t, p) for p, t in flat if isinstance(t, Tensor)]


def _prefetch_gemm() -> None:
    """Start loading (or, with an empty cache, building) ember's GEMM library in the background while
    the first trace runs: the native build of the trace calls it (shared_gemm.py), and its compiler
    then runs beside the Python of the trace instead of beside the graph's own compilers."""
    from . import gemm, shared_gemm
    if gemm.enabled():
        shared_gemm.prefetch()


def _prefault_arena(name: str) -> None:
    """Touch the arena memory the plan cache noted for ``name`` in the background while the first trace
    runs (prefault.py): the first native call then writes no fresh pages."""
    from . import prefault
    prefault.start(name)


def _prof_enabled() -> bool:
    from ..profiler import is_enabled
    return is_enabled()


def _profile_range(kind: str, name: str):
    """A profiler range for a compile phase ("compile::capture", ...); a cheap no-op when not profiling."""
    from ..profiler import record_range
    return record_range("compile", f"compile::{kind}", function=name)


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="inductor", mode=None,
            options=None, disable: bool = False):
    """Compile a function or module; usable as ``@ember.compile`` or ``@ember.compile(...)``.

    >>> f = ember.compile(lambda x: (x * 2).sin())
    >>> f(ember.ones(3))
    tensor([0.9093, 0.9093, 0.9093])
    """
    def wrap(m):
        if disable:
            return m
        from ..nn.modules.module import Module
        if isinstance(m, Module):
            return OptimizedModule(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode)
        return CompiledFunction(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode)
    if model is None:
        return wrap
    return wrap(model)


def reset() -> None:
    """Drop all in-memory compiled code and traces (disk cache entries stay)."""
    for f in list(_ALL):
        f.reset()
    for k in counters:
        counters[k] = [] if isinstance(counters[k], list) else 0
    try:
        from .build import clear_memory_cache
        clear_memory_cache()
    except ImportError:
        pass


class OptimizedModule:
    """A compiled module: calls go through the compiled forward; everything else is the original's
    (state_dict keys have no prefix, parameters are the same objects)."""

    def __init__(self, mod, **kw):
        object.__setattr__(self, "_orig_mod", mod)
        object.__setattr__(self, "_compiled", CompiledFunction(mod.forward, module=mod, **kw))

    def __call__(self, *args, **kwargs):
        m = self._orig_mod
        if m._forward_hooks or m._forward_pre_hooks:
            return m._call_impl(*args, **kwargs)
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._orig_mod, name)

    def __setattr__(self, name, value):
        setattr(self._orig_mod, name, value)

    def __repr__(self):
        return f"OptimizedModule(\n  (_orig_mod): {repr(self._orig_mod)}\n)".replace("\n)", "\n)")

    def __reduce__(self):
        return (_rebuild_optimized, (self._orig_mod,))


def _rebuild_optimized(mod):
    return compile(mod)
