"""Cold compiles: one trace for a training step's first and later calls, libraries built from several
translation units at once, builds that wait per key (not on one process-wide lock), and graph libraries
calling ember's GEMM in its own library (issue 16 item 5). Speed is measured in
``python -m ember.bench compile``; these tests check the behaviour and the results."""
import ctypes
import json
import os
import stat
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.compiler import build, counters, gemm, shared_gemm, units
from compile_support import _reset, cache  # noqa: F401  (fresh compiler state; a private cache per test)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- one trace serves the first and the later steps -----------------------------------------------------

def _step_fn(loss_of, zero_grad="optimizer"):
    """A training step: clear the gradients (through the optimizer, the module, or not at all), the
    loss, backward, the update; returns the loss."""
    def step(model, opt, x, y):
        if zero_grad == "optimizer":
            opt.zero_grad()
        elif zero_grad == "module":
            model.zero_grad()
        loss = loss_of(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def _train(opt_name, compiled, steps=4, zero_grad="optimizer"):
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    opt = (ember.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1) if opt_name == "AdamW" else
           ember.optim.Adam(m.parameters(), lr=1e-2, amsgrad=True))
    x, y = ember.randn(10, 6), ember.randn(10, 3)

    step = _step_fn(lambda out, y: ((out - y) ** 2).mean(), zero_grad)
    f = ember.compile(step) if compiled else step
    losses = [float(f(m, opt, x, y)) for _ in range(steps)]
    return losses, [p.detach().numpy().copy() for p in m.parameters()], opt


