"""Chrome trace export: the JSON that chrome://tracing and Perfetto (ui.perfetto.dev) open.

Format (the Trace Event Format): ``{"traceEvents": [...]}`` where each range is a complete event
``{"ph": "X", "name", "cat", "pid", "tid", "ts", "dur", "args"}`` with ``ts``/``dur`` in microseconds
since the profiler started, instants are ``"ph": "i"``, and metadata events (``"ph": "M"``) name the
process and one track per thread. Forward ops and the backward nodes made for them are joined by flow
arrows (``"cat": "fwdbwd"``), as torch's traces do. Ranges are written from integer nanoseconds, so a
nested range's ``[ts, ts + dur]`` always lies inside its parent's.

Device work gets a process per device ("opencl:0", pid ``DEVICE_PID_BASE + index``, above any Linux
pid) with two tracks, "opencl:0 kernels" and "opencl:0 copies"; a flow arrow (``"cat": "ac2g"``, as
torch's) joins the CPU range that enqueued a command to it. CPU fallbacks are instants on their own
track "fallbacks" of the host process (tid ``FALLBACK_TID``).
"""
from __future__ import annotations

import json
import os

from . import _events as E

_CATEGORY = {E.OP: "cpu_op", E.BACKWARD: "cpu_op", E.USER: "user_annotation", E.STEP: "user_annotation",
             E.COMPILE: "compile", E.KERNEL: "kernel", E.MEMCPY: "gpu_memcpy", E.FALLBACK: "fallback",
             E.MEMORY: "cpu_instant_event"}


def _us(ns: int) -> float:
    # integer nanoseconds -> microseconds with three decimals, exactly representable enough to keep order
    return round(ns / 1000.0, 3)


def _jsonable(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)


DEVICE_PID_BASE = 1 << 23      # device "processes": above Linux's largest pid (2**22)
FALLBACK_TID = 1 << 23         # the fallbacks track of the host process
_TRACKS = {E.KERNEL: "kernels", E.MEMCPY: "copies"}


def _place(ev, pid):
    """(pid, tid) of an event's track."""
    if ev.device_type != "CPU":
        return DEVICE_PID_BASE + ev.device_index, ev.thread
    if ev.kind == E.FALLBACK:
        return pid, FALLBACK_TID
    return pid, ev.thread


