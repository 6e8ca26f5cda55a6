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

Devices that run work asynchronously plug in through ``register_synchronizer(device_type, fn)`` (or,
before they registered one, through their runtime module's ``synchronize`` in ``ember.devices``):
``ember.synchronize(device)`` waits for their queued work. An ``Event`` on a device whose runtime module
has an ``Event`` class (``ember.devices.opencl.Event``, a marker in the device's queue) is that event:
``record()`` enqueues the marker without waiting, ``query()`` says whether the device reached it and
``elapsed_time`` is measured between device timestamps.

    >>> start, end = ember.Event("opencl", enable_timing=True), ember.Event("opencl", enable_timing=True)
    >>> start.record(); y = a @ b; end.record()       # a, b on the device   # doctest: +SKIP
    >>> start.elapsed_time(end)                        # milliseconds on the device   # doctest: +SKIP
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


def _runtime_module(dev):
    """The ``ember.devices`` runtime module of an accelerator device type (None for cpu/meta/unknown)."""
    if dev.type in ("cpu", "meta"):
        return None
    from . import devices
    if dev.type not in devices.names():
        return None
    return devices.get(dev.type)


def _sync(dev) -> None:
    fn = _SYNCHRONIZERS.get(dev.type)
    if fn is None:
        mod = _runtime_module(dev)
        fn = getattr(mod, "synchronize", None)
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

    __slots__ = ("_device", "enable_timing", "blocking", "interprocess", "_t", "event_id", "_dev_event")

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
        # an accelerator with its own events (a marker in its queue): this event is one of those
        cls = getattr(_runtime_module(self._device), "Event", None)
        self._dev_event = None if cls is None else cls(enable_timing=self.enable_timing,
                                                        device=self._device.index or 0)

    @property
    def device(self):
        """The device this event belongs to."""
        return self._device

    def record(self, stream=None) -> None:
        """Mark the current point of the device's work (re-recording moves the mark)."""
        if self._dev_event is not None:
            self._dev_event.record()     # a marker in the device's queue: no wait
        else:
            _sync(self._device)          # other asynchronous devices: the mark falls after their work
        self._t = time.perf_counter_ns()

    def query(self) -> bool:
        """Whether the work before the mark is done: always true for ember's synchronous CPU (and for an
        event never recorded, as in torch)."""
        if self._dev_event is not None:
            return self._dev_event.query()
        return True

    def synchronize(self) -> None:
        """Wait until the work before the mark is done."""
        if self._dev_event is not None:
            self._dev_event.synchronize()
        elif self._t is not None:
            _sync(self._device)

    def wait(self, stream=None) -> None:
        """Make future work on ``stream`` wait for this event: ember's work is already in order."""
        if self._dev_event is not None:
            self._dev_event.wait()
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
        a, b = self._device, end_event._device
        if (a.type, a.index or 0) != (b.type, b.index or 0) and (self._dev_event or end_event._dev_event):
            raise EventError(f"elapsed_time(): the events are on different devices ({self._device} and "
                             f"{end_event._device})")
        if self._dev_event is not None:
            return self._dev_event.elapsed_time(end_event._dev_event)
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
