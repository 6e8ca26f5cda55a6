"""ember's float32 GEMM kernel (compiler/gemm_c.py), path by path, against NumPy in float64: op(A) read in
place or packed, op(B) packed by copies or 8x8 transposes (with and without a k remainder), edge tiles,
strided operands, K over several blocks, accumulation into C, batches and the split of one GEMM into row
groups x column chunks on several threads. Also: the AVX-512 tile, which this CPU may not run, compiles."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from ember.compiler import build, gemm
from ember.compiler import prims as P
from ember.compiler.gemm_c import LIBRARY_C, SGEMM_C

needs_gemm = pytest.mark.skipif(not gemm.available(), reason="this CPU has neither AVX-512 nor AVX2+FMA: "
                                                             "ember's GEMM is not compiled (the BLAS runs)")


def _op(rng, rows, cols, trans, pad=0):
    """op(X) of shape (rows, cols): X stored transposed when ``trans``; ``pad`` extra columns in storage
    (a leading dimension larger than the row)."""
    r, c = (cols, rows) if trans else (rows, cols)
    x = rng.uniform(-1, 1, (r, c + pad)).astype(np.float32)[:, :c]
    return x.T if trans else x


def _check(c, a, b, base=None):
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    if base is not None:
        ref = ref + base
    k = a.shape[-1]
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=2e-6 * max(1, k))


# (M, N, K): whole and edge tiles (MR 6, NR 16/32), op(A) transposed read in place (kc*mc <= 4096) or
# packed, op(B) transposed with K a multiple of 8 or not, K over 2-4 nearly equal blocks
SHAPES = [(64, 64, 32), (64, 32, 64), (7, 13, 13), (6, 32, 20), (12, 48, 8), (96, 64, 256), (97, 33, 257),
          (200, 70, 600), (130, 17, 784), (5, 100, 1030)]


@needs_gemm
@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("pad", [0, 5])
def test_kernel_paths_match_numpy(ta, tb, pad):
    rng = np.random.default_rng(ta * 4 + tb * 2 + pad)
    for M, N, K in SHAPES:
        a, b = _op(rng, M, K, ta, pad), _op(rng, K, N, tb, pad)
        _check(gemm.sgemm(a, b, threads=1), a, b)


@needs_gemm
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("tb", [0, 1])
def test_row_major_a_4kb_apart_is_packed(threads, tb):
    """op(A) stored row-major with rows a multiple of 4 KB apart is packed (8x8 transposes of MR rows, a
    k remainder, a last partial micro-panel) when op(B) has enough panels; op(A) stored transposed is
    packed a row of A at a time (masked loads near the block's end)."""
    rng = np.random.default_rng(7 + tb)
    for M, N, K, pad in ((97, 300, 1000, 24), (13, 260, 1024, 0), (200, 520, 2048, 0)):
        a, b = _op(rng, M, K, 0, pad), _op(rng, K, N, tb)
        assert a.strides[0] % 4096 == 0
        _check(gemm.sgemm(a, b, threads=threads, exact_threads=True), a, b)
        at = _op(rng, M, K, 1, pad)
        _check(gemm.sgemm(at, b, threads=threads, exact_threads=True), at, b)


@needs_gemm
@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("ta,tb", [(0, 1), (1, 0)])
def test_accumulate_adds_to_out(threads, ta, tb):
    rng = np.random.default_rng(threads + ta)
    for M, N, K in ((64, 64, 32), (97, 33, 300), (300, 70, 40)):
        a, b = _op(rng, M, K, ta), _op(rng, K, N, tb)
        out = rng.uniform(-1, 1, (M, N)).astype(np.float32)
        base = out.astype(np.float64)
        r = gemm.sgemm(a, b, threads=threads, out=out, accumulate=True, exact_threads=True)
        _check(r, a, b, base)
        _check(out, a, b, base)
    c = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match="accumulate"):
        gemm.sgemm(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32), accumulate=True)
    with pytest.raises(ValueError, match="C-contiguous"):
        gemm.sgemm(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32), out=c.T, accumulate=True)
    with pytest.raises(ValueError, match="C-contiguous"):       # it would have received a copy's result
        gemm.sgemm(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32), out=c.T)


@needs_gemm
@pytest.mark.parametrize("threads", [2, 3, 4])
def test_one_gemm_split_over_threads(threads):
    """Column chunks and row groups (300 x 70 on 4 threads: 2-3 chunks x 6-8 groups, by layout), one chunk (N <= NR),
    fewer tiles than threads want (M = 7), K over several blocks: each item packs its own panels."""
    rng = np.random.default_rng(threads)
    for ta, tb in ((0, 0), (0, 1), (1, 0), (1, 1)):
        for M, N, K in ((300, 70, 40), (512, 256, 300), (7, 300, 9), (1000, 16, 64), (37, 1000, 513)):
            a, b = _op(rng, M, K, ta, 3), _op(rng, K, N, tb, 3)
            _check(gemm.sgemm(a, b, threads=threads, exact_threads=True), a, b)


