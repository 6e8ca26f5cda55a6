"""The C text of ember's float32 GEMM (see gemm.py for when it runs and how it is measured).

``C = op(A) @ op(B)`` for row-major float32 matrices, ``op`` a transpose or not, in batches. The shapes
(M, N, K), leading dimensions and batch strides are run-time arguments, so one compiled function serves
every size (and dynamic shapes).

Blocking (the usual packed-panel scheme): K is cut into blocks of ``EM_KC``; for each block op(B) is
packed into panels of ``EM_NR`` columns (k-major, zero-padded), shared by all threads; the work items are
(row block of ``EM_MC`` rows) x (chunk of column panels). A thread packs its row block of op(A) into
micro-panels of ``EM_MR`` rows (kept when its next item has the same rows) and runs the register tile
``EM_MR x EM_NR`` over each panel of its chunk. Threads take items dynamically from OpenMP's shared
counter (``schedule(dynamic, 1)``), so a thread whose core is busy with another process takes fewer
items instead of holding everyone up. Batches of small GEMMs run one GEMM per thread.

The register tile is written with GCC vector types: 16 floats (one zmm register) where ``__AVX512F__``
is defined, 8 (one ymm) with AVX2+FMA; the same code in both. ``a * b + c`` becomes one fused
multiply-add (``-ffp-contract=fast``, implied by ``-std=gnu11``). Elsewhere nothing is compiled and
``EM_SGEMM_OR`` is the BLAS call alone. Packing buffers are per thread (thread-local, grown on demand and
kept); when one cannot be allocated the functions return 0 and the caller runs the BLAS.
"""

