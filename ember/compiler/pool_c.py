"""The C text of the work pool ember's GEMM runs on (generated code; see gemm_c.py).

``em_pool_run(nt, n, fn, ctx)`` calls ``fn(ctx, item, worker)`` for every item in ``[0, n)`` on up to
``nt`` threads: the calling thread (worker 0) and pool threads 1..nt-1, started on first use and kept.
Items are claimed one at a time from a shared counter, and the call returns as soon as every item is
*done*, not when every thread has checked in: a pool thread that wakes late (its core busy with another
process) finds nothing left and goes back to sleep, instead of holding the caller at a barrier as an
OpenMP parallel region would (measured: with a competing process on one of two cores, OpenMP regions of
a small training step took 3x longer on two threads than on one).

Pool threads keep off the CPU the caller runs on while it works (their affinity is the caller's minus
that CPU): woken onto the caller's core a helper would preempt the caller, and with another process busy
on one core the scheduler could move the caller there (traces: 8-36 ms stalls of a 0.7-2 ms GEMM).

Waiting is passive: idle pool threads sleep on a condition variable. The caller, once no item is left to
claim, polls (``sched_yield``) for up to ``EM_POOL_SPIN_NS`` (30 us) for the items other threads are
finishing, then gives the pool threads back every CPU (a helper preempted on a busy core can then move
to the caller's, now idle) and sleeps until the last item is done, held to its CPU meanwhile (woken by a
helper on a busy core, the scheduler would place it there, behind the busy process). The claim counter carries the job's
generation, so a thread holding a stale job can never claim an item of the next one. One job runs at a
time (a mutex serializes callers from several threads).
"""

