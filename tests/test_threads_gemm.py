"""Threads: the default count, one setting for every pool, and ember's threaded GEMM (correctness only;
speed is in ``python -m ember.bench gemm`` / ``train --threads``)."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import ember
from ember.compiler import gemm, build
from gemm_support import assert_bits_of_one_thread

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

needs_gemm = pytest.mark.skipif(not gemm.available(), reason="this CPU has neither AVX-512 nor AVX2+FMA: "
                                                             "ember's GEMM is not compiled (the BLAS runs)")


def _operand(rng, rows, cols, trans, dtype=np.float32):
    x = rng.uniform(-1, 1, (cols, rows) if trans else (rows, cols)).astype(dtype)
    return x.T if trans else x


@needs_gemm
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_gemm_matches_numpy_odd_shapes(threads, ta, tb):
    """Partial register tiles (M not a multiple of 6, N of 16/32), several row blocks (M > 96), K over
    several blocks of 256, single rows/columns, K = 0 and empty results."""
    rng = np.random.default_rng(threads * 4 + ta * 2 + tb)
    for M, N, K in ((1, 1, 1), (7, 13, 5), (6, 32, 256), (97, 33, 257), (200, 70, 600), (1, 300, 40),
                    (301, 1, 9), (5, 4, 0), (0, 7, 3)):
        a, b = _operand(rng, M, K, ta), _operand(rng, K, N, tb)
        c = gemm.sgemm(a, b, threads=threads, exact_threads=True)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        assert c.shape == (M, N)
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5 * max(1, np.sqrt(K)))


@needs_gemm
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_batched_gemm_matches_numpy(threads):
    rng = np.random.default_rng(threads)
    for nb, M, N, K in ((64, 64, 64, 32), (3, 50, 17, 300), (7, 1, 9, 4)):
        a = rng.uniform(-1, 1, (nb, M, K)).astype(np.float32)
        b = rng.uniform(-1, 1, (nb, N, K)).astype(np.float32).transpose(0, 2, 1)    # transposed views
        c = gemm.sgemm(a, b, threads=threads, exact_threads=True)
        np.testing.assert_allclose(c, np.matmul(a.astype(np.float64), b), rtol=1e-5, atol=1e-5 * np.sqrt(K))


@needs_gemm
def test_batch_against_one_matrix_gives_the_bits_of_each_product_alone():
    """A batch whose B is one matrix for every product (batch stride 0: a linear layer's input gradient on
    (batch, time, features)) and whose A and C rows run on from one product to the next runs as one GEMM
    of all the rows, B packed once: each product's bits are those of the product alone, on 1-3 threads,
    accumulating too; a batch whose rows do not run on (every other product) is not folded."""
    rng = np.random.default_rng(11)
    for nb, M, N, K, tb in ((16, 64, 512, 128, 0), (5, 7, 33, 300, 1), (3, 1, 9, 4, 0), (4, 13, 40, 600, 1)):
        a = rng.uniform(-1, 1, (nb, M, K)).astype(np.float32)
        b = _operand(rng, K, N, tb)
        base = rng.uniform(-1, 1, (nb, M, N)).astype(np.float32)
        each = np.stack([gemm.sgemm(a[i], b, threads=1) for i in range(nb)])
        each_acc = base.copy()
        for i in range(nb):
            gemm.sgemm(a[i], b, threads=1, out=each_acc[i], accumulate=True)
        np.testing.assert_allclose(each, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5 * np.sqrt(K))
        for nt in (1, 2, 3):
            bb = np.broadcast_to(b, (nb, K, N))
            np.testing.assert_array_equal(gemm.sgemm(a, bb, threads=nt, exact_threads=True), each)
            acc = base.copy()
            gemm.sgemm(a, bb, threads=nt, out=acc, accumulate=True, exact_threads=True)
            np.testing.assert_array_equal(acc, each_acc)
            np.testing.assert_array_equal(gemm.sgemm(a[::2], bb[::2], threads=nt, exact_threads=True), each[::2])


@needs_gemm
@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_split_gemm_gives_the_bits_of_one_thread(ta, tb):
    """On several threads a GEMM runs as row items over one packed op(B) that they share (each panel
    packed by whichever thread needs it first, or privately when another is still packing it), or as
    blocks of C; either way every element is summed in one thread's order, so the result is bitwise one
    thread's, with accumulate=True too, job after job. (100 x 2100 x 2050: an op(B) too large to share,
    16 MB, is cut into blocks.)"""
    rng = np.random.default_rng(ta * 2 + tb)
    for M, N, K in ((300, 200, 700), (97, 33, 257), (1000, 40, 70), (40, 600, 50), (130, 16, 1), (100, 2100, 2050)):
        a, b = _operand(rng, M, K, ta), _operand(rng, K, N, tb)
        assert_bits_of_one_thread(a, b, rng.uniform(-1, 1, (M, N)).astype(np.float32))


@needs_gemm
@pytest.mark.parametrize("threads", [1, 2])
def test_gemm_of_expanded_and_reversed_views(threads):
    """Operands whose rows or columns overlap (``expand``: a zero stride) or run backwards are copied
    first; read with a leading dimension they would read past their memory (NaNs in an eager matmul of
    an expanded tensor were the symptom)."""
    rng = np.random.default_rng(threads)
    M, K, N = 20, 32, 24
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    views_a = [np.broadcast_to(a[:1], (M, K)), np.broadcast_to(a[:, :1], (M, K)), a[::-1], a[:, ::-1]]
    views_b = [b, np.broadcast_to(b[:1], (K, N)), np.broadcast_to(b[:, :1], (K, N)), b[::-1]]
    for av in views_a:
        for bv in views_b:
            ref = av.astype(np.float64) @ bv.astype(np.float64)
            np.testing.assert_allclose(gemm.sgemm(av, bv, threads=threads, exact_threads=True), ref, rtol=1e-5, atol=1e-4)
            np.testing.assert_allclose(gemm.sgemm(bv.T, av.T, threads=threads, exact_threads=True), ref.T, rtol=1e-5, atol=1e-4)
    A = rng.standard_normal((3, M, K)).astype(np.float32)
    B = rng.standard_normal((3, K, N)).astype(np.float32)
    for av in (np.broadcast_to(A[:1], A.shape), A[::-1], np.broadcast_to(A[:, :1], A.shape)):
        ref = np.matmul(av.astype(np.float64), B)
        np.testing.assert_allclose(gemm.sgemm(av, B, threads=threads, exact_threads=True), ref, rtol=1e-5, atol=1e-4)


def test_eager_matmul_of_an_expanded_tensor():
    n0 = ember.get_num_threads()
    x = np.random.default_rng(0).standard_normal((1, 256)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((256, 256)).astype(np.float32)
    try:
        ember.set_num_threads(2)
        r = ember.tensor(x).expand(64, 256) @ ember.tensor(w)
        np.testing.assert_allclose(r.numpy(), np.broadcast_to(x, (64, 256)) @ w, rtol=1e-5, atol=1e-3)
    finally:
        ember.set_num_threads(n0)


def test_sgemm_rejects_other_dtypes_and_shapes():
    if not gemm.available():
        with pytest.raises(RuntimeError, match="AVX"):
            gemm.sgemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
        return
    with pytest.raises(TypeError, match="float32"):
        gemm.sgemm(np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="do not multiply"):
        gemm.sgemm(np.ones((2, 3), np.float32), np.ones((2, 2), np.float32))


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_compiled_gemms_on_each_thread_count(threads, dtype, monkeypatch, tmp_path):
    """Compiled matmuls (ember's GEMM for float32 where the CPU has it, the BLAS for float64), plain,
    transposed and batched, on 1-3 threads: the same values as eager."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    n0 = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        def f(x, w, q, k, big):
            # big @ big.T: 2**24 multiply-adds, the size from which the compiled GEMM uses every thread
            return (x @ w).relu(), x.T @ x, q @ k.transpose(-1, -2), big @ big.T
        cf = ember.compile(f)
        g = ember.Generator().manual_seed(threads)
        args = (ember.randn(131, 257, generator=g, dtype=dtype), ember.randn(257, 67, generator=g, dtype=dtype),
                ember.randn(8, 70, 32, generator=g, dtype=dtype), ember.randn(8, 70, 32, generator=g, dtype=dtype),
                ember.randn(256, 256, generator=g, dtype=dtype))
        for u, v in zip(f(*args), cf(*args)):
            np.testing.assert_allclose(v.numpy(), u.numpy(), rtol=1e-4, atol=1e-4)
        assert build.omp_max_threads() == threads
    finally:
        ember.set_num_threads(n0)


def test_eager_matmul_on_threads_matches_blas():
    n0 = ember.get_num_threads()
    g = ember.Generator().manual_seed(0)
    a, b = ember.randn(4, 130, 257, generator=g, requires_grad=True), ember.randn(257, 99, generator=g)
    try:
        out = {}
        for n in (1, 2, 3):
            ember.set_num_threads(n)
            a.grad = None
            r = a @ b
            r.sum().backward()
            out[n] = (r.detach().numpy(), a.grad.numpy())
        ref = a.detach().numpy().astype(np.float64) @ b.numpy()
        for n in (1, 2, 3):
            np.testing.assert_allclose(out[n][0], ref, rtol=1e-5, atol=1e-4)
            np.testing.assert_allclose(out[n][1], out[1][1], rtol=1e-5, atol=1e-4)
    finally:
        ember.set_num_threads(n0)


def _fresh(code, **env_over):
    env = {k: v for k, v in os.environ.items()
           if k not in ("EMBER_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    env.update(env_over)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_default_threads_are_the_affinity_cores():
    code = ("import os, ember; from ember.compiler import build; "
            "print(len(os.sched_getaffinity(0)), ember.get_num_threads(), build.omp_max_threads(), "
            "os.environ['OMP_WAIT_POLICY'])")
    cores, n, omp, policy = _fresh(code)
    assert n == cores == omp and policy == "PASSIVE"
    # the environment's count wins
    assert _fresh(code, OMP_NUM_THREADS="3")[1:3] == ["3", "3"]
    assert _fresh(code, EMBER_NUM_THREADS="1")[1:3] == ["1", "1"]


def test_set_num_threads_governs_blas_and_kernels():
    threadpoolctl = pytest.importorskip("threadpoolctl", reason="threadpoolctl limits NumPy's BLAS")
    n0 = ember.get_num_threads()
    try:
        for n in (1, 3, 2):
            ember.set_num_threads(n)
            assert ember.get_num_threads() == n
            assert build.omp_max_threads() == n
            blas = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
            assert blas and all(k == n for k in blas)
    finally:
        ember.set_num_threads(n0)


def test_tuning_choices_become_the_defaults(tmp_path, monkeypatch):
    """What max-autotune picks is tallied per CPU; once a variant has won LEARN_MIN programs (and more
    than the plain defaults), compiles without tuning start from it."""
    from ember.compiler import autotune
    from ember.compiler.native import build_runner  # noqa: F401  (the module that applies them)
    from ember.compiler.render_c import Options
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    assert autotune.learned_defaults() == {}
    never = next(i for i, v in enumerate(autotune.VARIANTS) if v == dict(parallel_min=1 << 62))
    pick = Options(**autotune.VARIANTS[never])
    autotune.record_choice(pick)
    assert autotune.learned_defaults() == {}                  # one win is not enough
    autotune.record_choice(pick)
    assert autotune.learned_defaults() == dict(parallel_min=1 << 62)
    for _ in range(2):
        autotune.record_choice(Options())                     # the plain defaults win as often: keep them
    assert autotune.learned_defaults() == {}
    autotune.record_choice(pick)
    monkeypatch.setenv("EMBER_LEARNED_DEFAULTS", "0")
    assert autotune.learned_defaults() == {}
    monkeypatch.delenv("EMBER_LEARNED_DEFAULTS")
    # a compile without tuning now generates code with the learned threshold
    cf = ember.compile(lambda x: (x * 2).exp())
    x = ember.randn(300, 300)
    np.testing.assert_allclose(cf(x).numpy(), (x * 2).exp().numpy(), rtol=1e-6)
    src = cf.entries[-1].runner.native.source
    assert f"#define EMBER_PARALLEL_MIN {1 << 62}LL" in src


def test_max_autotune_records_its_choice(tmp_path, monkeypatch):
    from ember.compiler import autotune
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    cf = ember.compile(lambda a, b: (a @ b).relu(), mode="max-autotune")
    a, b = ember.randn(64, 80), ember.randn(80, 96)
    for _ in range(3):          # the native code is built (and tuned) from the second call
        np.testing.assert_allclose(cf(a, b).numpy(), (a @ b).relu().numpy(), rtol=1e-5, atol=1e-5)
    import json
    with open(autotune._learned_path()) as f:
        wins = json.load(f)
    assert sum(autotune._tally(wins).values()) == 1              # one program, one win


@needs_gemm
def test_max_autotune_times_each_distinct_program_once_and_keeps_the_default_unless_clearly_faster(
        tmp_path, monkeypatch):
    """Variants whose C is the default's (a BLAS-only setting where ember's GEMM runs the product) are not
    timed as candidates of their own; a variant replaces the default only when faster by the margin (with
    a margin no time can meet, the default stays)."""
    from ember.compiler import autotune
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "MARGIN", 0.0)
    cf = ember.compile(lambda a, b: (a @ b).relu(), mode="max-autotune")
    a, b = ember.randn(128, 96), ember.randn(96, 112)
    for _ in range(3):
        np.testing.assert_allclose(cf(a, b).numpy(), (a @ b).relu().numpy(), rtol=1e-5, atol=1e-5)
    tuner = cf.entries[-1].runner.native.autotuner
    assert tuner.done and tuner.choice == 0
    timed = set(tuner.timings)
    split = repr(tuner._opts(autotune.VARIANTS.index(dict(gemm_split_min=1 << 21))))
    assert repr(tuner._opts(0)) in timed and split not in timed
    assert 1 < len(timed) < len(autotune.VARIANTS)


@needs_gemm
def test_small_gemms_run_on_one_thread_whatever_is_asked():
    """Below EM_GEMM_PAR_MIN (8M multiply-adds) the product never reaches the pool (one thread); from it,
    two threads asked for are two (the pool's last job says so); exact_threads splits even small ones."""
    import ctypes
    lib = gemm.library()[0]
    last = lib.get("ember_pool_last", (ctypes.c_void_p,), None)

    def pool_job(fn):
        before, after = np.full(5, -1, np.int64), np.full(5, -1, np.int64)
        last(before.ctypes.data)
        fn()
        last(after.ctypes.data)
        return None if (before == after).all() else after      # (a job's time in ns tells jobs apart)

    rng = np.random.default_rng(0)
    big = rng.standard_normal((256, 256)).astype(np.float32)           # 16.7M multiply-adds
    small = rng.standard_normal((128, 128)).astype(np.float32)         # 2.1M
    # (a helper sent out by an earlier job on a busy machine sits out for up to 0.5 s, and meanwhile the
    # GEMM runs its one-thread code: pool_c.py em_pool_ready)
    time.sleep(0.6)
    job = pool_job(lambda: gemm.sgemm(big, big, threads=2))
    assert job is not None and job[0] >= 2                            # items on the pool
    # (while a pool thread still polls after a job, products split from 2M: pool_c.py; wait that out)
    time.sleep(0.05)
    assert pool_job(lambda: gemm.sgemm(small, small, threads=2)) is None
    job = pool_job(lambda: gemm.sgemm(small, small, threads=2, exact_threads=True))
    assert job is not None and job[0] >= 2
    np.testing.assert_allclose(gemm.sgemm(small, small, threads=2), small.astype(np.float64) @ small,
                               rtol=1e-5, atol=1e-4)
