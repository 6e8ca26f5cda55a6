"""Cold starts (issue 16 item 5): a first compile's trace does not wait for the eager native-kernel
library or ember's GEMM (its ops run on NumPy while the GEMM builds in the background), eager code
outside a trace waits for them (its kernels never change partway through a process); leftovers of
killed cache writers are cleaned up. Speed is measured in ``python -m ember.bench compile``; these tests check the
behaviour and the results."""
import json
import os
import subprocess
import sys
import textwrap

from compile_support import _reset, cache  # noqa: F401,E402  (fresh compiler state; a private cache per test)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gated_cc(tmp_path):
    """A C compiler that holds the builds of the eager kernels and of the GEMM until the file ``go``
    exists, at most a minute (other builds run at once)."""
    cc = tmp_path / "gated-cc"
    cc.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        i=0
        case "$*" in *ember_eager*|*ember_sgemm*)
            while [ ! -e {tmp_path / 'go'} ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done;; esac
        exec cc "$@"
        """))
    cc.chmod(0o755)
    return str(cc)


def test_a_cold_trace_does_not_wait_for_the_eager_libraries(tmp_path):
    """While ember's GEMM builds (held here by the compiler), a first compile's trace runs on NumPy and
    matches torch, without building the eager kernels; the compiled replays wait for the GEMM; the first
    eager call outside the trace builds the eager kernels, waits for them and uses them."""
    code = textwrap.dedent(f"""\
        import numpy as np, torch, ember
        import ember.nn.functional as F
        from ember._native import eager_kernels as k
        from ember.compiler import gemm, shared_gemm
        ember.set_num_threads(2)
        rng = np.random.default_rng(0)
        x = rng.standard_normal((64, 40)).astype(np.float32)
        w = rng.standard_normal((40,)).astype(np.float32)
        m = rng.standard_normal((40, 64)).astype(np.float32)
        def f(x, w, m):
            return F.softmax(F.gelu(F.layer_norm(x, (40,), w)) @ m, -1).sum(0)
        want = torch.softmax(torch.nn.functional.gelu(torch.nn.functional.layer_norm(
            torch.tensor(x), (40,), torch.tensor(w))) @ torch.tensor(m), -1).sum(0).numpy()
        cf = ember.compile(f)
        xe, we, me = ember.tensor(x), ember.tensor(w), ember.tensor(m)
        got = [cf(xe, we, me).numpy()]                             # the trace
        # (the compiled code does not call the eager kernels: a trace does not start their build)
        assert k._STATE[0] is None, k._STATE
        # the GEMM is still held by the compiler: the trace ran on NumPy's BLAS
        assert not gemm.enabled() or (not gemm._LIB and shared_gemm.building())   # (no GEMM on this CPU)
        open({str(tmp_path / 'go')!r}, "w").close()
        got += [cf(xe, we, me).numpy() for _ in range(2)]          # native replays (they wait for the GEMM)
        assert (gemm._LIB or not gemm.enabled()) and cf.entries[0].runner.native.lib is not None
        got.append(f(xe, we, me).numpy())                          # eager: builds the kernels, waits
        assert k._STATE[0], k._STATE
        for r in got:
            np.testing.assert_allclose(r, want, rtol=1e-4, atol=1e-5)
        calls = []
        def spy(name, real):
            return lambda *a: calls.append(name) or real(*a)
        for name, fn in list(k._STATE[0].items()):
            if not name.startswith("_"):
                k._STATE[0][name] = spy(name, fn)
        np.testing.assert_allclose(f(xe, we, me).numpy(), want, rtol=1e-4, atol=1e-5)
        assert calls, "the eager ops did not switch to the native kernels"
        print("ok")
        """)
    env = {**os.environ, "CC": _gated_cc(tmp_path), "EMBER_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("EMBER_EAGER_NATIVE", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")


def test_the_first_eager_op_builds_the_eager_library_and_uses_it(tmp_path):
    """The first eager op of a process with an empty cache builds the library and uses it at once; a
    later process loads it from the cache."""
    code = textwrap.dedent("""\
        import numpy as np, ember
        import ember.nn.functional as F
        from ember._native import eager_kernels as k
        F.gelu(ember.ones(4, 4))
        print("state", bool(k._STATE[0]))
        """)
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("EMBER_EAGER_NATIVE", None)
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "state True" in first.stdout
    again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "state True" in again.stdout


# ---- the pipeline runs at a trace's first replay ------------------------------------------------------------

def _sgd_losses(compiled, momentum, steps=4):
    import ember
    import ember.nn as nn
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    opt = ember.optim.SGD(m.parameters(), lr=0.1, momentum=momentum)
    x, y = ember.randn(10, 6), ember.randn(10, 3)

    def step(m, opt, x, y):
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()
    f = ember.compile(step) if compiled else step
    return [float(f(m, opt, x, y)) for _ in range(steps)], f


def test_a_trace_that_never_replays_runs_no_pipeline(cache):
    """SGD with momentum: the first step's trace (no momentum buffers yet) fails its guards on the second
    call and is traced again; only the second trace, which replays, is decomposed, scheduled and built."""
    import numpy as np
    from ember.compiler import counters, native
    eager, _ = _sgd_losses(False, 0.9)
    captures, programs = counters["captures"], native.STATS["programs"]
    got, f = _sgd_losses(True, 0.9)
    np.testing.assert_allclose(got, eager, rtol=1e-5)
    assert counters["captures"] == captures + 2
    assert native.STATS["programs"] == programs + 1
    first, second = f.entries
    assert type(first.runner).__name__ == "_AtFirstReplay"      # never made
    assert second.runner.native is not None


def test_the_first_replay_makes_the_runner_once(cache):
    import numpy as np
    import ember
    from ember.compiler import native
    f = ember.compile(lambda x: (x * 2).sin() + 1)
    x = ember.randn(5, 3)
    programs = native.STATS["programs"]
    want = (x * 2).sin() + 1
    np.testing.assert_allclose(f(x).numpy(), want.numpy(), rtol=1e-6)
    assert native.STATS["programs"] == programs                    # traced: nothing built yet
    for _ in range(3):
        np.testing.assert_allclose(f(x).numpy(), want.numpy(), rtol=1e-6)
    assert native.STATS["programs"] == programs + 1
    assert f.entries[0].runner.native is not None
    g = ember.compile(lambda x: x.cos())
    g(x)
    assert g.entries[0].runner.native is not None                  # asking for it makes it at once
    assert native.STATS["programs"] == programs + 2


# ---- leftovers of killed writers ----------------------------------------------------------------------------

def test_leftovers_of_killed_writers_are_removed_by_a_later_build(cache):
    """A ``.build-*`` directory holding a partial library and a ``.plan-*`` temporary file, as a writer
    killed mid-way leaves them, are removed by the next run that writes to the cache; fresh ones (a
    writer at work now) and the entries stay."""
    import time
    import numpy as np
    import ember
    from ember.compiler import cache as kcache
    from ember.compiler import plan_cache
    kernels = os.path.join(str(cache), "kernels")
    plans = os.path.join(kernels, "plans")
    os.makedirs(plans, mode=0o700)
    os.chmod(str(cache), 0o700)
    os.chmod(kernels, 0o700)
    old = time.time() - 2 * kcache.STALE_SECONDS
    stale_build = os.path.join(kernels, ".build-killed")
    os.mkdir(stale_build, 0o700)
    with open(os.path.join(stale_build, "ember_x-0123.so"), "wb") as f:
        f.write(b"\x7fELF partial")
    stale_plan = os.path.join(plans, ".plan-killed")
    with open(stale_plan, "wb") as f:
        f.write(b"EMBERPLAN1\nhalf")
    live_build = os.path.join(kernels, ".build-busy")
    os.mkdir(live_build, 0o700)
    for p in (os.path.join(stale_build, "ember_x-0123.so"), stale_build, stale_plan):
        os.utime(p, (old, old))
    kcache._SWEPT.clear()

    f = ember.compile(lambda x: (x * 2).exp().sum(0))
    x = ember.randn(4, 3)
    for _ in range(3):
        np.testing.assert_allclose(f(x).numpy(), (x * 2).exp().sum(0).numpy(), rtol=1e-5)
    assert f.entries[0].runner.native.lib is not None
    assert not os.path.exists(stale_build) and not os.path.exists(stale_plan)
    assert os.path.isdir(live_build)                         # too fresh: maybe a writer at work
    assert any(n.endswith(".so") for n in os.listdir(kernels))
    assert plan_cache.STATS["stores"] >= 1 and any(n.endswith(".plan") for n in os.listdir(plans))


def test_a_warm_run_sweeps_nothing(cache):
    """Loads never sweep (only a run that writes does): a stale leftover stays until then."""
    import time
    import ember
    from ember.compiler import build
    from ember.compiler import cache as kcache
    f = ember.compile(lambda x: x.sin() * 3)
    x = ember.randn(5)
    f(x), f(x)
    kernels = os.path.join(str(cache), "kernels")
    leftover = os.path.join(kernels, ".plan-old")
    open(leftover, "wb").close()
    old = time.time() - 2 * kcache.STALE_SECONDS
    os.utime(leftover, (old, old))
    kcache._SWEPT.clear()
    ember.compiler.reset()
    g = ember.compile(lambda x: x.sin() * 3)
    compiles = build.STATS["compiles"]
    g(x), g(x)
    assert build.STATS["compiles"] == compiles and os.path.exists(leftover)
    assert kcache.sweep_leftovers(kernels) == 1 and not os.path.exists(leftover)


# ---- tiered builds: a quick library first, the -O3 one swapped in when it lands -----------------------------

def _held_cc(tmp_path, hold_seconds=60):
    """A C compiler that holds every command building the graph ``ember_step`` without ``-O1`` (the -O3
    build and its link) until the file ``go`` exists; after ``hold_seconds`` it fails them."""
    cc = tmp_path / "held-cc"
    cc.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo "$*" >> {tmp_path / 'cc.log'}
        case "$*" in *-O1*) ;; *ember_step*)
            i=0
            while [ ! -e {tmp_path / 'go'} ]; do
                sleep 0.05; i=$((i+1)); [ $i -ge {int(hold_seconds * 20)} ] && exit 1
            done;; esac
        exec cc "$@"
        """))
    cc.chmod(0o755)
    return str(cc)


