"""What the profiler records: ``FunctionEvent`` (one range or instant), ``EventList`` (a list of them with
``table``/``key_averages``/``export_chrome_trace``) and ``FunctionEventAvg`` (one row of
``key_averages``). Times are microseconds (floats) as in ``torch.autograd.profiler_util``; memory is
bytes.
"""
from __future__ import annotations


__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList", "Interval"]

# what kind of thing an event is; also its category in the Chrome trace
OP = "op"                  # an ember operator call (forward or inside a derivative)
BACKWARD = "backward"      # an autograd node evaluated by the backward engine
USER = "user"              # record_function ranges
STEP = "step"              # ProfilerStep#N ranges made by prof.step()
COMPILE = "compile"        # compiler phases: capture, autodiff, codegen, C compile, cache hit/miss
KERNEL = "kernel"          # a compiled kernel run
MEMCPY = "memcpy"          # host<->device copies
FALLBACK = "fallback"      # an op a device did not run and sent to the CPU
MEMORY = "memory"          # "[memory]" allocation/free instants (profile_memory=True)

KINDS = (OP, BACKWARD, USER, STEP, COMPILE, KERNEL, MEMCPY, FALLBACK, MEMORY)


class Interval:
    """Start and end of an event in microseconds since the profiler started."""

    __slots__ = ("start", "end")

    def __init__(self, start: float, end: float):
        self.start = start
        self.end = end

    def elapsed_us(self) -> float:
        return self.end - self.start

    def __repr__(self):
        return f"Interval(start={self.start:.3f}, end={self.end:.3f})"


class FunctionEvent:
    """One recorded range (or instant, when ``instant`` is true).

    ``name``: "ember::add" for ops, "autograd::engine::evaluate_function: MulBackward0" and
    "MulBackward0" for backward nodes, the label for ``record_function``. ``kind`` says which (see
    ``KINDS``); ``is_backward`` marks backward nodes and everything that ran inside one;
    ``sequence_nr`` links a forward op to the backward node made for it (-1 when none);
    ``input_shapes``/``input_dtypes`` are filled when ``record_shapes=True``; ``cpu_memory_usage`` is the
    change in allocated bytes during the event (``profile_memory=True``); ``fields`` holds whatever
    ``record_event``/``record_range`` was given (bytes and direction of a copy, reason of a fallback...).

    Device work (a kernel or a copy that ran on an OpenCL device) is an event with ``device_type``
    "OpenCL", ``device_index`` and the device's start/end converted to the profiler's clock;
    ``launch_ns`` is when the host enqueued it. Its CPU times are 0 and its device times its duration.
    ``kernels`` of a CPU event are the device events it launched itself (as in torch), so a CPU
    event's ``device_time_total`` covers its own kernels and its children's.
    """

    __slots__ = ("id", "name", "kind", "thread", "start_ns", "end_ns", "cpu_parent", "cpu_children",
                 "input_shapes", "input_dtypes", "sequence_nr", "fwd_thread", "is_backward",
                 "cpu_memory_usage", "stack", "fields", "instant", "device_type", "device_index", "kernels",
                 "launch_ns", "_mem0", "_base")

    def __init__(self, id, name, kind, thread, start_ns, base_ns):  # noqa: A002 - torch's name
        self.id = id
        self.name = name
        self.kind = kind
        self.thread = thread
        self.start_ns = start_ns
        self.end_ns = None
        self.cpu_parent = None
        self.cpu_children = []
        self.input_shapes = []
        self.input_dtypes = []
        self.sequence_nr = -1
        self.fwd_thread = None
        self.is_backward = False
        self.cpu_memory_usage = 0
        self.stack = []
        self.fields = {}
        self.instant = False
        self.device_type = "CPU"
        self.device_index = -1
        self.kernels = []
        self.launch_ns = None
        self._mem0 = None
        self._base = base_ns

    # ---- torch's FunctionEvent interface (microseconds) ---------------------------------------
    @property
    def key(self) -> str:
        return self.name

    @property
    def count(self) -> int:
        return 1

    @property
    def time_range(self) -> Interval:
        end = self.end_ns if self.end_ns is not None else self.start_ns
        return Interval((self.start_ns - self._base) / 1e3, (end - self._base) / 1e3)

    @property
    def duration_ns(self) -> int:
        return 0 if self.end_ns is None else self.end_ns - self.start_ns

    @property
    def cpu_time_total(self) -> float:
        if self.device_type != "CPU":
            return 0.0
        return self.duration_ns / 1e3

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total

    @property
    def self_cpu_time_total(self) -> float:
        if self.device_type != "CPU":
            return 0.0
        return (self.duration_ns - sum(c.duration_ns for c in self.cpu_children)) / 1e3

    @property
    def self_cpu_memory_usage(self) -> int:
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def is_user_annotation(self) -> bool:
        return self.kind == USER

    @property
    def trace_name(self) -> str:
        return self.name

    @property
    def device_time_total(self) -> float:
        """Microseconds on the device: a device event's duration; for a CPU event, the device events it
        and its children launched."""
        if self.device_type != "CPU":
            return self.duration_ns / 1e3
        if not self.kernels and not self.cpu_children:
            return 0.0
        return (sum(k.duration_ns for k in self.kernels) / 1e3 +
                sum(c.device_time_total for c in self.cpu_children))

    @property
    def self_device_time_total(self) -> float:
        """A device event's duration; for a CPU event, the device events it launched itself."""
        if self.device_type != "CPU":
            return self.duration_ns / 1e3
        return sum(k.duration_ns for k in self.kernels) / 1e3

    @property
    def device_time(self) -> float:
        return self.device_time_total

    cuda_time_total = device_time_total
    self_cuda_time_total = self_device_time_total

    def __repr__(self):
        tr = self.time_range
        return (f"<FunctionEvent id={self.id} name={self.name} kind={self.kind} thread={self.thread} "
                f"cpu_time={_fmt_time(self.cpu_time_total)} start_us={tr.start:.3f} end_us={tr.end:.3f} "
                f"cpu_children={[c.id for c in self.cpu_children]} input_shapes={self.input_shapes} "
                f"sequence_nr={self.sequence_nr} cpu_memory_usage={self.cpu_memory_usage}>")


