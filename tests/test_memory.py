"""ember.memory: storage counting, peaks, stats, and the per-process memory fraction limit."""
import gc

import numpy as np
import pytest

import ember
import ember.memory as mem
import importlib

_tensor_mod = importlib.import_module("ember.tensor")


@pytest.fixture(autouse=True)
def _tracking():
    gc.collect()
    mem.enable_tracking()
    yield
    mem._clear_limit()
    mem.disable_tracking()
    assert _tensor_mod._mem_track is None       # back to the single cheap check on the hot path


def test_counts_rise_and_fall_with_lifetimes():
    base = mem.memory_allocated()
    x = ember.zeros(1000)                                   # float32
    assert mem.memory_allocated() - base == 4000
    y = ember.ones(10, 10, dtype=ember.float64)
    assert mem.memory_allocated() - base == 4800
    del x
    assert mem.memory_allocated() - base == 800
    del y
    assert mem.memory_allocated() == base
    z = ember.Tensor(10, 10)                                # the legacy constructor counts too
    assert mem.memory_allocated() - base == 400
    del z
    assert mem.memory_allocated() == base


def test_views_and_aliases_are_not_double_counted():
    base = mem.memory_allocated()
    x = ember.zeros(100, 10)
    views = [x[3:7], x.view(1000), x.t(), x.detach(), x.data, x.reshape(10, 100), x.expand(2, 100, 10),
             x[:, 2], x.unsqueeze(0)]
    assert mem.memory_allocated() - base == 4000
    del x                                   # the views keep the storage alive
    assert mem.memory_allocated() - base == 4000
    del views
    assert mem.memory_allocated() == base


def test_op_results_and_autograd_saved_values():
    base = mem.memory_allocated()
    a = ember.ones(256, requires_grad=True)                # 1024 bytes
    b = (a * 2).exp()                                      # two more storages; exp saves its output
    assert mem.memory_allocated() - base == 3 * 1024
    b.sum().backward()
    assert a.grad is not None
    del b
    gc.collect()
    assert mem.memory_allocated() - base == 2 * 1024      # a and a.grad
    del a
    assert mem.memory_allocated() == base


def test_peak_and_reset():
    mem.reset_peak_memory_stats()
    base = mem.memory_allocated()
    assert mem.max_memory_allocated() == base
    x = ember.empty(250_000)                               # 1,000,000 bytes
    del x
    assert mem.memory_allocated() == base
    assert mem.max_memory_allocated() >= base + 1_000_000
    assert mem.max_memory_reserved() == mem.max_memory_allocated()
    mem.reset_peak_memory_stats()
    assert mem.max_memory_allocated() == base


def test_stats_keys_and_summary():
    x = ember.ones(1000)
    st = mem.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "allocated_bytes.all.allocated",
                "allocated_bytes.all.freed", "reserved_bytes.all.current", "active_bytes.all.current",
                "allocation.all.current", "segment.all.current", "num_alloc_retries", "num_ooms"):
        assert key in st, key
    assert st["allocated_bytes.all.current"] == mem.memory_allocated()
    assert st["reserved_bytes.all.current"] == mem.memory_reserved() == mem.memory_allocated()
    assert st["allocated_bytes.all.peak"] >= st["allocated_bytes.all.current"]
    assert mem.memory_cached() == mem.memory_reserved()
    s = mem.memory_summary()
    assert "Allocated memory" in s and "Reserved memory" in s and "Allocations" in s
    assert "OOMs" in s
    assert "Allocated memory" in mem.memory_summary(abbreviated=True)
    mem.empty_cache()                           # nothing cached on the CPU: counts unchanged
    assert mem.memory_allocated() == st["allocated_bytes.all.current"]
    mem.reset_accumulated_memory_stats()
    assert mem.memory_stats()["allocated_bytes.all.freed"] == 0
    del x


