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

The late helper (the busy-core rule). A helper whose core another process keeps busy can be preempted
while it holds an item; the caller, out of items, would then wait a whole time slice of that process
(measured: two-thread GEMMs 5-9x slower than one thread with a busy loop on the other core). Every
thread notes when it claimed its current item. The caller, once no item is left to claim, polls
(``sched_yield``) for up to ``EM_POOL_SPIN_NS`` (30 us), then sleeps held to its CPU; a helper still on
an item claimed longer ago than one of the caller's own items took plus that poll is *late*: the caller
moves it onto its own CPU (``sched_setaffinity`` of a preempted thread moves it at once; the caller's
CPU is idle while it sleeps), where it finishes its item. The next job pins it off the caller's CPU
again. Symmetrically a helper out of items moves a late caller onto its own CPU (the caller restores
its mask at the end of the job). When the recent jobs, late ones included, ran no faster than the
caller alone would have (its CPU time per item times the items; decayed sums of both, see
em_pool_run), the helpers sit out the following jobs for a while (``EM_POOL_BENCH_NS``, 2 ms at first,
doubled each time up to 0.5 s; halved after 8 jobs in a row where they paid), so where they cannot help
the pool runs about as one thread would (ember's GEMM then runs its one-thread code: ``em_pool_ready``),
re-probing now and then; on a quiet machine they pay and nothing changes.

Waiting is passive: idle pool threads sleep on a condition variable, after a bounded poll. Waking a
sleeping thread costs 30-40 us here (measured: from the caller's broadcast to the helper's first item, a
2-CPU VM), a fifth of a 2-thread GEMM of the GPT's; a job right behind the last (the GEMMs of a layer's
backward, attention's products, a step's kernels) finds a thread that still polls in about 2 us (this VM's
idle CPUs halt at once, ``haltpoll.guest_halt_poll_ns=0``: a wake-up is a trip through the hypervisor).
So a pool thread, done with a job, polls for the next (``sched_yield`` between looks, so a process that
wants its CPU gets it) before it sleeps: for ``EM_POOL_HOT_NS`` (20 us) after an isolated job, and for
``EM_POOL_HOT_MAX_NS`` (400 us) while jobs come in a train, at least two of the last few within that
window of the one before (a compiled step's GEMMs and parallel loops with serial kernels of 50-300 us
between them, where every job paid a 30-100 us wake-up: a 250 us attention product on two threads ran
1.0x one thread's speed). At most that much CPU per job, never a spin without end: idle, the pool sleeps
after one window; jobs the helpers sit out (below) wake nobody, and jobs that did not pay end the train.
A poll stops early when its looks come more than ``EM_POOL_SHARED_NS`` (50 us) apart: the yield let
another process run on that CPU, and there a sleeping thread is woken sooner (a wake-up preempts the
process) than a polling one gets its turn back (measured with a busy loop on the helper's CPU: a 400 us
poll made two-thread GEMMs of a train slower than the 20 us one). While a thread polls after a job of a
train, GEMMs and parallel loops split from less work (em_pool_is_hot: gemm_c.py, render_par.py).
The claim counter carries the job's generation, so a thread holding a stale job can never claim an item
of the next one. One job runs at a time (a mutex serializes callers from several threads).

Which items (``em_pool_take``). The caller claims from the front of ``[0, half)`` (``half``: its share by
count, ``ceil(n / (helpers + 1))``), the helpers from the front of ``[half, n)``; a thread whose range is
used up claims from the other (so a late helper still costs nothing). With two threads the caller thus
runs the first part of every parallel loop and GEMM and the helper the last, the same split job after
job: a kernel over the buffer the last one wrote finds its half in its own core's cache, where
claiming from one counter handed each chunk to whichever thread came first and about half of every
kernel's input crossed between the cores (measured, the GPT b16 step on two threads with per-kernel
timing, interleaved: 1.04-1.06x faster whole steps, the MLP b512 Adam step 1.01-1.04x; an elementwise
copy of 128K floats took 114 us on one thread and 170 us on two before). ``ember_pool_halves = 0`` (the
GEMM library's symbol) goes back to one counter (an A/B in one process: set it through ctypes between runs).
``em_pool_run_mine`` sets the caller's range where items differ in size: a GEMM's row items (large
first) and its K split (the first item is several K blocks) give the caller the items worth 1 / nt.
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
/* the counters every thread writes per item, and each thread's hold time, on cache lines of their own
   (written on another core, a shared line costs a transfer per item: attention's items take ~3 us) */
static _Atomic unsigned long long em_pool_claim __attribute__((aligned(64)));   /* generation << 32 | next item */
static _Atomic unsigned long long em_pool_claim2 __attribute__((aligned(64)));  /* ... of the helpers' range */
static long em_job_half;                        /* the caller's range of items is [0, em_job_half) */
/* 1: the caller claims from the first part of a job's items, the helpers from the rest (the module
   text); 0: one counter for all (tests, A/B runs: set through ctypes) */
__attribute__((visibility("default"))) int ember_pool_halves = 1;
static _Atomic long em_pool_done __attribute__((aligned(64)));
#define EM_MASK_WORDS 16                        /* CPU masks of up to 1024 CPUs */
static unsigned long em_pool_all[EM_MASK_WORDS];  /* the CPUs the caller may use */
static unsigned long em_pool_mask[EM_MASK_WORDS]; /* ... minus the one it runs on: the pool threads' CPUs */
static int em_pool_cpu = -1;                    /* the caller's CPU em_pool_mask was made for (-1: none) */
static int em_pool_pinned = 0;                  /* pool threads are (or will be) held to em_pool_mask */
static unsigned em_pool_mask_gen = 0;           /* bumped when the pool threads should take em_pool_mask */
static unsigned em_pool_mask_seen[EM_POOL_MAX]; /* the em_pool_mask_gen worker w holds (0: none yet) */
/* the late helper (see the module text): when each worker claimed the item it works on (ns, 0: none),
   which were moved onto the caller's CPU in this job, and which sit out jobs until when (ns) */
static _Atomic long long em_pool_hold_[EM_POOL_MAX * 8] __attribute__((aligned(64)));
#define em_pool_hold(w) em_pool_hold_[(w) * 8]
static char em_pool_moved[EM_POOL_MAX];
static char em_pool_sits[EM_POOL_MAX];          /* worker w takes no part in the current job */
static long long em_pool_bench_until[EM_POOL_MAX], em_pool_bench_len[EM_POOL_MAX];
static int em_pool_good_run[EM_POOL_MAX];       /* jobs in a row worker w paid in (see em_pool_run) */
static double em_pool_sum_alone, em_pool_sum_took;   /* decayed sums over judged jobs (see em_pool_run) */
static long em_pool_late_count = 0;             /* threads found late so far (tests, the bench) */
static long em_pool_jobs = 0;                   /* jobs the helpers took part in so far (the bench) ... */
static _Atomic long em_pool_joins[2];           /* ... and helpers that took a job while polling, after sleeping */
static long long em_pool_last[5];               /* the last job: items, the caller's, ns taken, ns alone, helpers */
static long em_pool_caller_tid = 0;             /* the caller of the current job */
static int em_pool_caller_moved = 0;            /* a helper moved it onto its CPU (the caller undoes it) */
#ifndef EM_POOL_SPIN_NS
#define EM_POOL_SPIN_NS 30000                   /* the caller polls this long for the last items, then sleeps */
#endif
#ifndef EM_POOL_HOT_NS
#define EM_POOL_HOT_NS 20000                    /* a pool thread polls this long for the next job, then sleeps */
#endif
#ifndef EM_POOL_HOT_MAX_NS
#define EM_POOL_HOT_MAX_NS 400000               /* ... and this long while jobs come in a train (see above) */
#endif
static long long em_pool_hot_max = EM_POOL_HOT_MAX_NS;   /* (ember_pool_set_hot: the bench's A/B) */
static long long em_pool_hot = EM_POOL_HOT_NS;  /* a pool thread's poll after the current job (ns) */
static long long em_pool_end = 0;               /* when the last job the helpers took part in ended (ns) */
static int em_pool_train = 0;                   /* recent jobs that came within em_pool_hot_max of the last (0-4) */
static _Atomic int em_pool_polling = 0;         /* pool threads polling for the next job now */
#ifndef EM_POOL_SHARED_NS
#define EM_POOL_SHARED_NS 50000                 /* a poll whose looks are further apart than this stops */
#endif
#ifndef EM_POOL_BENCH_NS
#define EM_POOL_BENCH_NS 2000000LL              /* a late helper sits out this long at first ... */
#endif
#ifndef EM_POOL_JUDGE_NS
#define EM_POOL_JUDGE_NS 100000.0               /* jobs shorter than this (on the caller alone) are not judged */
#endif
#ifndef EM_POOL_GOOD_RUN
#define EM_POOL_GOOD_RUN 8                      /* ... and halved after this many good jobs in a row */
#endif
#ifndef EM_POOL_BENCH_MAX_NS
#define EM_POOL_BENCH_MAX_NS 500000000LL        /* ... doubled each time it is late again, up to this */
#endif

static inline long long em_pool_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void em_pool_set_mask(long tid, const unsigned long *m) {
  syscall(SYS_sched_setaffinity, tid, sizeof(unsigned long) * EM_MASK_WORDS, m);
}

/* 1 while a pool thread polls for the next job after one of a train (see the module text; a stale
   answer costs only speed) */
static int em_pool_is_hot(void) {
  return em_pool_train >= 2 && atomic_load_explicit(&em_pool_polling, memory_order_relaxed) > 0;
}

/* keep pool threads off the caller's CPU while a job runs: otherwise the scheduler may wake one onto it
   (the caller then waits for its own helper) or, with a busy core, move the caller there. A helper the
   last job moved onto the caller's CPU gets its mask back here. Called with em_pool_mu held. */
static void em_pool_note_cpu(int nt) {
  const int cpu = sched_getcpu();
  unsigned long m[EM_MASK_WORDS];
  memset(m, 0, sizeof(m));
  /* the affinity is read every job (one syscall, well under a microsecond): a user who changed it since
     the last job must never get the old mask back from the pool */
  if (cpu >= 0 && cpu < 64 * EM_MASK_WORDS && syscall(SYS_sched_getaffinity, 0, sizeof(m), m) > 0 &&
      (cpu != em_pool_cpu || memcmp(m, em_pool_all, sizeof(m)) != 0)) {
    memcpy(em_pool_all, m, sizeof(m));
    m[cpu / 64] &= ~(1UL << (cpu % 64));
    int any = 0;
    for (int i = 0; i < EM_MASK_WORDS; i++) any |= m[i] != 0;
    if (any) {                                  /* (one CPU: nowhere else to go) */
      em_pool_cpu = cpu;
      memcpy(em_pool_mask, m, sizeof(m));
      em_pool_pinned = 1;
      em_pool_mask_gen++;
    }
  }
  /* a helper moved onto the caller's CPU, or whose mask is older than the caller's CPU, gets its mask from
     here, before the job wakes it: a helper left to set its own (on joining the job) was woken where the
     caller runs, preempting it (at real-time priority it never ran at all: the caller had moved onto its CPU) */
  for (int w = 1; w < nt && w <= em_pool_threads; w++) {
    if (!em_pool_moved[w] && (!em_pool_pinned || em_pool_mask_seen[w] == em_pool_mask_gen)) continue;
    em_pool_moved[w] = 0;                       /* asleep or about to sleep: set its mask from here */
    if (!em_pool_tid[w]) continue;              /* (not started yet: it sets its own on joining) */
    em_pool_set_mask(em_pool_tid[w], em_pool_pinned ? em_pool_mask : em_pool_all);
    em_pool_mask_seen[w] = em_pool_pinned ? em_pool_mask_gen : 0;
  }
}

/* worker w sits out the jobs of the next while: EM_POOL_BENCH_NS at first, doubled each time it is sent
   out again (up to EM_POOL_BENCH_MAX_NS); em_pool_mu held */
static void em_pool_sit_out(int w, long long now) {
  const long long len = em_pool_bench_len[w] ? em_pool_bench_len[w] : EM_POOL_BENCH_NS;
  em_pool_bench_until[w] = now + len;
  em_pool_bench_len[w] = 2 * len < EM_POOL_BENCH_MAX_NS ? 2 * len : EM_POOL_BENCH_MAX_NS;
}

/* the caller has done its share (c_items items in own_ns) and waits for the items helpers hold: it polls
   briefly, then sleeps held to its CPU, moving every late helper onto that CPU (see the module text).
   Returns 1 when some helper was late. */
static int em_pool_wait(long n, int nt, long c_items, long long own_ns) {
  const long long t0 = em_pool_now();
  while (atomic_load(&em_pool_done) < n) {
    if (em_pool_now() - t0 > EM_POOL_SPIN_NS) break;
    sched_yield();
  }
  if (atomic_load(&em_pool_done) >= n) return 0;
  const long long late_ns = (c_items > 0 ? own_ns / c_items : 0) + EM_POOL_SPIN_NS;
  /* the caller sleeps held to its CPU: woken by a helper on a busy core, the scheduler would otherwise
     place it there, behind the busy process (traces: 3-4 ms per call) */
  unsigned long own[EM_MASK_WORDS], here[EM_MASK_WORDS];
  memset(own, 0, sizeof(own));
  memset(here, 0, sizeof(here));
  const int cpu = sched_getcpu();
  const int hold = cpu >= 0 && cpu < 64 * EM_MASK_WORDS && syscall(SYS_sched_getaffinity, 0, sizeof(own), own) > 0;
  if (hold) {
    here[cpu / 64] = 1UL << (cpu % 64);
    em_pool_set_mask(0, here);
  }
  int late = 0;
  pthread_mutex_lock(&em_pool_mu);
  em_pool_waiting = 1;
  while (atomic_load(&em_pool_done) < n) {
    const long long now = em_pool_now();
    long long next = 0;                         /* when the next helper turns late (0: none to watch) */
    for (int w = 1; w < nt; w++) {
      const long long h = atomic_load(&em_pool_hold(w));
      if (!h || em_pool_moved[w]) continue;
      if (now - h < late_ns) {
        if (!next || h + late_ns < next) next = h + late_ns;
        continue;
      }
      late = 1;
      em_pool_late_count++;
      if (hold && em_pool_tid[w]) {             /* a preempted thread moves at once; a running one soon */
        em_pool_set_mask(em_pool_tid[w], here);
        em_pool_moved[w] = 1;
      }
    }
    /* (none to watch: look again after late_ns, for a helper between its claim and noting it) */
    struct timespec ts;                         /* the condition variable's clock is CLOCK_REALTIME */
    clock_gettime(CLOCK_REALTIME, &ts);
    const long long ns = ts.tv_nsec + (next ? next - now : late_ns);
    ts.tv_sec += ns / 1000000000LL;
    ts.tv_nsec = ns % 1000000000LL;
    pthread_cond_timedwait(&em_pool_done_cv, &em_pool_mu, &ts);
  }
  em_pool_waiting = 0;
  pthread_mutex_unlock(&em_pool_mu);
  if (hold) em_pool_set_mask(0, own);
  return late;
}

/* claims the next item of [.., end) from counter c (generation gen); 0 when none is left */
static int em_pool_take_from(_Atomic unsigned long long *c, unsigned gen, long end, long *item) {
  unsigned long long w = atomic_load(c);
  for (;;) {
    if ((unsigned)(w >> 32) != gen || (long)(w & 0xffffffffULL) >= end) return 0;
    if (atomic_compare_exchange_weak(c, &w, w + 1)) {
      *item = (long)(w & 0xffffffffULL);
      return 1;
    }
  }
}

/* the caller's items first come from [0, half), the helpers' from [half, n); a thread out of its own
   range takes from the other (see "Which items" in the module text) */
static int em_pool_take(unsigned gen, long n, long half, int worker, long *item) {
  if (worker == 0)
    return em_pool_take_from(&em_pool_claim, gen, half, item) || em_pool_take_from(&em_pool_claim2, gen, n, item);
  return em_pool_take_from(&em_pool_claim2, gen, n, item) || em_pool_take_from(&em_pool_claim, gen, half, item);
}

/* claims and runs items until none is left; returns how many it ran */
static long em_pool_work(unsigned gen, long n, long half, em_task_fn fn, void *ctx, int worker) {
  long item, count = 0;
  while (em_pool_take(gen, n, half, worker, &item)) {
    atomic_store_explicit(&em_pool_hold(worker), em_pool_now(), memory_order_relaxed);
    fn(ctx, item, worker);
    atomic_store_explicit(&em_pool_hold(worker), 0, memory_order_relaxed);
    atomic_fetch_add(&em_pool_done, 1);
    count++;
  }
  return count;
}

/* a helper out of items while the caller still holds one: polls briefly; a caller on its item longer than
   the helper's items took plus that poll is late (preempted on a busy core): the helper moves it onto its
   own CPU, which it leaves idle (the caller restores its mask at the end of the job) */
static void em_pool_watch_caller(unsigned gen, long n, long c_items, long long own_ns) {
  const long long late_ns = (c_items > 0 ? own_ns / c_items : 0) + EM_POOL_SPIN_NS, t0 = em_pool_now();
  for (;;) {
    if (atomic_load(&em_pool_done) >= n || (unsigned)(atomic_load(&em_pool_claim) >> 32) != gen) return;
    const long long h = atomic_load(&em_pool_hold(0)), now = em_pool_now();
    if (h ? now - h >= late_ns : now - t0 >= late_ns) break;
    if (now - t0 < EM_POOL_SPIN_NS) {
      sched_yield();
    } else {                                    /* then passively, in naps a new job cuts short */
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 50000;
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      pthread_mutex_lock(&em_pool_mu);
      if (em_pool_gen == gen) pthread_cond_timedwait(&em_pool_cv, &em_pool_mu, &ts);
      pthread_mutex_unlock(&em_pool_mu);
    }
  }
  if (!atomic_load(&em_pool_hold(0))) return;  /* the caller waits for other helpers */
  const int cpu = sched_getcpu();
  if (cpu < 0 || cpu >= 64 * EM_MASK_WORDS) return;
  unsigned long here[EM_MASK_WORDS];
  memset(here, 0, sizeof(here));
  here[cpu / 64] = 1UL << (cpu % 64);
  pthread_mutex_lock(&em_pool_mu);              /* (the caller's end of job takes the lock after done == n) */
  if (atomic_load(&em_pool_done) < n && (unsigned)(atomic_load(&em_pool_claim) >> 32) == gen &&
      !em_pool_caller_moved && em_pool_caller_tid && em_pool_pinned) {   /* (pinned: em_pool_all is set) */
    em_pool_set_mask(em_pool_caller_tid, here);
    em_pool_caller_moved = 1;
    em_pool_late_count++;
  }
  pthread_mutex_unlock(&em_pool_mu);
}

static void *em_pool_main(void *arg) {
  const int id = (int)(intptr_t)arg;
  unsigned seen = 0;
  pthread_mutex_lock(&em_pool_mu);
  em_pool_tid[id] = syscall(SYS_gettid);
  long long hot = EM_POOL_HOT_NS;
  int counted = 0;                              /* this thread is counted in em_pool_polling */
  for (;;) {
    if (em_pool_gen == seen && hot > 0) {       /* a short poll for a job right behind the last */
      pthread_mutex_unlock(&em_pool_mu);
      if (!counted) atomic_fetch_add_explicit(&em_pool_polling, 1, memory_order_relaxed), counted = 1;
      const long long t0 = em_pool_now();
      for (long long last = t0, now; __atomic_load_n(&em_pool_gen, __ATOMIC_RELAXED) == seen; last = now) {
        now = em_pool_now();
        /* a look after a long gap: another process ran on this CPU (the yield gave it away), so sleep
           instead (a wake-up preempts such a process at once; a poll would wait for its turn) */
        if (now - t0 >= hot || now - last > EM_POOL_SHARED_NS) break;
        sched_yield();
      }
      pthread_mutex_lock(&em_pool_mu);
    }
    if (counted) atomic_fetch_sub_explicit(&em_pool_polling, 1, memory_order_relaxed), counted = 0;
    const int slept = em_pool_gen == seen;
    while (em_pool_gen == seen) pthread_cond_wait(&em_pool_cv, &em_pool_mu);
    seen = em_pool_gen;
    const em_task_fn fn = em_job_fn;
    void *const ctx = em_job_ctx;
    const long n = em_job_n, half = em_job_half;
    const int in = id < em_job_nt && !em_pool_sits[id];
    hot = in ? em_pool_hot : EM_POOL_HOT_NS;   /* (a thread the job left out polls briefly) */
    if (in && em_pool_pinned && em_pool_mask_seen[id] != em_pool_mask_gen) {   /* under the lock: see note_cpu */
      em_pool_set_mask(0, em_pool_mask);
      em_pool_mask_seen[id] = em_pool_mask_gen;
    }
    pthread_mutex_unlock(&em_pool_mu);
    if (in) {
      atomic_fetch_add_explicit(&em_pool_joins[slept], 1, memory_order_relaxed);
      const long long t0 = em_pool_now();
      const long mine = em_pool_work(seen, n, half, fn, ctx, id);
      /* out of items, about to poll: counted from now (the caller may plan its next job first) */
      if (hot > EM_POOL_HOT_NS) atomic_fetch_add_explicit(&em_pool_polling, 1, memory_order_relaxed), counted = 1;
      if (mine) em_pool_watch_caller(seen, n, mine, em_pool_now() - t0);
    }
    pthread_mutex_lock(&em_pool_mu);
    if (em_pool_waiting && atomic_load(&em_pool_done) >= n) pthread_cond_signal(&em_pool_done_cv);
  }
  return 0;
}

/* how many of nt threads a job started now would run on: the caller and the helpers not sitting out (an
   unlocked look, for a caller choosing between a split and its one-thread code: gemm_c.py) */
static int em_pool_ready(int nt) {
  const long long now = em_pool_now();
  int ready = 1;
  for (int w = 1; w < nt && w < EM_POOL_MAX; w++) ready += em_pool_bench_until[w] <= now;
  return ready;
}

/* fn(ctx, item, worker) for item in [0, n) on up to nt threads (worker < nt); the caller's range is
   [0, first) (first <= 0: its share by count; a GEMM whose first item is worth several others gives 1) */
static void em_pool_run_mine(int nt, long n, long first, em_task_fn fn, void *ctx) {
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
  const long long t0 = em_pool_now();
  int helpers = 0;                              /* the helpers that take part (late ones sit out a while) */
  for (int w = 1; w < nt; w++) {
    em_pool_sits[w] = em_pool_bench_until[w] > t0;
    helpers += !em_pool_sits[w];
  }
  if (!helpers) {                               /* every helper sits out: the caller alone, nobody woken */
    em_pool_last[0] = em_pool_last[1] = n, em_pool_last[4] = 0;
    pthread_mutex_unlock(&em_pool_mu);
    for (long i = 0; i < n; i++) fn(ctx, i, 0);
    pthread_mutex_unlock(&em_pool_run_mu);
    return;
  }
  em_pool_note_cpu(nt);
  /* the helpers' poll after this job: long while jobs come in a train (see the module text) */
  const int close = em_pool_end > 0 && t0 - em_pool_end < em_pool_hot_max;
  em_pool_train = close ? (em_pool_train < 4 ? em_pool_train + 1 : 4) : (em_pool_train > 0 ? em_pool_train - 1 : 0);
  em_pool_hot = em_pool_train >= 2 && em_pool_hot_max > EM_POOL_HOT_NS ? em_pool_hot_max : EM_POOL_HOT_NS;
  static __thread long my_tid = 0;
  if (!my_tid) my_tid = syscall(SYS_gettid);
  em_pool_caller_tid = my_tid;
  const unsigned gen = em_pool_gen + 1;
  __atomic_store_n(&em_pool_gen, gen, __ATOMIC_RELAXED);   /* (read unlocked by a polling thread) */
  em_job_fn = fn;
  em_job_ctx = ctx;
  em_job_n = n;
  em_job_nt = nt;
  /* the caller's share of the items by count (helpers = nt - 1 threads take the rest) */
  const long half = !ember_pool_halves ? n : first > 0 ? (first < n ? first : n) : (n + helpers) / (helpers + 1);
  em_job_half = half;
  atomic_store(&em_pool_done, 0);
  atomic_store(&em_pool_claim2, (unsigned long long)gen << 32 | (unsigned long long)half);
  atomic_store(&em_pool_claim, (unsigned long long)gen << 32);
  pthread_mutex_unlock(&em_pool_mu);
  /* after the unlock: a woken thread does not block on the mutex the caller still holds (the threads
     test em_pool_gen under the mutex, so no wake-up is lost) */
  pthread_cond_broadcast(&em_pool_cv);
  struct timespec c0, c1;                       /* the caller's CPU time on its items (see below) */
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
  const long mine = em_pool_work(gen, n, half, fn, ctx, 0);
  const long long own_ns = em_pool_now() - t0;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
  const long long own_cpu = (c1.tv_sec - c0.tv_sec) * 1000000000LL + (c1.tv_nsec - c0.tv_nsec);
  const int late = em_pool_wait(n, nt, mine, own_ns);   /* items other threads are finishing */
  /* did the helpers pay? The caller alone would have taken about n times its own item time, counted in
     CPU time (a caller preempted on its own items inflated a wall-clock estimate and made slow jobs look
     paid: measured, jobs of 14 ms judged good against 1.8 ms alone). Over the
     recent judged jobs (helpers took items; at least EM_POOL_JUDGE_NS alone, or one was late), the
     decayed sums of that estimate and of the time taken compare: when the jobs ran less than 1.05x
     faster than the caller alone would have, the helpers sit out (em_pool_sit_out). Judged by a sum, not
     job by job: on a machine whose cores are all contended, two threads still paid 1.3-1.8x by the
     median while single jobs often did not (sending helpers out on each such job measured 1.0x); one
     stall of a few time slices outweighs many good jobs. EM_POOL_GOOD_RUN jobs in a row over 1.3x halve
     the next sitting out. A job the helpers were woken for but took no item of is judged too: with the
     other core busy, such jobs took 3-10 ms of a 1.2 ms GEMM (the caller's CPU time 1.2 ms: it waited
     to run, not on items), and left unjudged they kept the helpers in (two threads 0.54-0.97x one). */
  const long long t1 = em_pool_now();
  const double alone = mine > 0 ? (double)own_cpu * n / mine : 0.0, took = (double)(t1 - t0);
  const int judged = late || alone >= EM_POOL_JUDGE_NS, good = !late && alone > 1.3 * took;
  pthread_mutex_lock(&em_pool_mu);
  em_pool_last[0] = n, em_pool_last[1] = mine, em_pool_last[2] = t1 - t0, em_pool_last[3] = (long long)alone;
  em_pool_last[4] = helpers;
  int poor = 0;
  if (judged) {
    em_pool_sum_alone = 0.875 * em_pool_sum_alone + alone;
    em_pool_sum_took = 0.875 * em_pool_sum_took + took;
    poor = em_pool_sum_alone < 1.05 * em_pool_sum_took;
    if (poor) em_pool_sum_alone = em_pool_sum_took = 0.0, em_pool_train = 0;   /* (a fresh start when they come back) */
  }
  for (int w = 1; w < nt; w++) {
    if (em_pool_sits[w]) continue;
    if (good && em_pool_bench_len[w] > EM_POOL_BENCH_NS && ++em_pool_good_run[w] >= EM_POOL_GOOD_RUN) {
      em_pool_bench_len[w] /= 2;
      em_pool_good_run[w] = 0;
    }
    if (poor) {
      em_pool_good_run[w] = 0;
      if (em_pool_bench_until[w] <= t1) em_pool_sit_out(w, t1);
    }
  }
  em_pool_end = em_pool_now();
  em_pool_jobs++;
  if (em_pool_caller_moved) {                   /* a helper moved the caller: its own mask back */
    em_pool_set_mask(0, em_pool_all);
    em_pool_caller_moved = 0;
    em_pool_cpu = -1;
  }
  pthread_mutex_unlock(&em_pool_mu);
  pthread_mutex_unlock(&em_pool_run_mu);
}
static void em_pool_run(int nt, long n, em_task_fn fn, void *ctx) { em_pool_run_mine(nt, n, 0, fn, ctx); }
"""
