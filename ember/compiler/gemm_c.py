"""The C text of ember's float32 GEMM (see gemm.py for when it runs and how it is measured).

``C = op(A) @ op(B)`` for row-major float32 matrices, ``op`` a transpose or not, in batches. The shapes
(M, N, K), leading dimensions and batch strides are run-time arguments, so one compiled function serves
every size (and dynamic shapes).

Blocking (one thread, ``em_gemm_1t``): K is cut into nearly equal blocks of at most ``EM_KC`` (784 ->
4 x 196, not 3 x 256 + 16); per block op(B) is packed into panels of ``EM_NR`` columns (k-major,
zero-padded; vector copies, or 8x8 AVX transposes when B is stored transposed) and the register tile
``EM_MR x EM_NR`` runs over row blocks of ``EM_MC`` rows, panel by panel. op(A) stored row-major is read
in place: the tile broadcasts its elements from the rows (rows past the edge repeat the last row, so
nothing outside op(A) is read), unless its rows lie a multiple of 4 KB apart (a tile's rows would share
one L1 set: square 1024) and op(B) has enough panels: then it is packed by 8x8 transposes
(``em_pack_an``). Stored transposed it is read in place while a row block's kc x mc floats fit L1
(attention's 64 x 64), else packed (``em_pack_at``: a row of A at a time, rows fetched ahead, as a weight
gradient's op(A) comes from the L3) into k-major micro-panels. Small batched GEMMs thus pay only the B
packing (attention's 64 x 64 x 32 products: 70-77% of the FMA peak). A tile adding to C (every K block
after the first), or whose rows of C lie a multiple of 2 KB apart, fetches its lines of C first
(``em_tile``): a C larger than the L2 otherwise stalled each tile's loads at its end (square 1024: ~10%
of its time).

Threads (``em_sgemm_batched_acc``): a batch of at least two GEMMs per thread runs whole GEMMs, a few per
item (about 8 items per thread: attention's 3-us products one per item paid the pool's per-item cost). One
GEMM of enough rows (``em_gemm_rows``) runs as row items against an op(B) packed once for the whole job
into a buffer the threads share: panel by panel, each packed by the first thread that needs it (a
claim flag per panel; a thread finding a panel being packed by another does its other panels first, and
packs a private copy rather than wait long for a packer that may be preempted), so nothing is packed
twice and no thread ever waits at a barrier. Row items are guided: each takes a third of the rows left
per thread (at least two register tiles, at most a quarter of a thread's share), large first (fewer
passes over the packed op(B)), small last (threads finish together); on one core they cost 0-6% more
than the whole product. A small C against a long K (a weight gradient) is split along K instead
(gemm_ksplit_c.py). Other GEMMs (small batches, few rows) are cut into about ``EM_ITEMS_PER_THREAD``
blocks per thread, column chunks (whole panels) x row groups (whole tiles) re-reading least, each a
single-threaded GEMM. Every element is summed in the same order as on one thread (K blocks in order),
so results are bitwise those of one thread. Items run on ember's work pool
(pool_c.py): threads claim them one at a time and the call returns when all are done, so a thread whose
core is busy with another process takes fewer items instead of holding everyone up. The thread count is
ember's (``ember.set_num_threads``), fewer for small GEMMs (``em_gemm_threads``: one below
``EM_GEMM_PAR_MIN``, 8M multiply-adds; 2M while the pool's threads poll between the jobs of a train).

The register tile is written with GCC vector types: 16 floats (one zmm) with ``__AVX512F__``, else 8 (one
ymm) with AVX2+FMA (-march=native decides; gcc enables AVX-512 only where the OS saves the zmm state). At
run time ``em_sgemm_cpu_ok`` checks again (cpuid, XCR0); where the tile cannot run every call returns 0
and the caller runs the BLAS (``tests/test_gemm_kernel.py`` compiles the 512-bit tile anywhere). ``a * b
+ c`` is one fused multiply-add (``-ffp-contract=fast``, implied by ``-std=gnu11``). Elsewhere
``EM_SGEMM_OR`` is the BLAS call alone. Packing buffers are per thread (grown on demand and kept); when
one cannot be allocated the functions return 0 and the caller runs the BLAS.
"""
from .pool_c import POOL_C
from .gemm_ksplit_c import KSPLIT_C

