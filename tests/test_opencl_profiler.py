"""The OpenCL device in ember.profiler (kernels, copies and CPU fallbacks as events, tables and trace
tracks), in ember.opencl.profiler, and device events (ember.opencl.Event, ember.Event("opencl"))."""
import json
import time
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.devices import opencl as ocl
from ember.profiler import profile, ProfilerActivity
from ember.profiler import trace as T

from device_support import needs_opencl, _quiet_fallback_warnings  # noqa: E402,F401 - autouse fixture

pytestmark = needs_opencl


def _no_hooks():
    return not (ocl.KERNEL_HOOKS or ocl.COPY_HOOKS or ocl.FALLBACK_HOOKS)


def _model_step(model, opt, x, y):
    xd, yd = x.to("opencl"), y.to("opencl")
    loss = F.cross_entropy(model(xd), yd)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return xd, loss.cpu()


def _setup():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5)).to("opencl")
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    x, y = ember.randn(8, 12), ember.randint(0, 5, (8,))
    _model_step(model, opt, x, y)            # builds (or loads) the kernels outside the profile
    ember.randn(3, 4, device="opencl").mode(dim=1)
    return model, opt, x, y


@pytest.mark.parametrize("slow", ["enqueue_fill_buffer", "enqueue_nd_range_kernel"])
def test_device_events_stay_inside_the_profile_when_the_host_stalls_after_an_enqueue(monkeypatch, slow):
    """The host clock read for a command must come before its enqueue: a thread that is descheduled
    right after enqueuing (a loaded machine) must not shift the device clock's offset, and with it
    every later device event, past the end of the profile. Each enqueue here stalls 20 ms after it
    returns (fills and strided copies are the enqueues whose clock reading came after)."""
    from ember.devices.opencl import _copies
    real = getattr(_copies.cl, slow)

    def stalled(*a, **k):
        evt = real(*a, **k)
        time.sleep(0.02)
        return evt
    d = ocl.empty((64, 64), np.float32, 0)
    ocl.fill_(d, 1.0)
    ocl.copy_(ocl.empty((64, 32), np.float32, 0), d.view(d.offset, (64, 32), (64, 1)))   # strided
    ocl.synchronize()
    monkeypatch.setattr(_copies.cl, slow, stalled)
    t0 = time.perf_counter_ns()
    with profile() as prof:
        ocl.fill_(d, 2.0)
        ocl.copy_(ocl.empty((64, 32), np.float32, 0), d.view(d.offset, (64, 32), (64, 1)))
        monkeypatch.setattr(_copies.cl, slow, real)
        y = ember.ones(256, device="opencl") * 3.0
        y.cpu()
    t1 = time.perf_counter_ns()
    evs = [e for e in prof.events() if e.kind in ("kernel", "memcpy")]
    assert any(e.name in ("ember_fill", "ember_copy_4") for e in evs), [e.name for e in evs]
    for e in evs:
        assert t0 <= e.launch_ns <= e.start_ns < e.end_ns <= t1, e.name


