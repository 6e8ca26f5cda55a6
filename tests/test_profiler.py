"""ember.profiler: op/backward/user events, nesting, tables, Chrome traces, schedules, device/compiler
event API, and that nothing is recorded (or hooked) when the profiler is off."""
import json
import threading
import time

import pytest

import ember
from ember.autograd import engine
from ember.ops import registry
from ember.profiler import (profile, record_function, record_event, record_range, record_copy, record_fallback,
                            ProfilerActivity, ProfilerAction, schedule)


def _by_name(prof, name):
    return [e for e in prof.events() if e.name == name]


def test_ops_are_recorded_with_shapes_and_dtypes():
    x = ember.ones(4, 3, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        y = (x * 2 + 1).sum()
    mul, = _by_name(prof, "ember::mul")
    assert mul.kind == "op" and not mul.is_backward
    assert mul.input_shapes == [[4, 3], []]
    assert mul.input_dtypes == ["float", "Scalar"]
    assert mul.cpu_time_total >= mul.self_cpu_time_total >= 0
    add, = _by_name(prof, "ember::add")
    s, = _by_name(prof, "ember::sum")
    # forward ops carry the sequence number of the node they made, in creation order
    assert 0 <= mul.sequence_nr < add.sequence_nr < s.sequence_nr
    assert s.sequence_nr == y.grad_fn.seq
    assert mul.time_range.start <= add.time_range.start


def test_shapes_are_not_recorded_unless_asked():
    with profile() as prof:
        ember.ones(2, 2) + 1
    add, = _by_name(prof, "ember::add")
    assert add.input_shapes == []
    with pytest.raises(RuntimeError, match="record_shapes"):
        prof.key_averages(group_by_input_shape=True)


def test_backward_nodes_nest_and_link_to_forward():
    x = ember.ones(4, 3, requires_grad=True)
    with profile(record_shapes=True) as prof:
        y = (x * x).sum()
        y.backward()
    fwd, = [e for e in prof.events() if e.name == "ember::mul" and not e.is_backward]
    outer, = _by_name(prof, "autograd::engine::evaluate_function: MulBackward0")
    inner, = _by_name(prof, "MulBackward0")
    assert outer.kind == inner.kind == "backward"
    assert outer.is_backward and inner.is_backward
    assert inner.cpu_parent is outer
    assert outer.sequence_nr == inner.sequence_nr == fwd.sequence_nr
    # the derivative's own ops run inside the node and are marked as backward
    bw_ops = inner.cpu_children
    assert bw_ops and all(c.name.startswith("ember::") and c.is_backward for c in bw_ops)
    assert any(c.name == "ember::mul" for c in bw_ops)
    for c in bw_ops:
        assert inner.start_ns <= c.start_ns <= c.end_ns <= inner.end_ns
    assert _by_name(prof, "autograd::engine::evaluate_function: SumBackward0")


def test_record_function_nesting_and_decorator():
    @record_function("helper")
    def helper(n):
        r = ember.ones(3) * n
        return helper(n - 1) if n > 1 else r

    with profile() as prof:
        with record_function("outer"):
            with record_function("inner"):
                ember.ones(2) + 1
            helper(2)
    outer, = _by_name(prof, "outer")
    inner, = _by_name(prof, "inner")
    helpers = _by_name(prof, "helper")
    assert outer.kind == inner.kind == "user" and outer.is_user_annotation
    assert inner.cpu_parent is outer
    assert len(helpers) == 2
    assert helpers[0].cpu_parent is outer and helpers[1].cpu_parent is helpers[0]     # recursion nests
    add, = _by_name(prof, "ember::add")
    assert add.cpu_parent is inner
    assert outer.cpu_time_total >= inner.cpu_time_total + sum(h.cpu_time_total for h in helpers[:1]) - 1e-3
    # self time excludes children
    assert abs(outer.self_cpu_time_total
               - (outer.cpu_time_total - sum(c.cpu_time_total for c in outer.cpu_children))) < 1e-6


def test_nothing_recorded_or_hooked_when_off():
    assert registry.HOOKS == [] and engine.NODE_HOOKS == []
    with record_function("no profiler"):          # a no-op
        ember.ones(2) * 3
    assert record_event("compile", "compile::capture") is None
    with record_range("kernel", "kernel::k") as ev:
        assert ev is None
    assert not ember.profiler.is_enabled()
    with profile() as prof:
        assert registry.HOOKS and engine.NODE_HOOKS
        assert ember.profiler.is_enabled()
        ember.ones(2) + 1
    n = len(prof.events())
    assert registry.HOOKS == [] and engine.NODE_HOOKS == []
    x = ember.ones(2, requires_grad=True)
    (x * 2).sum().backward()
    with record_function("after"):
        pass
    assert len(prof.events()) == n


def test_key_averages_table_like_torch():
    x = ember.ones(8, 8, requires_grad=True)
    with profile(record_shapes=True, profile_memory=True) as prof:
        for _ in range(3):
            (x @ x).relu().sum().backward()
    ka = prof.key_averages()
    mm = [r for r in ka if r.key == "ember::mm" or r.key == "ember::matmul"]
    assert mm and mm[0].count >= 3
    table = ka.table(sort_by="self_cpu_time_total", row_limit=20)
    for col in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "CPU Mem",
                "Self CPU Mem", "# of Calls"):
        assert col in table
    assert "Self CPU time total:" in table
    rows = [ln for ln in table.splitlines() if ln.strip().startswith(("ember::", "autograd::", "[memory]"))
            or "Backward0" in ln]
    assert 0 < len(rows) <= 20
    # sorted by self CPU time, largest first
    sorted_rows = sorted(ka, key=lambda r: r.self_cpu_time_total, reverse=True)
    first_row = table.splitlines()[3]
    assert sorted_rows[0].key[:40] in first_row
    shaped = prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total", row_limit=5)
    assert "Input Shapes" in shaped and "[[8, 8], [8, 8]]" in prof.key_averages(
        group_by_input_shape=True).table(row_limit=100)
    assert len(prof.key_averages().table(row_limit=2).splitlines()) == 3 + 2 + 2
    with pytest.raises(ValueError, match="sort_by"):
        ka.table(sort_by="bogus")
    assert str(ka).startswith("---")
    tot = prof.events().total_average()
    assert tot.count == len(prof.events())