SGEMM_C = r"""/* ember's sgemm (ember.compiler.gemm_c): C = op(A) op(B), row-major float32 */
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define EM_HAVE_SGEMM 1
#include <stdlib.h>
#include <string.h>
#include <cpuid.h>
#include <immintrin.h>
__EM_POOL__
#ifdef __AVX512F__
#define EM_VW 16
#define EM_BCAST(x) ((em_vf)_mm512_set1_ps(x))
#define EM_XCR0_NEED 0xe6        /* XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM state enabled by the OS */
#else
#define EM_VW 8
#define EM_BCAST(x) ((em_vf)_mm256_set1_ps(x))
#define EM_XCR0_NEED 0x06        /* XMM and YMM state */
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
#ifndef EM_PREFETCH_C_KC
#define EM_PREFETCH_C_KC 64         /* a tile adding to C over at least this many k fetches C first */
#endif
#ifndef EM_PACK_AHEAD
#define EM_PACK_AHEAD 8             /* rows of op(A) stored transposed fetched ahead while packing it */
#endif
#ifndef EM_GEMM_PAR_MIN
/* nb*M*N*K below this: one thread; each thread past two needs another half of it (em_gemm_threads).
   Waking a thread costs 10-20 us: measured on this 2-core machine, two threads ran 1.3-1.5x faster than
   one from 8M multiply-adds (the MLP's 64x256x784, attention's 64 x 64x64x32), 0.9-1.3x at 2-4M. (A
   thread on a core another process keeps busy is the pool's business: pool_c.py.) */
#define EM_GEMM_PAR_MIN (1LL << 23)
#endif
#ifndef EM_ITEMS_PER_THREAD
#define EM_ITEMS_PER_THREAD 4
#endif
/* ember's thread count (ember_pool_set_threads, which ember.set_num_threads calls once the library is
   loaded); OpenMP's until then. Not OpenMP's alone: torch shares the process's libgomp, and its
   set_num_threads (called by a module at import) would change ember's count too. */
static int em_pool_nthreads = 0;
#ifdef _OPENMP
#define EM_MAXT() (em_pool_nthreads > 0 ? em_pool_nthreads : omp_get_max_threads())
#else
#define EM_MAXT() (em_pool_nthreads > 0 ? em_pool_nthreads : 1)
#endif
typedef float em_vf __attribute__((vector_size(EM_VW * 4)));
typedef float em_vfu __attribute__((vector_size(EM_VW * 4), aligned(4)));

/* 1 when this CPU and its OS run the compiled tile: cpuid says AVX2+FMA (and AVX-512F for the 512-bit
   tile) and XCR0 says the OS saves the registers it uses; else 0 and every call runs the BLAS. The
   compiler enabled the tile for the build host (-march=native); this guards a library run elsewhere. */
static int em_sgemm_cpu_ok(void) {
  static int ok = -1;
  if (ok < 0) {
    unsigned a, b, c, d;
    int r = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) && (c & bit_AVX) && (c & bit_FMA)) {
      unsigned lo, hi;
      __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      if ((lo & EM_XCR0_NEED) == EM_XCR0_NEED && __get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        r = (b & bit_AVX2) != 0;
#ifdef __AVX512F__
        r = r && (b & bit_AVX512F) != 0;
#endif
      }
    }
    ok = r;
  }
  return ok;
}

/* grows a thread's buffer to at least n floats (64-byte aligned, kept); NULL when it cannot */
static float *em_grow(float **buf, size_t *cap, size_t n) {
  if (n > *cap) {
    const size_t c = (n + 4095) & ~(size_t)4095;
    float *p = (float *)aligned_alloc(64, c * sizeof(float));
    if (!p) return 0;
    free(*buf);
    *buf = p;
    *cap = c;
  }
  return *buf;
}
static __thread float *em_ws = 0, *em_wsh = 0;
static __thread size_t em_ws_cap = 0, em_wsh_cap = 0;
/* this thread's packing buffer of at least n floats, or NULL */
static float *em_workspace(size_t n) { return em_grow(&em_ws, &em_ws_cap, n); }
/* the buffer a caller shares with the pool's threads for one job (its packed op(B)), or NULL */
static float *em_shared_workspace(size_t n) { return em_grow(&em_wsh, &em_wsh_cap, n); }

/* the register tile: c[0:mr, 0:nr] (+)= A (mr x kc, element (i, k) at a[i*rs + k*cs]) times bp (kc x NR,
   k-major). A is a packed micro-panel (rs 1, cs MR) or row-major op(A) read in place (rs lda, cs 1); rows
   from mr on repeat row mr-1 (computed, never stored), so nothing past op(A)'s rows is read */
static inline __attribute__((always_inline)) void
em_tile_body(int kc, const float *restrict a, long rs, long cs, const float *restrict bp, float *restrict c, long ldc,
        int mr, int nr, int acc) {
  em_vf r[EM_MR][EM_NV];
  const float *ar[EM_MR];
#pragma GCC unroll 16
  for (int i = 0; i < EM_MR; i++) {
    ar[i] = a + (i < mr ? i : mr - 1) * rs;
#pragma GCC unroll 4
    for (int v = 0; v < EM_NV; v++) r[i][v] = (em_vf){0};
  }
  for (long k = 0; k < kc; k++) {
    em_vf b[EM_NV];
#pragma GCC unroll 4
    for (int v = 0; v < EM_NV; v++) b[v] = *(const em_vf *)(bp + k * EM_NR + v * EM_VW);
#pragma GCC unroll 16
    for (int i = 0; i < EM_MR; i++) {
      const em_vf x = EM_BCAST(ar[i][k * cs]);
#pragma GCC unroll 4
      for (int v = 0; v < EM_NV; v++) r[i][v] += x * b[v];
    }
  }
  if (nr == EM_NR) {              /* whole rows: vector stores (mr < MR only at the bottom edge) */
#pragma GCC unroll 16
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
#pragma GCC unroll 16
    for (int i = 0; i < EM_MR; i++)
#pragma GCC unroll 4
      for (int v = 0; v < EM_NV; v++) *(em_vf *)(&t[i][v * EM_VW]) = r[i][v];
    for (int i = 0; i < mr; i++)
      for (int j = 0; j < nr; j++) c[i * ldc + j] = acc ? c[i * ldc + j] + t[i][j] : t[i][j];
  }
}

/* em_tile_body with the whole-tile case compiled apart (no clamped rows, no partial stores); one copy
   of each serves every layout of op(A) (rs, cs at run time: one more add per k, fewer lines to compile) */
static __attribute__((noinline)) void em_tile_whole(int kc, const float *restrict a, long rs, long cs,
                                                    const float *restrict bp, float *restrict c, long ldc, int acc) {
  em_tile_body(kc, a, rs, cs, bp, c, ldc, EM_MR, EM_NR, acc);
}
static __attribute__((noinline)) void em_tile_edge(int kc, const float *restrict a, long rs, long cs,
                                                   const float *restrict bp, float *restrict c, long ldc, int mr,
                                                   int nr, int acc) {
  em_tile_body(kc, a, rs, cs, bp, c, ldc, mr, nr, acc);
}
static inline void em_tile(int kc, const float *restrict a, long rs, long cs, const float *restrict bp,
                           float *restrict c, long ldc, int mr, int nr, int acc) {
  /* the tile's lines of C fetched (for writing) while its k loop runs, where it adds to C (a C larger
     than the L2, square 1024's, missed there at the loads that end each tile) or where C's rows lie a
     multiple of 2 KB apart (they share two L1 sets: gpt_fc's stores, 1.0-1.14x); not for other stores
     (1-2% slower) nor short tiles. Not in the tile: there gcc spilled its row pointers (attention -5%). */
  if ((acc || ldc % 512 == 0) && kc >= EM_PREFETCH_C_KC)
    for (int i = 0; i < mr; i++) {
#pragma GCC unroll 4
      for (int j = 0; j < EM_NR; j += 16) __builtin_prefetch(c + i * ldc + j, 1, 3);
      __builtin_prefetch(c + i * ldc + EM_NR - 1, 1, 3);
    }
  if (mr == EM_MR && nr == EM_NR)
    em_tile_whole(kc, a, rs, cs, bp, c, ldc, acc);
  else
    em_tile_edge(kc, a, rs, cs, bp, c, ldc, mr, nr, acc);
}

/* d[k * ldd + j] = row j's k-th float (k, j < 8) for eight 8-float rows (AVX: unpack, shuffle, swap
   128-bit halves); the stores go in order of k, each 8 floats (with ldd < 8 each one's tail is
   overwritten by the next) */
static inline void em_tr8v(__m256 r0, __m256 r1, __m256 r2, __m256 r3, __m256 r4, __m256 r5, __m256 r6, __m256 r7,
                           float *d, long ldd) {
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
               t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(d + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(d + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(d + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(d + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(d + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(d + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(d + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* d[k * ldd + j] = s[j * ld + k] for an 8 x 8 block */
static inline void em_tr8(const float *s, long ld, float *d, long ldd) {
  em_tr8v(_mm256_loadu_ps(s), _mm256_loadu_ps(s + ld), _mm256_loadu_ps(s + 2 * ld), _mm256_loadu_ps(s + 3 * ld),
          _mm256_loadu_ps(s + 4 * ld), _mm256_loadu_ps(s + 5 * ld), _mm256_loadu_ps(s + 6 * ld),
          _mm256_loadu_ps(s + 7 * ld), d, ldd);
}

/* op(B)[0:kc, j0:j0+NR] -> dst (kc x NR, zero-padded columns); B points at op(B)[0, 0] of this k block */
static void em_pack_b(float *restrict dst, int tb, const float *B, long ldb, long N, int kc, long j0) {
  const int nr = N - j0 < EM_NR ? (int)(N - j0) : EM_NR;
  if (!tb) {
    const float *s = B + j0;
    if (nr == EM_NR) {
      for (int k = 0; k < kc; k++)
#pragma GCC unroll 4
        for (int v = 0; v < EM_NV; v++)
          *(em_vf *)(dst + k * EM_NR + v * EM_VW) = *(const em_vfu *)(s + k * ldb + v * EM_VW);
      return;
    }
    for (int k = 0; k < kc; k++) {
      for (int j = 0; j < nr; j++) dst[k * EM_NR + j] = s[k * ldb + j];
      for (int j = nr; j < EM_NR; j++) dst[k * EM_NR + j] = 0.0f;
    }
    return;
  }
  const float *s = B + j0 * ldb;          /* op(B)[k, j] at s[j * ldb + k] */
  int k8 = 0;
  if (nr == EM_NR) {
    for (; k8 + 8 <= kc; k8 += 8)
      for (int j = 0; j < EM_NR; j += 8) em_tr8(s + j * ldb + k8, ldb, dst + k8 * EM_NR + j, EM_NR);
  } else {
    memset(dst, 0, sizeof(float) * (size_t)kc * EM_NR);
  }
  for (int j = 0; j < nr; j++)
    for (int k = k8; k < kc; k++) dst[k * EM_NR + j] = s[j * ldb + k];
}

/* op(A)[0:mc, 0:kc] for A stored transposed (op(A)[i, k] at A[k * lda + i]) -> dst: micro-panels of MR
   rows, each kc x MR (k-major, zero-padded rows). Row by row of A (k outer: one pass over mc contiguous
   floats per k; micro-panel by micro-panel walked kc lines lda apart mc / MR times, and with lda a
   multiple of 512 floats those lines shared two L1 sets: a fifth of gpt_fc_dw's time). With MR <= 8 a
   row of a micro-panel is one 8-float load (masked past op(A)'s rows: zero) and one 8-float store whose
   extra lanes land on the next k's slots, written next; the last k stores MR floats alone (its extra
   lanes would be the next micro-panel's first, already written). */
static void em_pack_at(float *restrict dst, const float *A, long lda, int mc, int kc) {
#if EM_MR <= 8
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i whole = _mm256_cmpgt_epi32(_mm256_set1_epi32(EM_MR), iota);
  for (int k = 0; k < kc; k++) {
    const float *s = A + k * lda;
    float *d = dst + k * EM_MR;
    const int tail = k == kc - 1;
    int ir = 0;
    /* the rows a few k ahead, fetched now: op(A) comes from the L3 (a weight gradient's activations,
       2 MB in the GPT's), and one row's few lines at a time left the pack waiting on each */
    if (k + EM_PACK_AHEAD < kc)
      for (int i = 0; i < mc; i += 16) __builtin_prefetch(s + EM_PACK_AHEAD * lda + i, 0, 3);
    for (; ir + 8 <= mc; ir += EM_MR) {
      const __m256 v = _mm256_loadu_ps(s + ir);
      if (!tail) _mm256_storeu_ps(d + (long)ir * kc, v);
      else _mm256_maskstore_ps(d + (long)ir * kc, whole, v);
    }
    for (; ir < mc; ir += EM_MR) {          /* (near the block's end: loads masked to its rows) */
      const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(mc - ir < EM_MR ? mc - ir : EM_MR), iota);
      const __m256 v = _mm256_maskload_ps(s + ir, m);
      if (!tail) _mm256_storeu_ps(d + (long)ir * kc, v);
      else _mm256_maskstore_ps(d + (long)ir * kc, whole, v);
    }
  }
#else
  for (int ir = 0; ir < mc; ir += EM_MR) {
    const int mr = mc - ir < EM_MR ? mc - ir : EM_MR;
    float *d = dst + (long)ir * kc;
    const float *s = A + ir;
    for (int k = 0; k < kc; k++) {
      for (int i = 0; i < mr; i++) d[k * EM_MR + i] = s[k * lda + i];
      for (int i = mr; i < EM_MR; i++) d[k * EM_MR + i] = 0.0f;
    }
  }
#endif
}

/* op(A)[0:mc, 0:kc] stored row-major (op(A)[i, k] at A[i * lda + k]) -> dst, the micro-panels of
   em_pack_at: 8 k at a time, MR rows transposed into k-major rows of MR (8x8 transposes whose extra
   rows are zeros and whose extra columns land on slots written next; callers leave 8 floats of room
   past the panels), the k remainder one by one. Slots of rows past mc are left as they are: the tile
   never reads them (its rows past mr repeat row mr - 1). */
static void em_pack_an(float *restrict dst, const float *A, long lda, int mc, int kc) {
#if EM_MR <= 8
  const __m256 z = _mm256_setzero_ps();
  for (int ir = 0; ir < mc; ir += EM_MR) {
    const int mr = mc - ir < EM_MR ? mc - ir : EM_MR;
    float *d = dst + (long)ir * kc;
    const float *p[8];
    for (int i = 0; i < 8; i++) p[i] = A + (long)(ir + (i < mr ? i : mr - 1)) * lda;
    int k = 0;
    for (; k + 8 <= kc; k += 8)
      em_tr8v(_mm256_loadu_ps(p[0] + k), _mm256_loadu_ps(p[1] + k), _mm256_loadu_ps(p[2] + k),
              _mm256_loadu_ps(p[3] + k), _mm256_loadu_ps(p[4] + k), _mm256_loadu_ps(p[5] + k),
              EM_MR > 6 ? _mm256_loadu_ps(p[6] + k) : z, EM_MR > 7 ? _mm256_loadu_ps(p[7] + k) : z,
              d + k * EM_MR, EM_MR);
    for (; k < kc; k++)
      for (int i = 0; i < EM_MR; i++) d[k * EM_MR + i] = p[i][k];
  }
#else
  for (int ir = 0; ir < mc; ir += EM_MR) {
    const int mr = mc - ir < EM_MR ? mc - ir : EM_MR;
    float *d = dst + (long)ir * kc;
    for (int k = 0; k < kc; k++)
      for (int i = 0; i < mr; i++) d[k * EM_MR + i] = A[(long)(ir + i) * lda + k];
  }
#endif
}

#ifndef EM_PACK_AN_PANELS
#define EM_PACK_AN_PANELS 8          /* op(A) stored row-major 4 KB apart is packed for this many panels */
#endif
/* whether a block of mc rows of op(A) (one K block of kc) is packed before the tiles run over np panels.
   Stored transposed: once the block's kc lines no longer stay in L1. Stored row-major: its rows are read
   in place (packing cost 2-7% where N is a few panels), unless they lie a multiple of 4 KB apart: then a
   tile's MR rows share one L1 set (8 ways) with the panel's lines and evict each other (square 1024:
   packed, 4% faster; the whole pack is 1/(2N) of the multiply-adds) */
static inline int em_pack_a_wanted(int ta, long lda, int kc, long mc, long np) {
  return ta ? (long)kc * mc > 4096 : lda % 1024 == 0 && np >= EM_PACK_AN_PANELS;
}
/* packs op(A)[0:mc, 0:kc] (a0: its element (0, 0)) into dst, stored transposed or not */
static inline void em_pack_a(float *restrict dst, int ta, const float *a0, long lda, int mc, int kc) {
  if (ta) em_pack_at(dst, a0, lda, mc, kc);
  else em_pack_an(dst, a0, lda, mc, kc);
}

/* the tiles of one block of rows against one packed panel bp: C[0:m, 0:nr] (+)= op(A)[0:m, 0:kc] bp. op(A)
   is packed micro-panels ap (em_pack_at), or read in place from a0 (op(A)[0, 0] of the block) */
static void em_rows_panel(int kc, int ta, const float *ap, const float *a0, long lda, const float *bp, float *c,
                          long ldc, long m, int nr, int ak) {
  for (long ir = 0; ir < m; ir += EM_MR) {
    const int mr = m - ir < EM_MR ? (int)(m - ir) : EM_MR;
    if (ap)
      em_tile(kc, ap + ir * kc, 1, EM_MR, bp, c + ir * ldc, ldc, mr, nr, ak);
    else if (ta)
      em_tile(kc, a0 + ir, 1, lda, bp, c + ir * ldc, ldc, mr, nr, ak);
    else
      em_tile(kc, a0 + ir * lda, lda, 1, bp, c + ir * ldc, ldc, mr, nr, ak);
  }
}

/* C[0:M, 0:N] (+)= op(A) op(B) on the calling thread (acc: add to C). A, B and C point at element (0, 0)
   of this block; op(A)[i, k] is A[i*lda + k] (ta 0) or A[k*lda + i] (ta 1), op(B)[k, j] likewise.
   K is cut into nearly equal blocks of at most KC; per block op(B) is packed into panels of NR columns,
   op(A) is read in place or packed per MC rows (em_pack_a_wanted). 0 when a buffer could not be
   allocated. */
static int em_gemm_1t(int ta, int tb, long M, long N, long K, const float *A, long lda, const float *B, long ldb,
                      float *C, long ldc, int acc) {
  if (M <= 0 || N <= 0) return 1;
  if (K <= 0) {
    if (!acc)
      for (long i = 0; i < M; i++) memset(C + i * ldc, 0, sizeof(float) * (size_t)N);
    return 1;
  }
  const long nk = (K + EM_KC - 1) / EM_KC, kcmax = (K + nk - 1) / nk, np = (N + EM_NR - 1) / EM_NR;
  const size_t bsize = (size_t)kcmax * EM_NR * np;
  float *ws = em_workspace(bsize + (size_t)kcmax * (EM_MC + EM_MR) + 8);   /* (8: em_pack_a's room) */
  if (!ws) return 0;
  float *bp = ws, *ap = ws + bsize;
  for (long k0 = 0; k0 < K; k0 += kcmax) {
    const int kc = K - k0 < kcmax ? (int)(K - k0) : (int)kcmax, ak = acc || k0 > 0;
    const float *Bk = B + (tb ? k0 : k0 * ldb);
    for (long p = 0; p < np; p++) em_pack_b(bp + p * kc * EM_NR, tb, Bk, ldb, N, kc, p * EM_NR);
    for (long i0 = 0; i0 < M; i0 += EM_MC) {
      const int mc = M - i0 < EM_MC ? (int)(M - i0) : EM_MC;
      const float *a0 = ta ? A + k0 * lda + i0 : A + i0 * lda + k0;
      const int pack = em_pack_a_wanted(ta, lda, kc, mc, np);
      if (pack) em_pack_a(ap, ta, a0, lda, mc, kc);
      for (long p = 0; p < np; p++) {
        const long j0 = p * EM_NR;
        const int nr = N - j0 < EM_NR ? (int)(N - j0) : EM_NR;
        em_rows_panel(kc, ta, pack ? ap : 0, a0, lda, bp + p * kc * EM_NR, C + i0 * ldc + j0, ldc, mc, nr, ak);
      }
    }
  }
  return 1;
}

__EM_KSPLIT__
/* the parallel GEMMs' shared state: item it is the block (row group it / nch, column chunk it % nch) of
   C[b] for b = it / (ng * nch); each item is one em_gemm_1t call with its own packing buffers */
typedef struct {
  int ta, tb, acc;
  long M, N, K;
  const float *A;
  long lda, sa;
  const float *B;
  long ldb, sb;
  float *C;
  long ldc, sc;
  long ng, rpg, nch, cpc;     /* row groups, rows per group, column chunks, columns per chunk */
  _Atomic int failed;
  /* row items (em_task_rows): item i is rows [rows[i], rows[i+1]) of C against all of op(B), packed once
     into bsh: panel p of K block kb (kcmax x NR floats) at bsh + (kb * np + p) * kcmax * NR, its state in
     bst[kb * np + p] (0: not packed, 1: being packed, 2: ready). Batch items (em_task_batch): item i is
     the GEMMs [rows[i], rows[i+1]) of the batch */
  long nk, kcmax, np;
  const long *rows;
  float *bsh;
  _Atomic int *bst;
} em_gemm_job;

#ifndef EM_PANEL_WAIT_NS
#define EM_PANEL_WAIT_NS 20000      /* a panel another thread packs is waited for this long, then packed here */
#endif

/* panel p of K block kb of the job's shared op(B), packed by the first thread that needs it. One another
   thread is packing: NULL when !wait (the caller comes back to it later), else waited for a while, then
   packed into `own` (a packer preempted on a busy core never holds anyone up) */
static const float *em_shared_panel(em_gemm_job *j, long kb, long p, int kc, float *own, int wait) {
  const long id = kb * j->np + p;
  float *dst = j->bsh + id * j->kcmax * EM_NR;
  const float *Bk = j->B + (j->tb ? kb * j->kcmax : kb * j->kcmax * j->ldb);
  int st = atomic_load_explicit(&j->bst[id], memory_order_acquire);
  if (st == 2) return dst;
  if (st == 0 && atomic_compare_exchange_strong(&j->bst[id], &st, 1)) {
    em_pack_b(dst, j->tb, Bk, j->ldb, j->N, kc, p * EM_NR);
    atomic_store_explicit(&j->bst[id], 2, memory_order_release);
    return dst;
  }
  if (!wait) return 0;
  const long long t0 = em_pool_now();
  do {
    for (int i = 0; i < 64; i++) {
      if (atomic_load_explicit(&j->bst[id], memory_order_acquire) == 2) return dst;
      _mm_pause();
    }
  } while (em_pool_now() - t0 < EM_PANEL_WAIT_NS);
  em_pack_b(own, j->tb, Bk, j->ldb, j->N, kc, p * EM_NR);
  return own;
}

/* a row item: rows [rows[it], rows[it+1]) of C, K block by K block (in order: the sums are those of one
   thread), every panel of the shared op(B); a panel another thread is packing is left for the end */
static void em_task_rows(void *c, long it, int w) {
  em_gemm_job *j = (em_gemm_job *)c;
  (void)w;
  const long r0 = j->rows[it], m = j->rows[it + 1] - r0;
  float *own = em_workspace((size_t)j->kcmax * EM_NR + (size_t)j->kcmax * (m + EM_MR) + 8);
  if (!own) {
    atomic_store(&j->failed, 1);
    return;
  }
  float *ap = own + j->kcmax * EM_NR;
  long later[64];
  for (long kb = 0; kb < j->nk; kb++) {
    const long k0 = kb * j->kcmax;
    const int kc = j->K - k0 < j->kcmax ? (int)(j->K - k0) : (int)j->kcmax, ak = j->acc || kb > 0;
    const float *a0 = j->A + (j->ta ? k0 * j->lda + r0 : r0 * j->lda + k0);
    const int pack = em_pack_a_wanted(j->ta, j->lda, kc, m, j->np);
    if (pack) em_pack_a(ap, j->ta, a0, j->lda, (int)m, kc);
    long q = 0, nl = 0, li = 0;
    for (;;) {
      long p;
      int wait;
      if (q < j->np)
        p = q++, wait = nl == 64;
      else if (li < nl)
        p = later[li++], wait = 1;
      else
        break;
      const float *bp = em_shared_panel(j, kb, p, kc, own, wait);
      if (!bp) {
        later[nl++] = p;
        continue;
      }
      const long j0 = p * EM_NR;
      em_rows_panel(kc, j->ta, pack ? ap : 0, a0, j->lda, bp, j->C + r0 * j->ldc + j0, j->ldc, m,
                    j->N - j0 < EM_NR ? (int)(j->N - j0) : EM_NR, ak);
    }
  }
}

static void em_task_gemm(void *c, long it, int w) {
  em_gemm_job *j = (em_gemm_job *)c;
  (void)w;
  const long per = j->ng * j->nch, b = it / per, g = it % per / j->nch, ch = it % j->nch;
  const long r0 = g * j->rpg, c0 = ch * j->cpc;
  const long m = j->M - r0 < j->rpg ? j->M - r0 : j->rpg, n = j->N - c0 < j->cpc ? j->N - c0 : j->cpc;
  const float *A = j->A + b * j->sa + (j->ta ? r0 : r0 * j->lda);
  const float *B = j->B + b * j->sb + (j->tb ? c0 * j->ldb : c0);
  if (!em_gemm_1t(j->ta, j->tb, m, n, j->K, A, j->lda, B, j->ldb, j->C + b * j->sc + r0 * j->ldc + c0, j->ldc,
                  j->acc))
    atomic_store(&j->failed, 1);
}

/* a batch item: GEMMs [rows[it], rows[it + 1]) of the batch, each whole on this thread */
static void em_task_batch(void *c, long it, int w) {
  em_gemm_job *j = (em_gemm_job *)c;
  (void)w;
  for (long b = j->rows[it]; b < j->rows[it + 1]; b++)
    if (!em_gemm_1t(j->ta, j->tb, j->M, j->N, j->K, j->A + b * j->sa, j->lda, j->B + b * j->sb, j->ldb, j->C + b * j->sc,
                    j->ldc, j->acc))
      atomic_store(&j->failed, 1);
}

#ifndef EM_ROW_MIN_TILES
#define EM_ROW_MIN_TILES 2          /* the smallest row item, in register tiles of rows */
#endif
#ifndef EM_ROW_GUIDE
#define EM_ROW_GUIDE 3              /* a row item takes 1 / (EM_ROW_GUIDE * threads) of the rows left */
#endif
#define EM_ROW_ITEMS_MAX 128
#ifndef EM_SHARED_MAX
/* floats of the largest packed op(B) shared by row items (16 MB: kept per calling thread, and the items
   stream it from the L3); a larger op(B), a language model's output layer say, is cut into blocks */
#define EM_SHARED_MAX (4L << 20)
#endif

/* guided item sizes: units [0, units) cut at b[0] = 0 < b[1] < ... < b[n] = units (n returned, at most
   EM_ROW_ITEMS_MAX), each item 1 / (EM_ROW_GUIDE * nt) of the units left, but at most `most` and at least
   `least` units (and at least units / (EM_ROW_ITEMS_MAX / 2)): large first, small last, so that the
   threads finish together */
static long em_guided(long units, long most, long least, int nt, long *b) {
  long n = 0;
  const long fit = (units + EM_ROW_ITEMS_MAX / 2 - 1) / (EM_ROW_ITEMS_MAX / 2);   /* (items enough for all) */
  if (least < fit) least = fit;
  if (most < least) most = least;
  for (long t = 0, sz; t < units; t += sz) {
    sz = (units - t) / (EM_ROW_GUIDE * nt);
    if (sz > most) sz = most;
    if (sz < least) sz = least;
    if (n == EM_ROW_ITEMS_MAX - 1 || sz > units - t) sz = units - t;
    b[n++] = t;
  }
  b[n] = units;
  return n;
}

/* one GEMM as row items against op(B) packed once and shared (em_task_rows). Guided sizes: the first
   items large (fewer passes over op(B)), at most 1 / EM_ITEMS_PER_THREAD of a thread's share (what a
   preempted thread may hold up), the last small (threads finish together). The caller's range is the
   first items up to about 1 / nt of the rows (by count it held more: two threads 1.03-1.1x slower).
   0 when the shared buffer would be larger than EM_SHARED_MAX or cannot be allocated. */
static int em_gemm_rows(int nt, em_gemm_job *j) {
  const long nk = (j->K + EM_KC - 1) / EM_KC, kcmax = (j->K + nk - 1) / nk, np = (j->N + EM_NR - 1) / EM_NR;
  const size_t nfl = (size_t)nk * np * kcmax * EM_NR;
  if (nfl > EM_SHARED_MAX) return 0;
  float *sh = em_shared_workspace(nfl + (size_t)nk * np);
  if (!sh) return 0;
  long rows[EM_ROW_ITEMS_MAX + 1];
  const long tiles = (j->M + EM_MR - 1) / EM_MR;
  const long n = em_guided(tiles, tiles / (EM_ITEMS_PER_THREAD * nt), EM_ROW_MIN_TILES, nt, rows);
  for (long i = 0; i <= n; i++) rows[i] = i < n ? rows[i] * EM_MR : j->M;
  j->nk = nk, j->kcmax = kcmax, j->np = np, j->rows = rows, j->bsh = sh, j->bst = (_Atomic int *)(sh + nfl);
  memset((void *)j->bst, 0, sizeof(int) * (size_t)nk * np);
  long first = 1;           /* (the caller's range) */
  for (long i = 2; i < n; i++) if (labs(rows[i] * nt - j->M) < labs(rows[first] * nt - j->M)) first = i;
  em_pool_run_mine(nt, n, first, em_task_rows, j);
  return 1;
}

/* the threads a GEMM of `work` multiply-adds runs on, of nt asked for (nt <= 0: OpenMP's count; nt < 0: -nt
   whatever the size, tests): 1 below EM_GEMM_PAR_MIN, then one per half of it; a quarter while hot */
static int em_gemm_threads(int nt, long long work) {
  if (nt < 0) return -nt;
  if (nt == 0) nt = EM_MAXT();
  if (nt <= 1) return 1;
  const long long most = 2 * work / (em_pool_is_hot() ? EM_GEMM_PAR_MIN / 4 : EM_GEMM_PAR_MIN);
  return most < 2 ? 1 : (most < nt ? (int)most : nt);
}

/* nb GEMMs C[b] (+)= op(A[b]) op(B[b]) (batch strides sa, sb, sc in floats; acc: add to C) on up to nt
   threads (nt 0: OpenMP's count; fewer for small GEMMs, see em_gemm_threads); 0 when a buffer could not be
   allocated or the CPU cannot run the tile (the caller then runs the BLAS). Several threads: a batch of
   at least 2 per thread runs a few whole GEMMs per item; one GEMM of a small C and a long K is split
   along K (em_gemm_ksplit), one of enough rows runs as row items over a shared packed op(B)
   (em_gemm_rows); otherwise each GEMM is cut into about 4 blocks per thread (column chunks x row groups). */
static int em_sgemm_batched_acc(int nt, long nb, int ta, int tb, long M, long N, long K, const float *A, long lda,
                                long sa, const float *B, long ldb, long sb, float *C, long ldc, long sc, int acc) {
  if (!em_sgemm_cpu_ok()) return 0;
  const int exact = nt < 0;
  /* a batch against one op(B) whose op(A) and C rows run on from one product to the next (a linear layer's
     input gradient on (batch, time, features) activations: 16 x 64x512x128 in the GPT's backward) is one
     GEMM of nb*M rows: op(B) packed once instead of per product (10-15% of the work), and on several
     threads row items over it instead of whole products. Every element's sum is the same. */
  if (nb > 1 && sb == 0 && !ta && sa == M * lda && sc == M * ldc) M *= nb, nb = 1;
  nt = em_gemm_threads(nt, (long long)nb * M * N * K);
  if (!exact && nt > 1 && em_pool_ready(nt) == 1) nt = 1;   /* every helper sits out: one thread's code */
  if (M <= 0 || N <= 0 || nb <= 0) return 1;
  if (nt <= 1) {
    for (long b = 0; b < nb; b++)
      if (!em_gemm_1t(ta, tb, M, N, K, A + b * sa, lda, B + b * sb, ldb, C + b * sc, ldc, acc)) return 0;
    return 1;
  }
  const int ks = nb == 1 ? em_gemm_ksplit(nt, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, acc) : 0;  /* small C */
  if (ks) return ks > 0;
  em_gemm_job job = {ta, tb, acc, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, 1, M, 1, N, 0};
  /* one GEMM of enough rows: row items over a shared op(B) (nothing packed twice) */
  if (nb == 1 && K > 0 && (M + EM_MR - 1) / EM_MR >= 4L * EM_ROW_MIN_TILES * nt && em_gemm_rows(nt, &job))
    return !atomic_load(&job.failed);
  if (nb < 2L * nt) {
    /* about EM_ITEMS_PER_THREAD items per thread: of the splits into column chunks (whole panels) times
       row groups (whole tiles), the one that re-reads least: every row group packs op(B) again
       (N*K floats; transposed, 8x8 transposes cost about twice a copy) and every column chunk reads
       op(A) again (M*K: in place when row-major, a quarter of a packing's cost; packed when transposed).
       Measured on one thread, items of a 2-thread split cost 1-4% less so than with equal weights. */
    const double wb = tb ? 2.0 : 1.0, wa = ta ? 1.0 : 0.25;
    const long want = (EM_ITEMS_PER_THREAD * nt + nb - 1) / nb, np = (N + EM_NR - 1) / EM_NR,
               tiles = (M + EM_MR - 1) / EM_MR;
    double best = -1.0;
    for (long c = 1; c <= np && c <= want; c++) {
      const long ppc = (np + c - 1) / c, nch = (np + ppc - 1) / ppc;
      long ng = (want + nch - 1) / nch;
      if (ng > tiles) ng = tiles;
      const long rpg = (tiles + ng - 1) / ng * EM_MR;
      ng = (M + rpg - 1) / rpg;
      const double cost = wb * ng * N + wa * nch * M;
      if (ng * nch * nb >= nt && (best < 0 || cost < best)) {
        best = cost;
        job.ng = ng, job.rpg = rpg, job.nch = nch, job.cpc = ppc * EM_NR;
      }
    }
  }
  if (nb >= 2L * nt) {
    /* whole GEMMs, grouped: items of at most nb / (2 * EM_ITEMS_PER_THREAD * nt) (attention's 64
       products of ~3 us each, one per item, paid the pool's per-item cost, two cache-line transfers, 64
       times), guided down to one GEMM at the end (equal items of 4 left one thread up to 10 us of a
       ~90 us job to do alone) */
    long bounds[EM_ROW_ITEMS_MAX + 1];
    const long n = em_guided(nb, nb / (2L * EM_ITEMS_PER_THREAD * nt), 1, nt, bounds);
    job.rows = bounds;
    em_pool_run(nt, n, em_task_batch, &job);
  } else {
    em_pool_run(nt, nb * job.ng * job.nch, em_task_gemm, &job);
  }
  return !atomic_load(&job.failed);
}

static int em_sgemm_batched(int nt, long nb, int ta, int tb, long M, long N, long K, const float *A, long lda,
                            long sa, const float *B, long ldb, long sb, float *C, long ldc, long sc) {
  return em_sgemm_batched_acc(nt, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, 0);
}
/* the batched GEMM, or `blas` (a statement computing the same result) where it cannot run */
#define EM_SGEMM_OR(blas, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc) \
  do { if (!em_sgemm_batched(0, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc)) { blas; } } while (0)
#else
#define EM_HAVE_SGEMM 0
#define EM_SGEMM_OR(blas, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc) do { blas; } while (0)
#endif
"""

