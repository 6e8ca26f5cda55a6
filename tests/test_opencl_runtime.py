"""The OpenCL device runtime (ember.devices.opencl, ember.opencl): copies, views, the caching allocator
and its limits, the program cache across processes, events, launches, profiling hooks and the CPU
fallback counters. Values are checked bit for bit against NumPy."""
import json
import os
import subprocess
import sys
import textwrap
import threading
import uuid
import warnings

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.opencl
from ember import devices
from ember.devices import cpu as dcpu
from ember.devices import opencl as o

needs_opencl = pytest.mark.skipif(not o.is_available(),
                                  reason=f"no usable OpenCL device: {o.unavailable_reason()}")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.float16, ml_dtypes.bfloat16,
          np.float32, np.float64, np.complex64, np.complex128]


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    if dt.kind == "c":
        return (rng.standard_normal(shape) * 1e3 + 1j * rng.standard_normal(shape)).astype(dt)
    a = (rng.standard_normal(shape) * 1e3).astype(dt)
    flat = a.reshape(-1)
    if flat.size >= 3:
        flat[:3] = np.array([np.nan, np.inf, -0.0]).astype(dt)
    return a


def same_bits(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    assert np.ascontiguousarray(a).view(np.uint8).tobytes() == np.ascontiguousarray(b).view(np.uint8).tobytes()


@pytest.fixture(autouse=True)
def _clean_state():
    yield
    if o.is_available():
        o.set_per_process_memory_fraction(0.0)
    o.set_fallback_allowed(None)
    o.reset_fallback_counts()


def run_python(code, env_extra):
    env = dict(os.environ, **env_extra)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=240)
    assert r.returncode == 0, r.stderr
    return r.stdout


# ---- without pyopencl ----------------------------------------------------------------------------------

def test_without_pyopencl_import_works_and_says_what_to_install():
    out = run_python("""
        import sys, json
        sys.modules["pyopencl"] = None            # as if not installed
        import ember, ember.opencl
        from ember.devices import opencl as o
        res = {"avail": ember.opencl.is_available(), "count": ember.opencl.device_count(),
               "why": o.unavailable_reason()}
        ember.opencl.manual_seed(3)               # like torch.mps.manual_seed: fine without a device
        try:
            ember.opencl.synchronize()
        except RuntimeError as e:
            res["sync"] = str(e)
        try:
            o.empty((2,), "float32")
        except RuntimeError as e:
            res["empty"] = str(e)
        print(json.dumps(res))
    """, {})
    res = json.loads(out.strip().splitlines()[-1])
    assert res["avail"] is False and res["count"] == 0
    assert "pip install pyopencl" in res["why"]
    assert "pyopencl" in res["sync"] and "pyopencl" in res["empty"]


# ---- the registry and the CPU facade -------------------------------------------------------------------

def test_registry_looks_up_modules_by_name():
    assert devices.get("cpu") is dcpu
    assert devices.get("opencl") is o
    assert devices.parse("opencl:1") == (o, 1)
    assert devices.parse("cpu") == (dcpu, 0)
    with pytest.raises(RuntimeError, match="device type at start of device string: tpu"):
        devices.get("tpu")
    with pytest.raises(RuntimeError, match="Invalid device string"):
        devices.parse("opencl:x")
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    assert dcpu.from_numpy(a) is not None and np.shares_memory(dcpu.from_numpy(a), a)
    e = dcpu.empty((2, 3), np.int16)
    dcpu.copy_(e, np.array([1, 2, 3], np.int16))
    assert dcpu.to_numpy(e).tolist() == [[1, 2, 3], [1, 2, 3]]


# ---- copies --------------------------------------------------------------------------------------------

