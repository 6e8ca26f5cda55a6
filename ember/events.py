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

__all__ = ["Event", "Stream", "synchronize", "register_synchronizer"]

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


_CURRENT_STREAMS: dict = {}    # (device type, index) -> the Stream set by set_stream / a ``with stream:``


class Stream:
    """A queue of device work (``torch.Stream``): ``query``, ``synchronize``, ``wait_event``,
    ``wait_stream``, ``record_event``, and ``with stream:`` to make it the current stream.

    ember's OpenCL device has ONE in-order queue per device: every Stream of a device is a name for that
    queue, so work never overlaps across streams and the orderings torch asks streams to keep
    (``wait_stream``, ``wait_event``) already hold. On the CPU, work is done when an op returns.

        >>> s = ember.Stream("opencl")                  # doctest: +SKIP
        >>> with s: y = x @ x                           # doctest: +SKIP
        >>> s.synchronize()                             # doctest: +SKIP
    """

    __slots__ = ("_device", "priority", "stream_id", "_prev")
    _ids = itertools.count(1)

    def __init__(self, device=None, *, priority: int = 0):
        if device is None:
            from . import accelerator
            device = accelerator.current_accelerator() if accelerator.is_available() else None
        d = _device(device)
        if d.type != "cpu" and d.index is None:
            from .tensor import device as _dev
            d = _dev(d.type, 0)
        self._device = d
        self.priority = int(priority)
        self.stream_id = 0 if d.type == "cpu" else next(Stream._ids)
        self._prev = None

    @property
    def device(self):
        return self._device

    @property
    def device_type(self) -> str:
        return self._device.type

    @property
    def device_index(self) -> int:
        return -1 if self._device.index is None else self._device.index

    def query(self) -> bool:
        """Whether all work queued on the stream is done: a marker is queued behind it and polled for up
        to a millisecond (an idle queue reaches it at once; a busy one answers False)."""
        if self._device.type == "cpu":
            return True
        e = Event(self._device)
        e.record(self)
        deadline = time.perf_counter() + 1e-3
        while not e.query():
            if time.perf_counter() > deadline:
                return False
            time.sleep(0)
        return True

    def synchronize(self) -> None:
        """Wait for all work queued on the stream."""
        _sync(self._device)

    def wait_event(self, event) -> None:
        """Make later work on this stream wait for ``event`` (the device's one in-order queue already does)."""
        event.wait(self)

    def wait_stream(self, stream) -> None:
        """Make later work on this stream wait for the work queued on ``stream`` so far (already so)."""
        if not isinstance(stream, Stream):
            raise TypeError(f"wait_stream(): argument 'stream' must be Stream, not {type(stream).__name__}")

    def record_event(self, event=None):
        """Record ``event`` (a new one if None) on this stream; returns it."""
        if event is None:
            event = Event(self._device)
        event.record(self)
        return event

    def __enter__(self):
        key = (self._device.type, self.device_index)
        self._prev = _CURRENT_STREAMS.get(key)
        _CURRENT_STREAMS[key] = self
        return self

    def __exit__(self, *exc):
        key = (self._device.type, self.device_index)
        if self._prev is None:
            _CURRENT_STREAMS.pop(key, None)
        else:
            _CURRENT_STREAMS[key] = self._prev
        return False

    def __eq__(self, other):
        return isinstance(other, Stream) and (self._device, self.stream_id) == (other._device, other.stream_id)

    def __hash__(self):
        return hash((self._device.type, self.device_index, self.stream_id))

    def __repr__(self):
        return (f"ember.Stream device_type={self._device.type}, device_index={self.device_index}, "
                f"stream_id={self.stream_id}")


def current_stream(device) -> Stream:
    """The stream work on ``device`` goes to: the one set by ``set_stream`` / ``with stream:``, else
    the device's default stream (stream_id 0)."""
    s = Stream(device)
    key = (s.device_type, s.device_index)
    cur = _CURRENT_STREAMS.get(key)
    if cur is None:
        s.stream_id = 0
        cur = _CURRENT_STREAMS[key] = s
    return cur


def set_stream(stream: Stream) -> None:
    """Make ``stream`` the current stream of its device."""
    if not isinstance(stream, Stream):
        raise TypeError(f"set_stream(): argument 'stream' must be Stream, not {type(stream).__name__}")
    _CURRENT_STREAMS[(stream.device_type, stream.device_index)] = stream
