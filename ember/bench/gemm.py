"""Suite ``gemm``: ember's float32 GEMM (compiler/gemm.py) in GFLOP/s against the FMA peak measured here.

The peak: a loop of 12 independent fused multiply-add chains on registers of the width the GEMM uses
(512-bit with AVX-512, else 256-bit), on one thread and on every thread of ``--threads``; the N-thread
peak is at least N times the one-thread peak (on a shared machine the N-thread loop seldom finds every
core free: measured here 102 GFLOP/s on two threads for 103.5 on one). Cases: the
GEMMs of the benchmark's training steps (MLP at batch 512 forward and backward, the small GPT at batch
16 x context 64, its attention as 64 batched 64x64x32 / 64x32x64 products, forward and backward), each on every thread count of
``--threads`` (``ember@Nt``) and NumPy's BLAS on one thread (``numpy``), interleaved. The report prints
GFLOP/s and the share of the peak for the same thread count.
"""
from __future__ import annotations

import ctypes
import sys
import time

import numpy as np

from .harness import Result

# (name, batch, M, N, K, transpose A?, transpose B?)
SHAPES = [
    ("mlp_fc1_fwd", 1, 512, 256, 784, 0, 1),
    ("mlp_fc1_dw", 1, 256, 784, 512, 1, 0),
    ("mlp_fc2_fwd", 1, 512, 256, 256, 0, 1),
    ("mlp_fc2_dw", 1, 256, 256, 512, 1, 0),
    ("mlp_fc2_dx", 1, 512, 256, 256, 0, 0),
    ("gpt_qkv", 1, 1024, 384, 128, 0, 1),
    ("gpt_proj", 1, 1024, 128, 128, 0, 1),
    ("gpt_fc", 1, 1024, 512, 128, 0, 1),
    ("gpt_fc_dx", 1, 1024, 128, 512, 0, 0),
    ("gpt_proj2", 1, 1024, 128, 512, 0, 1),
    ("gpt_fc_dw", 1, 512, 128, 1024, 1, 0),
    ("gpt_proj2_dw", 1, 128, 512, 1024, 1, 0),   # the other weight gradients (split along K on threads)
    ("gpt_qkv_dw", 1, 384, 128, 1024, 1, 0),
    ("gpt_proj_dw", 1, 128, 128, 1024, 1, 0),
    ("attn_qk", 64, 64, 64, 32, 0, 1),          # also the backward's dP = dO V^T
    ("attn_av", 64, 64, 32, 64, 0, 0),          # also dQ = dS K
    ("attn_dv", 64, 64, 32, 64, 1, 0),          # dV = P^T dO, dK = dS^T Q
    ("square_1024", 1, 1024, 1024, 1024, 0, 0),
]

_PEAK_C = r"""
#include <immintrin.h>
#include <stdint.h>
#ifdef __AVX512F__
typedef __m512 v_t;
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define WIDTH 16
#else
typedef __m256 v_t;
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define WIDTH 8
#endif
/* flops of `iters` rounds of 12 independent FMA chains, per thread; returns a value to keep it alive */
float ember_fma_loop(long iters) {
  v_t a0 = SET1(0.1f), a1 = SET1(0.2f), a2 = SET1(0.3f), a3 = SET1(0.4f), a4 = SET1(0.5f), a5 = SET1(0.6f),
      a6 = SET1(0.7f), a7 = SET1(0.8f), a8 = SET1(0.9f), a9 = SET1(1.0f), a10 = SET1(1.1f), a11 = SET1(1.2f);
  const v_t x = SET1(0.999f), y = SET1(1e-4f);
  for (long i = 0; i < iters; i++) {
    a0 = FMA(a0, x, y); a1 = FMA(a1, x, y); a2 = FMA(a2, x, y); a3 = FMA(a3, x, y);
    a4 = FMA(a4, x, y); a5 = FMA(a5, x, y); a6 = FMA(a6, x, y); a7 = FMA(a7, x, y);
    a8 = FMA(a8, x, y); a9 = FMA(a9, x, y); a10 = FMA(a10, x, y); a11 = FMA(a11, x, y);
  }
  v_t s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
  float o[WIDTH];
  __builtin_memcpy(o, &s, sizeof(o));
  return o[0];
}
int ember_fma_width(void) { return WIDTH; }
double ember_fma_peak(int nt, long iters) {
  double t0 = omp_get_wtime();
  float sink = 0.0f;
#pragma omp parallel num_threads(nt) reduction(+ : sink)
  sink += ember_fma_loop(iters);
  double dt = omp_get_wtime() - t0;
  return sink == 12345.0f ? 0.0 : (double)iters * 12 * 2 * WIDTH * nt / dt / 1e9;
}
/* GFLOP/s of nt threads each running the loop in short chunks until `seconds` after the start: a thread
   that starts late or loses its core for a while does less, nobody waits for it (the threads' work
   shared dynamically, as ember's pool shares a GEMM's items) */
double ember_fma_share(int nt, double seconds) {
  const double t0 = omp_get_wtime(), end = t0 + seconds;
  float sink = 0.0f;
  long total = 0;
#pragma omp parallel num_threads(nt) reduction(+ : sink, total)
  while (omp_get_wtime() < end) {
    sink += ember_fma_loop(2000);
    total += 2000;
  }
  const double dt = omp_get_wtime() - t0;
  return sink == 12345.0f ? 0.0 : (double)total * 12 * 2 * WIDTH / dt / 1e9;
}
"""