def test_profile_memory_counts_bytes_per_op():
    a = ember.ones(1000)
    with profile(profile_memory=True) as prof:
        b = a * 2                      # one new float32 storage: 4000 bytes
    mul, = _by_name(prof, "ember::mul")
    assert mul.cpu_memory_usage == 4000
    mems = [e for e in prof.events() if e.name == "[memory]"]
    assert any(e.fields["Bytes"] == 4000 for e in mems)
    assert not ember.memory.is_tracking()          # counting stops with the profiler
    del b


def test_chrome_trace_is_valid_and_nested(tmp_path):
    x = ember.ones(16, 16, requires_grad=True)

    def work():
        with record_function("thread-work"):
            (x * 3).sum()

    with profile(record_shapes=True) as prof:
        with record_function("main-step"):
            y = (x * x + 1).sum()
            y.backward()
        t = threading.Thread(target=work, name="worker")
        t.start()
        t.join()
        record_copy(4096, "HtoD", device="opencl:0", duration_us=5.0)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    evs = doc["traceEvents"]
    assert isinstance(evs, list) and evs
    complete = [e for e in evs if e["ph"] == "X"]
    assert complete
    for e in complete:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "cat"} <= set(e)
        assert e["dur"] >= 0
    tids = {e["tid"] for e in complete}
    assert len(tids) == 2                                          # one track per thread
    names = {e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    assert any("worker" in n for n in names)
    # ranges on one thread are either disjoint or properly contained
    eps = 1e-6
    for tid in tids:
        spans = sorted(((e["ts"], e["ts"] + e["dur"], e["name"]) for e in complete if e["tid"] == tid),
                       key=lambda s: (s[0], -s[1]))
        stack = []
        for s, end, name in spans:
            while stack and s >= stack[-1][1] - eps and not (s < stack[-1][1] - eps):
                stack.pop()
            if stack:
                assert end <= stack[-1][1] + eps, (name, stack[-1][2])
            stack.append((s, end, name))
    main_step = next(e for e in complete if e["name"] == "main-step")
    mul = next(e for e in complete if e["name"] == "ember::mul" and e["tid"] == main_step["tid"])
    assert main_step["ts"] <= mul["ts"] and mul["ts"] + mul["dur"] <= main_step["ts"] + main_step["dur"] + eps
    assert mul["args"]["Input Dims"] == [[16, 16], [16, 16]]
    assert "Sequence number" in mul["args"]
    flows = [e for e in evs if e.get("cat") == "fwdbwd"]
    assert {e["ph"] for e in flows} == {"s", "f"}
    copy = next(e for e in complete if e["name"].startswith("Memcpy HtoD"))
    assert copy["args"]["bytes"] == 4096 and copy["cat"] == "gpu_memcpy"
    assert abs(copy["dur"] - 5.0) < 1e-3
    import gzip
    gz = tmp_path / "trace.json.gz"
    prof.export_chrome_trace(str(gz))
    assert json.loads(gzip.open(gz, "rt").read())["traceEvents"] == evs


def test_device_and_compiler_event_api():
    with profile() as prof:
        with record_range("compile", "compile::capture", graph="g1") as ev:
            ev.fields["nodes"] = 12
            ember.ones(2) + 1
        record_event("compile", "compile::codegen", duration_us=30.0, lines=200)
        time.sleep(0.003)                       # the C compiler "runs" (timed by the caller)
        record_event("compile", "compile::cc", duration_us=1500.0, compiler="cc")
        record_event("compile", "compile::cache_miss", key="abc")
        for _ in range(3):
            record_event("compile", "compile::cache_hit", key="abc")
        with record_range("kernel", "kernel::fused_add_relu", device="cpu", numel=4):
            pass
        record_copy(1024, "HtoD", device="opencl:0")
        record_copy(512, "DtoH", device="opencl:0", duration_us=2.0)
        record_fallback("cumsum", "no OpenCL kernel for int64", device="opencl:0")
    cap, = _by_name(prof, "compile::capture")
    assert cap.kind == "compile" and cap.fields == {"graph": "g1", "nodes": 12}
    assert _by_name(prof, "ember::add")[0].cpu_parent is cap
    cc, = _by_name(prof, "compile::cc")
    assert abs(cc.cpu_time_total - 1500.0) < 1.0 and cc.fields["compiler"] == "cc"
    codegen, = _by_name(prof, "compile::codegen")
    # a reported duration never overlaps the previous event (the trace stays nested)
    assert codegen.start_ns >= cap.end_ns and codegen.fields["duration_us"] == 30.0
    assert cc.start_ns >= codegen.end_ns
    hit = [r for r in prof.key_averages() if r.key == "compile::cache_hit"][0]
    assert hit.count == 3
    kern, = _by_name(prof, "kernel::fused_add_relu")
    assert kern.kind == "kernel" and kern.fields["numel"] == 4
    h2d, = [e for e in prof.events() if e.kind == "memcpy" and e.fields["direction"] == "HtoD"]
    assert h2d.name == "Memcpy HtoD (Host -> Device)" and h2d.fields["bytes"] == 1024
    assert h2d.instant
    d2h, = [e for e in prof.events() if e.kind == "memcpy" and e.fields["direction"] == "DtoH"]
    assert not d2h.instant and d2h.fields["bytes"] == 512
    fb, = [e for e in prof.events() if e.kind == "fallback"]
    assert fb.name == "fallback::cumsum" and fb.fields["reason"] == "no OpenCL kernel for int64"
    assert fb.fields["op"] == "cumsum" and fb.fields["device"] == "opencl:0"
    with pytest.raises(ValueError, match="direction"):
        record_copy(1, "sideways")
    with pytest.raises(ValueError, match="kind"):
        record_range("bogus", "x")


def test_start_stop_and_single_active_profiler():
    prof = ember.profiler.start(record_shapes=True)
    try:
        ember.ones(3) * 2
        with pytest.raises(RuntimeError, match="already running"):
            profile().start()
    finally:
        got = ember.profiler.stop()
    assert got is prof
    assert _by_name(prof, "ember::mul")
    with pytest.raises(RuntimeError, match="no profiler"):
        ember.profiler.stop()


@pytest.mark.filterwarnings("ignore:Profiler won.t be using warmup")
def test_schedule_matches_torch():
    torch = pytest.importorskip("torch")
    configs = [dict(wait=1, warmup=1, active=2), dict(wait=2, warmup=0, active=1, repeat=2),
               dict(wait=1, warmup=2, active=3, repeat=1, skip_first=2),
               dict(wait=2, warmup=1, active=2, repeat=2, skip_first_wait=1)]
    for cfg in configs:
        mine = schedule(**cfg)
        ref = torch.profiler.schedule(**cfg)
        assert [mine(i).name for i in range(20)] == [ref(i).name for i in range(20)], cfg


def test_schedule_step_and_on_trace_ready():
    traces = []

    def ready(p):
        traces.append([e.name for e in p.events()])

    x = ember.ones(2)
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=1), on_trace_ready=ready) as prof:
        for i in range(6):
            with record_function(f"iter{i}"):
                x * 2
            prof.step()
    assert len(traces) == 1
    names = traces[0]
    assert "ProfilerStep#2" in names and "ProfilerStep#3" in names
    assert "iter2" in names and "iter3" in names
    assert not any(n in names for n in ("iter0", "iter1", "iter4", "iter5"))
    assert prof.current_action == ProfilerAction.NONE


