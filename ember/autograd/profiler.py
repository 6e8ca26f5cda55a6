"""``ember.autograd.profiler``: torch.autograd.profiler's legacy names on top of ``ember.profiler``.

``record_function`` is the same range marker; ``profile(enabled=True, use_cuda=..., record_shapes=...,
profile_memory=..., with_stack=...)`` is ``ember.profiler.profile`` with the legacy keyword set (device
flags are accepted and ignored: ember records CPU activity); ``enabled=False`` records nothing.
"""
from __future__ import annotations

from ..profiler import profile as _profile, record_function, EventList  # noqa: F401

__all__ = ["profile", "record_function", "EventList"]


class profile(_profile):  # noqa: N801 - torch's name
    """``with torch.autograd.profiler.profile(record_shapes=True) as prof: ...``; then
    ``prof.key_averages().table(...)`` as with ``ember.profiler.profile``."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device=None, record_shapes: bool = False,
                 with_flops: bool = False, profile_memory: bool = False, with_stack: bool = False,
                 with_modules: bool = False, use_kineto: bool = False, use_cpu: bool = True,
                 experimental_config=None, acc_events: bool = False, custom_trace_id_callback=None):
        self.enabled = enabled
        super().__init__(record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules, acc_events=acc_events)

    def __enter__(self):
        return super().__enter__() if self.enabled else self

    def __exit__(self, *exc):
        return super().__exit__(*exc) if self.enabled else False
