"""The plan cache (ember/compiler/plan_cache.py): a program captured again -- in a new process, or after
``ember.compiler.reset()`` -- skips decompose, schedule and render and runs its cached plan; anything
the plan depends on (shapes, options, thread count, ember's code) makes a new key; a damaged,
foreign or untrusted entry is not used and is written anew (issue 16 item 5). Speed is measured in
``python -m ember.bench compile``."""
import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.compiler import build, native, plan_cache
from compile_support import _reset, cache  # noqa: F401  (fresh compiler state; a private cache per test)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss.detach()


def _train(compiled, batch=8, steps=3):
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
    opt = ember.optim.AdamW(m.parameters(), lr=1e-2)
    x, y = ember.randn(batch, 6), ember.randn(batch, 3)
    f = ember.compile(_step) if compiled else _step
    losses = [float(f(m, opt, x, y)) for _ in range(steps)]
    return losses, [p.detach().numpy().copy() for p in m.parameters()], f


def _fresh_process_state():
    """What a new process would have: no compiled functions, no libraries loaded."""
    ember.compiler.reset()


def _stats():
    return dict(plan_cache.STATS), native.STATS["programs"]


def _plans(cache_dir):
    d = os.path.join(cache_dir, "kernels", "plans")
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".plan")) if os.path.isdir(d) else []


def _no_pipeline(monkeypatch):
    """Make any run of the pipeline fail the test."""
    def boom(*a, **k):
        raise AssertionError("the pipeline ran on a plan cache hit")
    for name in ("decompose", "schedule", "render_program"):
        monkeypatch.setattr(native, name, boom)


def test_second_capture_skips_the_pipeline_and_matches_eager(cache, monkeypatch):
    eager, eager_params, _ = _train(False)
    s0, p0 = _stats()
    cold, cold_params, _ = _train(True)
    s1, p1 = _stats()
    assert p1 == p0 + 1 and s1["misses"] == s0["misses"] + 1 and s1["stores"] == s0["stores"] + 1
    assert len(_plans(cache)) == 1
    _fresh_process_state()
    compiles = build.STATS["compiles"]
    _no_pipeline(monkeypatch)
    warm, warm_params, f = _train(True)
    s2, p2 = _stats()
    assert s2["hits"] == s1["hits"] + 1 and p2 == p1          # nothing decomposed, scheduled or rendered
    assert build.STATS["compiles"] == compiles                 # nothing built: the library came from disk
    assert f.entries[0].runner.native.lib is not None and f.entries[0].runner.native.lib.cache_hit
    np.testing.assert_allclose(cold, eager, rtol=1e-5)
    np.testing.assert_allclose(warm, eager, rtol=1e-5)
    for a, b, c in zip(warm_params, cold_params, eager_params):
        np.testing.assert_array_equal(a, b)                    # the same code as the cold run's
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)


def test_a_changed_guard_or_option_misses(cache, monkeypatch):
    _train(True, batch=8)
    hits = plan_cache.STATS["hits"]
    for change in ("batch", "timing", "threads"):
        _fresh_process_state()
        before = plan_cache.STATS["misses"]
        if change == "batch":
            _train(True, batch=5)                             # another shape: another program
        elif change == "timing":
            monkeypatch.setenv("EMBER_KERNEL_TIMING", "1")    # another code generation option
            _train(True)
            monkeypatch.delenv("EMBER_KERNEL_TIMING")
        else:
            n = ember.get_num_threads()
            ember.set_num_threads(1 if n != 1 else 2)
            try:
                _train(True)
            finally:
                ember.set_num_threads(n)
        assert plan_cache.STATS["misses"] == before + 1, change
    assert plan_cache.STATS["hits"] == hits
    # and a change of ember's own code (its source digest) or of the CPU is another key as well
    for what, name, value in (("code", "_EMBER_DIGEST", ["another ember"]), ("cpu", "_HOST", ["another cpu"])):
        _fresh_process_state()
        monkeypatch.setattr(plan_cache if what == "code" else build, name, value)
        before = plan_cache.STATS["misses"]
        _train(True)
        assert plan_cache.STATS["misses"] == before + 1 and plan_cache.STATS["hits"] == hits, what