_TIER_STEP = textwrap.dedent("""\
    import numpy as np, ember, ember.nn as nn
    from ember.compiler import units
    units.UNIT_CHARS = 300                                 # small enough to split: a tiered build
    def training(compiled):
        ember.manual_seed(0)
        m = nn.Sequential(nn.Linear(64, 96), nn.GELU(), nn.LayerNorm(96), nn.Linear(96, 10))
        opt = ember.optim.AdamW(m.parameters(), lr=1e-2)
        x, y = ember.randn(64, 64), ember.randint(0, 10, (64,))
        def step(m, opt, x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss.detach()
        f = ember.compile(step) if compiled else step
        return f, lambda n: [float(f(m, opt, x, y)) for _ in range(n)]
    """)


def _flags_of(lib):
    with open(lib.path[:-3] + ".json") as f:
        return json.load(f)["command"]


def _tiers_ns(monkeypatch):
    from ember.compiler import units
    monkeypatch.setattr(units, "UNIT_CHARS", units.UNIT_CHARS)     # (restored after the test)
    ns: dict = {}
    exec(_TIER_STEP, ns)
    return ns


def test_a_tiered_build_runs_the_quick_library_then_swaps_in_the_optimized_one(cache, tmp_path, monkeypatch):
    """A split graph not in the cache: its first replay runs on a -O1 build while the -O3 one is held
    back; the call after it lands runs on it; results match eager throughout; a later compile of the
    same program loads the -O3 library at once (no quick build)."""
    import numpy as np
    import ember
    from ember.compiler import tiers
    monkeypatch.setenv("CC", _held_cc(tmp_path))
    ns = _tiers_ns(monkeypatch)
    eager = ns["training"](False)[1](5)
    f, run = ns["training"](True)
    got = run(2)                                            # the trace, then the first replay
    r = f.entries[-1].runner.native
    quick = r.lib
    assert "-O1" in _flags_of(quick) and r._upgrade is not None and not r._upgrade.ready()
    got += run(1)                                           # still held: the quick library again
    assert r.lib is quick
    (tmp_path / "go").touch()
    assert tiers.wait_background(120) and r._upgrade.result is not None, r._upgrade.error
    got += run(2)                                           # swapped in at the start of the call
    assert r.lib is not quick and "-O1" not in _flags_of(r.lib) and r._upgrade is None
    np.testing.assert_allclose(got, eager, rtol=1e-5)
    # the entries' unit, built with its own flags, is compiled once: the -O3 build reuses its object
    log = (tmp_path / "cc.log").read_text().splitlines()
    assert len([c for c in log if "ember_step" in c and "-u0.c" in c]) == 1
    assert len([c for c in log if "ember_step" in c and "-u1.c" in c]) == 2
    kernels = os.path.join(str(cache), "kernels")
    assert len([n for n in os.listdir(kernels) if n.startswith("ember_step-") and n.endswith(".so")]) == 2
    ember.compiler.reset()
    from ember.compiler import build
    build.clear_memory_cache()
    f, run = ns["training"](True)
    np.testing.assert_allclose(run(3), eager[:3], rtol=1e-5)
    r = f.entries[-1].runner.native
    assert "-O1" not in _flags_of(r.lib) and r._upgrade is None


