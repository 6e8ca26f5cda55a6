"""Parallel loops of compiled programs on ember's work pool (ember/compiler/render_par.py).

Compiled results equal eager ones at one and two threads, for every kind of parallel loop (elementwise,
rows, column reductions, matmul epilogues, a prologue whose scalar the loop reads, batched GEMMs),
with sizes below and above the threshold (set low through ``EMBER_PARALLEL_MIN`` so that both sides
are cheap to test), and dynamic shapes. The thread count is ember's, not the OpenMP runtime's that torch
shares (torch.set_num_threads(1) used to make every compiled kernel single-threaded).
"""
import ctypes

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.bench.compile import step_function
from compile_support import _reset  # noqa: F401  (fresh compiler state per test)

MIN = 1 << 17         # the threshold these tests set (work: elements x statements x cost factor)


def _rng(seed):
    return np.random.default_rng(seed)


def T(*shape, seed=0):
    return ember.tensor(_rng(seed).uniform(-2.0, 2.0, shape).astype(np.float32))


@pytest.fixture
def low_threshold(monkeypatch):
    monkeypatch.setenv("EMBER_PARALLEL_MIN", str(MIN))
    yield MIN


@pytest.fixture(params=[1, 2])
def threads(request):
    old = ember.get_num_threads()
    ember.set_num_threads(request.param)
    yield request.param
    ember.set_num_threads(old)


def native_lib(cf):
    run = cf.entries[-1].runner
    assert hasattr(run, "native"), "the program did not compile natively"
    return run.native.lib


def last_threads(cf) -> int:
    """The thread count the compiled program's last parallel loop ran on (1: the caller alone)."""
    return native_lib(cf).get("ember_par_last_threads", (), ctypes.c_int)()


def par_runs(cf) -> int:
    """How many loops the compiled program ran on several threads so far."""
    return native_lib(cf).get("ember_par_runs", (), ctypes.c_long)()


def check(f, args, rtol=1e-5, atol=1e-5, calls=3):
    cf = ember.compile(f)
    for _ in range(calls):          # the first call traces, the second builds and runs the C
        got = cf(*args)
    want = f(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol)
    return cf


def gelu_mm(x, w):
    return F.gelu(x @ w)


def softmax_rows(x):
    return (x * 3).softmax(-1)


def layer_norm(x):
    return F.layer_norm(x, (x.shape[-1],))


def exp_loop(x):
    return (x * 0.5).exp() + x.sin()


def column_sum(x):
    return x.exp().sum(0)             # a reduction over the leading dim (blocks of the kept columns)


def middle_sum(x):
    return x.exp().sum(1)             # kept dims outside and inside the reduced one


@pytest.mark.parametrize("rows", [4, 600])     # below and above the threshold
@pytest.mark.parametrize("fn", [exp_loop, softmax_rows, layer_norm, column_sum])
def test_parallel_loops_match_eager(low_threshold, threads, fn, rows):
    x = T(rows, 96, seed=rows)
    cf = check(fn, (x,), rtol=1e-4, atol=1e-5)
    big = threads > 1 and rows == 600
    assert last_threads(cf) == (2 if big else 1)


@pytest.mark.parametrize("rows", [2, 300])
def test_middle_reduction_and_gemm_epilogue(low_threshold, threads, rows):
    x = T(rows, 7, 40, seed=1)
    cf = check(middle_sum, (x,), rtol=1e-4)
    assert last_threads(cf) == (2 if threads > 1 and rows == 300 else 1)
    a, w = T(rows, 64, seed=2), T(64, 48, seed=3)
    cf = check(gelu_mm, (a, w), rtol=1e-4, atol=1e-4)
    assert last_threads(cf) == (2 if threads > 1 and rows == 300 else 1)