@needs_opencl
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_roundtrip_every_dtype(dtype):
    a = sample((5, 7), dtype)
    d = o.from_numpy(a)
    assert d.shape == (5, 7) and d.strides == (7, 1) and d.dtype == np.dtype(dtype) and d.is_contiguous()
    assert d.nbytes == a.nbytes and d.itemsize == a.itemsize and d.ndim == 2 and d.size == 35
    same_bits(o.to_numpy(d), a)
    # a non-contiguous host array is made contiguous first
    same_bits(o.to_numpy(o.from_numpy(a[:, ::2])), a[:, ::2])
    # device -> device: contiguous, and strided (a transpose) through the generated copy kernel
    c = o.empty((5, 7), dtype)
    o.copy_(c, d)
    same_bits(o.to_numpy(c), a)
    t = d.view(0, (7, 5), (1, 7))
    assert not t.is_contiguous()
    same_bits(o.to_numpy(t), a.T)
    ct = o.empty((7, 5), dtype)
    o.copy_(ct, t)
    same_bits(o.to_numpy(ct), a.T)
    # zero-d and empty arrays
    s = sample((), dtype)
    same_bits(o.to_numpy(o.from_numpy(s)), s)
    z = np.zeros((0, 3), dtype)
    assert o.to_numpy(o.from_numpy(z)).shape == (0, 3)


@needs_opencl
def test_views_offsets_zero_strides_and_sparse_views():
    a = sample((4, 6, 5), np.float32, seed=1)
    d = o.from_numpy(a)
    isz = 4
    cases = [((6, 4), (5, 30), 3),      # picks a[:, :, 3].T
             ((2, 3, 5), (60, 10, 1), 35),   # a[::2, 1::2] with offset
             ((3, 4), (0, 1), 7),       # an expanded row (zero stride)
             ((5, 2, 3), (1, 0, 30), 2),  # zero stride in the middle
             ((), (), 17)]
    for shape, strides, off in cases:
        v = d.view(off * isz, shape, strides)
        want = np.lib.stride_tricks.as_strided(a.reshape(-1)[off:], shape, tuple(s * isz for s in strides))
        same_bits(o.to_numpy(v), want.copy())
        c = o.empty(shape, np.float32)
        o.copy_(c, v)
        same_bits(o.to_numpy(c), want.copy())
    # a view that spans far more than it holds is gathered on the device, not read whole
    big = np.arange(200_000, dtype=np.float32)
    db = o.from_numpy(big)
    o.reset_copy_stats()
    sparse = db.view(40, (100,), (1000,))
    same_bits(o.to_numpy(sparse), big[10::1000][:100].copy())
    st = o.copy_stats()
    assert st["d2d"]["count"] == 1 and st["d2h"]["bytes"] == 400
    # a dense-enough view reads the bytes it spans
    o.reset_copy_stats()
    same_bits(o.to_numpy(db.view(0, (10, 10), (1, 10))), big[:100].reshape(10, 10).T.copy())
    assert o.copy_stats()["d2d"]["count"] == 0 and o.copy_stats()["d2h"]["bytes"] == 400
    # 5-d permutation through the strided kernel
    p = sample((2, 3, 4, 5, 3), np.int64, seed=2)
    dp = o.from_numpy(p)
    perm = (4, 2, 0, 3, 1)
    view = dp.view(0, tuple(p.shape[k] for k in perm), tuple(dp.strides[k] for k in perm))
    out = o.empty(view.shape, np.int64)
    o.copy_(out, view)
    same_bits(o.to_numpy(out), p.transpose(perm).copy())


@needs_opencl
def test_view_bounds_and_alignment_are_checked():
    d = o.empty((4, 3), np.float32)
    with pytest.raises(RuntimeError, match=r"sizes \[3, 3\], strides \[3, 1\], storage offset 4, and itemsize 4 "
                                           r"requiring a storage size of 52 are out of bounds for storage of size 48"):
        d.view(16, (3, 3), (3, 1))
    with pytest.raises(ValueError, match="multiple of the item size 4"):
        d.view(2, (2,), (1,))
    with pytest.raises(RuntimeError, match="negative dimension"):
        o.empty((2, -1), np.float32)
    with pytest.raises(TypeError, match="can't store NumPy dtype object"):
        o.from_numpy(np.array([object()]))