def test_without_tiers_the_first_replay_waits_for_the_optimized_build(cache, monkeypatch):
    import numpy as np
    monkeypatch.setenv("EMBER_BUILD_TIERS", "0")
    ns = _tiers_ns(monkeypatch)
    eager = ns["training"](False)[1](3)
    f, run = ns["training"](True)
    np.testing.assert_allclose(run(3), eager, rtol=1e-5)
    r = f.entries[-1].runner.native
    assert "-O1" not in _flags_of(r.lib) and r._upgrade is None


def test_a_killed_background_build_leaves_no_entry(tmp_path):
    """A process killed while its -O3 build runs leaves the quick entry and no -O3 one (nothing
    partial); the next process loads the quick library, builds the -O3 one in the background, and every
    entry in the cache is whole."""
    code = _TIER_STEP + textwrap.dedent("""\
        import os, signal, sys
        from ember.compiler import tiers, cache
        f, run = training(True)
        run(2)
        r = f.entries[-1].runner.native
        if sys.argv[1] == "kill":
            assert r._upgrade is not None and not r._upgrade.ready()
            os.kill(os.getpid(), signal.SIGKILL)
        assert "-O1" in open(r.lib.path[:-3] + ".json").read()      # the quick build, from the cache
        assert tiers.wait_background(300) and r._upgrade.result is not None, r._upgrade.error
        run(1)
        assert "-O1" not in open(r.lib.path[:-3] + ".json").read()
        kernels = os.path.join(cache.cache_dir(), "kernels")
        entries = [n[:-3] for n in os.listdir(kernels) if n.endswith(".so")]
        for stem in entries:
            paths = cache._entry_paths(kernels, "", "x")
            paths.update(so=os.path.join(kernels, stem + ".so"), meta=os.path.join(kernels, stem + ".json"))
            key = __import__("json").load(open(paths["meta"]))["key"]
            assert cache._check_entry(paths, key) is None, stem
        print("ok", sum(n.startswith("ember_step-") for n in entries))
        """)
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "cache"), "CC": _held_cc(tmp_path, hold_seconds=30),
           "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    first = subprocess.run([sys.executable, "-c", code, "kill"], env=env, capture_output=True, text=True,
                           timeout=600)
    assert first.returncode == -9, first.stderr[-3000:]
    kernels = tmp_path / "cache" / "kernels"
    assert len([n for n in os.listdir(kernels) if n.startswith("ember_step-") and n.endswith(".so")]) == 1
    (tmp_path / "go").touch()
    again = subprocess.run([sys.executable, "-c", code, "again"], env=env, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.strip().endswith("ok 2")


def test_the_entries_unit_is_built_with_its_own_flags(cache):
    """Unit 0 (the entries, no loops) gets ENTRY_FLAGS, after the library's flags; a loop left there
    keeps the library's; the cache key covers a unit's flags."""
    from ember.compiler import build, units
    head = "/* head */\n#include <stdint.h>\n" + units.HEAD_END
    kernels = [f"static void kern{i}(void **bufs, float *restrict p0) {{\n  for (int j = 0; j < 4; j++) "
               f"p0[j] += {i}.0f{' + 1.0f' * 600};\n}}" for i in range(2)]
    entry = "\n\nvoid f_seg0(void **bufs) {\n  kern0(bufs, (float *)bufs[0]);\n  kern1(bufs, (float *)bufs[0]);\n}\n"
    src = head + "\n" + "\n\n".join(kernels) + entry
    old = units.UNIT_CHARS
    try:
        units.UNIT_CHARS = 2000
        parts = units.split(src)
        loopy = units.split(src.replace("void f_seg0(void **bufs) {\n",
                                        "void f_seg0(void **bufs) {\n  for (int k = 0; k < 2; k++) (void)k;\n"))
    finally:
        units.UNIT_CHARS = old
    assert parts[0].cflags == units.ENTRY_FLAGS and all(not getattr(p, "cflags", ()) for p in parts[1:])
    assert loopy[0].cflags == ()
    lib = build.compile_source(parts, name="entry_flags")
    plain = build.compile_source([str(p) for p in parts], name="entry_flags")
    assert plain.key != lib.key
    import numpy as np
    x = np.zeros(4, np.float32)
    lib.entry("f_seg0")((x,))
    plain.entry("f_seg0")((y := np.zeros(4, np.float32),))
    np.testing.assert_array_equal(x, y)