def test_prologue_runs_once_and_its_scalar_reaches_every_chunk(low_threshold, threads):
    # the scalar statement (t += 1) is the prologue of the loop kernel; the loop reads its value. It
    # must run once per call, not once per chunk, and every chunk must see the new value
    def f(t, x):
        t.add_(1)
        return (x * t).exp()
    x = T(500, 64, seed=4)
    t_c, t_e = ember.tensor(np.float32(0.5)), ember.tensor(np.float32(0.5))
    cf = ember.compile(f)
    for i in range(4):
        got = cf(t_c, x)
        want = f(t_e, x)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
        assert float(t_c) == float(t_e) == 1.5 + i
    assert last_threads(cf) == threads


def test_adam_step_matches_eager_on_two_threads(low_threshold):
    # the optimizer update (a prologue's step counter, bias corrections carried into the loop)
    old = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        results = []
        for compiled in (False, True):
            ember.manual_seed(0)
            model = ember.nn.Sequential(ember.nn.Linear(64, 128), ember.nn.GELU(), ember.nn.Linear(128, 10))
            opt = ember.optim.Adam(model.parameters(), lr=1e-2)
            x, y = T(256, 64, seed=5), ember.tensor(_rng(6).integers(0, 10, 256))
            step = step_function(ember, "mlp")        # zero_grad, cross-entropy, backward, step
            run = ember.compile(step) if compiled else step
            losses = [float(run(model, opt, x, y)) for _ in range(3)]
            before = par_runs(run) if compiled else 0
            losses.append(float(run(model, opt, x, y)))
            if compiled:
                assert par_runs(run) > before      # (the update of the 64x128 weight and others)
            results.append((losses, [p.detach().numpy().copy() for p in model.parameters()]))
        np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-4)
        for a, b in zip(results[1][1], results[0][1]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    finally:
        ember.set_num_threads(old)


def test_batched_gemm_over_threads(threads):
    def attn(q, k, v):
        return (q @ k.transpose(-1, -2)).softmax(-1) @ v
    q, k, v = T(64, 64, 32, seed=7), T(64, 64, 32, seed=8), T(64, 64, 32, seed=9)
    check(attn, (q, k, v), rtol=1e-4, atol=1e-5)
    q, k, v = T(2, 8, 4, seed=7), T(2, 8, 4, seed=8), T(2, 8, 4, seed=9)
    check(attn, (q, k, v), rtol=1e-4, atol=1e-5)


def test_dynamic_shapes_both_sides_of_the_threshold(low_threshold, threads):
    cf = ember.compile(softmax_rows, dynamic=True)
    for rows in (3, 700, 5, 900):
        x = T(rows, 96, seed=rows)
        got = cf(x)
        np.testing.assert_allclose(got.numpy(), softmax_rows(x).numpy(), rtol=1e-5, atol=1e-6)
    from ember.compiler import native_sym
    assert native_sym.STATS["shared_builds"] >= 1        # one C build serves every size
    lib = cf.entries[-1].shared_build.lib
    assert lib.get("ember_par_last_threads", (), ctypes.c_int)() == threads


def test_thread_count_is_embers_not_torchs_openmp(low_threshold):
    # torch shares the process's OpenMP runtime: its set_num_threads used to set the compiled kernels'
    # count too (a test module calling torch.set_num_threads(1) at import made them single-threaded)
    torch = pytest.importorskip("torch")
    old, old_torch = ember.get_num_threads(), torch.get_num_threads()
    try:
        x = T(600, 96, seed=10)
        cf = ember.compile(softmax_rows)
        ember.set_num_threads(2)
        cf(x)
        cf(x)
        torch.set_num_threads(1)
        torch.ones(4).sum()
        np.testing.assert_allclose(cf(x).numpy(), softmax_rows(x).numpy(), rtol=1e-5, atol=1e-6)
        assert last_threads(cf) == 2
        from ember.compiler import gemm
        lib = gemm.library()[0]
        if gemm.available():
            assert lib.get("ember_pool_threads", (), ctypes.c_int)() == 2
        ember.set_num_threads(1)
        cf(x)
        assert last_threads(cf) == 1
    finally:
        torch.set_num_threads(old_torch)
        ember.set_num_threads(old)
