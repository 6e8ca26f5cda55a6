"""ember.Event and ember.synchronize (torch.Event's interface; CPU events read a monotonic clock)."""
import time

import pytest

import ember


def test_elapsed_time_measures_milliseconds():
    start, end = ember.Event(enable_timing=True), ember.Event(enable_timing=True)
    start.record()
    time.sleep(0.02)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float)
    assert 15.0 <= ms < 2000.0


def test_query_wait_synchronize_and_device():
    e = ember.Event(enable_timing=True)
    assert e.query() is True          # nothing recorded: done, as in torch
    e.record()
    assert e.query() is True
    assert e.wait() is None
    assert e.synchronize() is None
    assert e.device == ember.device("cpu")
    assert "ember.Event" in repr(e)
    assert ember.synchronize() is None
    assert ember.synchronize("cpu") is None
    assert ember.synchronize(ember.device("cpu")) is None


def test_synchronize_unknown_device_raises():
    with pytest.raises(RuntimeError, match="cuda"):
        ember.synchronize("cuda")


def test_elapsed_before_record_raises_runtime_error():
    a, b = ember.Event(enable_timing=True), ember.Event(enable_timing=True)
    with pytest.raises(RuntimeError, match="Both events must be recorded"):
        a.elapsed_time(b)
    a.record()
    with pytest.raises(RuntimeError, match="Both events must be recorded"):
        a.elapsed_time(b)
    with pytest.raises(RuntimeError, match="Both events must be recorded"):
        b.elapsed_time(a)
    # torch raises ValueError for the same misuse: either except clause works
    with pytest.raises(ValueError):
        a.elapsed_time(b)


def test_elapsed_needs_enable_timing():
    a, b = ember.Event(), ember.Event(enable_timing=True)
    a.record()
    b.record()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        a.elapsed_time(b)
    with pytest.raises(TypeError):
        b.elapsed_time(3.0)


def test_cuda_style_positional_flag_and_interprocess():
    e = ember.Event(True)             # torch.cuda.Event(enable_timing) takes the flag first
    assert e.enable_timing
    with pytest.raises(RuntimeError, match="interprocess"):
        ember.Event(interprocess=True)


def test_ten_thousand_pairs_never_negative_never_hang():
    t0 = time.perf_counter()
    start, end = ember.Event(enable_timing=True), ember.Event(enable_timing=True)
    for _ in range(10_000):
        start.record()
        end.record()
        assert start.elapsed_time(end) >= 0.0
    assert time.perf_counter() - t0 < 30.0


def test_rerecord_moves_the_mark():
    a, b = ember.Event(enable_timing=True), ember.Event(enable_timing=True)
    a.record()
    b.record()
    first = a.elapsed_time(b)
    time.sleep(0.005)
    b.record()
    assert a.elapsed_time(b) > first


def test_registered_synchronizer_runs_for_its_device():
    from ember import events
    calls = []
    saved = events._SYNCHRONIZERS.get("opencl")
    events.register_synchronizer("opencl", lambda idx: calls.append(idx))
    try:
        ember.synchronize("opencl:0")
        ember.synchronize(ember.device("opencl"))
        assert calls == [0, None]
        # an Event on the device is a marker in its queue (tests/test_opencl_profiler.py): no host wait
        ember.Event(device="opencl", enable_timing=True)
        assert calls == [0, None]
    finally:
        events._SYNCHRONIZERS.pop("opencl", None)
        if saved is not None:
            events._SYNCHRONIZERS["opencl"] = saved
