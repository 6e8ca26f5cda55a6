"""The profiler: records op calls, backward nodes, user ranges and device/compiler events.

How it hooks in: while a profile records, ``_op_hook`` sits in ``ember.ops.registry.HOOKS`` (every
eager op call) and ``_node_hook`` in ``ember.autograd.engine.NODE_HOOKS`` (every derivative the
backward engine runs). When no profile records, both lists are empty and the eager path pays only
the ``if HOOKS`` check it always makes; ``record_function`` and ``record_event`` check one flag.

Device work: while a profile with the ``PrivateUse1`` activity runs (the default), its callbacks sit
in ``ember.devices.opencl``'s ``KERNEL_HOOKS``, ``COPY_HOOKS`` and ``FALLBACK_HOOKS`` (empty
otherwise: the device pays one truth test per launch). Kernels and copies arrive as records with
device timestamps once the device finished them (at a synchronize, when enough are pending, and at
``stop``); they become events of ``device_type`` "OpenCL" on the profiler's clock: the device clock
plus an offset per device, the largest ``host enqueue time - device queued time`` seen so far (a lower
bound of the true offset, so a command never appears to start before the host enqueued it). Results
link each device event to the innermost CPU range open when it was enqueued (``FunctionEvent.kernels``),
which gives the ops their device time. A fallback is an instant "fallback::<op>" inside the op.

Events nest through a per-thread stack: every range started while another is open on the same thread
becomes its child, so self time = own time - children's time, and the Chrome trace gets one track per
thread with properly contained ranges.
"""
from __future__ import annotations

import enum
import functools
import itertools
import threading
import time
import traceback
import warnings

from .. import memory as _mem
from . import _events as E
from ._events import EventList, FunctionEvent

__all__ = ["profile", "record_function", "record_event", "record_range", "record_copy", "record_fallback",
           "ProfilerActivity", "ProfilerAction", "schedule", "start", "stop", "is_enabled",
           "supported_activities"]

_ACTIVE = [None]              # the profile that is recording right now (None: profiler off)
_tls = threading.local()
_ids = itertools.count()
_clock = time.perf_counter_ns


class ProfilerActivity(enum.Enum):
    """What to profile (``torch.profiler.ProfilerActivity``). ember records ``CPU`` activity and, as
    ``PrivateUse1`` (torch's activity for an out-of-tree device), the OpenCL device's kernels, copies
    and CPU fallbacks; the other device activities are accepted for scripts written for torch and
    record nothing."""
    CPU = "CPU"
    XPU = "XPU"
    MTIA = "MTIA"
    CUDA = "CUDA"
    HPU = "HPU"
    PrivateUse1 = "PrivateUse1"


def supported_activities() -> set:
    """Activities ember can record on this machine: ``CPU``, and ``PrivateUse1`` when an OpenCL device
    is available."""
    from ..devices import opencl
    acts = {ProfilerActivity.CPU}
    if opencl.is_available():
        acts.add(ProfilerActivity.PrivateUse1)
    return acts