def _peak_library():
    from ..compiler import build
    return build.compile_source(build.OMP_PRELUDE + _PEAK_C, name="ember_fma_peak")


def fma_share():
    """``run(threads, seconds)``: GFLOP/s of the FMA loop on ``threads`` threads sharing ``seconds`` of
    wall time dynamically (``ember_fma_share``: a thread whose core is busy does less, nobody waits)."""
    return _peak_library().get("ember_fma_share", (ctypes.c_int, ctypes.c_double), ctypes.c_double)


def peak_gflops(threads: int, repeat: int = 40) -> tuple:
    """(GFLOP/s, vector width) of the FMA loop on ``threads`` threads: the best of ``repeat`` short runs
    (about 0.5 ms each, so that one of them finds the cores free on a shared machine)."""
    lib = _peak_library()
    fn = lib.get("ember_fma_peak", (ctypes.c_int, ctypes.c_long), ctypes.c_double)
    width = lib.get("ember_fma_width", (), ctypes.c_int)()
    return max(fn(threads, 200_000) for _ in range(repeat)), width


def _operands(rng, nb, M, N, K, ta, tb):
    a = rng.standard_normal((nb, K, M) if ta else (nb, M, K)).astype(np.float32)
    b = rng.standard_normal((nb, N, K) if tb else (nb, K, N)).astype(np.float32)
    a = a.transpose(0, 2, 1) if ta else a
    b = b.transpose(0, 2, 1) if tb else b
    return (a, b) if nb > 1 else (a[0], b[0])


_PEAKS: dict = {}


def results(repeat: int = 15, name_filter=None, threads: int = 1) -> list:
    from ..compiler import gemm
    from . import threads as _threads
    counts = _threads.counts()
    if not gemm.available():
        print("gemm: this CPU has neither AVX-512 nor AVX2+FMA; ember's GEMM is not compiled (the BLAS runs)")
        return []
    for n in sorted(set(counts) | {1}):
        _PEAKS[n] = peak_gflops(n)
    for n in counts:                      # (N cores can do N times what one does, measured or not)
        _PEAKS[n] = (max(_PEAKS[n][0], n * _PEAKS[1][0]), _PEAKS[n][1])
    out = []
    rng = np.random.default_rng(0)
    try:
        import threadpoolctl
        blas1 = threadpoolctl.threadpool_limits(1, "blas")
    except Exception:
        blas1 = None
    for name, nb, M, N, K, ta, tb in SHAPES:
        if name_filter and name_filter not in name:
            continue
        a, b = _operands(rng, nb, M, N, K, ta, tb)
        c = np.empty((nb, M, N) if nb > 1 else (M, N), np.float32)
        flops = 2.0 * nb * M * N * K
        number = max(1, int(2e8 / flops))
        # ember: one foreign call per run, its arguments worked out beforehand (as generated code calls it)
        fns = {f"ember@{n}t": gemm.sgemm_call(a, b, threads=n, out=c)[0] for n in counts}
        fns["numpy"] = lambda: np.matmul(a, b, out=c)
        samples = {k: [] for k in fns}
        for f in fns.values():
            f()
        for r in range(repeat):
            for label, f in (fns.items() if r % 2 == 0 else reversed(list(fns.items()))):
                t0 = time.perf_counter()
                for _ in range(number):
                    f()
                samples[label].append((time.perf_counter() - t0) / number)
        out += [Result(f"{name}_{nb}x{M}x{N}x{K}", "gemm", k, v, "us", "call") for k, v in samples.items()]
    if blas1 is not None:
        blas1.restore_original_limits()
    return out


def cases() -> list:
    return []


def report(res, file=None) -> dict:
    file = file if file is not None else sys.stdout
    rows = {}
    print("\ngemm: GFLOP/s of the median sample (share of the FMA peak measured here on as many threads; "
          "numpy: 1 thread), of the best sample (what a quiet machine gives), and vs 1t: speed over ember's "
          "own one-thread run (the --busy criterion is >= 0.9)", file=file)
    for n, (p, w) in sorted(_PEAKS.items()):
        print(f"  FMA peak, {n} thread(s), {w * 32}-bit vectors: {p:7.1f} GFLOP/s", file=file)
    one = {r.name: r.median for r in res if r.suite == "gemm" and r.variant == "ember@1t"}
    for r in res:
        if r.suite != "gemm":
            continue
        dims = [int(x) for x in r.name.rsplit("_", 1)[1].split("x")]
        gf = 2.0 * np.prod(dims) / r.median / 1e9
        n = int(r.variant.split("@")[1][:-1]) if "@" in r.variant else 1
        peak = _PEAKS.get(n, (None,))[0]
        share = gf / peak if peak else None
        best = 2.0 * np.prod(dims) / min(r.samples) / 1e9
        vs1 = one[r.name] / r.median if n > 1 and r.name in one else None
        rows[f"{r.name}/{r.variant}"] = {"gflops": gf, "share_of_peak": share, "best_gflops": best, "vs_1t": vs1}
        s = f"{share * 100:5.0f}%" if share is not None else "     -"
        b = f"{best / peak * 100:4.0f}%" if peak else "    -"
        v = f"  {vs1:5.2f}x vs 1t" if vs1 is not None else ""
        print(f"  {r.name:28s} {r.variant:9s} {gf:8.1f} GFLOP/s {s}  best {best:6.1f} {b}{v}", file=file)
    return {"peaks": {str(k): v[0] for k, v in _PEAKS.items()}, "rows": rows}