def test_counting_starts_with_live_tensors():
    mem.disable_tracking()
    x = ember.zeros(12345)                                  # made while counting is off
    mem.enable_tracking()                                   # found by the scan of live tensors
    before = mem.memory_allocated()
    del x
    assert before - mem.memory_allocated() == 12345 * 4


def test_foreign_buffers_are_not_ember_storage():
    base = mem.memory_allocated()
    buf = bytes(800)
    t = ember.from_numpy(np.frombuffer(buf, dtype=np.float64))
    assert mem.memory_allocated() == base
    del t


def test_device_argument():
    assert mem.memory_allocated("cpu") == mem.memory_allocated(ember.device("cpu")) == mem.memory_allocated(0)
    with pytest.raises(RuntimeError, match="cuda"):
        mem.memory_allocated("cuda")
    free, total = mem.mem_get_info()
    assert 0 < free <= total


def test_fraction_validation():
    with pytest.raises(TypeError, match="float"):
        mem.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError, match="Allowed range"):
        mem.set_per_process_memory_fraction(1.5)
    with pytest.raises(ValueError, match="Allowed range"):
        mem.set_per_process_memory_fraction(-0.1)
    mem.set_per_process_memory_fraction(0.5)
    assert mem.get_per_process_memory_fraction() == 0.5


def _limit_at(extra_bytes):
    total = mem._physical_memory()
    mem.set_per_process_memory_fraction((mem.memory_allocated() + extra_bytes) / total)
    return mem._LIMIT[0]


def test_fraction_limit_raises_and_recovers():
    keep = ember.arange(1000, dtype=ember.float32)
    limit = _limit_at(200_000)
    base = mem.memory_allocated()
    ooms = mem.memory_stats()["num_ooms"]
    with pytest.raises(ember.OutOfMemoryError) as info:
        ember.ones(250_000)                                   # 1,000,000 bytes
    msg = str(info.value)
    assert "1000000 bytes" in msg                              # the requested size
    assert f"{limit} bytes" in msg                             # the limit
    assert "already allocated" in msg and "cached" in msg
    assert "'ones'" in msg                                     # the op that asked
    assert isinstance(info.value, RuntimeError)
    assert ember.OutOfMemoryError is mem.OutOfMemoryError
    # the process keeps working and nothing already allocated is lost
    assert mem.memory_allocated() == base
    assert mem.memory_stats()["num_ooms"] == ooms + 1
    assert mem.memory_stats()["num_alloc_retries"] >= 1
    np.testing.assert_array_equal(keep.numpy(), np.arange(1000, dtype=np.float32))
    small = keep * 2                                           # fits under the limit
    assert float(small.sum()) == float(np.arange(1000).sum() * 2)


def test_fraction_limit_names_the_registered_op():
    x = ember.ones(1000)
    _limit_at(100_000)
    with pytest.raises(ember.OutOfMemoryError, match="'repeat'"):
        x.repeat(100)                                          # 400,000 bytes
    with pytest.raises(ember.OutOfMemoryError, match=r"'mul' \(called from test_memory.py:\d+: ember.outer"):
        ember.outer(x, x)                                      # 4,000,000 bytes, computed by mul
    mem.set_per_process_memory_fraction(1.0)                   # raising the limit lets it through
    assert ember.outer(x, x).shape == (1000, 1000)


def test_limit_collects_garbage_cycles_before_failing():
    _limit_at(3_000_000)

    class Holder:
        pass
    h = Holder()
    h.self = h
    h.t = ember.ones(500_000)                                  # 2,000,000 bytes, only a cycle keeps it
    del h
    y = ember.ones(500_000)                                    # fits once the cycle is collected
    assert y.shape == (500_000,)


def test_no_counting_when_off():
    mem.disable_tracking()
    assert not mem.is_tracking()
    assert _tensor_mod._mem_track is None
    n = len(mem._LIVE)
    ember.ones(100) + 1
    assert len(mem._LIVE) == n == 0
