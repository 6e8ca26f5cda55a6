"""A large graph's first compile runs in the background (ember/compiler/background.py): its first replays
run in the interpreter, with eager's results, until the library lands; the call after it switches to
the compiled library. Small graphs, EMBER_BACKGROUND_COMPILE=0 and plan-cache hits stay synchronous.
Speed is measured in ``python -m ember.bench compile`` (the "interpreted" and "compiled_at" fields)."""
import textwrap

import numpy as np
import pytest

from compile_support import _reset, cache  # noqa: F401,E402  (fresh compiler state; a private cache per test)


def _held_cc(tmp_path, hold_seconds=300):
    """A C compiler that holds every command building the graph ``ember_step`` until the file ``go``
    exists; after ``hold_seconds`` it fails them."""
    cc = tmp_path / "held-cc"
    cc.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo "$*" >> {tmp_path / 'cc.log'}
        case "$*" in *ember_step*)
            i=0
            while [ ! -e {tmp_path / 'go'} ]; do
                sleep 0.05; i=$((i+1)); [ $i -ge {int(hold_seconds * 20)} ] && exit 1
            done;; esac
        exec cc "$@"
        """))
    cc.chmod(0o755)
    return str(cc)


def _training(compiled):
    import ember
    import ember.nn as nn
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(32, 48), nn.GELU(), nn.LayerNorm(48), nn.Linear(48, 10))
    opt = ember.optim.AdamW(m.parameters(), lr=1e-2)
    x, y = ember.randn(16, 32), ember.randint(0, 10, (16,))

    def step(m, opt, x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    f = ember.compile(step) if compiled else step
    return f, lambda n: [float(f(m, opt, x, y)) for _ in range(n)]


def _files(root):
    import os
    return [n for _, _, names in os.walk(root) for n in names]


@pytest.fixture
def low_threshold(monkeypatch):
    from ember.compiler import background
    monkeypatch.setattr(background, "MIN_NODES", 10)     # the small step above counts as large
    monkeypatch.delenv("EMBER_BACKGROUND_COMPILE", raising=False)
    monkeypatch.delenv("EMBER_BUILD_TIERS", raising=False)


@pytest.mark.parametrize("fork", [True, False], ids=["pipeline forked", "pipeline in the thread"])
def test_the_interpreter_runs_until_the_library_lands_then_the_compiled_one(cache, tmp_path, monkeypatch,
                                                                            low_threshold, fork):
    from ember.compiler import background, native, plan_cache, tiers
    monkeypatch.setenv("CC", _held_cc(tmp_path))
    monkeypatch.setattr(background, "FORK", fork)
    stores = plan_cache.STATS["stores"]
    eager = _training(False)[1](6)
    f, run = _training(True)
    before = dict(background.STATS)
    got = run(3)                                  # the trace, then two replays while the build is held
    r = f.entries[-1].runner
    assert isinstance(r.native, background.BackgroundRunner)
    bg = r.native
    assert not bg.ready() and bg.interpreted == 2 and bg.native is None
    assert background.STATS["interpreted"] - before["interpreted"] == 2
    assert background.STATS["switched"] == before["switched"]
    (tmp_path / "go").touch()
    assert tiers.wait_background(120) and bg.ready()
    got += run(3)                                 # switched at the start of the first of these
    assert background.STATS["switched"] - before["switched"] == 1 and bg.interpreted == 2
    assert isinstance(bg.native, native.NativeRunner) and bg.native.lib is not None
    assert bg.lib is bg.native.lib and bg.kernel_count > 0           # (attributes read through)
    assert bg.switched_at >= bg.landed_at
    np.testing.assert_allclose(got, eager, rtol=1e-5)
    # the plan is kept (stored by the child, whose counters this process does not see, or here)
    assert plan_cache.STATS["stores"] - stores == (0 if fork else 1)
    assert any(n.endswith(".plan") for n in _files(cache))
    # built at -O3 at once: no quick -O1 build of the graph
    log = (tmp_path / "cc.log").read_text().splitlines()
    assert [c for c in log if "ember_step" in c] and not [c for c in log if "ember_step" in c and "-O1" in c]


def test_a_later_compile_with_the_plan_cached_is_synchronous(cache, low_threshold):
    import ember
    from ember.compiler import background, build, native, tiers
    eager = _training(False)[1](3)
    f, run = _training(True)
    np.testing.assert_allclose(run(3), eager, rtol=1e-5)
    assert tiers.wait_background(120)
    ember.compiler.reset()
    build.clear_memory_cache()
    f, run = _training(True)
    np.testing.assert_allclose(run(3), eager, rtol=1e-5)
    r = f.entries[-1].runner
    assert isinstance(r.native, native.NativeRunner)       # a plan hit: no pipeline to wait for
    assert not isinstance(r.native, background.BackgroundRunner)


@pytest.mark.parametrize("how", ["switch off", "small graph"])
def test_synchronous_when_off_or_small(cache, low_threshold, monkeypatch, how):
    from ember.compiler import background, native
    if how == "switch off":
        monkeypatch.setenv("EMBER_BACKGROUND_COMPILE", "0")
    else:
        monkeypatch.setattr(background, "MIN_NODES", 10 ** 6)
    eager = _training(False)[1](3)
    f, run = _training(True)
    before = dict(background.STATS)
    np.testing.assert_allclose(run(3), eager, rtol=1e-5)
    r = f.entries[-1].runner
    assert isinstance(r.native, native.NativeRunner) and r.native.lib is not None
    assert background.STATS == before


def test_a_failed_background_build_keeps_the_interpreter(cache, tmp_path, monkeypatch, low_threshold):
    """The held compiler gives up: the build fails in the background (warned), the calls go on in the
    interpreter with eager's results."""
    import warnings
    from ember.compiler import background, tiers
    monkeypatch.setenv("CC", _held_cc(tmp_path, hold_seconds=0.2))
    eager = _training(False)[1](4)
    f, run = _training(True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = run(2)
        assert tiers.wait_background(120)
        got += run(2)
    bg = f.entries[-1].runner.native
    assert isinstance(bg, background.BackgroundRunner) and bg.ready()
    assert bg.native is None or bg.native.lib is None
    np.testing.assert_allclose(got, eager, rtol=1e-5)
    assert not [n for n in _files(cache) if n.endswith(".plan")]      # (a plan that did not build is dropped)


def test_the_eager_kernels_a_trace_went_without_are_built_for_the_next_process(cache, low_threshold, monkeypatch):
    """A trace that found the eager-kernel library missing runs NumPy's kernels; once the graph's own
    library has landed, the library is built into the disk cache in the background (for the next
    process's trace), and this process's eager kernels stay as its first eager use decides."""
    from ember._native import eager_kernels
    from ember._native.eager_source import source
    from ember.compiler import build, tiers
    if not eager_kernels.available():
        pytest.skip("the native eager kernels do not build here (no C compiler or EMBER_EAGER_NATIVE=0)")
    monkeypatch.setattr(eager_kernels, "_STATE", [None])          # a process that has not used them yet
    monkeypatch.setattr(eager_kernels, "_NOT_CACHED", [False])
    monkeypatch.setattr(eager_kernels, "_LATER", [False])
    build.clear_memory_cache()
    for name in _files(cache):                                   # (available() built it in this cache)
        if name.startswith("ember_eager-"):
            (cache / "kernels" / name).unlink()
    assert build.compile_source(source(), name="ember_eager", cached_only=True) is None   # (a fresh cache)
    support = tiers.STATS["support"]
    f, run = _training(True)
    got = run(3)
    assert eager_kernels._NOT_CACHED[0]                          # the trace ran without them
    assert tiers.wait_background(300)
    assert tiers.STATS["support"] == support + 1 and eager_kernels._LATER[0]
    assert eager_kernels._STATE[0] is None                       # not bound here: this process is unchanged
    build.clear_memory_cache()
    assert build.compile_source(source(), name="ember_eager", cached_only=True) is not None
    assert not eager_kernels.build_later()                       # once per process
    np.testing.assert_allclose(got, _training(False)[1](3), rtol=1e-5)