def test_profile_records_kernels_copies_and_fallbacks(tmp_path):
    model, opt, x, y = _setup()
    assert _no_hooks()
    t0 = time.perf_counter_ns()
    with profile(record_shapes=True) as prof:
        assert ocl.KERNEL_HOOKS and ocl.COPY_HOOKS and ocl.FALLBACK_HOOKS
        xd, loss = _model_step(model, opt, x, y)
        s = xd.mode(dim=1)                  # no device kernel: a counted CPU fallback
        got = s.values.cpu()
    t1 = time.perf_counter_ns()
    assert _no_hooks()                        # installed only while profiling
    np.testing.assert_array_equal(got.numpy(), np.sort(x.numpy(), axis=1)[:, 0])     # (each value once: the smallest)
    evs = prof.events()

    kernels = [e for e in evs if e.kind == "kernel"]
    assert kernels and all(e.device_type == "OpenCL" and e.device_index == 0 for e in kernels)
    names = {e.name for e in kernels}
    assert "eager_relu" in names and any(n.startswith(("eager_linear", "eager_matmul", "eager_addmm"))
                                         for n in names), names
    for e in kernels:
        assert e.end_ns > e.start_ns >= e.launch_ns >= t0          # positive, after its enqueue
        assert e.end_ns <= t1 and e.cpu_time_total == 0.0
        assert e.device_time_total == e.self_device_time_total == pytest.approx(e.duration_ns / 1e3)
    # the device runs its commands in order: its kernels do not overlap on the profiler's clock
    ks = sorted(kernels, key=lambda e: e.start_ns)
    assert all(a.end_ns <= b.start_ns + 1000 for a, b in zip(ks, ks[1:]))

    copies = [e for e in evs if e.kind == "memcpy"]
    h2d = [e for e in copies if e.fields["direction"] == "HtoD"]
    d2h = [e for e in copies if e.fields["direction"] == "DtoH"]
    assert h2d[0].name == "Memcpy HtoD (Host -> Device)" and h2d[0].fields["bytes"] == x.numpy().nbytes
    assert any(e.fields["bytes"] == got.numpy().nbytes for e in d2h)       # .cpu() of the running maxima
    assert any(e.fields["bytes"] == 4 for e in d2h)                        # loss.cpu()
    assert all(e.end_ns >= e.start_ns >= e.launch_ns and e.device_type == "OpenCL" for e in copies)
    # a fallback copies its inputs to the host and its results back
    assert sum(e.fields["bytes"] for e in d2h) >= x.numpy().nbytes

    fb, = [e for e in evs if e.name == "fallback::mode"]
    assert fb.kind == "fallback" and fb.fields["op"] == "mode" and fb.fields["device"] == "opencl:0"
    assert "no device kernel" in fb.fields["reason"]
    assert fb.cpu_parent is not None and fb.cpu_parent.name == "ember::mode"
    # the optimizer step is a device program of its own (no fallback)
    assert not any(e.name.startswith("fallback::SGD") for e in evs)
    assert any(n.startswith("optimizer_step") for n in names), names

    # device work is linked to the CPU op that enqueued it: ops get device time
    relu, = [e for e in evs if e.name == "ember::relu"]
    assert [k.name for k in relu.kernels] == ["eager_relu"]
    assert relu.self_device_time_total == pytest.approx(relu.kernels[0].duration_ns / 1e3)
    step_total = sum(e.device_time_total for e in evs if e.device_type == "CPU" and e.cpu_parent is None)
    linked = sum(k.duration_ns for e in evs for k in e.kernels) / 1e3
    assert step_total == pytest.approx(linked) and linked > 0

    rows = {r.key: r for r in prof.key_averages()}
    r = rows["eager_relu"]
    assert r.count == 1 and r.device_type == "OpenCL" and r.cpu_time_total == 0 and r.device_time_total > 0
    assert rows["ember::relu"].device_time_total == pytest.approx(r.device_time_total)
    hrow = rows["Memcpy HtoD (Host -> Device)"]
    assert hrow.count == len(h2d) and hrow.fields["bytes"] == sum(e.fields["bytes"] for e in h2d)
    assert rows["fallback::mode"].count == 1
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=50)
    for col in ("Self OPENCL", "Self OPENCL %", "OPENCL total", "OPENCL time avg", "Self OPENCL time total"):
        assert col in table
    assert "eager_relu" in table and "Memcpy DtoH" in table

    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    te = doc["traceEvents"]
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in te if e.get("name") == "thread_name"}
    dpid = T.DEVICE_PID_BASE
    assert tracks[(dpid, 1)] == "opencl:0 kernels" and tracks[(dpid, 2)] == "opencl:0 copies"
    doc_pid = te[0]["pid"]
    assert tracks[(doc_pid, T.FALLBACK_TID)] == "fallbacks"
    assert any(e.get("name") == "process_name" and e["pid"] == dpid and e["args"]["name"] == "opencl:0" for e in te)
    on = {}
    for e in te:
        if e.get("ph") in ("X", "i"):
            on.setdefault((e["pid"], e["tid"]), []).append(e)
    assert {e["name"] for e in on[(dpid, 1)]} == names
    assert all(e["ph"] == "X" and e["dur"] > 0 and e["cat"] == "kernel" for e in on[(dpid, 1)])
    assert {e["args"]["direction"] for e in on[(dpid, 2)]} >= {"HtoD", "DtoH"}
    assert [e["name"] for e in on[(doc_pid, T.FALLBACK_TID)] if e["name"] == "fallback::mode"] == ["fallback::mode"]
    relu_x, = [e for e in on[(dpid, 1)] if e["name"] == "eager_relu"]
    starts = [e for e in te if e.get("cat") == "ac2g" and e["ph"] == "s"]
    finish = [e for e in te if e.get("cat") == "ac2g" and e["ph"] == "f"]
    assert len(starts) == len(finish) >= len(kernels)
    f_relu, = [e for e in finish if e["pid"] == dpid and e["ts"] == relu_x["ts"] and e["tid"] == 1]
    s_relu, = [e for e in starts if e["id"] == f_relu["id"]]
    assert s_relu["pid"] == doc_pid and s_relu["ts"] <= f_relu["ts"]
    del xd, s


def test_cpu_activity_only_records_no_device_work():
    model, opt, x, y = _setup()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        assert _no_hooks()
        _model_step(model, opt, x, y)
    evs = prof.events()
    assert evs and all(e.device_type == "CPU" for e in evs)
    assert not any(e.kind in ("kernel", "memcpy", "fallback") for e in evs)
    assert "OPENCL" not in prof.key_averages().table()
    assert ProfilerActivity.PrivateUse1 in ember.profiler.supported_activities()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
            pass