@pytest.mark.parametrize("opt_name,zero_grad", [("AdamW", "optimizer"), ("Adam", "optimizer"), ("AdamW", "module")])
def test_adam_training_step_is_traced_once(opt_name, zero_grad):
    eager, eager_params, _ = _train(opt_name, False, zero_grad=zero_grad)
    got, params, opt = _train(opt_name, True, zero_grad=zero_grad)
    np.testing.assert_allclose(got, eager, rtol=1e-5)
    for a, b in zip(params, eager_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the state the first step made is the one later steps read and advance
    assert all(float(st["step"]) == 4.0 for st in opt.state.values())
    assert counters["captures"] == 1 and counters["fallbacks"] == 0 and counters["replays"] == 3


def test_step_without_zero_grad_still_accumulates():
    """Without zero_grad the first step finds .grad None and the next ones accumulate: a second trace."""
    eager, eager_params, _ = _train("AdamW", False, zero_grad=None)
    got, params, _ = _train("AdamW", True, zero_grad=None)
    np.testing.assert_allclose(got, eager, rtol=1e-5)
    for a, b in zip(params, eager_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert counters["captures"] == 2


def test_state_cleared_after_tracing_is_remade():
    """The state made outside the trace is guarded: a cleared state retraces (and is made again)."""
    ember.manual_seed(0)
    m = nn.Linear(4, 2)
    opt = ember.optim.Adam(m.parameters(), lr=0.1)
    x = ember.randn(5, 4)

    def step():
        opt.zero_grad()
        m(x).square().sum().backward()
        opt.step()
    f = ember.compile(step)
    f()
    f()
    opt.state.clear()
    f()
    assert counters["captures"] == 2
    assert all(float(st["step"]) == 1.0 for st in opt.state.values())


# ---- libraries from several translation units ----------------------------------------------------------

HIDDEN = '__attribute__((visibility("hidden")))'
UNITS = [f"{HIDDEN} int part1(int);\n{HIDDEN} int part2(int);\nint total(int x) {{ return part1(x) + part2(x); }}\n",
         f"{HIDDEN} int part1(int x) {{ return 10 * x; }}\n",
         f"{HIDDEN} int part2(int x) {{ return x + 7; }}\n"]


def test_units_are_linked_into_one_library(cache):
    lib = build.compile_source(UNITS, name="three")
    assert lib.get("total", [ctypes.c_int], ctypes.c_int)(2) == 29
    with pytest.raises(AttributeError):
        lib.get("part1", [ctypes.c_int], ctypes.c_int)       # hidden: not exported
    with open(lib.path[:-3] + ".json") as f:
        assert json.load(f)["units"] == 3
    with open(lib.source_path) as f:
        kept = f.read()
    assert all(u in kept for u in UNITS)
    assert build.compile_source(UNITS, name="three").key != build.compile_source("".join(UNITS), name="three").key
    build.clear_memory_cache()
    again = build.compile_source(UNITS, name="three")
    assert again.cache_hit and again.get("total", [ctypes.c_int], ctypes.c_int)(1) == 18


def test_failed_unit_is_kept_and_nothing_is_cached(cache):
    bad = UNITS[:2] + [f"{HIDDEN} int part2(int x) {{ return x + no_such_name; }}\n"]
    with pytest.raises(build.CompileError) as info:
        build.compile_source(bad, name="badunit")
    assert "no_such_name" in info.value.stderr
    with open(info.value.source_path) as f:
        assert f.read() == bad[2]           # the unit that failed
    names = os.listdir(cache / "kernels")
    assert not any(n.endswith((".so", ".json")) for n in names)
    assert not any(n.startswith(".build-") for n in names)


def _interval_cc(tmp_path):
    """A CC that logs when each compile of a unit starts and ends (and sleeps in between)."""
    log = tmp_path / "cc.log"
    script = tmp_path / "logcc.sh"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        case "$*" in *--version*) exec cc "$@";; esac
        echo "start $$ $(date +%s.%N)" >> {log}
        sleep 0.6
        cc "$@"; rc=$?
        echo "end $$ $(date +%s.%N)" >> {log}
        exit $rc
    """))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), log


def _overlapping(log) -> bool:
    """Whether two logged compiler runs overlapped in time."""
    ev = [line.split() for line in log.read_text().splitlines()]
    spans = {}
    for kind, pid, t in ev:
        spans.setdefault(pid, {})[kind] = float(t)
    s = sorted((v["start"], v["end"]) for v in spans.values())
    return any(b[0] < a[1] for a, b in zip(s, s[1:]))


def test_units_compile_at_the_same_time(cache, tmp_path, monkeypatch):
    cc, log = _interval_cc(tmp_path)
    monkeypatch.setenv("CC", cc)
    monkeypatch.setenv("EMBER_BUILD_JOBS", "3")
    lib = build.compile_source(UNITS, name="parallel")
    assert lib.get("total", [ctypes.c_int], ctypes.c_int)(3) == 40
    assert _overlapping(log)


def test_threads_build_different_keys_at_the_same_time(cache, tmp_path, monkeypatch):
    cc, log = _interval_cc(tmp_path)
    monkeypatch.setenv("CC", cc)
    out = {}

    def one(k):
        out[k] = build.compile_source(f"int val{k}(void) {{ return {k}; }}\n", name=f"t{k}")
    threads = [threading.Thread(target=one, args=(k,)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [out[k].get(f"val{k}", [], ctypes.c_int)() for k in (1, 2)] == [1, 2]
    assert _overlapping(log)


def test_threads_asking_for_one_key_build_it_once(cache):
    before = build.STATS["compiles"]
    src = "int forty_two(void) { return 42; }\n"
    got = []
    threads = [threading.Thread(target=lambda: got.append(build.compile_source(src, name="once"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(g is got[0] for g in got)
    assert build.STATS["compiles"] == before + 1


CHILD = textwrap.dedent(f"""
    import json, sys, types
    for name, path in (("ember", {os.path.join(ROOT, "ember")!r}),
                       ("ember.compiler", {os.path.join(ROOT, "ember", "compiler")!r})):
        pkg = types.ModuleType(name); pkg.__path__ = [path]; sys.modules[name] = pkg
    import ctypes
    from ember.compiler import build
    lib = build.compile_source(json.loads(sys.stdin.read()), name="shared_units")
    print(json.dumps({{"stats": build.STATS, "value": lib.get("total", [ctypes.c_int], ctypes.c_int)(1)}}))
""")


def test_two_processes_filling_one_cache_with_units_build_once(tmp_path):
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    for p in procs:
        p.stdin.write(json.dumps(UNITS))
        p.stdin.close()
    results = []
    for p in procs:
        out, err = p.stdout.read(), p.stderr.read()
        assert p.wait(timeout=120) == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["value"] == 18 for r in results)
    assert sum(r["stats"]["compiles"] for r in results) == 1
    assert sum(r["stats"]["disk_hits"] for r in results) == 1
    assert not [n for n in os.listdir(tmp_path / "kernels") if n.startswith(".build-")]


# ---- a graph split into units, calling the shared GEMM -------------------------------------------------

def _mlp_step(split_chars, monkeypatch):
    monkeypatch.setattr(units, "UNIT_CHARS", split_chars)
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 96), nn.GELU(), nn.LayerNorm(96), nn.Linear(96, 10))
    opt = ember.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    x, y = ember.randn(64, 64), ember.randint(0, 10, (64,))
    f = ember.compile(_step_fn(nn.functional.cross_entropy))
    losses = [float(f(m, opt, x, y)) for _ in range(4)]
    return f, losses, [p.detach().numpy().copy() for p in m.parameters()]


def _library(f):
    r = f.entries[-1].runner
    assert hasattr(r, "native"), "not compiled natively"
    return r.native


def test_split_graph_gives_the_unsplit_results(monkeypatch):
    f1, losses1, params1 = _mlp_step(10 ** 9, monkeypatch)
    assert isinstance(units.split(_library(f1).source), str)        # one unit
    ember.compiler.reset()
    f2, losses2, params2 = _mlp_step(split_chars=300, monkeypatch=monkeypatch)
    n = units.split(_library(f2).source)
    assert isinstance(n, list) and 2 <= len(n) <= units.MAX_UNITS
    with open(_library(f2).lib.path[:-3] + ".json") as f:
        assert json.load(f)["units"] == len(n)
    assert losses1 == losses2            # the same code in other units: bit for bit
    for a, b in zip(params1, params2):
        np.testing.assert_array_equal(a, b)


def test_split_keeps_every_kernel_once():
    head = "/* head */\nstatic inline int h(int x) { return x; }\n" + units.HEAD_END
    kernels = [f"static void kern{i}(void **bufs, float *restrict p0) {{\n  p0[{i}] = {'1.0f + ' * 400}{i};\n}}"
               for i in range(6)]
    src = head + "\n" + "\n\n".join(kernels) + "\n\nvoid f_seg0(void **bufs) {\n" + "".join(
        f"  kern{i}(bufs, (float *)bufs[2]);\n" for i in range(6)) + "}\n"
    monkey = units.UNIT_CHARS
    try:
        units.UNIT_CHARS = 2000
        parts = units.split(src)
    finally:
        units.UNIT_CHARS = monkey
    assert isinstance(parts, list) and len(parts) == units.MAX_UNITS
    assert all(p.count(units.HEAD_END) == 1 for p in parts)
    for i in range(6):
        defs = sum(p.count(f"kern{i}(void **bufs, float *restrict p0) {{") for p in parts)
        assert defs == 1, i
    assert "void f_seg0" in parts[0] and all("f_seg0" not in p for p in parts[1:])
    assert all(p.startswith("#define EM_UNIT_EXTERN 1\n") for p in parts[1:])


@pytest.mark.skipif(not gemm.enabled(), reason="EMBER_NATIVE_GEMM=0: the graphs call the BLAS")
def test_graph_library_calls_the_shared_gemm():
    if not gemm.available():
        pytest.skip("this CPU has neither AVX-512 nor AVX2+FMA: ember's GEMM is not compiled")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((96, 80)).astype(np.float32), rng.standard_normal((80, 72)).astype(np.float32)
    f = ember.compile(lambda x, y: (x @ y).relu())
    out = f(ember.tensor(a), ember.tensor(b))
    out = f(ember.tensor(a), ember.tensor(b))
    np.testing.assert_allclose(out.numpy(), np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)
    r = _library(f)
    assert shared_gemm.uses_gemm(r.source) and "em_pool_run" not in r.source    # no copy of the GEMM
    lib = gemm.library()[0]
    before = build.STATS["disk_misses"] + build.STATS["disk_hits"]
    f2 = ember.compile(lambda x, y: (x @ y).tanh())
    f2(ember.tensor(a), ember.tensor(b))
    f2(ember.tensor(a), ember.tensor(b))
    assert gemm.library()[0] is lib                                  # built or loaded once per process
    assert build.STATS["disk_misses"] + build.STATS["disk_hits"] == before + 1     # only the new graph
    # unbound (a NULL pointer), the same call sites run the BLAS: the same result within rounding
    setter = r.lib.get("ember_bind_sgemm", (ctypes.c_void_p,), None)
    setter(None)
    try:
        np.testing.assert_allclose(f(ember.tensor(a), ember.tensor(b)).numpy(), out.numpy(), rtol=1e-5, atol=1e-5)
    finally:
        shared_gemm.bind(r.lib)


# ---- ember's fixed libraries, built ahead of time ----------------------------------------------------

def test_after_prebuild_a_program_costs_one_build(cache, monkeypatch):
    """``python -m ember.compiler.prebuild`` builds the runtime, the GEMM and the eager kernels; a training
    step compiled afterwards (its trace runs the eager GELU/LayerNorm, its C calls the GEMM) builds
    exactly one library: its own."""
    from ember.compiler import prebuild, plan_cache
    got = prebuild.support_libraries()
    assert set(got) == {"ember_runtime", "ember_sgemm", "ember_eager"} and got["ember_runtime"] is not None
    # (in a process that loaded them before, they are not built again in this test's cache)
    compiles, stores = build.STATS["compiles"], plan_cache.STATS["stores"]
    f, losses, _ = _mlp_step(10 ** 9, monkeypatch)
    assert build.STATS["compiles"] == compiles + 1 and plan_cache.STATS["stores"] == stores + 1
    ember.compiler.reset()
    eager = _train_eager_mlp()
    np.testing.assert_allclose(losses, eager, rtol=1e-5)


def _train_eager_mlp():
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 96), nn.GELU(), nn.LayerNorm(96), nn.Linear(96, 10))
    opt = ember.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    x, y = ember.randn(64, 64), ember.randint(0, 10, (64,))
    step = _step_fn(nn.functional.cross_entropy)
    return [float(step(m, opt, x, y)) for _ in range(4)]