@needs_gemm
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_batched_attention_products(threads, ta, tb):
    """Attention's products and their backward layouts: 64 batches (one GEMM per item on several threads)
    and 3 batches (< 2 per thread: each GEMM split, the batch in the item index)."""
    rng = np.random.default_rng(threads * 4 + ta * 2 + tb)
    for nb, M, N, K in ((64, 64, 64, 32), (64, 64, 32, 64), (3, 70, 50, 90)):
        a = rng.uniform(-1, 1, (nb, K, M) if ta else (nb, M, K)).astype(np.float32)
        b = rng.uniform(-1, 1, (nb, N, K) if tb else (nb, K, N)).astype(np.float32)
        a = a.transpose(0, 2, 1) if ta else a
        b = b.transpose(0, 2, 1) if tb else b
        _check(gemm.sgemm(a, b, threads=threads, exact_threads=True), a, b)


@needs_gemm
@pytest.mark.parametrize("threads", [2, 3])
def test_long_batch_of_small_products_every_one_once(threads):
    """A batch of many small products runs in guided items (large first, single products last, never
    more items than the pool's item table holds): every product is computed once and right, and C's
    elements past the batch stay untouched."""
    rng = np.random.default_rng(threads)
    for nb, M, N, K in ((1000, 4, 5, 6), (129, 7, 17, 9)):
        a = rng.uniform(-1, 1, (nb, M, K)).astype(np.float32)
        b = rng.uniform(-1, 1, (nb, K, N)).astype(np.float32)
        out = np.full(nb * M * N + 7, 5.0, np.float32)
        r = gemm.sgemm(a, b, threads=threads, out=out[:nb * M * N], exact_threads=True)
        _check(r, a, b)
        assert (out[nb * M * N:] == 5.0).all()


def test_tile_width_follows_the_cpu_flags():
    """The tile runs where cpuid and the OS (XCR0) allow it: 16-float vectors only with AVX-512F, none
    without AVX2+FMA (then available() is False and the BLAS runs)."""
    with open("/proc/cpuinfo") as f:
        flags = set(re.search(r"^flags\s*:(.*)$", f.read(), re.M).group(1).split())
    if "avx512f" in flags:
        assert gemm.simd_width() == 16
    elif {"avx2", "fma"} <= flags:
        assert gemm.simd_width() == 8 and gemm.available()
    else:
        assert not gemm.available()


def _compile_only(tmp_path, flags):
    argv = build._compiler()[0]
    src = tmp_path / "sgemm.c"
    src.write_text("\n".join([P.C_PRELUDE, build.OMP_PRELUDE, SGEMM_C, LIBRARY_C]))
    out = tmp_path / "sgemm.s"
    r = subprocess.run([*argv, "-O2", "-std=gnu11", "-fopenmp", "-fPIC", *flags, "-S", str(src), "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out.read_text()


def test_avx512_tile_compiles(tmp_path):
    """The 512-bit tile is what a CPU with AVX-512 runs; this machine may not have it, so at least its C
    must compile and use zmm fused multiply-adds; the AVX2 tile uses ymm and none of them; a CPU with
    neither compiles the stub (every GEMM runs the BLAS)."""
    asm = _compile_only(tmp_path, ("-mavx512f", "-mavx2", "-mfma"))
    assert re.search(r"vfmadd\w*ps\s+[^\n]*%zmm", asm)
    asm = _compile_only(tmp_path, ("-mavx2", "-mfma", "-mno-avx512f"))
    assert re.search(r"vfmadd\w*ps\s+[^\n]*%ymm", asm) and "%zmm" not in asm
    asm = _compile_only(tmp_path, ("-mno-avx2",))
    assert "vfmadd" not in asm and "ember_sgemm" in asm


@needs_gemm
@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs at least two CPUs this process may use")
def test_pool_threads_keep_off_the_callers_cpu():
    """During a job the pool's helper may run anywhere the process may except the caller's CPU; a helper
    the caller found late was moved onto the caller's CPU alone (test_pool_late_helper.py); the library
    says whether it pins, /proc shows the helper's affinity: one CPU fewer, or one CPU."""
    code = ("import ctypes, json, os, numpy as np\n"
            "from ember.compiler import gemm\n"
            "lib = gemm.library()[0]\n"
            "pinned = lib.get('ember_pool_pinned', (), ctypes.c_int)\n"
            "a = np.ones((512, 512), np.float32)\n"
            "mine = os.sched_getaffinity(0)\n"
            "for _ in range(5):\n"
            "    gemm.sgemm(a, a, threads=2)\n"
            "    others = [sorted(os.sched_getaffinity(int(t))) for t in os.listdir('/proc/self/task')]\n"
            "    print(json.dumps([pinned(), len(mine), [s for s in others if set(s) != mine]]))\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for line in r.stdout.splitlines():
        pinned, n, differ = json.loads(line)
        if pinned:                                   # one helper thread, pinned away from one CPU
            assert len(differ) == 1 and len(differ[0]) in (n - 1, 1), line
        else:
            assert differ == [], line
