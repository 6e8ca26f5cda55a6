"""``ember.opencl.profiler``: ``torch.mps.profiler``'s ``start``/``stop``/``profile`` for the OpenCL
device. Instead of OS signposts, the kernels, copies and CPU fallbacks while profiling are collected as
``ember.devices.opencl.KernelRecord`` / ``CopyRecord`` / ``FallbackRecord`` tuples (device timestamps
from OpenCL profiling, in ns, plus the host ``perf_counter_ns`` at enqueue), which ``records()``
returns.

    >>> with ember.opencl.profiler.profile():
    ...     ...                                  # device work
    >>> [r.name for r in ember.opencl.profiler.records() if hasattr(r, "name")]

It listens to the same hooks as ``ember.profiler.profile`` (which turns the records into events of its
trace and tables, on its own clock); the two can run at the same time and each sees every record.

``mode`` is accepted as in torch ("interval", "event" or both: the records have start and end
times either way); ``wait_until_completed=True`` waits for every command as it is enqueued, so that
commands do not overlap on the timeline (slower).
"""
from __future__ import annotations

import contextlib

from ember.devices import opencl as _rt

__all__ = ["start", "stop", "profile", "records", "clear", "is_profiling"]

RECORDS: list = []          # KernelRecord, CopyRecord and FallbackRecord tuples, in delivery order
_ACTIVE = [False]
_MODES = ("interval", "event", "interval,event", "event,interval")


def _collect(record) -> None:
    RECORDS.append(record)


def start(mode: str = "interval", wait_until_completed: bool = False) -> None:
    """Start collecting records of OpenCL kernels, copies and CPU fallbacks."""
    mode_normalized = mode.lower().replace(" ", "")
    if mode_normalized not in _MODES:
        raise ValueError(f"Invalid profiler mode '{mode}': expected 'interval', 'event' or 'interval,event'")
    if _rt._PENDING and not _ACTIVE[0]:
        _rt._flush_records()     # commands queued before start belong to whoever listened then
    for hooks in (_rt.KERNEL_HOOKS, _rt.COPY_HOOKS, _rt.FALLBACK_HOOKS):
        if _collect not in hooks:
            hooks.append(_collect)
    _rt._WAIT_EACH[0] = bool(wait_until_completed)
    _ACTIVE[0] = True


def stop() -> None:
    """Stop collecting (the records of work queued so far are delivered first)."""
    _rt._flush_records()
    for hooks in (_rt.KERNEL_HOOKS, _rt.COPY_HOOKS, _rt.FALLBACK_HOOKS):
        while _collect in hooks:
            hooks.remove(_collect)
    _rt._WAIT_EACH[0] = False
    _ACTIVE[0] = False


@contextlib.contextmanager
def profile(mode: str = "interval", wait_until_completed: bool = False):
    """``start`` on entry and ``stop`` on exit."""
    try:
        start(mode, wait_until_completed)
        yield
    finally:
        stop()


def is_profiling() -> bool:
    return _ACTIVE[0]


def records() -> list:
    """The records collected so far (a copy; pending ones are delivered first)."""
    if _ACTIVE[0]:
        _rt._flush_records()
    return list(RECORDS)


def clear() -> None:
    """Forget the collected records."""
    RECORDS.clear()
