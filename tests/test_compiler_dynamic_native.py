"""Dynamic shapes in the native backend (issue 12): the generated C takes the sizes as run-time
arguments, so ONE build serves every size of a dynamic entry, and the disk cache keys on the symbolic
program (a new process builds nothing). C builds of compiled programs are counted where they happen
(``native.STATS["builds"]``: compiler runs, with a private kernel cache per test; support libraries
such as the runtime are not programs); every compiled result is compared with eager mode."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.bench import models as M
from ember.compiler import counters, native, native_sym
from compile_support import _reset, _close, _close_trained_gpts  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """A private, empty kernel cache: every C build of a program is a compiler run."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    ember.compiler.reset()
    return tmp_path / "cache"


def _builds():
    return native.STATS["builds"]


def _gpt(n_layer=2, block_size=64):
    ember.manual_seed(0)
    return M.gpt(ember, M.GPTConfig(block_size=block_size, n_layer=n_layer)).eval()


def _first(x):
    return x[0] if isinstance(x, tuple) else x


def test_gpt_forward_lengths_1_to_64_one_build(private_cache):
    model = _gpt()
    cm = ember.compile(model)
    rng = np.random.default_rng(0)
    before, runners = _builds(), native_sym.STATS["size_runners"]
    with ember.no_grad():
        for L in rng.permutation(np.arange(1, 65)):
            idx = ember.from_numpy(rng.integers(0, 65, (2, int(L))))
            _close(_first(cm(idx)), _first(model(idx)), f"L={L}", rtol=1e-4, atol=1e-5)
    assert _builds() - before <= 2
    # (lengths 1 and the first two traced; every other length ran the shared native build)
    assert native_sym.STATS["size_runners"] - runners >= 60
    assert counters["fallbacks"] == 0


def test_a_fresh_process_builds_nothing(private_cache):
    script = textwrap.dedent("""
        import numpy as np, ember
        from ember.bench import models as M
        from ember.compiler import native, native_sym
        from ember.compiler.prebuild import support_libraries
        support_libraries()     # (traces run eagerly: both processes on the same eager kernels and GEMM)
        ember.manual_seed(0)
        model = M.gpt(ember, M.GPTConfig(block_size=64, n_layer=1)).eval()
        cm = ember.compile(model)
        rng = np.random.default_rng(1)
        out = 0.0
        with ember.no_grad():
            for L in [7, 12, 3, 30, 64, 2, 45, 12, 19]:
                r = cm(ember.from_numpy(rng.integers(0, 65, (2, L))))
                out += float((r[0] if isinstance(r, tuple) else r).sum())
        print("RESULT", out, native.STATS["builds"], native_sym.STATS["size_runners"])
    """)
    env = dict(os.environ, EMBER_CACHE_DIR=str(private_cache), EMBER_LOGS="")
    res = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600,
                           cwd=ROOT)
        assert p.returncode == 0, p.stderr
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")][0].split()
        res.append((float(line[1]), int(line[2]), int(line[3])))
    (v1, c1, r1), (v2, c2, r2) = res
    assert v1 == v2 and 1 <= c1 <= 2 and r1 >= 5
    assert c2 == 0 and r2 == r1          # the same native runs, every library from the disk cache


def _train_step(model, opt, x, y):
    opt.zero_grad()
    out = _first(model(x))
    loss = F.cross_entropy(out.reshape(-1, out.size(-1)), y.reshape(-1))
    loss.backward()
    opt.step()
    return loss


def _mlp_with_adam():
    nn = ember.nn
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.LayerNorm(12), nn.Linear(12, 3))
    return m, ember.optim.Adam(m.parameters(), lr=1e-2)


def test_training_with_a_partial_last_batch_one_build(private_cache):
    rng = np.random.default_rng(0)
    X = ember.from_numpy(rng.standard_normal((93, 6)).astype(np.float32))
    Y = ember.from_numpy(rng.integers(0, 3, 93))
    (m1, o1), (m2, o2) = _mlp_with_adam(), _mlp_with_adam()
    cstep = ember.compile(_train_step)
    before = _builds()
    for epoch in range(2):
        for bs in (16, 20):                  # partial last batches of 13 and 13, then other batch sizes
            for i in range(0, 93, bs):
                x, y = X[i:i + bs], Y[i:i + bs]
                _close(cstep(m1, o1, x, y), _train_step(m2, o2, x, y), f"epoch {epoch} bs {bs} at {i}",
                       rtol=1e-4, atol=1e-5)
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        _close(p1, p2, "parameters after training", rtol=1e-4, atol=1e-5)
    assert _builds() - before <= 2 and counters["fallbacks"] == 0