@needs_opencl
def test_copy_broadcasts_and_refuses_like_torch():
    dst = o.empty((2, 3), np.int32)
    o.copy_(dst, o.from_numpy(np.array([1, 2, 3], np.int32)))
    assert o.to_numpy(dst).tolist() == [[1, 2, 3], [1, 2, 3]]
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of tensor b \(4\) "
                                           r"at non-singleton dimension 1"):
        o.copy_(dst, o.empty((4,), np.int32))
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        o.copy_(o.empty((3,), np.int32), dst)
    expanded = o.empty((1,), np.int32).view(0, (3,), (0,))
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        o.copy_(expanded, o.empty((3,), np.int32))
    with pytest.raises(RuntimeError, match="destination int32, source float32"):
        o.copy_(dst, o.empty((2, 3), np.float32))
    # overlapping source and destination in one block behave like a copy through a temporary
    a = np.arange(10, dtype=np.int16)
    d = o.from_numpy(a)
    o.copy_(d.view(2, (9,), (1,)), d.view(0, (9,), (1,)))
    want = a.copy()
    want[1:] = a[:-1]
    same_bits(o.to_numpy(d), want)


@needs_opencl
def test_non_blocking_upload_and_copy_hooks():
    seen = []
    o.COPY_HOOKS.append(seen.append)
    try:
        o.reset_copy_stats()
        a = np.arange(1000, dtype=np.float64)
        d = o.from_numpy(a, non_blocking=True)
        o.synchronize()
        same_bits(o.to_numpy(d), a)
        o.copy_(o.empty((1000,), np.float64), d)
        o.synchronize()
    finally:
        o.COPY_HOOKS.remove(seen.append)
    assert [(r.direction, r.nbytes) for r in seen] == [("h2d", 8000), ("d2h", 8000), ("d2d", 8000)]
    assert all(r.seconds >= 0 and r.end_ns >= r.start_ns and r.device == 0 for r in seen)
    st = o.copy_stats()
    assert (st["h2d"], st["d2h"], st["d2d"]) == ({"count": 1, "bytes": 8000},) * 3


@needs_opencl
def test_fill_and_arange():
    for dtype, value in [(np.float32, 2.5), (np.int64, -7), (np.bool_, True), (ml_dtypes.bfloat16, 1.5),
                         (np.complex128, 1 - 2j), (np.uint8, 200)]:
        d = o.from_numpy(np.zeros((3, 4), dtype))
        o.fill_(d.view(0, (3, 2), (4, 2)), value)      # strided: every other column
        want = np.zeros((3, 4), dtype)
        want[:, ::2] = value
        same_bits(o.to_numpy(d), want)
        o.fill_(d, value)                               # contiguous: clEnqueueFillBuffer
        same_bits(o.to_numpy(d), np.full((3, 4), value, dtype))
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8 without overflow"):
        o.fill_(o.empty((2,), np.int8), 300)
    same_bits(o.to_numpy(o.arange(6, np.int32, start=-2, step=3)), np.arange(-2, 16, 3, dtype=np.int32))
    same_bits(o.to_numpy(o.arange(5, np.float32, start=0.5, step=0.25)),
              (np.float32(0.5) + np.arange(5, dtype=np.float32) * np.float32(0.25)))


# ---- the caching allocator -----------------------------------------------------------------------------

@needs_opencl
def test_allocator_reuses_blocks_and_counts():
    assert [o._size_class(n) for n in (0, 1, 512, 513, 1 << 20, (1 << 20) + 1)] == \
        [512, 512, 512, 1024, 1 << 20, 2 << 20]
    o.empty_cache()
    base = o.memory_allocated()
    assert o.driver_allocated_memory() == base
    a = o.empty((250,), np.float32)                     # 1000 bytes -> a 1024-byte block
    ptr = a.buffer.int_ptr
    assert o.memory_allocated() == base + 1024
    del a
    assert o.memory_allocated() == base and o.driver_allocated_memory() == base + 1024
    hits = o.memory_stats()["num_cache_hits"]
    b = o.empty((900,), np.uint8)                       # same size class: the same buffer comes back
    assert b.buffer.int_ptr == ptr and o.memory_stats()["num_cache_hits"] == hits + 1
    v = b.view(100, (10,), (2,))
    del b                                               # the view keeps the block alive
    assert o.memory_allocated() == base + 1024
    del v
    assert o.memory_allocated() == base
    frees = o.memory_stats()["num_driver_frees"]
    o.empty_cache()
    assert o.driver_allocated_memory() == base and o.memory_stats()["num_driver_frees"] == frees + 1
    assert ember.opencl.current_allocated_memory() == o.memory_allocated()
    assert ember.opencl.driver_allocated_memory() == o.driver_allocated_memory()
    assert ember.opencl.recommended_max_memory() == o._runtime(0).device.global_mem_size > 0


