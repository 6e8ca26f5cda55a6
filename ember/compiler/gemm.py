"""ember's own single-precision GEMM, emitted into generated C for CPUs with AVX-512.

The BLAS that ember links (OpenBLAS from scipy-openblas32) picks its kernels by CPU model; where it runs
its AVX2 kernels on an AVX-512 CPU (this project's machine pins ``OPENBLAS_CORETYPE=Haswell``), a plain
6x32 AVX-512 register tile with packed panels measured 1.6-1.8x faster on the training steps' GEMMs
(MLP and GPT shapes, one thread). ``render_special.emit_gemm`` calls ``em_sgemm`` for float32 GEMMs of at
least ``MIN_WORK`` multiply-adds; below that (attention's 64x64x32 tiles) packing costs more than it saves
and the BLAS runs. The C is compiled only where ``__AVX512F__`` is defined (``-march=native``); elsewhere,
and if its buffers cannot be allocated, the same call site runs the BLAS. ``EMBER_NATIVE_GEMM=0`` turns
it off. Accuracy: fused multiply-adds in K order within blocks of ``EM_KC``, like the BLAS kernels (the
tests compare against eager at 1e-5 relative).
"""
from __future__ import annotations

import os

MIN_WORK = 1 << 20          # M*N*K below this: the BLAS (measured: packing dominates tiny GEMMs)


def enabled() -> bool:
    return os.environ.get("EMBER_NATIVE_GEMM", "1") not in ("0", "")


SGEMM_C = r"""/* ember's sgemm (ember.compiler.gemm): C = alpha op(A) op(B) + beta C, row-major */
#ifdef __AVX512F__
#include <immintrin.h>
#define EM_MR 6
#define EM_NR 32
#define EM_KC 256
static void em_sgemm_tile(int kc, const float *ap, const float *bp, float *c, long ldc, float alpha, float beta,
                          int first, int mr, int nr) {
  __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(), c11 = _mm512_setzero_ps(),
         c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps(), c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps(),
         c40 = _mm512_setzero_ps(), c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps();
  for (int k = 0; k < kc; k++) {
    const __m512 b0 = _mm512_loadu_ps(bp + k * EM_NR), b1 = _mm512_loadu_ps(bp + k * EM_NR + 16);
    const float *a = ap + k * EM_MR;
    __m512 x;
    x = _mm512_set1_ps(a[0]); c00 = _mm512_fmadd_ps(x, b0, c00); c01 = _mm512_fmadd_ps(x, b1, c01);
    x = _mm512_set1_ps(a[1]); c10 = _mm512_fmadd_ps(x, b0, c10); c11 = _mm512_fmadd_ps(x, b1, c11);
    x = _mm512_set1_ps(a[2]); c20 = _mm512_fmadd_ps(x, b0, c20); c21 = _mm512_fmadd_ps(x, b1, c21);
    x = _mm512_set1_ps(a[3]); c30 = _mm512_fmadd_ps(x, b0, c30); c31 = _mm512_fmadd_ps(x, b1, c31);
    x = _mm512_set1_ps(a[4]); c40 = _mm512_fmadd_ps(x, b0, c40); c41 = _mm512_fmadd_ps(x, b1, c41);
    x = _mm512_set1_ps(a[5]); c50 = _mm512_fmadd_ps(x, b0, c50); c51 = _mm512_fmadd_ps(x, b1, c51);
  }
  __m512 r[12] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int i = 0; i < mr; i++) {
    for (int h = 0; h < 2 && h * 16 < nr; h++) {
      int w = nr - h * 16 < 16 ? nr - h * 16 : 16;
      __mmask16 m = (__mmask16)((1u << w) - 1u);
      float *cp = c + i * ldc + h * 16;
      __m512 v = r[i * 2 + h];
      if (first) {
        if (alpha != 1.0f) v = _mm512_mul_ps(v, va);
        if (beta != 0.0f) v = _mm512_add_ps(v, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m, cp)));
      } else {
        if (alpha != 1.0f) v = _mm512_mul_ps(v, va);
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, cp));
      }
      _mm512_mask_storeu_ps(cp, m, v);
    }
  }
}
/* returns 0 when it could not allocate (the caller then uses the BLAS) */
static int em_sgemm(int ta, int tb, long M, long N, long K, float alpha, const float *A, long lda,
                    const float *B, long ldb, float beta, float *C, long ldc) {
  if (M <= 0 || N <= 0) return 1;
  if (K <= 0) {
    for (long i = 0; i < M; i++) for (long j = 0; j < N; j++) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return 1;
  }
  const long np = (N + EM_NR - 1) / EM_NR;
  float *bp = (float *)aligned_alloc(64, sizeof(float) * (size_t)(EM_KC * EM_NR * np));
  float *ap = (float *)aligned_alloc(64, sizeof(float) * (size_t)(EM_KC * EM_MR));
  if (!bp || !ap) { free(bp); free(ap); return 0; }
  for (long k0 = 0; k0 < K; k0 += EM_KC) {
    const int kc = K - k0 < EM_KC ? (int)(K - k0) : EM_KC;
    for (long p = 0; p < np; p++) {                 /* pack op(B)[k0:k0+kc, p*NR : p*NR+NR] */
      float *dst = bp + p * EM_KC * EM_NR;
      const long j0 = p * EM_NR;
      const int nr = N - j0 < EM_NR ? (int)(N - j0) : EM_NR;
      for (int k = 0; k < kc; k++) {
        float *d = dst + k * EM_NR;
        if (!tb) { const float *s = B + (k0 + k) * ldb + j0; for (int j = 0; j < nr; j++) d[j] = s[j]; }
        else { const float *s = B + j0 * ldb + (k0 + k); for (int j = 0; j < nr; j++) d[j] = s[j * ldb]; }
        for (int j = nr; j < EM_NR; j++) d[j] = 0.0f;
      }
    }
    for (long i0 = 0; i0 < M; i0 += EM_MR) {
      const int mr = M - i0 < EM_MR ? (int)(M - i0) : EM_MR;
      for (int k = 0; k < kc; k++) {               /* pack op(A)[i0:i0+MR, k0:k0+kc], k-major */
        float *d = ap + k * EM_MR;
        if (!ta) { for (int i = 0; i < mr; i++) d[i] = A[(i0 + i) * lda + k0 + k]; }
        else { const float *s = A + (k0 + k) * lda + i0; for (int i = 0; i < mr; i++) d[i] = s[i]; }
        for (int i = mr; i < EM_MR; i++) d[i] = 0.0f;
      }
      for (long p = 0; p < np; p++) {
        const long j0 = p * EM_NR;
        const int nr = N - j0 < EM_NR ? (int)(N - j0) : EM_NR;
        em_sgemm_tile(kc, ap, bp + p * EM_KC * EM_NR, C + i0 * ldc + j0, ldc, alpha, beta, k0 == 0, mr, nr);
      }
    }
  }
  free(bp);
  free(ap);
  return 1;
}
#define EM_SGEMM_OR(blas, ta, tb, M, N, K, al, A, lda, B, ldb, be, C, ldc) \
  do { if (!em_sgemm(ta, tb, M, N, K, al, A, lda, B, ldb, be, C, ldc)) { blas; } } while (0)
#else
#define EM_SGEMM_OR(blas, ta, tb, M, N, K, al, A, lda, B, ldb, be, C, ldc) do { blas; } while (0)
#endif
"""