def test_gpt_training_at_many_lengths_one_build(private_cache):
    def make():
        ember.manual_seed(0)
        m = M.gpt(ember, M.GPTConfig(block_size=32, n_layer=1))
        return m, ember.optim.AdamW(m.parameters(), lr=1e-3)

    (m1, o1), (m2, o2) = make(), make()
    cstep = ember.compile(_train_step)
    r = np.random.default_rng(0)
    before = _builds()
    for L in [16, 16, 24, 9, 30, 12, 24, 5, 31, 2, 17]:
        idx, y = (ember.from_numpy(r.integers(0, 64, (2, L))) for _ in range(2))
        _close(cstep(m1, o1, idx, y), _train_step(m2, o2, idx, y), f"length {L}", rtol=1e-4, atol=1e-5)
    _close_trained_gpts(m1, m2, atol=1e-4, steps=11)
    assert _builds() - before <= 2


def test_generation_with_a_growing_context_one_build(private_cache):
    model = _gpt()
    cm = ember.compile(model)
    idx = ember.randint(0, 65, (1, 1))
    ref = idx.clone()
    before = _builds()
    with ember.no_grad():
        for _ in range(40):
            out, want = _first(cm(idx)), _first(model(ref))
            _close(out, want, f"context {idx.shape[1]}", rtol=1e-4, atol=1e-5)
            idx = ember.cat([idx, out[:, -1].argmax(-1, keepdim=True)], 1)
            ref = ember.cat([ref, want[:, -1].argmax(-1, keepdim=True)], 1)
    assert _builds() - before <= 2 and counters["captures"] <= 3    # (context 1 is specialised)


def test_softmax_rows_and_reductions_over_a_symbolic_dim(private_cache):
    def f(x, w):
        h = (x @ w).softmax(-1) * x.mean(1, keepdim=True)
        return F.layer_norm(h, (h.shape[-1],)) + h.sum(0), h[:, 1:].amax(-1)
    w = ember.randn(8, 8)
    cf = ember.compile(f, dynamic=True)
    before = _builds()
    for b, t in [(3, 5), (4, 7), (2, 11), (5, 2), (3, 16), (6, 9)]:
        x = ember.randn(b, t, 8)
        for got, want in zip(cf(x, w), f(x, w)):
            _close(got, want, f"({b}, {t})", rtol=1e-5, atol=1e-5)
    assert _builds() - before <= 1 and counters["captures"] == 2


def test_the_generated_c_takes_the_sizes_as_arguments(private_cache):
    f = lambda x: (x * 2).relu().sum(-1)         # noqa: E731
    cf = ember.compile(f, dynamic=True)
    for t in (5, 9, 13):
        cf(ember.randn(3, t))
    e = next(e for e in cf.entries if e.kind == "dynamic")
    src = e.shared_build.src
    assert "em_s0" in src and "em_s1" in src
    for n in ("13LL", "39LL"):            # no size of any call or hint is a constant of the code
        assert n not in src


def test_mark_dynamic_range_and_an_extern_op_one_build(private_cache):
    # the build's hint sizes stay inside the marked range; cumsum runs its NumPy kernel between native
    # segments, on arrays of each call's size
    def f(x):
        return (x * 2).cumsum(0)[1:] + x.mean(0)
    cf = ember.compile(f)
    before = _builds()
    for n in (3, 4, 12, 7, 5, 9, 12):
        x = ember.randn(n, 6)
        ember.compiler.mark_dynamic(x, 0, min=2, max=12)
        _close(cf(x), f(x), f"n={n}", rtol=1e-5, atol=1e-5)
    x = ember.randn(13, 6)
    ember.compiler.mark_dynamic(x, 0, min=2, max=12)
    _close(cf(x), f(x), "n=13, outside the range")
    assert _builds() - before <= 1 and native_sym.STATS["shared_builds"] >= 1