SGEMM_C = r"""/* ember's sgemm (ember.compiler.gemm_c): C = op(A) op(B), row-major float32 */
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define EM_HAVE_SGEMM 1
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>
#ifdef __AVX512F__
#define EM_VW 16
#define EM_BCAST(x) ((em_vf)_mm512_set1_ps(x))
#else
#define EM_VW 8
#define EM_BCAST(x) ((em_vf)_mm256_set1_ps(x))
#endif
#ifndef EM_MR
#define EM_MR 6
#endif
#ifndef EM_NV
#define EM_NV 2
#endif
#define EM_NR (EM_VW * EM_NV)
#ifndef EM_KC
#define EM_KC 256
#endif
#ifndef EM_MC
#define EM_MC 96
#endif
#ifndef EM_GEMM_PAR_MIN
#define EM_GEMM_PAR_MIN (1LL << 20)   /* M*N*K below this: one thread (a fork costs ~10-20 us) */
#endif
#ifdef _OPENMP
#define EM_TID() omp_get_thread_num()
#define EM_MAXT() omp_get_max_threads()
#else
#define EM_TID() 0
#define EM_MAXT() 1
#endif
typedef float em_vf __attribute__((vector_size(EM_VW * 4)));
typedef float em_vfu __attribute__((vector_size(EM_VW * 4), aligned(4)));

static __thread float *em_ws = 0;
static __thread size_t em_ws_cap = 0;

/* this thread's packing buffer of at least n floats (64-byte aligned), or NULL */
static float *em_workspace(size_t n) {
  if (n > em_ws_cap) {
    size_t cap = (n + 4095) & ~(size_t)4095;
    float *p = (float *)aligned_alloc(64, cap * sizeof(float));
    if (!p) return 0;
    free(em_ws);
    em_ws = p;
    em_ws_cap = cap;
  }
  return em_ws;
}

/* the register tile: c[0:mr, 0:nr] (+)= ap (kc x MR, k-major) times bp (kc x NR, k-major) */
static inline void em_tile(int kc, const float *restrict ap, const float *restrict bp, float *restrict c,
                           long ldc, int mr, int nr, int acc) {
  em_vf r[EM_MR][EM_NV];
#pragma GCC unroll 8
  for (int i = 0; i < EM_MR; i++)
#pragma GCC unroll 4
    for (int v = 0; v < EM_NV; v++) r[i][v] = (em_vf){0};
  for (int k = 0; k < kc; k++) {
    em_vf b[EM_NV];
#pragma GCC unroll 4
    for (int v = 0; v < EM_NV; v++) b[v] = *(const em_vf *)(bp + k * EM_NR + v * EM_VW);
    const float *a = ap + k * EM_MR;
#pragma GCC unroll 8
    for (int i = 0; i < EM_MR; i++) {
      const em_vf x = EM_BCAST(a[i]);
#pragma GCC unroll 4
      for (int v = 0; v < EM_NV; v++) r[i][v] += x * b[v];
    }
  }
  if (mr == EM_MR && nr == EM_NR) {
#pragma GCC unroll 8
    for (int i = 0; i < EM_MR; i++)
#pragma GCC unroll 4
      for (int v = 0; v < EM_NV; v++) {
        em_vfu *p = (em_vfu *)(c + i * ldc + v * EM_VW);
        *p = acc ? *p + r[i][v] : r[i][v];
      }
  } else {
    float t[EM_MR][EM_NR] __attribute__((aligned(64)));
#pragma GCC unroll 8
    for (int i = 0; i < EM_MR; i++)
#pragma GCC unroll 4
      for (int v = 0; v < EM_NV; v++) *(em_vf *)(&t[i][v * EM_VW]) = r[i][v];
    for (int i = 0; i < mr; i++)
      for (int j = 0; j < nr; j++) c[i * ldc + j] = acc ? c[i * ldc + j] + t[i][j] : t[i][j];
  }
}

/* op(B)[k0:k0+kc, j0:j0+NR] -> dst (kc x NR, zero-padded columns) */
static void em_pack_b(float *restrict dst, int tb, const float *B, long ldb, long N, long k0, int kc, long j0) {
  const int nr = N - j0 < EM_NR ? (int)(N - j0) : EM_NR;
  if (!tb) {
    for (int k = 0; k < kc; k++) {
      const float *s = B + (k0 + k) * ldb + j0;
      float *d = dst + k * EM_NR;
      for (int j = 0; j < nr; j++) d[j] = s[j];
      for (int j = nr; j < EM_NR; j++) d[j] = 0.0f;
    }
  } else {
    if (nr < EM_NR) memset(dst, 0, sizeof(float) * (size_t)kc * EM_NR);
    for (int j = 0; j < nr; j++) {
      const float *s = B + (j0 + j) * ldb + k0;
      for (int k = 0; k < kc; k++) dst[k * EM_NR + j] = s[k];
    }
  }
}

/* op(A)[i0:i0+mc, k0:k0+kc] -> dst: micro-panels of MR rows, each kc x MR (k-major, zero-padded rows) */
static void em_pack_a(float *restrict dst, int ta, const float *A, long lda, long i0, int mc, long k0, int kc) {
  for (int ir = 0; ir < mc; ir += EM_MR) {
    const int mr = mc - ir < EM_MR ? mc - ir : EM_MR;
    float *d = dst + (long)ir * kc;
    if (!ta) {
      if (mr < EM_MR) memset(d, 0, sizeof(float) * (size_t)kc * EM_MR);
      for (int i = 0; i < mr; i++) {
        const float *s = A + (i0 + ir + i) * lda + k0;
        for (int k = 0; k < kc; k++) d[k * EM_MR + i] = s[k];
      }
    } else {
      for (int k = 0; k < kc; k++) {
        const float *s = A + (k0 + k) * lda + i0 + ir;
        for (int i = 0; i < mr; i++) d[k * EM_MR + i] = s[i];
        for (int i = mr; i < EM_MR; i++) d[k * EM_MR + i] = 0.0f;
      }
    }
  }
}

/* rows i0:i0+mc of C, column panels p0:p1: the packed row block ap times the packed panels */
static void em_block(const float *ap, const float *bp, float *C, long ldc, long N, long i0, int mc, int kc,
                     long p0, long p1, int acc) {
  for (long p = p0; p < p1; p++) {
    const long j0 = p * EM_NR;
    const int nr = N - j0 < EM_NR ? (int)(N - j0) : EM_NR;
    const float *bpp = bp + p * EM_KC * EM_NR;
    for (int ir = 0; ir < mc; ir += EM_MR)
      em_tile(kc, ap + (long)ir * kc, bpp, C + (i0 + ir) * ldc + j0, ldc, mc - ir < EM_MR ? mc - ir : EM_MR, nr, acc);
  }
}

/* one GEMM on up to nt threads; 0 when a buffer could not be allocated (C is then unspecified) */
static int em_sgemm_nt(int nt, int ta, int tb, long M, long N, long K, const float *A, long lda,
                       const float *B, long ldb, float *C, long ldc) {
  if (M <= 0 || N <= 0) return 1;
  if (K <= 0) {
    for (long i = 0; i < M; i++) memset(C + i * ldc, 0, sizeof(float) * (size_t)N);
    return 1;
  }
  const long np = (N + EM_NR - 1) / EM_NR, nmb = (M + EM_MC - 1) / EM_MC;
  long nch = 1;
  if (nt > 1) {                    /* enough items for every thread to take a few */
    nch = (4L * nt + nmb - 1) / nmb;
    if (nch > np) nch = np;
  }
  const long ppc = (np + nch - 1) / nch;
  nch = (np + ppc - 1) / ppc;
  const long items = nmb * nch;
  if (nt > items) nt = (int)items;
  if (nt < 1) nt = 1;
  const size_t bsize = (size_t)EM_KC * EM_NR * np, asize = (size_t)EM_KC * EM_MC;
  float *ws = em_workspace(bsize + (size_t)nt * asize);
  if (!ws) return 0;
  float *bp = ws;
  if (nt == 1) {                   /* the same loops without OpenMP's bookkeeping (small GEMMs) */
    float *ap = ws + bsize;
    for (long k0 = 0; k0 < K; k0 += EM_KC) {
      const int kc = K - k0 < EM_KC ? (int)(K - k0) : EM_KC;
      for (long p = 0; p < np; p++) em_pack_b(bp + p * EM_KC * EM_NR, tb, B, ldb, N, k0, kc, p * EM_NR);
      for (long i0 = 0; i0 < M; i0 += EM_MC) {
        const int mc = M - i0 < EM_MC ? (int)(M - i0) : EM_MC;
        em_pack_a(ap, ta, A, lda, i0, mc, k0, kc);
        em_block(ap, bp, C, ldc, N, i0, mc, kc, 0, np, k0 > 0);
      }
    }
    return 1;
  }
#pragma omp parallel num_threads(nt) if(nt > 1)
  {
    float *ap = ws + bsize + (size_t)EM_TID() * asize;
    for (long k0 = 0; k0 < K; k0 += EM_KC) {
      const int kc = K - k0 < EM_KC ? (int)(K - k0) : EM_KC;
      long packed = -1;
#pragma omp for schedule(dynamic, 1)
      for (long p = 0; p < np; p++) em_pack_b(bp + p * EM_KC * EM_NR, tb, B, ldb, N, k0, kc, p * EM_NR);
#pragma omp for schedule(dynamic, 1)
      for (long it = 0; it < items; it++) {
        const long mb = it / nch, ch = it % nch;
        const long i0 = mb * EM_MC;
        const int mc = M - i0 < EM_MC ? (int)(M - i0) : EM_MC;
        if (packed != mb) {
          em_pack_a(ap, ta, A, lda, i0, mc, k0, kc);
          packed = mb;
        }
        em_block(ap, bp, C, ldc, N, i0, mc, kc, ch * ppc, (ch + 1) * ppc < np ? (ch + 1) * ppc : np, k0 > 0);
      }
    }
  }
  return 1;
}

/* nb GEMMs C[b] = op(A[b]) op(B[b]) (batch strides sa, sb, sc in floats) on up to nt threads
   (nt <= 0: the OpenMP default); 0 when a buffer could not be allocated */
static int em_sgemm_batched(int nt, long nb, int ta, int tb, long M, long N, long K, const float *A, long lda,
                            long sa, const float *B, long ldb, long sb, float *C, long ldc, long sc) {
  if (nt <= 0) nt = EM_MAXT();
  if ((long long)nb * M * N * K < EM_GEMM_PAR_MIN) nt = 1;
  if (nb == 1) return em_sgemm_nt(nt, ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
  if (nt > 1 && nb >= 2L * nt) {
    int ok = 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) reduction(&& : ok)
    for (long b = 0; b < nb; b++)
      ok = em_sgemm_nt(1, ta, tb, M, N, K, A + b * sa, lda, B + b * sb, ldb, C + b * sc, ldc) && ok;
    return ok;
  }
  for (long b = 0; b < nb; b++)
    if (!em_sgemm_nt(nt, ta, tb, M, N, K, A + b * sa, lda, B + b * sb, ldb, C + b * sc, ldc)) return 0;
  return 1;
}
/* the batched GEMM, or `blas` (a statement computing the same result) where it cannot run */
#define EM_SGEMM_OR(blas, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc) \
  do { if (!em_sgemm_batched(0, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc)) { blas; } } while (0)
#else
#define EM_HAVE_SGEMM 0
#define EM_SGEMM_OR(blas, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc) do { blas; } while (0)
#endif
"""

# a library of its own (tests, the bench, eager matmuls): the GEMM with exported entry points
LIBRARY_C = r"""
#include <stdint.h>
int ember_have_sgemm(void) { return EM_HAVE_SGEMM; }
int ember_simd_width(void) {
#if EM_HAVE_SGEMM
  return EM_VW;
#else
  return 0;
#endif
}
int ember_sgemm(int nt, long nb, int ta, int tb, long M, long N, long K, const float *A, long lda, long sa,
                const float *B, long ldb, long sb, float *C, long ldc, long sc) {
#if EM_HAVE_SGEMM
  return em_sgemm_batched(nt, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc);
#else
  return 0;
#endif
}
"""