class FunctionEventAvg:
    """One row of ``key_averages``: the events sharing a key (name, and shapes/stack when grouped)."""

    def __init__(self, key, input_shapes=None, stack=None):
        self.key = key
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.input_shapes = input_shapes
        self.stack = stack or []
        self.kind = None
        self.is_backward = False
        self.device_type = "CPU"
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0
        self.fields = {}

    def add(self, ev) -> "FunctionEventAvg":
        """Fold one event (or another average) into this row."""
        if self.count == 0:
            self.device_type = ev.device_type
        self.count += ev.count
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total
        self.device_time_total += ev.device_time_total
        self.self_device_time_total += ev.self_device_time_total
        self.cpu_memory_usage += ev.cpu_memory_usage
        self.self_cpu_memory_usage += ev.self_cpu_memory_usage
        if self.kind is None:
            self.kind = ev.kind
            self.is_backward = ev.is_backward
        for k, v in getattr(ev, "fields", {}).items():
            # numeric fields (bytes of a copy) add up; others keep the first value seen
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.fields[k] = self.fields.get(k, 0) + v
            else:
                self.fields.setdefault(k, v)
        return self

    __iadd__ = add

    @property
    def name(self) -> str:
        return self.key

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self) -> float:
        return self.device_time_total / self.count if self.count else 0.0

    @property
    def cuda_time_total(self) -> float:
        return self.device_time_total

    @property
    def self_cuda_time_total(self) -> float:
        return self.self_device_time_total

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={_fmt_time(self.self_cpu_time_total)} "
                f"cpu_time={_fmt_time(self.cpu_time)} count={self.count} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage}>")


