"""The C text of ember's float32 GEMM (see gemm.py for when it runs and how it is measured).

``C = op(A) @ op(B)`` for row-major float32 matrices, ``op`` a transpose or not, in batches. The shapes
(M, N, K), leading dimensions and batch strides are run-time arguments, so one compiled function serves
every size (and dynamic shapes).

Blocking (the usual packed-panel scheme): K is cut into blocks of ``EM_KC``; for each block op(B) is
packed into panels of ``EM_NR`` columns (k-major, zero-padded), shared by all threads; the work items are
(row block of ``EM_MC`` rows) x (chunk of column panels). A thread packs its row block of op(A) into
micro-panels of ``EM_MR`` rows (kept when its next item has the same rows) and runs the register tile
``EM_MR x EM_NR`` over each panel of its chunk. The items run on ember's work pool (pool_c.py): threads
claim them one at a time and the call returns when all are done, so a thread whose core is busy with
another process takes fewer items instead of holding everyone up. Batches of small GEMMs run one GEMM
per item. The thread count is OpenMP's (``omp_get_max_threads()``, which ``ember.set_num_threads`` sets).

The register tile is written with GCC vector types: 16 floats (one zmm register) where ``__AVX512F__``
is defined, 8 (one ymm) with AVX2+FMA; the same code in both. ``a * b + c`` becomes one fused
multiply-add (``-ffp-contract=fast``, implied by ``-std=gnu11``). Elsewhere nothing is compiled and
``EM_SGEMM_OR`` is the BLAS call alone. Packing buffers are per thread (thread-local, grown on demand and
kept); when one cannot be allocated the functions return 0 and the caller runs the BLAS.
"""
from .pool_c import POOL_C

SGEMM_C = r"""/* ember's sgemm (ember.compiler.gemm_c): C = op(A) op(B), row-major float32 */
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define EM_HAVE_SGEMM 1
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>
__EM_POOL__
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
/* nb*M*N*K below this: one thread. Waking a thread costs 10-20 us, and on cores shared with other
   processes a thread may wait a time slice: measured on 2 busy cores, the MLP step at batch 64 (GEMMs of
   4-13M multiply-adds) ran 1.2-4x slower on two threads than on one; from batch 512 (100M) two won. */
#define EM_GEMM_PAR_MIN (1LL << 24)
#endif
#ifdef _OPENMP
#define EM_MAXT() omp_get_max_threads()     /* ember.set_num_threads() sets OpenMP's count */
#else
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
  if (nr == EM_NR) {              /* whole rows: vector stores (mr < MR only at the bottom edge) */
#pragma GCC unroll 8
    for (int i = 0; i < EM_MR; i++) {
      if (i >= mr) break;
#pragma GCC unroll 4
      for (int v = 0; v < EM_NV; v++) {
        em_vfu *p = (em_vfu *)(c + i * ldc + v * EM_VW);
        *p = acc ? *p + r[i][v] : r[i][v];
      }
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

/* one parallel GEMM's shared state (the pool's tasks below read it) */
typedef struct {
  int ta, tb;
  long N;
  const float *A;
  long lda;
  const float *B;
  long ldb;
  float *C;
  long ldc;
  float *bp, *ap0;            /* the shared packed panels; worker w's row block at ap0 + w * asize */
  size_t asize;
  long nch, ppc;              /* column chunks per row block, panels per chunk */
  long k0;
  int kc;
  long M;
  long *packed;               /* per worker: the row block its buffer holds (-1: none) */
} em_gemm_job;

static void em_task_pack_b(void *c, long p, int w) {
  const em_gemm_job *j = (const em_gemm_job *)c;
  (void)w;
  em_pack_b(j->bp + p * EM_KC * EM_NR, j->tb, j->B, j->ldb, j->N, j->k0, j->kc, p * EM_NR);
}

static void em_task_block(void *c, long it, int w) {
  const em_gemm_job *j = (const em_gemm_job *)c;
  const long mb = it / j->nch, ch = it % j->nch, np = (j->N + EM_NR - 1) / EM_NR;
  const long i0 = mb * EM_MC;
  const int mc = j->M - i0 < EM_MC ? (int)(j->M - i0) : EM_MC;
  float *ap = j->ap0 + (size_t)w * j->asize;
  if (j->packed[w] != mb) {
    em_pack_a(ap, j->ta, j->A, j->lda, i0, mc, j->k0, j->kc);
    j->packed[w] = mb;
  }
  em_block(ap, j->bp, j->C, j->ldc, j->N, i0, mc, j->kc, ch * j->ppc, (ch + 1) * j->ppc < np ? (ch + 1) * j->ppc : np,
           j->k0 > 0);
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
  em_gemm_job job = {ta, tb, N, A, lda, B, ldb, C, ldc, bp, ws + bsize, asize, nch, ppc, 0, 0, 0};
  long packed[nt];
  job.packed = packed;
  for (long k0 = 0; k0 < K; k0 += EM_KC) {
    job.k0 = k0;
    job.kc = K - k0 < EM_KC ? (int)(K - k0) : EM_KC;
    job.M = M;
    for (int w = 0; w < nt; w++) packed[w] = -1;
    em_pool_run(nt, np, em_task_pack_b, &job);
    em_pool_run(nt, items, em_task_block, &job);
  }
  return 1;
}

typedef struct {
  int ta, tb;
  long M, N, K;
  const float *A;
  long lda, sa;
  const float *B;
  long ldb, sb;
  float *C;
  long ldc, sc;
  _Atomic int failed;
} em_batch_job;

static void em_task_batch(void *c, long b, int w) {
  em_batch_job *j = (em_batch_job *)c;
  (void)w;
  if (!em_sgemm_nt(1, j->ta, j->tb, j->M, j->N, j->K, j->A + b * j->sa, j->lda, j->B + b * j->sb, j->ldb,
                   j->C + b * j->sc, j->ldc))
    atomic_store(&j->failed, 1);
}

/* nb GEMMs C[b] = op(A[b]) op(B[b]) (batch strides sa, sb, sc in floats) on up to nt threads
   (nt <= 0: OpenMP's count, or one below EM_GEMM_PAR_MIN); 0 when a buffer could not be allocated */
static int em_sgemm_batched(int nt, long nb, int ta, int tb, long M, long N, long K, const float *A, long lda,
                            long sa, const float *B, long ldb, long sb, float *C, long ldc, long sc) {
  if (nt <= 0) nt = (long long)nb * M * N * K < EM_GEMM_PAR_MIN ? 1 : EM_MAXT();
  if (nb == 1) return em_sgemm_nt(nt, ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
  if (nt > 1 && nb >= 2L * nt) {      /* one GEMM per item, each on one thread */
    em_batch_job job = {ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, 0};
    em_pool_run(nt, nb, em_task_batch, &job);
    return !atomic_load(&job.failed);
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

SGEMM_C = SGEMM_C.replace("__EM_POOL__", POOL_C)

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
