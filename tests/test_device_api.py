"""torch.accelerator / torch.cuda-style memory and stream calls answered by the OpenCL device: the
allocator's statistics with torch's keys, peaks and their reset, ``ember.memory.*`` for a device, and
``ember.Stream`` (one in-order queue per device)."""
import pytest

import ember
import ember.accelerator as acc

from device_support import needs_opencl, _quiet_fallback_warnings  # noqa: E402,F401 - autouse fixture

pytestmark = needs_opencl


def test_accelerator_memory_calls_follow_device_allocations():
    ember.opencl.synchronize()
    base = acc.memory_allocated()
    x = ember.ones(1000, device="opencl")              # 4000 bytes: one 4096-byte block
    assert acc.memory_allocated() == base + 4096
    assert acc.max_memory_allocated() >= base + 4096
    st = acc.memory_stats()
    assert set(st) == set(ember.memory.memory_stats())      # the CPU's torch keys, every one
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
                "allocation.all.current", "segment.all.current", "num_ooms", "num_alloc_retries"):
        assert isinstance(st[key], int), key
    assert st["allocated_bytes.all.current"] == acc.memory_allocated() == ember.memory.memory_allocated("opencl")
    assert acc.memory_reserved() >= acc.memory_allocated()
    y = x * 2
    peak = acc.max_memory_allocated()
    del y
    ember.opencl.synchronize()
    acc.reset_peak_memory_stats()
    assert acc.max_memory_allocated() == acc.memory_allocated() < peak
    assert acc.max_memory_reserved() == acc.memory_reserved()
    acc.reset_accumulated_memory_stats()
    assert acc.memory_stats()["allocation.all.allocated"] == 0
    z = x + 1
    assert acc.memory_stats()["allocation.all.allocated"] >= 1
    free, total = acc.get_memory_info()
    assert total == ember.opencl.recommended_max_memory() and 0 <= free <= total
    assert ember.memory.mem_get_info("opencl:0") == acc.get_memory_info()
    assert "opencl:0 memory summary" in ember.memory.memory_summary("opencl")
    del x, z


def test_memory_fraction_through_ember_memory():
    try:
        ember.memory.set_per_process_memory_fraction(0.5, "opencl")
        assert ember.memory.get_per_process_memory_fraction("opencl") == 0.5
        assert ember.opencl._rt.get_per_process_memory_fraction() == 0.5
    finally:
        ember.opencl.set_per_process_memory_fraction(0.0)
    with pytest.raises(RuntimeError, match="not available"):
        ember.memory.memory_allocated("meta")


def test_streams_name_the_device_queue():
    s = ember.Stream("opencl")
    assert s.device == ember.device("opencl", 0) and s.device_type == "opencl" and s.device_index == 0
    default = acc.current_stream()
    assert default.stream_id == 0 and default.device_type == "opencl"
    x = ember.arange(6.0, device="opencl")
    with s:
        assert acc.current_stream() is s
        y = x * 2
    assert acc.current_stream() is default
    e = s.record_event()
    s.wait_stream(default)
    default.wait_event(e)
    s.synchronize()
    assert e.query() and s.query()
    assert y.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    acc.set_stream(s)
    assert acc.current_stream() is s
    acc.set_stream(default)
    assert s == s and s != default and len({s, default}) == 2
    cpu = ember.Stream("cpu")
    assert cpu.device_index == -1 and cpu.stream_id == 0 and cpu.query()
    with pytest.raises(TypeError):
        s.wait_stream(e)