_SORT_KEYS = ("cpu_time", "cpu_time_total", "self_cpu_time_total", "count", "cpu_memory_usage",
              "self_cpu_memory_usage", "device_time", "device_time_total", "self_device_time_total",
              "cuda_time_total", "self_cuda_time_total")


class EventList(list):
    """A list of events with torch's helpers: ``table``, ``key_averages``, ``total_average``,
    ``export_chrome_trace``."""

    def __init__(self, *args, profile_memory: bool = False, with_shapes: bool = False,
                 with_stack: bool = False, trace=None):
        super().__init__(*args)
        self._profile_memory = profile_memory
        self._with_shapes = with_shapes
        self._with_stack = with_stack
        self._trace = trace       # (profile, events) for export_chrome_trace

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> "EventList":
        """Average the events by name (and input shapes / the innermost ``group_by_stack_n`` stack
        frames when asked): one ``FunctionEventAvg`` per group, in order of first appearance."""
        rows: dict = {}
        for ev in self:
            if ev.kind == MEMORY and not self._profile_memory:
                continue
            key = [ev.key]
            if group_by_input_shape:
                key.append(str(ev.input_shapes))
            if group_by_stack_n > 0:
                key.append(tuple(ev.stack[:group_by_stack_n]))
            key = tuple(key)
            row = rows.get(key)
            if row is None:
                row = rows[key] = FunctionEventAvg(
                    ev.key, ev.input_shapes if group_by_input_shape else None,
                    ev.stack[:group_by_stack_n] if group_by_stack_n > 0 else None)
            row.add(ev)
        return EventList(rows.values(), profile_memory=self._profile_memory,
                         with_shapes=group_by_input_shape, with_stack=group_by_stack_n > 0)

    def total_average(self) -> FunctionEventAvg:
        """All events folded into one row (key "Total")."""
        total = FunctionEventAvg("Total")
        for ev in self:
            total.add(ev)
        return total

    @property
    def self_cpu_time_total(self) -> float:
        return sum(ev.self_cpu_time_total for ev in self)

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False, time_unit: str | None = None) -> str:
        """A text table like torch's: Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg,
        [Self OPENCL, Self OPENCL %, OPENCL total, OPENCL time avg], [CPU Mem, Self CPU Mem], # of Calls,
        [Input Shapes], [Source Location]. The device columns appear when device work was recorded
        (torch's "Self CUDA" columns); their percentages are of the device events' total.

        ``sort_by`` is an attribute of the rows ("self_cpu_time_total", "cpu_time_total", "cpu_time",
        "count", "cpu_memory_usage", "self_cpu_memory_usage", "self_device_time_total",
        "device_time_total", "device_time"), largest first.
        """
        return _build_table(self, sort_by, row_limit, max_src_column_width, max_name_column_width,
                            max_shapes_column_width, header, top_level_events_only, time_unit)

    def export_chrome_trace(self, path: str) -> None:
        """Write these events as Chrome trace JSON (see ``ember.profiler.trace``)."""
        from .trace import export_chrome_trace
        if self._trace is None:
            raise RuntimeError("export_chrome_trace: this EventList holds averages, not events; call it "
                               "on prof.events() or on the profiler")
        export_chrome_trace(self._trace, list(self), path)

    def __str__(self):
        return self.table()


# ---- formatting ---------------------------------------------------------------------------------
def _fmt_time(us: float, unit: str | None = None) -> str:
    if unit == "s" or (unit is None and abs(us) >= 1e6):
        return f"{us / 1e6:.3f}s"
    if unit == "ms" or (unit is None and abs(us) >= 1e3):
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _fmt_mem(n: int) -> str:
    # torch's profiler style: decimal-looking binary units with a lowercase b
    for unit, size in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def _pct(part: float, whole: float) -> str:
    return f"{(100.0 * part / whole) if whole else 0.0:.2f}%"


