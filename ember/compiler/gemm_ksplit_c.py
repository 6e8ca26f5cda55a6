"""The C text of ember's GEMM split along K on several threads (part of gemm_c.py's SGEMM_C).

Why: a weight gradient ``dW = X^T dY`` over the batch*seq rows has a small C and a long K (the GPT's
512x128x1024, 128x512x1024, 384x128x1024; the MLP's 256x256x512). Split by rows of C, every row item
streams the whole packed op(B) (K x N floats, from the L3) and two threads ran only 1.3-1.45x one.
Split along K, each thread packs and reads only its share of op(A) and op(B).

Bits: one thread sums K block by K block (blocks of at most ``EM_KC``, gemm_c.py): every block's sum
starts from zero in the registers and is then added to C, in block order. Here the first item runs the
first ``h`` blocks into C exactly so; every later block is its own item, computed alone into a buffer of
partial sums (as the one-thread tile computes it: from zero), and at the end each element of C gets
those partials added in block order. Every element thus goes through the same operations in the same
order as on one thread: the result is bitwise one thread's, whatever thread runs which item (torch's
CPU GEMMs, by contrast, may give other bits on other thread counts). The price is the final pass over
``(nk - h) * M * N`` partials (split by rows across the threads too).

Items: the first (``h`` blocks, ``h = nk / nt``) is the caller's (``em_pool_run_mine``: its range is
that one item), the single blocks after it the helpers'; a thread out of its range takes from the
other's, so a late helper costs nothing more than on any job. With two threads and four blocks (K=1024)
each thread runs two blocks.

When (``em_ksplit_wanted``, ``ember_gemm_ksplit = 1``): one GEMM (not a batch), more K blocks than
threads (at least one single-block item left to even out a thread that starts late or loses its core),
the partials fit ``EM_KSPLIT_MAX``, and C is small against K: ``M * N <= EM_KSPLIT_MN`` (64K) and ``M, N
<= K``. ``ember_gemm_ksplit`` (the GEMM library's symbol, set through ctypes): 0 never, 2 wherever there
are two K blocks (tests, A/B runs).

Measured (2-core Zen 5 VM shared with other processes, SCHED_FIFO, one call per sample, variants
interleaved, medians of 60-150; two threads' speed over one): 128x512x1024 1.27-1.33x as row items ->
1.49-1.74x split along K, 128x128x1024 1.26-1.28x -> 1.61x, 512x128x1024 1.56-1.65x -> 1.68-1.78x,
384x128x1024 1.59-1.75x -> 1.63-1.84x (split whatever their layout). Not chosen: 256x256x512 (two K
blocks, one item per thread: 1.11-1.70x -> 1.11-1.85x, worse in 4 of 7 runs), 512x256x784 (the MLP's
first layer: no faster in 6 runs), shapes where N or M exceeds K (256x784x512 no faster, 1024x128x512
1.75x -> 1.43x). Cutting each part's rows in two as well (more, smaller items) was no faster (B packed
twice).
"""