def test_opencl_profiler_next_to_ember_profiler():
    model, opt, x, y = _setup()
    ember.opencl.profiler.clear()
    with profile() as prof:
        with ember.opencl.profiler.profile():
            a = ember.ones(5, 7, device="opencl")
            b = (a * 3).mode(dim=1).values
            host = b.cpu()
        assert not ember.opencl.profiler.is_profiling() and ocl.KERNEL_HOOKS   # ember.profiler still listens
    assert _no_hooks()
    assert host.numpy().tolist() == [3.0] * 5
    recs = ember.opencl.profiler.records()
    kinds = {type(r).__name__ for r in recs}
    assert kinds == {"KernelRecord", "CopyRecord", "FallbackRecord"}
    fb, = [r for r in recs if isinstance(r, ocl.FallbackRecord)]
    assert fb.op == "mode" and fb.device == 0 and "no device kernel" in fb.reason
    kr = [r for r in recs if isinstance(r, ocl.KernelRecord)]
    ke = [e for e in prof.events() if e.kind == "kernel"]
    assert [r.name for r in kr] == [e.name for e in sorted(ke, key=lambda e: e.start_ns)]
    # the same commands, the same device durations
    assert [r.end_ns - r.start_ns for r in kr] == [e.duration_ns for e in sorted(ke, key=lambda e: e.start_ns)]
    ember.opencl.profiler.clear()


def test_records_of_work_queued_before_the_profile_are_not_its_own():
    a = ember.ones(64, 64, device="opencl")
    with ember.opencl.profiler.profile():
        b = a + 1                              # pending when the ember profile starts
        with profile() as prof:
            c = b * 2
        ember.opencl.synchronize()
    names = [e.name for e in prof.events() if e.kind == "kernel"]
    assert names == ["eager_mul"]
    assert [r.name for r in ember.opencl.profiler.records() if isinstance(r, ocl.KernelRecord)] == \
        ["eager_add", "eager_mul"]
    ember.opencl.profiler.clear()
    del a, b, c


# ---- events ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda: ember.opencl.Event(enable_timing=True),
                                  lambda: ember.Event("opencl", enable_timing=True)],
                         ids=["ember.opencl.Event", "ember.Event"])
def test_event_times_a_device_matmul(make):
    a = ember.randn(128, 128, device="opencl")
    (a @ a).cpu()                              # kernel built
    start, end = make(), make()
    with profile() as prof:
        ember.opencl.synchronize()
        t0 = time.perf_counter()
        start.record()
        c = a @ a
        end.record()
        end.synchronize()
        wall_ms = (time.perf_counter() - t0) * 1e3
    assert end.query() and start.query()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and 0.0 < ms <= wall_ms
    kernel_ms = sum(e.duration_ns for e in prof.events() if e.kind == "kernel") / 1e6
    assert kernel_ms > 0 and ms >= 0.9 * kernel_ms           # the markers enclose the matmul's kernel
    np.testing.assert_allclose(c.cpu().numpy(), a.cpu().numpy() @ a.cpu().numpy(), rtol=1e-4, atol=1e-3)


def test_ember_event_on_the_device():
    e = ember.Event(device="opencl", enable_timing=True)
    assert e.device == ember.device("opencl") and e.query()         # never recorded: done, as in torch
    with pytest.raises(RuntimeError, match="Both events must be recorded"):
        e.elapsed_time(ember.Event("opencl", enable_timing=True))
    cpu = ember.Event(enable_timing=True)
    e.record()
    cpu.record()
    with pytest.raises(RuntimeError, match="different devices"):
        e.elapsed_time(cpu)
    no_timing = ember.Event("opencl")
    no_timing.record()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        e.elapsed_time(no_timing)
    e.synchronize()
    e.wait()
    assert ember.synchronize("opencl") is None and ember.synchronize("opencl:0") is None


@pytest.mark.parametrize("make", [lambda: ember.opencl.Event(enable_timing=True),
                                  lambda: ember.Event("opencl", enable_timing=True)],
                         ids=["ember.opencl.Event", "ember.Event"])
def test_ten_thousand_record_elapsed_pairs_finish(make):
    start, end = make(), make()
    t0 = time.perf_counter()
    total = 0.0
    for _ in range(10_000):
        start.record()
        end.record()
        ms = start.elapsed_time(end)
        assert ms >= 0.0
        total += ms
    assert time.perf_counter() - t0 < 120.0       # a hang (or a leak of markers) would not finish
    assert total < 10_000                          # empty intervals: well under a millisecond each
