"""The C text of the work pool ember's GEMM runs on (generated code; see gemm_c.py).

``em_pool_run(nt, n, fn, ctx)`` calls ``fn(ctx, item, worker)`` for every item in ``[0, n)`` on up to
``nt`` threads: the calling thread (worker 0) and pool threads 1..nt-1, started on first use and kept.
Items are claimed one at a time from a shared counter, and the call returns as soon as every item is
*done*, not when every thread has checked in: a pool thread that wakes late (its core busy with another
process) finds nothing left and goes back to sleep, instead of holding the caller at a barrier as an
OpenMP parallel region would (measured: with a competing process on one of two cores, OpenMP regions of
a small training step took 3x longer on two threads than on one).

Waiting is passive: idle pool threads sleep on a condition variable; only the caller polls (with
``sched_yield``) for items other threads are still finishing. The claim counter carries the job's
generation, so a thread holding a stale job can never claim an item of the next one. One job runs at a
time (a mutex serializes callers from several threads).
"""

POOL_C = r"""/* ember's work pool (ember.compiler.pool_c) */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#ifndef EM_POOL_MAX
#define EM_POOL_MAX 256
#endif
typedef void (*em_task_fn)(void *ctx, long item, int worker);
static pthread_mutex_t em_pool_mu = PTHREAD_MUTEX_INITIALIZER;   /* guards the job fields below */
static pthread_cond_t em_pool_cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t em_pool_run_mu = PTHREAD_MUTEX_INITIALIZER;
static int em_pool_threads = 0;                 /* pool threads started (worker ids 1..em_pool_threads) */
static unsigned em_pool_gen = 0;
static em_task_fn em_job_fn;
static void *em_job_ctx;
static long em_job_n;
static int em_job_nt;
static _Atomic unsigned long long em_pool_claim;   /* generation << 32 | next item */
static _Atomic long em_pool_done;

static int em_pool_take(unsigned gen, long n, long *item) {
  unsigned long long w = atomic_load(&em_pool_claim);
  for (;;) {
    if ((unsigned)(w >> 32) != gen || (long)(w & 0xffffffffULL) >= n) return 0;
    if (atomic_compare_exchange_weak(&em_pool_claim, &w, w + 1)) {
      *item = (long)(w & 0xffffffffULL);
      return 1;
    }
  }
}

static void em_pool_work(unsigned gen, long n, em_task_fn fn, void *ctx, int worker) {
  long item;
  while (em_pool_take(gen, n, &item)) {
    fn(ctx, item, worker);
    atomic_fetch_add(&em_pool_done, 1);
  }
}

static void *em_pool_main(void *arg) {
  const int id = (int)(intptr_t)arg;
  unsigned seen = 0;
  pthread_mutex_lock(&em_pool_mu);
  for (;;) {
    while (em_pool_gen == seen) pthread_cond_wait(&em_pool_cv, &em_pool_mu);
    seen = em_pool_gen;
    const em_task_fn fn = em_job_fn;
    void *const ctx = em_job_ctx;
    const long n = em_job_n;
    const int nt = em_job_nt;
    pthread_mutex_unlock(&em_pool_mu);
    if (id < nt) em_pool_work(seen, n, fn, ctx, id);
    pthread_mutex_lock(&em_pool_mu);
  }
  return 0;
}

/* fn(ctx, item, worker) for item in [0, n) on up to nt threads (worker < nt) */
static void em_pool_run(int nt, long n, em_task_fn fn, void *ctx) {
  if (nt > n) nt = (int)n;
  if (nt > EM_POOL_MAX) nt = EM_POOL_MAX;
  if (nt <= 1 || n >= 0xffffffffL) {
    for (long i = 0; i < n; i++) fn(ctx, i, 0);
    return;
  }
  pthread_mutex_lock(&em_pool_run_mu);
  pthread_mutex_lock(&em_pool_mu);
  while (em_pool_threads < nt - 1) {             /* start the threads this job needs */
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    const int ok = pthread_create(&t, &at, em_pool_main, (void *)(intptr_t)(em_pool_threads + 1)) == 0;
    pthread_attr_destroy(&at);
    if (!ok) break;
    em_pool_threads++;
  }
  if (nt > em_pool_threads + 1) nt = em_pool_threads + 1;
  const unsigned gen = ++em_pool_gen;
  em_job_fn = fn;
  em_job_ctx = ctx;
  em_job_n = n;
  em_job_nt = nt;
  atomic_store(&em_pool_done, 0);
  atomic_store(&em_pool_claim, (unsigned long long)gen << 32);
  if (nt > 1) pthread_cond_broadcast(&em_pool_cv);
  pthread_mutex_unlock(&em_pool_mu);
  em_pool_work(gen, n, fn, ctx, 0);
  while (atomic_load(&em_pool_done) < n) sched_yield();   /* items other threads are finishing */
  pthread_mutex_unlock(&em_pool_run_mu);
}
"""
