"""Timing events and device synchronisation: ``ember.Event`` and ``ember.synchronize``.

``ember.Event`` has the interface of ``torch.Event`` / ``torch.cuda.Event``: ``record()`` marks a point in
the device's stream of work, ``elapsed_time(end)`` gives the milliseconds between two recorded
events. ember runs every op synchronously on the CPU, so recording an event reads a monotonic clock
(``time.perf_counter_ns``); intervals between events recorded in order are never negative and do not
jump when the wall clock is adjusted. ``ember.cuda.Event`` is the same class.

    >>> start, end = ember.Event(enable_timing=True), ember.Event(enable_timing=True)
    >>> start.record()
    >>> y = ember.ones(100, 100) @ ember.ones(100, 100)
    >>> end.record()
    >>> end.synchronize()
    >>> start.elapsed_time(end) >= 0.0
    True

Devices that run work asynchronously plug in through ``register_synchronizer(device_type, fn)``:
``ember.synchronize(device)`` and ``Event.record``/``synchronize`` on such a device first wait for its
queued work, so host-side timings cover the device's work.
"""
from __future__ import annotations

import itertools
import time

__all__ = ["Event", "synchronize", "register_synchronizer"]

_SYNCHRONIZERS: dict = {}      # device type -> fn(index): waits until the device's queued work is done
_ids = itertools.count(1)


class EventError(RuntimeError, ValueError):
    """Misuse of an event (a RuntimeError; also a ValueError, which torch raises for some of these)."""


def register_synchronizer(device_type: str, fn) -> None:
    """Let an asynchronous device make ``synchronize``/``Event`` wait for its work: ``fn(index)``."""
    _SYNCHRONIZERS[device_type] = fn


def _device(device):
    from .tensor import device as _dev
    if device is None:
        return _dev("cpu")
    if isinstance(device, _dev):
        return device
    if isinstance(device, int) and not isinstance(device, bool):
        return _dev("cpu", device)
    if isinstance(device, str):
        return _dev(device)
    raise TypeError(f"expected a device (str, ember.device or int), got {type(device).__name__}")


def _sync(dev) -> None:
    fn = _SYNCHRONIZERS.get(dev.type)
    if fn is not None:
        fn(dev.index)
    elif dev.type not in ("cpu", "meta"):
        raise RuntimeError(f"ember.synchronize: device '{dev}' is not available; ember runs on the "
                           "'cpu' device only so far")


def synchronize(device=None) -> None:
    """Wait until all queued work on ``device`` is done (``torch.cuda.synchronize``).

    ember's CPU runs every op to completion before returning, so on the CPU this returns at once.

        >>> ember.synchronize()
    """
    _sync(_device(device))


class Event:
    """A marker in the device's work whose time can be measured (``torch.Event``).

    Args:
        device: the device whose work the event marks (default: the CPU).
        enable_timing: whether ``elapsed_time`` may be asked of this event.
        blocking, interprocess: accepted for torch compatibility; ``interprocess=True`` is not
            supported (events cannot be shared between processes).

        >>> e = ember.Event(enable_timing=True)
        >>> e.record(); e.query()
        True
    """

    __slots__ = ("_device", "enable_timing", "blocking", "interprocess", "_t", "event_id")

    def __init__(self, device=None, *, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        if isinstance(device, bool):
            # torch.cuda.Event(enable_timing, blocking, interprocess) takes the flag first
            device, enable_timing = None, device
        if interprocess:
            raise RuntimeError("ember.Event: interprocess=True is not supported (ember events cannot be "
                               "shared between processes)")
        self._device = _device(device)
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self.interprocess = False
        self._t = None
        self.event_id = next(_ids)

    @property
    def device(self):
        """The device this event belongs to."""
        return self._device

    def record(self, stream=None) -> None:
        """Mark the current point of the device's work (re-recording moves the mark)."""
        _sync(self._device)     # asynchronous devices: the mark falls after their queued work
        self._t = time.perf_counter_ns()

    def query(self) -> bool:
        """Whether the work before the mark is done: always true for ember's synchronous CPU (and for an
        event never recorded, as in torch)."""
        return True

    def synchronize(self) -> None:
        """Wait until the work before the mark is done."""
        if self._t is not None:
            _sync(self._device)

    def wait(self, stream=None) -> None:
        """Make future work on ``stream`` wait for this event: ember's work is already in order."""
        return None

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds from this event to ``end_event`` (both recorded, both with ``enable_timing``).

        Measured with a monotonic clock: never negative when ``end_event`` was recorded after this one.
        """
        if not isinstance(end_event, Event):
            raise TypeError(f"elapsed_time(): argument 'end_event' must be an Event, not "
                            f"{type(end_event).__name__}")
        if not (self.enable_timing and end_event.enable_timing):
            raise EventError("Both events must be created with argument 'enable_timing=True'.")
        if self._t is None or end_event._t is None:
            raise EventError("Both events must be recorded before calculating elapsed time.")
        return (end_event._t - self._t) / 1e6

    def ipc_handle(self):
        """Not supported: ember events cannot be shared between processes."""
        raise RuntimeError("ember.Event.ipc_handle: interprocess events are not supported")

    @classmethod
    def from_ipc_handle(cls, device, handle):
        """Not supported: ember events cannot be shared between processes."""
        raise RuntimeError("ember.Event.from_ipc_handle: interprocess events are not supported")

    def __repr__(self):
        state = "recorded" if self._t is not None else "not recorded"
        return (f"ember.Event(device_type={self._device.type}, event_id={self.event_id}, "
                f"enable_timing={self.enable_timing}, {state})")