@needs_opencl
def test_memory_fraction_is_checked_before_the_driver(monkeypatch):
    with pytest.raises(TypeError, match="must be `float`"):
        ember.opencl.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError, match=r"Invalid fraction value: 2.5. Allowed range: 0~2"):
        ember.opencl.set_per_process_memory_fraction(2.5)
    o.empty_cache()
    total = o.recommended_max_memory()
    calls = []
    real = o._create_buffer
    monkeypatch.setattr(o._device_runtime, "_create_buffer", lambda ctx, size: calls.append(size) or real(ctx, size))
    keep = o.empty((1 << 20,), np.uint8)                # 1 MiB held
    held = o.driver_allocated_memory()
    ember.opencl.set_per_process_memory_fraction((held + (11 << 19)) / total)   # room for 5.5 MiB more
    limit = o.memory_stats()["limit_bytes"]
    assert held + (5 << 20) < limit < held + (6 << 20)
    calls.clear()
    with pytest.raises(ember.OutOfMemoryError) as info:
        o.empty((8 << 20,), np.uint8, op="zeros")
    msg = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert "ember op zeros tried to allocate 8.00 MiB (8388608 bytes" in msg
    assert "the per-process limit is" in msg and f"({limit} bytes" in msg
    assert f"({o.memory_allocated()} bytes) is allocated" in msg and "is cached" in msg
    assert calls == [] and o.driver_allocated_memory() == held       # refused before asking the driver
    # cached blocks are released first when they are what stands in the way
    tmp = o.empty((3 << 20,), np.uint8)
    del tmp
    assert o.driver_allocated_memory() == held + (3 << 20)
    ok = o.empty((2 << 20,), np.uint16)                 # 4 MiB: fits once the cached 3 MiB are freed
    assert o.memory_stats()["cached_bytes"] == 0 and ok.nbytes == 4 << 20
    del ok
    ember.opencl.set_per_process_memory_fraction(0.0)   # no limit: the process carries on
    x = o.from_numpy(np.arange(4 << 20, dtype=np.uint8))
    assert o.to_numpy(x)[-1] == 255 and o.to_numpy(x)[257] == 1
    assert keep.size == 1 << 20
    # one buffer above CL_DEVICE_MAX_MEM_ALLOC_SIZE is refused before the driver, too
    calls.clear()
    with pytest.raises(ember.OutOfMemoryError, match="CL_DEVICE_MAX_MEM_ALLOC_SIZE"):
        o.empty((o._runtime(0).max_alloc + 1,), np.uint8)
    assert calls == []


@needs_opencl
def test_driver_failure_empties_the_cache_retries_once_then_raises(monkeypatch):
    cl = o.cl
    real = o._create_buffer
    failures = [0]

    def flaky(ctx, size):
        if failures[0]:
            failures[0] -= 1
            raise cl.MemoryError("MEM_OBJECT_ALLOCATION_FAILURE")
        return real(ctx, size)

    monkeypatch.setattr(o._device_runtime, "_create_buffer", flaky)
    o.empty((5 << 20,), np.uint8)                       # freed at once: something in the cache
    assert o.memory_stats()["cached_bytes"] >= 5 << 20
    retries = o.memory_stats()["num_alloc_retries"]
    failures[0] = 1
    a = o.empty((7 << 20,), np.uint8)                   # a new size class: the driver fails once
    assert o.memory_stats()["num_alloc_retries"] == retries + 1 and o.memory_stats()["cached_bytes"] == 0
    failures[0] = 2
    with pytest.raises(ember.OutOfMemoryError, match=r"ember op add tried to allocate 9.00 MiB .*driver refused"):
        o.empty((9 << 20,), np.uint8, op="add")
    b = o.from_numpy(np.ones(3, np.float32))            # and the process keeps working
    assert o.to_numpy(b).tolist() == [1, 1, 1] and a.size == 7 << 20