def test_on_trace_ready_without_schedule_runs_at_exit():
    seen = []
    with profile(on_trace_ready=lambda p: seen.append(len(p.events()))):
        ember.ones(2) + 1
    assert seen and seen[0] >= 1


def test_with_stack_and_group_by_stack():
    with profile(with_stack=True) as prof:
        ember.ones(2) + 1
    add, = _by_name(prof, "ember::add")
    assert add.stack and "test_profiler.py" in add.stack[0]
    table = prof.key_averages(group_by_stack_n=2).table(row_limit=5)
    assert "Source Location" in table and "test_profiler.py" in table


def test_unsupported_activity_warns():
    with pytest.warns(UserWarning, match="CUDA"):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            pass
    from ember.devices import opencl
    device = {ProfilerActivity.PrivateUse1} if opencl.is_available() else set()
    assert ember.profiler.supported_activities() == {ProfilerActivity.CPU} | device


def test_stop_inside_a_range_closes_it_once():
    prof = ember.profiler.start()
    rf = record_function("open-at-stop")
    rf.__enter__()
    ember.ones(2) * 2
    ember.profiler.stop()
    rf.__exit__(None, None, None)          # leaving the block later does not stretch the event
    ev, = _by_name(prof, "open-at-stop")
    mul, = _by_name(prof, "ember::mul")
    assert mul.cpu_parent is ev and ev.end_ns >= mul.end_ns
    end = ev.end_ns
    ember.ones(2) * 2
    assert ev.end_ns == end and len(_by_name(prof, "ember::mul")) == 1


def test_completed_cycle_survives_exit_in_idle_phase():
    with profile(schedule=schedule(wait=0, warmup=0, active=1, repeat=1)) as prof:
        for _ in range(3):
            ember.ones(2) + 1
            prof.step()
    assert [e.name for e in prof.events() if e.kind == "op"] == ["ember::add"]