class ProfilerAction(enum.Enum):
    """What the profiler does during a step, as returned by a ``schedule``."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0):
    """A step -> ``ProfilerAction`` function (``torch.profiler.schedule``): after ``skip_first`` steps,
    cycles of ``wait`` idle steps, ``warmup`` steps and ``active`` recorded steps, ``repeat`` times
    (0: forever). The last active step of each cycle is ``RECORD_AND_SAVE``: ``on_trace_ready`` runs
    when it ends.

        >>> sched = ember.profiler.schedule(wait=1, warmup=1, active=2)
        >>> [sched(i).name for i in range(4)]
        ['NONE', 'WARMUP', 'RECORD', 'RECORD_AND_SAVE']
    """
    for name, v, lo in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1), ("repeat", repeat, 0),
                        ("skip_first", skip_first, 0)):
        if not isinstance(v, int) or v < lo:
            raise ValueError(f"schedule(): {name} must be an int >= {lo}, got {v!r}")

    def fn(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait          # the first cycle starts at its warmup; later cycles wait as usual
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        return _phase(step % cycle, wait, warmup, active)
    return fn


def _phase(mod, wait, warmup, active):
    if mod < wait:
        return ProfilerAction.NONE
    if mod < wait + warmup:
        return ProfilerAction.WARMUP
    return ProfilerAction.RECORD if mod < wait + warmup + active - 1 else ProfilerAction.RECORD_AND_SAVE


def _default_schedule(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


# ---- the thread-local stack of open ranges ---------------------------------------------------------
def _stack() -> list:
    try:
        return _tls.stack
    except AttributeError:
        _tls.stack = []
        return _tls.stack


def _begin(prof, name: str, kind: str, fields=None) -> FunctionEvent:
    tid = threading.get_native_id()
    if tid not in prof._thread_names:
        prof._thread_names[tid] = threading.current_thread().name
    ev = FunctionEvent(next(_ids), name, kind, tid, _clock(), prof._base_ns)
    stack = _stack()
    if stack:
        parent = stack[-1]
        ev.cpu_parent = parent
        parent.cpu_children.append(ev)
        ev.is_backward = parent.is_backward
    if fields:
        ev.fields.update(fields)
    if prof.profile_memory:
        ev._mem0 = _mem._C[0]
    if prof.with_stack:
        ev.stack = _python_stack()
    prof._events.append(ev)
    stack.append(ev)
    return ev


def _end(prof, ev: FunctionEvent) -> None:
    if ev.end_ns is not None:
        return                   # already closed when the profiler stopped inside this range
    ev.end_ns = _clock()
    stack = _stack()
    if stack and stack[-1] is ev:
        stack.pop()
    elif ev in stack:
        stack.remove(ev)         # a range closed out of order (a step ended inside a user range)
    if ev._mem0 is not None:
        ev.cpu_memory_usage = _mem._C[0] - ev._mem0
        ev._mem0 = None
    if ev.cpu_parent is None:
        _tls.last_top_end = ev.end_ns


def _instant(prof, name: str, kind: str, fields, duration_ns=None) -> FunctionEvent:
    """An event that is not a context: an instant, or a range of known duration ending now."""
    now = _clock()
    tid = threading.get_native_id()
    if tid not in prof._thread_names:
        prof._thread_names[tid] = threading.current_thread().name
    stack = _stack()
    parent = stack[-1] if stack else None
    start = now
    if duration_ns is not None:
        # a range timed by the caller: keep it inside its parent and after its previous sibling, so
        # the trace stays properly nested (the requested duration stays in the fields)
        if parent is not None:
            lo = parent.cpu_children[-1].end_ns if parent.cpu_children else parent.start_ns
            lo = max(lo or parent.start_ns, parent.start_ns)
        else:
            lo = getattr(_tls, "last_top_end", 0)
        start = max(now - int(duration_ns), lo)
        fields = {**fields, "duration_us": duration_ns / 1e3}
    ev = FunctionEvent(next(_ids), name, kind, tid, start, prof._base_ns)
    ev.end_ns = now
    ev.instant = duration_ns is None
    ev.fields.update(fields)
    if parent is not None:
        ev.cpu_parent = parent
        parent.cpu_children.append(ev)
        ev.is_backward = parent.is_backward
    else:
        _tls.last_top_end = now
    prof._events.append(ev)
    return ev


def _python_stack() -> list:
    """The user's Python frames (innermost first), ember's own frames left out."""
    out = []
    for fs in reversed(traceback.extract_stack()[:-1]):
        fn = fs.filename.replace("\\", "/")
        if "/ember/" in fn and "/tests/" not in fn:
            continue
        out.append(f"{fs.filename}({fs.lineno}): {fs.name}")
    return out


# ---- the hooks ---------------------------------------------------------------------------------------
_DT_NAMES: dict = {}      # ember dtype -> torch's C++ type name used in traces ("float", "long int")


def _dtype_name(dt) -> str:
    if not _DT_NAMES:
        from .. import dtypes as d
        _DT_NAMES.update({d.float32: "float", d.float64: "double", d.float16: "c10::Half",
                          d.bfloat16: "c10::BFloat16", d.int64: "long int", d.int32: "int", d.int16: "short int",
                          d.int8: "signed char", d.uint8: "unsigned char", d.bool: "bool"})
    return _DT_NAMES.get(dt) or str(dt)


def _describe(args):
    from ..tensor import Tensor
    shapes, dtypes = [], []
    for a in args:
        if isinstance(a, Tensor):
            shapes.append(list(a._data.shape))
            dtypes.append(_dtype_name(a._dtype))
        elif isinstance(a, (list, tuple)) and a and all(isinstance(x, Tensor) for x in a):
            shapes.append([list(x._data.shape) for x in a])
            dtypes.append("TensorList")
        elif isinstance(a, (list, tuple)):
            shapes.append([])
            dtypes.append("ScalarList")
        elif a is None:
            shapes.append([])
            dtypes.append("")
        else:
            shapes.append([])
            dtypes.append("Scalar")
    return shapes, dtypes


def _op_hook(op, args, attrs, run):
    prof = _ACTIVE[0]
    if prof is None or not prof._recording:
        return run()
    ev = _begin(prof, "ember::" + op.name, E.OP)
    if prof.record_shapes:
        ev.input_shapes, ev.input_dtypes = _describe(args)
    try:
        out = run()
    finally:
        _end(prof, ev)
    # link to the backward node this call made (its sequence number), as torch does
    for o in (out if type(out) is tuple else (out,)):
        g = getattr(o, "grad_fn", None)
        if g is not None and getattr(g, "op", None) is op:
            ev.sequence_nr = g.seq
            ev.fwd_thread = ev.thread
            break
    return out


def _node_hook(node, run):
    prof = _ACTIVE[0]
    if prof is None or not prof._recording:
        return run()
    name = node.name()
    outer = _begin(prof, "autograd::engine::evaluate_function: " + name, E.BACKWARD)
    outer.is_backward = True
    outer.sequence_nr = node.seq
    inner = _begin(prof, name, E.BACKWARD)
    inner.is_backward = True
    inner.sequence_nr = node.seq
    try:
        return run()
    finally:
        _end(prof, inner)
        _end(prof, outer)


# ---- public recording API ----------------------------------------------------------------------------
def is_enabled() -> bool:
    """Whether a profiler is recording now (callers can skip preparing event fields when not)."""
    p = _ACTIVE[0]
    return p is not None and p._recording


class record_function:  # noqa: N801 - torch's name
    """Label a region: ``with record_function("label"):`` or ``@record_function("label")``.

    The range nests with everything recorded inside it and shows up in ``key_averages`` and the
    trace. Costs one check when no profiler is recording.

        >>> with ember.profiler.profile() as prof:
        ...     with ember.profiler.record_function("forward"):
        ...         y = ember.ones(3) * 2
        >>> any(e.name == "forward" for e in prof.events())
        True
    """

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self.args = args
        self._ev = None
        self._prof = None

    def __enter__(self):
        prof = _ACTIVE[0]
        if prof is not None and prof._recording:
            self._prof = prof
            self._ev = _begin(prof, self.name, E.USER, {"args": self.args} if self.args is not None else None)
        return self

    def __exit__(self, *exc):
        if self._ev is not None:
            _end(self._prof, self._ev)
            self._ev = self._prof = None
        return False

    def __call__(self, fn):
        # a fresh range per call, so recursion and threads nest correctly
        name, args = self.name, self.args

        @functools.wraps(fn)
        def inner(*a, **k):
            with record_function(name, args):
                return fn(*a, **k)
        return inner


def record_event(kind: str, name: str, *, duration_us: float | None = None, **fields):
    """Record an event of ``kind`` for the device, compiler and runtime layers; a no-op (returning None)
    when no profiler records.

    Without ``duration_us`` the event is an instant (a cache hit, a fallback); with it, a range of that
    length ending now (a phase timed by the caller), shortened if needed so that it starts after the
    previous event on its thread and inside the open range (the trace stays properly nested; the
    requested length is kept in ``fields["duration_us"]``). Prefer ``record_range`` around work that
    can be wrapped. ``fields`` are kept on ``event.fields`` and written to the trace's ``args``.
    Kinds and names used by ember:

    - ``"compile"``: "compile::capture", "compile::autodiff", "compile::codegen", "compile::cc" (C
      compile), "compile::cache_hit", "compile::cache_miss" (fields: key, ...)
    - ``"kernel"``: a compiled kernel run, "kernel::<name>" (fields: device, numel, ...)
    - ``"memcpy"``: host/device copies (see ``record_copy``)
    - ``"fallback"``: an op sent to the CPU by a device (see ``record_fallback``)

        >>> with ember.profiler.profile() as prof:
        ...     ev = ember.profiler.record_event("compile", "compile::cache_hit", key="abc")
        >>> [e.fields["key"] for e in prof.events()]
        ['abc']
    """
    prof = _ACTIVE[0]
    if prof is None or not prof._recording:
        return None
    if kind not in E.KINDS:
        raise ValueError(f"record_event(): unknown kind '{kind}'; expected one of {', '.join(E.KINDS)}")
    return _instant(prof, name, kind, fields, None if duration_us is None else int(duration_us * 1000))


class record_range:  # noqa: N801 - a context manager like record_function
    """``with record_range(kind, name, **fields) as ev:`` times a region as an event of ``kind`` (a
    compiler phase, a kernel run, a copy); ``ev`` is the event (None when not recording), so the
    region can add ``ev.fields[...]`` as it learns them."""

    __slots__ = ("kind", "name", "fields", "_ev", "_prof")

    def __init__(self, kind: str, name: str, **fields):
        if kind not in E.KINDS:
            raise ValueError(f"record_range(): unknown kind '{kind}'; expected one of {', '.join(E.KINDS)}")
        self.kind = kind
        self.name = name
        self.fields = fields
        self._ev = self._prof = None

    def __enter__(self):
        prof = _ACTIVE[0]
        if prof is not None and prof._recording:
            self._prof = prof
            self._ev = _begin(prof, self.name, self.kind, self.fields)
        return self._ev

    def __exit__(self, *exc):
        if self._ev is not None:
            _end(self._prof, self._ev)
            self._ev = self._prof = None
        return False


_range = record_range

_DIRECTIONS = {"HtoD": "Host -> Device", "DtoH": "Device -> Host", "DtoD": "Device -> Device",
               "HtoH": "Host -> Host"}


def record_copy(nbytes: int, direction: str, device: str = "cpu", duration_us: float | None = None):
    """Record a copy between host and device: ``direction`` is "HtoD", "DtoH", "DtoD" or "HtoH".
    The event is named like torch's ("Memcpy HtoD (Host -> Device)") and carries ``bytes``,
    ``direction`` and ``device`` fields; ``key_averages`` sums the bytes per direction."""
    if direction not in _DIRECTIONS:
        raise ValueError(f"record_copy(): direction must be one of {', '.join(_DIRECTIONS)}, got {direction!r}")
    return record_event(E.MEMCPY, f"Memcpy {direction} ({_DIRECTIONS[direction]})", duration_us=duration_us,
                        bytes=int(nbytes), direction=direction, device=str(device))


def record_fallback(op: str, reason: str, device: str = "cpu"):
    """Record that ``device`` sent ``op`` to the CPU, and why (event "fallback::<op>")."""
    return record_event(E.FALLBACK, f"fallback::{op}", op=op, reason=reason, device=str(device))


_COPY_DIRECTIONS = {"h2d": "HtoD", "d2h": "DtoH", "d2d": "DtoD"}
KERNEL_TRACK = 1            # FunctionEvent.thread of device kernels (a track of the device in the trace)
COPY_TRACK = 2              # ... and of device copies


def _start_of(ev) -> int:
    return ev.start_ns


def _link_device_events(events) -> None:
    """Give each device event the innermost CPU range (on any thread) that was open when the host
    enqueued it: it joins that range's ``kernels`` (recomputed from scratch: idempotent)."""
    import bisect
    dev = [e for e in events if e.device_type != "CPU" and e.launch_ns is not None]
    if not dev:
        return
    tops: dict = {}
    for e in events:
        if e.device_type == "CPU":
            if e.kernels:
                e.kernels = []
            if not e.instant and e.cpu_parent is None and e.end_ns is not None:
                tops.setdefault(e.thread, []).append(e)
    for lst in tops.values():
        lst.sort(key=lambda e: e.start_ns)
    starts = {t: [e.start_ns for e in lst] for t, lst in tops.items()}

    def innermost(lst, st, t):
        i = bisect.bisect_right(st, t) - 1
        if i < 0 or lst[i].end_ns < t:
            return None, 0
        ev, depth = lst[i], 1
        while True:
            kids = ev.cpu_children          # in order of start, not overlapping
            j = bisect.bisect_right(kids, t, key=_start_of) - 1
            if j < 0 or kids[j].instant or kids[j].end_ns is None or kids[j].end_ns < t:
                return ev, depth
            ev, depth = kids[j], depth + 1
    for d in dev:
        best, best_depth = None, 0
        for t, lst in tops.items():
            ev, depth = innermost(lst, starts[t], d.launch_ns)
            if ev is not None and depth > best_depth:
                best, best_depth = ev, depth
        if best is not None:
            best.kernels.append(d)