# ---- programs ------------------------------------------------------------------------------------------

@needs_opencl
def test_program_cache_on_disk_across_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    source = (f"/* {uuid.uuid4().hex} */\n"
              "__kernel void twice(__global int *x, long off, long n) {\n"
              "  long i = get_global_id(0); if (i < n) x[off + i] *= 2; }\n")
    before = o.build_stats()
    prg = o.build(source)
    st = o.build_stats()
    assert st["source_builds"] == before["source_builds"] + 1 and st["disk_cache"] is None
    files = list((tmp_path / "opencl").glob("*.bin"))
    assert len(files) == 1 and (files[0].stat().st_mode & 0o777) == 0o600
    assert (tmp_path / "opencl").stat().st_mode & 0o777 == 0o700
    assert o.build(source) is prg and o.build_stats()["memory_hits"] == st["memory_hits"] + 1
    d = o.from_numpy(np.arange(8, dtype=np.int32))
    o.launch(prg, "twice", 4, None, [d, 2, 4])
    assert o.to_numpy(d).tolist() == [0, 1, 4, 6, 8, 10, 6, 7]
    # a second process builds nothing: it loads the binary
    out = run_python(f"""
        import json
        from ember.devices import opencl as o
        src = {source!r}
        o.build(src)
        print(json.dumps(o.build_stats()))
    """, {"EMBER_CACHE_DIR": str(tmp_path)})
    child = json.loads(out.strip().splitlines()[-1])
    assert child["source_builds"] == 0 and child["binary_loads"] == 1
    # a corrupt file (checksum) and a file the driver refuses are both rebuilt from source and replaced
    rt = o._runtime(0)
    good = files[0].read_bytes()
    for bad in (good[:-100] + b"x" * 100,
                o._CACHE_MAGIC + __import__("hashlib").sha256(b"junk" * 50).digest() + b"junk" * 50):
        files[0].write_bytes(bad)
        del rt.programs[(source, "")]
        s0 = o.build_stats()
        prg2 = o.build(source)
        s1 = o.build_stats()
        assert s1["rejected_binaries"] == s0["rejected_binaries"] + 1
        assert s1["source_builds"] == s0["source_builds"] + 1 and s1["disk_writes"] == s0["disk_writes"] + 1
        assert o._read_binary(str(files[0])) is not None
        o.launch(prg2, "twice", 8, None, [d, 0, 8])
    assert o.to_numpy(d).tolist() == [0, 4, 16, 24, 32, 40, 24, 28]
    with pytest.raises(RuntimeError, match="building an OpenCL program for opencl:0"):
        o.build("__kernel void broken(__global int *x) { x[0] = undeclared_thing; }")


# ---- events, launches, profiling -----------------------------------------------------------------------

@needs_opencl
def test_events_time_device_work_and_refuse_misuse():
    from ember.events import EventError
    start, end = ember.opencl.Event(enable_timing=True), ember.opencl.Event(enable_timing=True)
    assert start.query()                               # never recorded: nothing to wait for
    with pytest.raises(RuntimeError, match="Both events must be recorded before calculating elapsed time."):
        start.elapsed_time(end)
    d = o.from_numpy(np.zeros(1 << 20, np.float32))
    start.record()
    for _ in range(5):
        o.fill_(d, 1.0)
    end.record()
    end.synchronize()
    assert end.query() and start.query()
    ms = start.elapsed_time(end)
    assert 0.0 <= ms < 60_000
    end.wait()
    plain = ember.opencl.Event()
    plain.record()
    with pytest.raises(EventError, match=r"Both events must be created with argument 'enable_timing=True'."):
        plain.elapsed_time(end)
    with pytest.raises(TypeError, match="must be Event"):
        start.elapsed_time(3)


@needs_opencl
def test_ten_thousand_event_pairs_finish():
    results = []

    def loop():
        s, e = ember.opencl.Event(enable_timing=True), ember.opencl.Event(enable_timing=True)
        for _ in range(10_000):
            s.record()
            e.record()
            results.append(s.elapsed_time(e))

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    t.join(timeout=180)
    assert not t.is_alive(), "10,000 record/elapsed_time pairs did not finish"
    assert len(results) == 10_000 and min(results) >= 0.0