@pytest.mark.parametrize("damage", ["truncate", "flip", "other_key", "mode"])
def test_a_damaged_entry_is_not_used_and_is_written_anew(cache, damage):
    eager, _, _ = _train(False)
    _train(True)
    (path,) = _plans(cache)
    data = open(path, "rb").read()
    if damage == "truncate":
        open(path, "wb").write(data[:len(data) // 2])
    elif damage == "flip":
        i = len(data) - 100
        open(path, "wb").write(data[:i] + bytes([data[i] ^ 0x55]) + data[i + 1:])
    elif damage == "other_key":
        m = len(plan_cache._MAGIC)
        open(path, "wb").write(data[:m] + b"0" * 64 + data[m + 64:])
    else:
        os.chmod(path, 0o666)                                 # writable by others: not trusted
    _fresh_process_state()
    rejected, programs = plan_cache.STATS["rejected"], native.STATS["programs"]
    got, _, _ = _train(True)
    np.testing.assert_allclose(got, eager, rtol=1e-5)
    assert plan_cache.STATS["rejected"] == rejected + 1 and native.STATS["programs"] == programs + 1
    assert open(path, "rb").read() == data                    # rebuilt: the same plan again
    assert os.stat(path).st_mode & 0o077 == 0
    _fresh_process_state()
    hits = plan_cache.STATS["hits"]
    _train(True)
    assert plan_cache.STATS["hits"] == hits + 1


def test_a_plan_naming_other_code_is_refused(cache, tmp_path):
    """The unpickler resolves ember's classes and NumPy's reconstructors only: an entry that names any
    other callable (here os.system) is rejected before anything runs."""
    _train(True)
    (path,) = _plans(cache)
    data = open(path, "rb").read()
    head = len(plan_cache._MAGIC)
    key = data[head:head + 64]
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))
    payload = pickle.dumps(Evil(), protocol=5)
    import hashlib
    open(path, "wb").write(plan_cache._MAGIC + key + b"\n" + hashlib.sha256(payload).hexdigest().encode()
                           + b"\n" + payload)
    _fresh_process_state()
    rejected = plan_cache.STATS["rejected"]
    _train(True)
    assert plan_cache.STATS["rejected"] == rejected + 1 and not marker.exists()


def test_custom_ops_are_not_planned(cache):
    """A custom op's kernel is user code the key cannot follow: such programs always run the pipeline."""
    from ember.library import custom_op

    @custom_op("plantest::twice_plus", mutates_args=())
    def twice_plus(x: ember.Tensor) -> ember.Tensor:
        return ember.from_numpy(x.numpy() * 2 + 1)

    @twice_plus.register_fake
    def _(x):
        return ember.empty_like(x)

    f = ember.compile(lambda x: twice_plus(x * 3) + 1)
    x = ember.randn(5)
    want = x.numpy() * 6 + 2
    before = dict(plan_cache.STATS)
    for _ in range(2):
        np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-6)
    assert plan_cache.STATS["uncacheable"] == before["uncacheable"] + 1
    assert plan_cache.STATS["stores"] == before["stores"]


CHILD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    import ember, ember.nn as nn
    from ember.compiler import build, native, plan_cache
    from test_compiler_plan_cache import _train
    # (the first step runs eagerly while tracing: both processes run it on the same eager kernels, so
    # bit-equal results compare the compiled code; a cold one would otherwise trace on NumPy while the
    # eager kernels and GEMM build in the background)
    from ember.compiler.prebuild import support_libraries
    support_libraries()
    losses, params, f = _train(True)
    print(json.dumps({{"losses": losses, "plan": plan_cache.STATS, "programs": native.STATS["programs"],
                      "compiles": build.STATS["compiles"], "sum": float(sum(p.sum() for p in params))}}))