# ---- the profile ----------------------------------------------------------------------------------------
class profile:  # noqa: N801 - torch's name
    """Profile ember code (``torch.profiler.profile``).

        >>> x = ember.ones(4, 3, requires_grad=True)
        >>> with ember.profiler.profile(record_shapes=True) as prof:
        ...     (x * 2).sum().backward()
        >>> print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))  # doctest: +SKIP

    Records every op call ("ember::<op name>", with input shapes and dtypes when ``record_shapes``),
    every autograd node the backward engine evaluates ("autograd::engine::evaluate_function:
    MulBackward0" around "MulBackward0", the ops of the derivative nested inside, linked to the forward
    op through ``sequence_nr``), ``record_function`` ranges, compiler/device events, and with
    ``profile_memory`` the bytes allocated during each event plus "[memory]" instants.

    ``schedule``/``on_trace_ready``/``step()`` work as in torch: each ``step()`` advances the schedule,
    and ``on_trace_ready(prof)`` runs at the end of every active cycle (or at exit without a schedule).
    """

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config=None, execution_trace_observer=None,
                 acc_events: bool = False, use_cuda=None, custom_trace_id_callback=None):
        if activities is None:
            # CPU and the device: the device hooks cost nothing when no device work runs (and asking
            # whether a device exists would load the OpenCL driver)
            acts = {ProfilerActivity.CPU, ProfilerActivity.PrivateUse1}
        else:
            acts = set(activities)
            for a in acts:
                if not isinstance(a, ProfilerActivity):
                    raise TypeError(f"profile(): activities must be ProfilerActivity members, got {a!r}")
            unsupported = acts - {ProfilerActivity.CPU}
            if unsupported:
                unsupported -= supported_activities()
            if unsupported:
                warnings.warn(f"ember.profiler: {', '.join(sorted(a.name for a in unsupported))} activity is not "
                              "available (ember records CPU activity, and PrivateUse1 for an OpenCL device); "
                              "nothing will be recorded for it", stacklevel=2)
        self.activities = acts
        self._device_activity = ProfilerActivity.PrivateUse1 in acts
        self._dev_offset: dict = {}      # device index -> device clock to perf_counter_ns offset
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        self.with_stack = bool(with_stack)
        self.with_flops = bool(with_flops)
        self.with_modules = bool(with_modules)
        self.schedule = schedule if schedule is not None else _default_schedule
        self._has_schedule = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._events: list = []
        self._done_events: list | None = None
        self._thread_names: dict = {}
        self._recording = False
        self._running = False
        self._step_ev = None
        self._base_ns = _clock()
        self._base_epoch_ns = time.time_ns()

    # ---- lifecycle -----------------------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self) -> "profile":
        """Start profiling (what ``with`` does on entry)."""
        if _ACTIVE[0] is not None:
            raise RuntimeError("ember.profiler: another profiler is already running; stop it before "
                               "starting a new one")
        _ACTIVE[0] = self
        self._running = True
        self._events = []
        self._done_events = None
        self.step_num = 0
        self._install()            # (counting memory may first scan live tensors: not part of the trace)
        self._base_ns = _clock()
        self._base_epoch_ns = time.time_ns()
        self._set_action(self.schedule(0))
        if self._has_schedule and self._recording:
            self._open_step()
        return self

    def stop(self) -> "profile":
        """Stop profiling (what ``with`` does on exit); runs ``on_trace_ready`` for a cycle in progress."""
        if not self._running:
            return self
        self._flush_device()         # the device's records of this profile (waits for its queued work)
        self._close_step()
        was_recording = self._recording
        self._set_action(ProfilerAction.NONE)
        self._uninstall()
        self._running = False
        if _ACTIVE[0] is self:
            _ACTIVE[0] = None
        self._close_open()
        if was_recording or self._done_events is None:
            self._done_events = self._events    # else keep the last completed cycle
        if was_recording and self.on_trace_ready is not None:
            self.on_trace_ready(self)
        return self

    def step(self) -> None:
        """Mark the end of a training step: advance the schedule (and close "ProfilerStep#N")."""
        if not self._running:
            return
        self._close_step()
        prev = self.current_action
        self.step_num += 1
        action = self.schedule(self.step_num)
        if prev == ProfilerAction.RECORD_AND_SAVE:
            # the active cycle just ended: hand it over, start the next one fresh
            self._flush_device()
            self._close_open()
            self._done_events = self._events
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
            self._events = []
        self._set_action(action)
        if self._recording:
            self._open_step()

    # ---- internals -----------------------------------------------------------------------------
    def _install(self):
        from ..ops import registry
        from ..autograd import engine
        registry.HOOKS.append(_op_hook)
        engine.NODE_HOOKS.append(_node_hook)
        if self.profile_memory:
            _mem._enable("profiler")
            _mem._LISTENERS.append(self._on_memory)
        if self._device_activity:
            from ..devices import opencl
            if opencl._PENDING:
                opencl._flush_records()      # commands queued before this profile are not its business
            opencl.KERNEL_HOOKS.append(self._on_kernel)
            opencl.COPY_HOOKS.append(self._on_copy)
            opencl.FALLBACK_HOOKS.append(self._on_fallback)

    def _uninstall(self):
        from ..ops import registry
        from ..autograd import engine
        if _op_hook in registry.HOOKS:
            registry.HOOKS.remove(_op_hook)
        if _node_hook in engine.NODE_HOOKS:
            engine.NODE_HOOKS.remove(_node_hook)
        if self.profile_memory:
            if self._on_memory in _mem._LISTENERS:
                _mem._LISTENERS.remove(self._on_memory)
            _mem._disable("profiler")
        if self._device_activity:
            from ..devices import opencl
            for hooks, fn in ((opencl.KERNEL_HOOKS, self._on_kernel), (opencl.COPY_HOOKS, self._on_copy),
                              (opencl.FALLBACK_HOOKS, self._on_fallback)):
                if fn in hooks:
                    hooks.remove(fn)

    # ---- device records -------------------------------------------------------------------------
    def _flush_device(self):
        if self._device_activity:
            from ..devices import opencl
            if opencl._PENDING:
                opencl._flush_records()

    def _device_event(self, name, kind, track, rec) -> FunctionEvent | None:
        if not self._recording or rec.host_ns < self._base_ns:
            return None
        # the device clock -> perf_counter_ns: the host enqueue time is before the device's queued (or
        # start) time, so host - device is a lower bound of the offset; keep the largest seen
        dev_t = getattr(rec, "queued_ns", 0) or rec.start_ns
        off = self._dev_offset.get(rec.device)
        if off is None or rec.host_ns - dev_t > off:
            off = self._dev_offset[rec.device] = rec.host_ns - dev_t
        ev = FunctionEvent(next(_ids), name, kind, track, rec.start_ns + off, self._base_ns)
        ev.end_ns = max(rec.end_ns, rec.start_ns) + off
        ev.device_type = "OpenCL"
        ev.device_index = rec.device
        ev.launch_ns = rec.host_ns
        ev.fields["device"] = f"opencl:{rec.device}"
        self._events.append(ev)
        return ev

    def _on_kernel(self, rec):
        self._device_event(rec.name, E.KERNEL, KERNEL_TRACK, rec)

    def _on_copy(self, rec):
        d = _COPY_DIRECTIONS[rec.direction]
        ev = self._device_event(f"Memcpy {d} ({_DIRECTIONS[d]})", E.MEMCPY, COPY_TRACK, rec)
        if ev is not None:
            ev.fields.update(bytes=int(rec.nbytes), direction=d)

    def _on_fallback(self, rec):
        if self._recording:
            _instant(self, f"fallback::{rec.op}", E.FALLBACK,
                     {"op": rec.op, "reason": rec.reason, "device": f"opencl:{rec.device}"})

    def _set_action(self, action):
        self.current_action = action
        self._recording = action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)

    def _open_step(self):
        self._step_ev = _begin(self, f"ProfilerStep#{self.step_num}", E.STEP)

    def _close_step(self):
        if self._step_ev is not None:
            _end(self, self._step_ev)
            self._step_ev = None

    def _close_open(self):
        # ranges still open when recording stops end now (and leave their thread's stack)
        now = _clock()
        for ev in self._events:
            if ev.end_ns is None:
                ev.end_ns = now
                if ev._mem0 is not None:
                    ev.cpu_memory_usage = _mem._C[0] - ev._mem0
                    ev._mem0 = None
        stack = _stack()
        stack[:] = [ev for ev in stack if ev.end_ns is None]

    def _on_memory(self, delta: int, total: int):
        if self._recording:
            _instant(self, "[memory]", E.MEMORY, {"Bytes": delta, "Total Allocated": total,
                                                  "Total Reserved": total, "Device Type": 0})

    # ---- results --------------------------------------------------------------------------------
    def _result(self) -> list:
        return self._done_events if self._done_events is not None else self._events

    def events(self) -> EventList:
        """Every recorded event (ranges, instants, device work) in order of start."""
        if self._running and self._recording:
            self._flush_device()
        evs = sorted(self._result(), key=lambda e: (e.start_ns, e.id))
        _link_device_events(evs)
        return EventList(evs, profile_memory=self.profile_memory, with_shapes=self.record_shapes,
                         trace=self)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        """Events averaged by name (and input shapes / stack): see ``EventList.table``."""
        if group_by_input_shape and not self.record_shapes:
            raise RuntimeError("key_averages(group_by_input_shape=True) needs profile(record_shapes=True)")
        if group_by_stack_n and not self.with_stack:
            raise RuntimeError("key_averages(group_by_stack_n=...) needs profile(with_stack=True)")
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as Chrome trace JSON, for chrome://tracing or ui.perfetto.dev."""
        from .trace import export_chrome_trace
        export_chrome_trace(self, list(self.events()), path)

    def table(self, *args, **kwargs) -> str:
        """``key_averages().table(...)``."""
        return self.key_averages().table(*args, **kwargs)


_GLOBAL = [None]


def start(**kwargs) -> profile:
    """Start a profiler without a ``with`` block (``kwargs`` as for ``profile``); returns it."""
    prof = profile(**kwargs)
    prof.start()
    _GLOBAL[0] = prof
    return prof


def stop() -> profile:
    """Stop the profiler started by ``start()`` (or whichever is running) and return it."""
    prof = _GLOBAL[0] if _GLOBAL[0] is not None and _GLOBAL[0]._running else _ACTIVE[0]
    if prof is None:
        raise RuntimeError("ember.profiler.stop(): no profiler is running")
    prof.stop()
    _GLOBAL[0] = None
    return prof