SGEMM_C = SGEMM_C.replace("__EM_POOL__", POOL_C).replace("__EM_KSPLIT__", KSPLIT_C)

# a library of its own (tests, the bench, eager matmuls): the GEMM with exported entry points
LIBRARY_C = r"""
#include <stdint.h>
int ember_have_sgemm(void) {
#if EM_HAVE_SGEMM
  return em_sgemm_cpu_ok();
#else
  return 0;
#endif
}
int ember_pool_pinned(void) {      /* 1: the pool's threads are held off the last caller's CPU */
#if EM_HAVE_SGEMM
  return em_pool_pinned;
#else
  return 0;
#endif
}
long ember_pool_late(void) {       /* helpers found late so far (pool_c.py: the late helper) */
#if EM_HAVE_SGEMM
  return em_pool_late_count;
#else
  return 0;
#endif
}
/* the pool's last job: items, the caller's items, ns it took, ns the caller alone would have taken (an
   estimate), helpers taking part (0: they sat out) */
void ember_pool_last(long long *out) {
#if EM_HAVE_SGEMM
  for (int i = 0; i < 5; i++) out[i] = em_pool_last[i];
#else
  for (int i = 0; i < 5; i++) out[i] = 0;
#endif
}
/* jobs helpers took part in so far, helpers that joined one while polling, after sleeping (a wake-up) */
void ember_pool_counts(long long *out) {
#if EM_HAVE_SGEMM
  out[0] = em_pool_jobs, out[1] = atomic_load(&em_pool_joins[0]), out[2] = atomic_load(&em_pool_joins[1]);
#else
  out[0] = out[1] = out[2] = 0;
#endif
}
/* the pool threads' longest poll between jobs in a train (ns; pool_c.py; 0: always the short one) */
void ember_pool_set_hot(long long ns) {
#if EM_HAVE_SGEMM
  em_pool_hot_max = ns;
#else
  (void)ns;
#endif
}
int ember_simd_width(void) {
#if EM_HAVE_SGEMM
  return EM_VW;
#else
  return 0;
#endif
}
/* C[b] (+)= op(A[b]) op(B[b]) (acc: add); 0 where the caller must run the BLAS */
int ember_sgemm_acc(int nt, long nb, int ta, int tb, long M, long N, long K, const float *A, long lda, long sa,
                    const float *B, long ldb, long sb, float *C, long ldc, long sc, int acc) {
#if EM_HAVE_SGEMM
  return em_sgemm_batched_acc(nt, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, acc);
#else
  return 0;
#endif
}
/* the work pool for generated parallel loops (native.POOL_STUB_C): fn(ctx, item, worker) for item in
   [0, n) on nt threads (nt <= 0: ember's count); the pool's thread count and its setter */
void ember_pool_run(int nt, long n, void (*fn)(void *, long, int), void *ctx) {
#if EM_HAVE_SGEMM
  em_pool_run(nt > 0 ? nt : EM_MAXT(), n, fn, ctx);
#else
  (void)nt;
  for (long i = 0; i < n; i++) fn(ctx, i, 0);
#endif
}
/* 1 while the pool's threads poll for the next job (a train of jobs, pool_c.py): loops split from less */
int ember_pool_hot(void) {
#if EM_HAVE_SGEMM
  return em_pool_is_hot();
#else
  return 0;
#endif
}
int ember_pool_threads(void) {
#if EM_HAVE_SGEMM
  return EM_MAXT();
#else
  return 1;
#endif
}
void ember_pool_set_threads(int n) {
#if EM_HAVE_SGEMM
  em_pool_nthreads = n;
#else
  (void)n;
#endif
}
/* C[b] = op(A[b]) op(B[b]): the signature graph libraries call (shared_gemm.GEMM_STUB_C) */
int ember_sgemm(int nt, long nb, int ta, int tb, long M, long N, long K, const float *A, long lda, long sa,
                const float *B, long ldb, long sb, float *C, long ldc, long sc) {
  return ember_sgemm_acc(nt, nb, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, 0);
}
"""