def _clip(s: str, width: int) -> str:
    return s if len(s) <= width else s[: max(0, width - 3)] + "..."


def _build_table(events, sort_by, row_limit, max_src_column_width, max_name_column_width,
                 max_shapes_column_width, header, top_level_events_only, time_unit) -> str:
    rows = list(events)
    if top_level_events_only:
        rows = [e for e in rows if getattr(e, "cpu_parent", None) is None]
    if sort_by is not None:
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"table(): unknown sort_by '{sort_by}'; use one of {', '.join(_SORT_KEYS)}")
        rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
    total_self = sum(e.self_cpu_time_total for e in events)
    if row_limit is not None and row_limit > 0:
        rows = rows[:row_limit]
    mem = events._profile_memory if isinstance(events, EventList) else False
    shapes = events._with_shapes if isinstance(events, EventList) else False
    stacks = events._with_stack if isinstance(events, EventList) else False
    dev_types = sorted({e.device_type for e in events if e.device_type != "CPU"})
    has_device = any(e.self_device_time_total > 0 for e in events)
    total_self_dev = sum(e.self_device_time_total for e in events if e.device_type != "CPU")
    dname = (dev_types[0] if dev_types else "device").upper()
    name_w = min(max([len(e.key) for e in rows] + [len("Name")]) + 4, max_name_column_width)
    cols = [("Name", name_w), ("Self CPU %", 12), ("Self CPU", 12), ("CPU total %", 12), ("CPU total", 12),
            ("CPU time avg", 12)]
    if has_device:
        cols += [(f"Self {dname}", 12), (f"Self {dname} %", 14), (f"{dname} total", 12),
                 (f"{dname} time avg", 15)]
    if mem:
        cols += [("CPU Mem", 12), ("Self CPU Mem", 12)]
    cols.append(("# of Calls", 12))
    if shapes:
        shape_w = min(max([len(str(e.input_shapes)) for e in rows] + [len("Input Shapes")]) + 4,
                      max_shapes_column_width)
        cols.append(("Input Shapes", shape_w))
    if stacks:
        src_w = min(max([len(s) for e in rows for s in e.stack] + [len("Source Location")]) + 4,
                    max_src_column_width)
        cols.append(("Source Location", src_w))
    sep = "  ".join("-" * w for _, w in cols) + "  "

    def line(cells):
        return "  ".join(f"{_clip(str(c), w):>{w}s}" for c, (_, w) in zip(cells, cols)) + "  "

    out = []
    if header:
        out.append("=" * len(sep))
        out.append(header)
    out += [sep, line([c for c, _ in cols]), sep]
    for e in rows:
        cells = [e.key, _pct(e.self_cpu_time_total, total_self), _fmt_time(e.self_cpu_time_total, time_unit),
                 _pct(e.cpu_time_total, total_self), _fmt_time(e.cpu_time_total, time_unit),
                 _fmt_time(e.cpu_time_total / max(e.count, 1), time_unit)]
        if has_device:
            cells += [_fmt_time(e.self_device_time_total, time_unit), _pct(e.self_device_time_total, total_self_dev),
                      _fmt_time(e.device_time_total, time_unit),
                      _fmt_time(e.device_time_total / max(e.count, 1), time_unit)]
        if mem:
            cells += [_fmt_mem(e.cpu_memory_usage), _fmt_mem(e.self_cpu_memory_usage)]
        cells.append(str(e.count))
        if shapes:
            cells.append(str(e.input_shapes))
        if stacks:
            cells.append(e.stack[0] if e.stack else "")
        out.append(line(cells))
        if stacks:
            for s in e.stack[1:]:
                out.append(line([""] * (len(cols) - 1) + [s]))
    out.append(sep)
    out.append(f"Self CPU time total: {_fmt_time(total_self, time_unit)}")
    if has_device:
        out.append(f"Self {dname} time total: {_fmt_time(total_self_dev, time_unit)}")
    return "\n".join(out) + "\n"


