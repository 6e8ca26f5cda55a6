"""Profiling hooks and records: ``COPY_HOOKS`` / ``KERNEL_HOOKS``, the pending records they are
delivered from (see "Profiling hooks" in the package docstring), and the copy counters.
"""
from __future__ import annotations

import collections

_PENDING_FLUSH = 256       # profiling records delivered at the latest when this many are pending

CopyRecord = collections.namedtuple("CopyRecord", "direction nbytes seconds device start_ns end_ns host_ns")
CopyRecord.__doc__ = ("A finished copy: direction 'h2d', 'd2h' or 'd2d', bytes moved, seconds on the "
                      "device, device index, device start/end timestamps (ns) and host perf_counter_ns "
                      "at enqueue.")
KernelRecord = collections.namedtuple("KernelRecord", "name device queued_ns start_ns end_ns host_ns")
KernelRecord.__doc__ = ("A finished kernel: name, device index, device queued/start/end timestamps (ns) "
                        "and host perf_counter_ns at enqueue.")
COPY_HOOKS: list = []
KERNEL_HOOKS: list = []
_COPY_STATS = {"h2d": [0, 0], "d2h": [0, 0], "d2d": [0, 0]}
_PENDING = collections.deque()   # ("copy"|"kernel", name/direction, nbytes, device, event, host_ns)
_WAIT_EACH = [False]             # profiler's wait_until_completed


def copy_stats() -> dict:
    """``{"h2d"|"d2h"|"d2d": {"count": copies, "bytes": bytes moved}}`` since the last reset."""
    return {k: {"count": v[0], "bytes": v[1]} for k, v in _COPY_STATS.items()}


def reset_copy_stats() -> None:
    for v in _COPY_STATS.values():
        v[0] = v[1] = 0


def _note_copy(rt, direction: str, nbytes: int, event, host_ns: int) -> None:
    st = _COPY_STATS[direction]
    st[0] += 1
    st[1] += nbytes
    if COPY_HOOKS and event is not None:
        _PENDING.append(("copy", direction, nbytes, rt.index, event, host_ns))
        if _WAIT_EACH[0] or len(_PENDING) >= _PENDING_FLUSH:
            _flush_records()


def _flush_records() -> None:
    """Deliver the pending profiling records (waits for their commands)."""
    while _PENDING:
        kind, name, nbytes, dev, evt, host_ns = _PENDING.popleft()
        evt.wait()
        prof = evt.profile
        start, end = prof.start, prof.end
        if kind == "kernel":
            rec = KernelRecord(name, dev, prof.queued, start, end, host_ns)
            hooks = KERNEL_HOOKS
        else:
            rec = CopyRecord(name, nbytes, max(0, end - start) / 1e9, dev, start, end, host_ns)
            hooks = COPY_HOOKS
        for fn in list(hooks):
            fn(rec)


def _note_kernel(rt, name: str, evt, host_ns: int) -> None:
    _PENDING.append(("kernel", name, 0, rt.index, evt, host_ns))
    if _WAIT_EACH[0] or len(_PENDING) >= _PENDING_FLUSH:
        _flush_records()