KSPLIT_C = r"""/* ember's K-split GEMM (ember.compiler.gemm_ksplit_c) */
#ifndef EM_KSPLIT_MAX
#define EM_KSPLIT_MAX (4L << 20)    /* floats of partial sums at most (16 MB) */
#endif
#ifndef EM_KSPLIT_MN
#define EM_KSPLIT_MN (64L * 1024)   /* M * N at most, where chosen (ember_gemm_ksplit 1) */
#endif
/* 0: never split along K; 1: where em_ksplit_wanted says; 2: wherever there are two K blocks */
__attribute__((visibility("default"))) int ember_gemm_ksplit = 1;

typedef struct {
  int ta, tb, acc;
  long M, N, K;
  const float *A;
  long lda;
  const float *B;
  long ldb;
  float *C;
  long ldc;
  long kcmax, h, nk, rpi;    /* K block size, blocks of the first item, blocks, rows per sum item */
  float *part;               /* block b >= h: M x N partial sums at part + (b - h) * M * N */
  _Atomic int failed;
} em_ksplit_job;

/* K block b of the product into c (acc: added to it), as the one-thread code computes it */
static int em_ksplit_block(const em_ksplit_job *j, long b, float *c, long ldc, int acc) {
  const long k0 = b * j->kcmax, kc = j->K - k0 < j->kcmax ? j->K - k0 : j->kcmax;
  return em_gemm_1t(j->ta, j->tb, j->M, j->N, kc, j->A + (j->ta ? k0 * j->lda : k0), j->lda,
                    j->B + (j->tb ? k0 : k0 * j->ldb), j->ldb, c, ldc, acc);
}

/* item 0: blocks [0, h) into C in order; item i > 0: block h + i - 1 alone into its partial sums */
static void em_task_kblocks(void *c, long it, int w) {
  em_ksplit_job *j = (em_ksplit_job *)c;
  (void)w;
  int ok = 1;
  if (it == 0)
    for (long b = 0; b < j->h && ok; b++) ok = em_ksplit_block(j, b, j->C, j->ldc, j->acc || b > 0);
  else
    ok = em_ksplit_block(j, j->h + it - 1, j->part + (it - 1) * j->M * j->N, j->N, 0);
  if (!ok) atomic_store(&j->failed, 1);
}

/* rows [it * rpi, (it + 1) * rpi) of C: the partials added in block order (a row of C stays in L1) */
static void em_task_ksum(void *c, long it, int w) {
  em_ksplit_job *j = (em_ksplit_job *)c;
  (void)w;
  const long r1 = (it + 1) * j->rpi < j->M ? (it + 1) * j->rpi : j->M, N = j->N, mn = j->M * N;
  for (long i = it * j->rpi; i < r1; i++) {
    float *restrict ci = j->C + i * j->ldc;
    for (long q = 0; q < j->nk - j->h; q++) {
      const float *restrict p = j->part + q * mn + i * N;
      for (long x = 0; x < N; x++) ci[x] += p[x];
    }
  }
}

static int em_ksplit_wanted(int nt, long M, long N, long K, long nk) {
  if (ember_gemm_ksplit <= 0 || nk < 2) return 0;
  return ember_gemm_ksplit >= 2 || (nk > nt && M * N <= EM_KSPLIT_MN && M <= K && N <= K);
}

/* C (+)= op(A) op(B) split along K on nt > 1 threads (the module text). Returns 0 where it does not
   apply or its buffer cannot be allocated (the caller splits otherwise), 1 when done, -1 when a
   packing buffer could not be allocated on the way */
static int em_gemm_ksplit(int nt, int ta, int tb, long M, long N, long K, const float *A, long lda,
                          const float *B, long ldb, float *C, long ldc, int acc) {
  const long nk = (K + EM_KC - 1) / EM_KC;
  if (!em_ksplit_wanted(nt, M, N, K, nk)) return 0;
  const long h = nk / nt > 0 ? nk / nt : 1;
  if ((size_t)(nk - h) * M * N > EM_KSPLIT_MAX) return 0;
  float *part = em_shared_workspace((size_t)(nk - h) * M * N);
  if (!part) return 0;
  em_ksplit_job j = {ta, tb, acc, M, N, K, A, lda, B, ldb, C, ldc, (K + nk - 1) / nk, h, nk, 0, part, 0};
  em_pool_run_mine(nt, 1 + nk - h, 1, em_task_kblocks, &j);
  if (atomic_load(&j.failed)) return -1;
  /* the sums: on the caller alone when small (a job costs a few us), else about 2 row items per thread */
  const long items = (nk - h) * M * N < 32768 ? 1 : 2L * nt;
  j.rpi = (M + items - 1) / items;
  em_pool_run(nt, (M + j.rpi - 1) / j.rpi, em_task_ksum, &j);
  return 1;
}
"""
