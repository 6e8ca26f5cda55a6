"""``Event``: ``torch.mps.Event`` on an OpenCL device, a marker in the device's queue."""
from __future__ import annotations

from ._device_runtime import _runtime
from ._devices import _index

cl = None                  # pyopencl, bound by _devices._load_cl on first use


class Event:
    """A marker in a device's queue (``torch.mps.Event`` / ``torch.cuda.Event``).

    ``record()`` enqueues the marker (re-recording moves it); ``elapsed_time(end)`` waits for both
    markers and returns the milliseconds between their completion timestamps (never negative)."""

    __slots__ = ("enable_timing", "_device", "_evt", "_rt")

    def __init__(self, enable_timing: bool = False, device=None):
        self.enable_timing = bool(enable_timing)
        self._device = _index(device)
        self._evt = None
        self._rt = None

    def record(self) -> None:
        rt = self._rt or _runtime(self._device)
        self._rt = rt
        self._evt = cl.enqueue_marker(rt.queue)

    def wait(self) -> None:
        """Make work enqueued later wait for this event (already so on the single in-order queue)."""
        if self._evt is not None:
            cl.enqueue_barrier(self._rt.queue, wait_for=[self._evt])

    def query(self) -> bool:
        """True when the work before the marker is done (or the event was never recorded)."""
        if self._evt is None:
            return True
        self._rt.queue.flush()
        return self._evt.command_execution_status == cl.command_execution_status.COMPLETE

    def synchronize(self) -> None:
        """Wait (on the host) for the work before the marker."""
        if self._evt is not None:
            self._evt.wait()

    def elapsed_time(self, end_event: "Event") -> float:
        if not isinstance(end_event, Event):
            raise TypeError(f"elapsed_time(): argument 'end_event' must be Event, not {type(end_event).__name__}")
        from ember.events import EventError
        if not (self.enable_timing and end_event.enable_timing):
            raise EventError("Both events must be created with argument 'enable_timing=True'.")
        if self._evt is None or end_event._evt is None:
            raise EventError("Both events must be recorded before calculating elapsed time.")
        if self._device != end_event._device:
            raise EventError(f"elapsed_time(): the events are on different devices (opencl:{self._device} "
                             f"and opencl:{end_event._device})")
        self._evt.wait()
        end_event._evt.wait()
        return max(0.0, (end_event._evt.profile.end - self._evt.profile.end) / 1e6)

    def __repr__(self):
        state = "recorded" if self._evt is not None else "not recorded"
        return f"ember.opencl.Event(device='opencl:{self._device}', enable_timing={self.enable_timing}, {state})"