def trace_events(prof, events) -> list:
    """The ``traceEvents`` list for ``events`` recorded by ``prof``."""
    base = prof._base_ns
    pid = os.getpid()
    out = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0, "args": {"name": "ember"}},
           {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "ts": 0, "args": {"labels": "CPU"}},
           {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "ts": 0, "args": {"sort_index": 0}}]
    threads = sorted({ev.thread for ev in events if ev.device_type == "CPU" and ev.kind != E.FALLBACK})
    for i, tid in enumerate(threads):
        tname = prof._thread_names.get(tid, f"thread {tid}")
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": 0,
                    "args": {"name": f"thread {tid} ({tname})"}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "ts": 0,
                    "args": {"sort_index": i}})
    if any(ev.kind == E.FALLBACK and ev.device_type == "CPU" for ev in events):
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": FALLBACK_TID, "ts": 0,
                    "args": {"name": "fallbacks"}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": FALLBACK_TID, "ts": 0,
                    "args": {"sort_index": len(threads)}})
    tracks = sorted({(ev.device_index, ev.thread, ev.kind) for ev in events if ev.device_type != "CPU"})
    for dev in sorted({t[0] for t in tracks}):
        dpid = DEVICE_PID_BASE + dev
        out.append({"ph": "M", "name": "process_name", "pid": dpid, "tid": 0, "ts": 0,
                    "args": {"name": f"opencl:{dev}"}})
        out.append({"ph": "M", "name": "process_labels", "pid": dpid, "tid": 0, "ts": 0,
                    "args": {"labels": "OpenCL"}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": dpid, "tid": 0, "ts": 0,
                    "args": {"sort_index": 1 + dev}})
    for dev, tid, kind in tracks:
        dpid = DEVICE_PID_BASE + dev
        out.append({"ph": "M", "name": "thread_name", "pid": dpid, "tid": tid, "ts": 0,
                    "args": {"name": f"opencl:{dev} {_TRACKS.get(kind, kind)}"}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": dpid, "tid": tid, "ts": 0,
                    "args": {"sort_index": tid}})
    forward_seqs = {ev.sequence_nr for ev in events if ev.kind == E.OP and ev.sequence_nr >= 0
                    and not ev.is_backward}
    for idx, ev in enumerate(events):
        start = ev.start_ns - base
        args = {}
        if ev.input_shapes:
            args["Input Dims"] = _jsonable(ev.input_shapes)
            args["Input type"] = _jsonable(ev.input_dtypes)
        if ev.sequence_nr >= 0:
            args["Sequence number"] = ev.sequence_nr
            if ev.fwd_thread is not None:
                args["Fwd thread id"] = ev.fwd_thread
        if ev.kind in (E.BACKWARD,) or ev.is_backward:
            args["backward"] = True
        if ev.stack:
            args["Call stack"] = ";".join(ev.stack)
        if ev.cpu_memory_usage:
            args["CPU Mem"] = ev.cpu_memory_usage
        for k, v in ev.fields.items():
            args[k] = _jsonable(v)
        args["Ev Idx"] = idx
        epid, etid = _place(ev, pid)
        rec = {"name": ev.name, "cat": _CATEGORY.get(ev.kind, ev.kind), "pid": epid, "tid": etid,
               "ts": _us(start), "args": args}
        if ev.instant:
            rec.update(ph="i", s="t")
        else:
            end = (ev.end_ns if ev.end_ns is not None else ev.start_ns) - base
            rec.update(ph="X", dur=round(_us(end) - _us(start), 3))
        out.append(rec)
        # flow arrows from the CPU range that enqueued device work to the work
        for k in ev.kernels:
            out.append({"ph": "s", "id": k.id, "pid": pid, "tid": ev.thread, "ts": _us(k.launch_ns - base),
                        "cat": "ac2g", "name": "ac2g"})
            out.append({"ph": "f", "id": k.id, "pid": DEVICE_PID_BASE + k.device_index, "tid": k.thread,
                        "ts": _us(k.start_ns - base), "cat": "ac2g", "name": "ac2g", "bp": "e"})
        # flow arrows from a forward op to the backward node made for it
        if ev.kind == E.OP and ev.sequence_nr >= 0 and not ev.is_backward:
            out.append({"ph": "s", "id": ev.sequence_nr, "pid": pid, "tid": ev.thread, "ts": _us(start),
                        "cat": "fwdbwd", "name": "fwdbwd"})
        elif (ev.kind == E.BACKWARD and ev.sequence_nr in forward_seqs
              and ev.name.startswith("autograd::engine::evaluate_function")):
            out.append({"ph": "f", "id": ev.sequence_nr, "pid": pid, "tid": ev.thread, "ts": _us(start),
                        "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"})
    return out


def export_chrome_trace(prof, events, path: str) -> None:
    """Write ``events`` (recorded by ``prof``) to ``path`` as Chrome trace JSON (gzipped when the
    path ends with ".gz", which Perfetto opens as is)."""
    doc = {"schemaVersion": 1, "displayTimeUnit": "ms", "deviceProperties": [],
           "record_shapes": int(bool(prof.record_shapes)), "profile_memory": int(bool(prof.profile_memory)),
           "baseTimeNanoseconds": prof._base_epoch_ns, "traceName": str(path),
           "traceEvents": trace_events(prof, events)}
    if str(path).endswith(".gz"):
        import gzip
        with gzip.open(path, "wt") as f:
            json.dump(doc, f)
        return
    with open(path, "w") as f:
        json.dump(doc, f)
