"""``ember.profiler``: where the time (and memory) goes, with ``torch.profiler``'s API.

    >>> import ember
    >>> from ember.profiler import profile, record_function, ProfilerActivity
    >>> x = ember.ones(64, 64, requires_grad=True)
    >>> with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True) as prof:
    ...     with record_function("step"):
    ...         (x @ x).relu().sum().backward()
    >>> print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))  # doctest: +SKIP
    >>> prof.export_chrome_trace("trace.json")       # doctest: +SKIP  (open in ui.perfetto.dev)

Event names: ops are "ember::<registered op name>" ("ember::add", "ember::matmul"), in the spirit of
torch's "aten::add"; backward nodes are "autograd::engine::evaluate_function: MulBackward0" with a
nested "MulBackward0" whose children are the derivative's ops; ``record_function`` ranges keep their
label; ``prof.step()`` makes "ProfilerStep#N". Compiler and device layers report through
``record_event`` / ``record_range`` / ``record_copy`` / ``record_fallback`` (see their docstrings).

When no profiler is recording, the eager path pays one ``if HOOKS`` check per op (the hook list in
``ember.ops.registry``) and one per backward node; nothing is recorded.

``ember.profiler.start()`` / ``ember.profiler.stop()`` profile without a ``with`` block.
"""
from .profiler import (profile, record_function, record_event, record_range, record_copy,  # noqa: F401
                       record_fallback, ProfilerActivity, ProfilerAction, schedule, start, stop, is_enabled,
                       supported_activities, _range)
from ._events import FunctionEvent, FunctionEventAvg, EventList, Interval  # noqa: F401
from . import trace  # noqa: F401

__all__ = ["profile", "record_function", "record_event", "record_range", "record_copy", "record_fallback",
           "ProfilerActivity", "ProfilerAction", "schedule", "start", "stop", "is_enabled",
           "supported_activities", "FunctionEvent", "FunctionEventAvg", "EventList", "Interval"]