""")


def test_a_warm_process_builds_and_renders_nothing(tmp_path):
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path), "PYTHONPATH": ROOT}
    env.pop("EMBER_LOGS", None)
    runs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", CHILD.format(tests=os.path.join(ROOT, "tests"))],
                           capture_output=True, text=True, env=env, timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["programs"] == 1 and cold["plan"]["stores"] == 1 and cold["compiles"] >= 1
    assert warm["plan"]["hits"] == 1 and warm["programs"] == 0 and warm["compiles"] == 0
    assert warm["losses"] == cold["losses"] and warm["sum"] == cold["sum"]


def _run_kind(kind, compiled):
    """aot_backward: a compiled module whose backward is called outside (captured ahead of time with the
    forward); graph_break: a function that reads a value in Python (two graphs)."""
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 2))
    x, y = ember.randn(4, 5), ember.randn(4, 2)
    if kind == "aot_backward":
        fwd = ember.compile(m) if compiled else m
        out = []
        for _ in range(2):
            m.zero_grad()
            loss = ((fwd(x) - y) ** 2).mean()
            loss.backward()
            out.append([float(loss)] + [p.grad.numpy().copy() for p in m.parameters()])
        return out

    def with_break(x):
        h = m(x)
        s = float(h.abs().sum())            # a graph break: Python reads a value
        return h * (2.0 if s > 0 else 1.0), ember.Size([3, 4])
    f = ember.compile(with_break) if compiled else with_break
    return [[f(x)[0].detach().numpy().copy()] for _ in range(2)]


@pytest.mark.parametrize("kind", ["aot_backward", "graph_break"])
def test_other_program_shapes_hit_too(cache, kind):
    eager = _run_kind(kind, False)
    cold = _run_kind(kind, True)
    _fresh_process_state()
    hits, programs = plan_cache.STATS["hits"], native.STATS["programs"]
    warm = _run_kind(kind, True)
    assert plan_cache.STATS["hits"] == hits + 1 and native.STATS["programs"] == programs
    for a, b, c in zip(eager, cold, warm):
        for i, j, k in zip(a, b, c):
            np.testing.assert_allclose(j, i, rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(k, j)


def _tiny_program(**node):
    """A one-op program (``add`` of a traced value and a constant) with ``node``'s fields changed."""
    from ember.compiler.ir import Graph, OpNode, Program, Value
    from ember.ops.registry import REGISTRY
    a = Value(0, "arg", (2, 3), ember.float32, (0,), False)
    out = Value(1, "node", (2, 3), ember.float32)
    fields = dict(op=REGISTRY["add"], inputs=[a, 1.0], attrs={"alpha": 1}, outputs=[out], where="f.py:3")
    fields.update(node)
    n = OpNode(**{k: v for k, v in fields.items() if k != "view"})
    if "view" in fields:
        n.view = fields["view"]
    return Program([a, out], [Graph([n])], out, [a], [], [], [])


def test_the_fingerprint_tells_programs_apart():
    """Each change of an op's inputs, attributes or fields is another key, on the one-token fast path and
    on the general path (an attribute the fast path does not write: a nested tuple, an array)."""
    from ember.compiler.ir import Value
    from ember.ops.registry import REGISTRY
    other = Value(1, "node", (2, 3), ember.float32)
    variants = [dict(), dict(inputs=[Value(0, "arg", (2, 3), ember.float32, (0,), False), 1]),
                dict(inputs=[Value(0, "arg", (2, 3), ember.float32, (0,), False), True]),
                dict(inputs=[Value(0, "arg", (2, 3), ember.float32, (0,), False), "1.0"]),
                dict(attrs={"alpha": 2}), dict(attrs={"alpha": (1,)}), dict(attrs={"alpha": ((1,),)}),
                dict(attrs={"alpha": ((1,), 2)}), dict(attrs={"alpha": np.float32}),
                dict(attrs={"alpha": np.dtype(np.float32)}), dict(attrs={"alpha": np.dtype(np.float64)}),
                dict(attrs={"alpha": ember.float64}), dict(attrs={"alpha": np.arange(3)}),
                dict(attrs={"alpha": np.arange(4)}), dict(attrs={"alpha": "1\x02x"}), dict(attrs={"beta": 1}),
                dict(attrs={"alpha": 1, "x": "y"}), dict(attrs={}), dict(op=REGISTRY["sub"]),
                dict(where="f.py:4"), dict(where="f.py:3\x02True"), dict(phase="backward"), dict(grad_enabled=False),
                dict(view=True), dict(view=False), dict(outputs=[other, other])]
    prints = [plan_cache.fingerprint(_tiny_program(**v)) for v in variants]
    assert len(set(prints)) == len(prints)
    assert prints[0] == plan_cache.fingerprint(_tiny_program())          # (and the same program: the same text)


def test_a_program_with_an_unknown_attribute_is_uncacheable():
    with pytest.raises(plan_cache.Uncacheable):
        plan_cache.fingerprint(_tiny_program(attrs={"alpha": object()}))
    with pytest.raises(plan_cache.Uncacheable):
        plan_cache.fingerprint(_tiny_program(attrs={"alpha": (object(),)}))