@needs_opencl
def test_launch_kernel_hooks_and_profiler():
    prg = o.build("__kernel void axpy(__global float *y, long yoff, __global const float *x, long xoff, "
                  "float a, long n) { long i = get_global_id(0); if (i < n) y[yoff + i] += a * x[xoff + i]; }")
    x = o.from_numpy(np.arange(10, dtype=np.float32))
    y = o.from_numpy(np.ones(10, np.float32))
    with pytest.raises(TypeError, match="pass a DeviceArray"):
        o.launch(prg, "axpy", 5, None, [y, 0, x, 0, 2.0, 5])
    with ember.opencl.profiler.profile():
        o.launch(prg, "axpy", 5, None, [y, 5, x, 0, np.float32(2.0), 5])
        assert o.launch(prg, "axpy", 0, None, [y, 0, x, 0, np.float32(2.0), 0]) is None
        got = o.to_numpy(y)
    assert got.tolist() == [1] * 5 + [1, 3, 5, 7, 9]
    recs = ember.opencl.profiler.records()
    kernels = [r for r in recs if isinstance(r, o.KernelRecord)]
    copies = [r for r in recs if isinstance(r, o.CopyRecord)]
    assert [k.name for k in kernels] == ["axpy"] and kernels[0].end_ns >= kernels[0].start_ns > 0
    assert [(c.direction, c.nbytes) for c in copies] == [("d2h", 40)]
    assert not o.KERNEL_HOOKS and not o.COPY_HOOKS and not ember.opencl.profiler.is_profiling()
    ember.opencl.profiler.clear()
    with pytest.raises(ValueError, match="Invalid profiler mode"):
        ember.opencl.profiler.start("sometimes")


# ---- ember.opencl, random state, fallbacks -------------------------------------------------------------

@needs_opencl
def test_ember_opencl_functions():
    assert ember.opencl.is_available() and ember.opencl.device_count() == o.device_count() >= 1
    assert ember.opencl.get_device_name(0) == o._enumerate()[0][1].name.strip()
    with pytest.raises(RuntimeError, match="invalid device index"):
        ember.opencl.get_device_name(o.device_count())
    ember.opencl.synchronize()
    ember.opencl.empty_cache()
    ember.opencl.manual_seed(1234)
    s1 = ember.opencl.get_rng_state()
    assert o.default_generator(0).initial_seed() == 1234
    ember.opencl.seed()
    assert o.default_generator(0).initial_seed() != 1234
    ember.opencl.set_rng_state(s1)
    assert o.default_generator(0).initial_seed() == 1234
    assert bytes(ember.opencl.get_rng_state()._data) == bytes(s1._data)


def test_fallback_counters_warn_once_and_strict_mode(monkeypatch):
    o.reset_fallback_counts()
    o._FALLBACK_WARNED.discard("aten::foo_test")
    with pytest.warns(UserWarning, match=r"The operator 'aten::foo_test' is not currently supported on the "
                                         r"OpenCL device opencl:0.* \(no kernel\) and will fall back"):
        o.record_fallback("aten::foo_test", "no kernel")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        o.record_fallback("aten::foo_test", "no kernel")      # warned once per op
    assert ember.opencl.fallback_counts() == {"aten::foo_test": 2}
    o.set_fallback_allowed(False)
    with pytest.raises(NotImplementedError, match=r"'aten::bar_test' is not currently implemented for the "
                                                  r"OpenCL device opencl:0"):
        o.record_fallback("aten::bar_test")
    assert "aten::bar_test" not in o.fallback_counts()
    o.set_fallback_allowed(None)
    monkeypatch.setenv("EMBER_OPENCL_FALLBACK", "0")
    with pytest.raises(NotImplementedError, match="EMBER_OPENCL_FALLBACK=0"):
        o.record_fallback("aten::foo_test")
    monkeypatch.setenv("EMBER_OPENCL_FALLBACK", "1")
    o.record_fallback("aten::foo_test")
    assert o.fallback_counts() == {"aten::foo_test": 3}
    ember.opencl.reset_fallback_counts()
    assert ember.opencl.fallback_counts() == {}