POOL_C = r"""/* ember's work pool (ember.compiler.pool_c) */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
extern int sched_getcpu(void);                  /* glibc; declared by <sched.h> only under _GNU_SOURCE */
#ifndef EM_POOL_MAX
#define EM_POOL_MAX 256
#endif
typedef void (*em_task_fn)(void *ctx, long item, int worker);
static pthread_mutex_t em_pool_mu = PTHREAD_MUTEX_INITIALIZER;   /* guards the job fields below */
static pthread_cond_t em_pool_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t em_pool_done_cv = PTHREAD_COND_INITIALIZER;   /* the caller sleeps here (end of a job) */
static int em_pool_waiting = 0;                 /* the caller sleeps on em_pool_done_cv */
static long em_pool_tid[EM_POOL_MAX];           /* kernel thread id of each pool thread (0: not started) */
static pthread_mutex_t em_pool_run_mu = PTHREAD_MUTEX_INITIALIZER;
static int em_pool_threads = 0;                 /* pool threads started (worker ids 1..em_pool_threads) */
static unsigned em_pool_gen = 0;
static em_task_fn em_job_fn;
static void *em_job_ctx;
static long em_job_n;
static int em_job_nt;
static _Atomic unsigned long long em_pool_claim;   /* generation << 32 | next item */
static _Atomic long em_pool_done;
#define EM_MASK_WORDS 16                        /* CPU masks of up to 1024 CPUs */
static unsigned long em_pool_all[EM_MASK_WORDS];  /* the CPUs the caller may use */
static unsigned long em_pool_mask[EM_MASK_WORDS]; /* ... minus the one it runs on: the pool threads' CPUs */
static int em_pool_cpu = -1;                    /* the caller's CPU em_pool_mask was made for (-1: none) */
static int em_pool_pinned = 0;                  /* pool threads are (or will be) held to em_pool_mask */
static unsigned em_pool_mask_gen = 0;           /* bumped when the pool threads should take em_pool_mask */
#ifndef EM_POOL_SPIN_NS
#define EM_POOL_SPIN_NS 30000                   /* the caller polls this long for the last items, then sleeps */
#endif

/* keep pool threads off the caller's CPU while a job runs: otherwise the scheduler may wake one onto it
   (the caller then waits for its own helper) or, with a busy core, move the caller there. Called with
   em_pool_mu held. */
static void em_pool_note_cpu(void) {
  const int cpu = sched_getcpu();
  if (cpu == em_pool_cpu || cpu < 0 || cpu >= 64 * EM_MASK_WORDS) return;
  em_pool_cpu = cpu;
  unsigned long m[EM_MASK_WORDS];
  memset(m, 0, sizeof(m));
  if (syscall(SYS_sched_getaffinity, 0, sizeof(m), m) <= 0) return;
  memcpy(em_pool_all, m, sizeof(m));
  m[cpu / 64] &= ~(1UL << (cpu % 64));
  int any = 0;
  for (int i = 0; i < EM_MASK_WORDS; i++) any |= m[i] != 0;
  if (!any) return;                             /* one CPU: nowhere else to go */
  memcpy(em_pool_mask, m, sizeof(m));
  em_pool_pinned = 1;
  em_pool_mask_gen++;
}

/* the caller has done its share and waits for items other threads hold: it polls briefly, then lets the
   pool threads run anywhere again (one preempted by another process can then move to the caller's CPU,
   which the caller leaves idle) and sleeps until the last item is done */
static void em_pool_wait(long n, int nt) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (atomic_load(&em_pool_done) < n) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > EM_POOL_SPIN_NS) break;
    sched_yield();
  }
  if (atomic_load(&em_pool_done) >= n) return;
  /* the caller sleeps held to its CPU: woken by a helper on a busy core, the scheduler would otherwise
     place it there, behind the busy process (traces: 3-4 ms per call) */
  unsigned long own[EM_MASK_WORDS], here[EM_MASK_WORDS];
  memset(own, 0, sizeof(own));
  memset(here, 0, sizeof(here));
  const int cpu = sched_getcpu();
  const int hold = cpu >= 0 && cpu < 64 * EM_MASK_WORDS && syscall(SYS_sched_getaffinity, 0, sizeof(own), own) > 0;
  if (hold) {
    here[cpu / 64] = 1UL << (cpu % 64);
    syscall(SYS_sched_setaffinity, 0, sizeof(here), here);
  }
  pthread_mutex_lock(&em_pool_mu);
  if (em_pool_pinned) {
    for (int w = 1; w < nt; w++)
      if (em_pool_tid[w]) syscall(SYS_sched_setaffinity, em_pool_tid[w], sizeof(em_pool_all), em_pool_all);
    em_pool_pinned = 0;
    em_pool_cpu = -1;                           /* the next job pins them again */
  }
  em_pool_waiting = 1;
  while (atomic_load(&em_pool_done) < n) pthread_cond_wait(&em_pool_done_cv, &em_pool_mu);
  em_pool_waiting = 0;
  pthread_mutex_unlock(&em_pool_mu);
  if (hold) syscall(SYS_sched_setaffinity, 0, sizeof(own), own);
}

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
  unsigned seen = 0, mask_seen = 0;
  pthread_mutex_lock(&em_pool_mu);
  em_pool_tid[id] = syscall(SYS_gettid);
  for (;;) {
    while (em_pool_gen == seen) pthread_cond_wait(&em_pool_cv, &em_pool_mu);
    seen = em_pool_gen;
    const em_task_fn fn = em_job_fn;
    void *const ctx = em_job_ctx;
    const long n = em_job_n;
    const int nt = em_job_nt;
    if (em_pool_mask_gen != mask_seen && em_pool_pinned)      /* under the lock: em_pool_wait may unpin */
      syscall(SYS_sched_setaffinity, 0, sizeof(em_pool_mask), em_pool_mask);
    mask_seen = em_pool_mask_gen;
    pthread_mutex_unlock(&em_pool_mu);
    if (id < nt) em_pool_work(seen, n, fn, ctx, id);
    pthread_mutex_lock(&em_pool_mu);
    if (em_pool_waiting && atomic_load(&em_pool_done) >= n) pthread_cond_signal(&em_pool_done_cv);
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
  em_pool_note_cpu();
  const unsigned gen = ++em_pool_gen;
  em_job_fn = fn;
  em_job_ctx = ctx;
  em_job_n = n;
  em_job_nt = nt;
  atomic_store(&em_pool_done, 0);
  atomic_store(&em_pool_claim, (unsigned long long)gen << 32);
  pthread_mutex_unlock(&em_pool_mu);
  /* after the unlock: a woken thread does not block on the mutex the caller still holds (the threads
     test em_pool_gen under the mutex, so no wake-up is lost) */
  pthread_cond_broadcast(&em_pool_cv);
  em_pool_work(gen, n, fn, ctx, 0);
  em_pool_wait(n, nt);                           /* items other threads are finishing */
  pthread_mutex_unlock(&em_pool_run_mu);
}
"""
