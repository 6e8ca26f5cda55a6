"""ember's work pool (compiler/pool_c.py) when a thread is late: a helper (or the caller) that holds an
item while it cannot run is moved onto the idle thread's CPU, a late helper sits out the next jobs for
a while and comes back, every item still runs exactly once, the caller's CPU mask is restored, and the
GEMM on two threads gives NumPy's results while another process keeps one core busy. Correctness only:
what a busy core costs is measured by ``python -m ember.bench gemm --threads 1,2 --busy``."""
import ctypes
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from ember.compiler import build, gemm
from ember.compiler.pool_c import POOL_C

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
two_cpus = pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                              reason="needs at least two CPUs this process may use")

# a job of n items: item i spins `spin_us`, except the first item `slow_worker` takes, which sleeps
# `slow_us` and notes its thread's CPU mask before and after the sleep (the first 64 CPUs)
_HARNESS_C = POOL_C + r"""
#include <stdlib.h>
static _Atomic int t_count[4096];
static int t_worker[4096];
static int t_slow_worker;
static long t_slow_us, t_spin_us;
static _Atomic int t_slow_taken;
static unsigned long t_mask_before, t_mask_after;

static unsigned long t_mask(void) {
  unsigned long m[16];
  memset(m, 0, sizeof(m));
  syscall(SYS_sched_getaffinity, 0, sizeof(m), m);
  return m[0];
}

static void t_task(void *ctx, long it, int w) {
  (void)ctx;
  atomic_fetch_add(&t_count[it], 1);
  t_worker[it] = w;
  if (w == t_slow_worker && !atomic_exchange(&t_slow_taken, 1)) {
    t_mask_before = t_mask();
    const struct timespec d = {t_slow_us / 1000000, (t_slow_us % 1000000) * 1000};
    nanosleep(&d, 0);
    t_mask_after = t_mask();
    return;
  }
  const long long t0 = em_pool_now();
  while (em_pool_now() - t0 < t_spin_us * 1000) {}
}

/* runs the job; counts[i] how often item i ran, workers[i] who ran it; masks: before, after the sleep */
long t_run(int nt, long n, int slow_worker, long slow_us, long spin_us, int *counts, int *workers,
           unsigned long *masks) {
  for (long i = 0; i < n; i++) t_count[i] = 0, t_worker[i] = -1;
  t_slow_worker = slow_worker, t_slow_us = slow_us, t_spin_us = spin_us;
  t_slow_taken = 0, t_mask_before = t_mask_after = 0;
  em_pool_run(nt, n, t_task, 0);
  for (long i = 0; i < n; i++) counts[i] = t_count[i], workers[i] = t_worker[i];
  masks[0] = t_mask_before, masks[1] = t_mask_after;
  return em_pool_late_count;
}
/* whether a pool thread polls after a train of jobs (GEMMs and loops then split from less work) */
int t_hot(void) { return em_pool_is_hot(); }
long long t_poll_ns(void) { return em_pool_hot; }     /* the poll the last job's threads took up */
/* `jobs` jobs of n items back to back (no Python between them): the longest poll any of them set up, or
   -1 when an item ran other than once */
long long t_train(int jobs, long n, long spin_us) {
  long long longest = 0;
  t_slow_worker = -1, t_spin_us = spin_us;
  for (int j = 0; j < jobs; j++) {
    for (long i = 0; i < n; i++) t_count[i] = 0;
    em_pool_run(2, n, t_task, 0);
    for (long i = 0; i < n; i++) if (t_count[i] != 1) return -1;
    if (em_pool_hot > longest) longest = em_pool_hot;
  }
  return longest;
}
"""
_LIB = []


def _run(nt, n, slow_worker=-1, slow_us=0, spin_us=20):
    if not _LIB:
        lib = build.compile_source(_HARNESS_C, name="test_pool_late")
        p = ctypes.c_void_p
        _LIB.append(lib.get("t_run", (ctypes.c_int, ctypes.c_long, ctypes.c_int, ctypes.c_long, ctypes.c_long,
                                      p, p, p), ctypes.c_long))
        _LIB.append(lib.get("t_hot", (), ctypes.c_int))
        _LIB.append(lib.get("t_poll_ns", (), ctypes.c_longlong))
        _LIB.append(lib.get("t_train", (ctypes.c_int, ctypes.c_long, ctypes.c_long), ctypes.c_longlong))
    counts = np.zeros(n, np.int32)
    workers = np.zeros(n, np.int32)
    masks = np.zeros(2, np.uint64)
    late = _LIB[0](nt, n, slow_worker, slow_us, spin_us, counts.ctypes.data, workers.ctypes.data,
                   masks.ctypes.data)
    cpus = [{c for c in range(64) if int(m) >> c & 1} for m in masks]
    return counts, workers, cpus, late


@two_cpus
def test_a_late_helper_is_moved_then_sits_out_then_returns():
    mine = os.sched_getaffinity(0)
    for attempt in range(5):                  # the helper must take an item at all (it may wake late)
        time.sleep(0.6 if attempt else 0)     # (a job it did not help sends it out for up to 0.5 s)
        counts, workers, (before, after), late = _run(2, 64, slow_worker=1, slow_us=30000)
        assert (counts == 1).all()             # every item exactly once, the slow one included
        if (workers == 1).any():
            break
    else:
        pytest.skip("the pool thread never got an item in 5 jobs (the machine is too busy to test this)")
    assert late >= 1
    # kept off the caller's CPU while the job ran; during the caller's wait, moved onto that CPU alone
    assert before and len(after) == 1 and not after <= before, (before, after)
    assert os.sched_getaffinity(0) == mine
    # right after: the late helper sits out (the caller runs every item)
    counts, workers, _, _ = _run(2, 16, spin_us=20)
    assert (counts == 1).all() and (workers == 0).all()
    # after the longest sitting out (0.5 s) it takes part again
    for attempt in range(5):
        time.sleep(0.6)
        counts, workers, _, _ = _run(2, 64, spin_us=50)
        assert (counts == 1).all()
        if (workers == 1).any():
            return
    raise AssertionError("the helper never took part again after sitting out")


@two_cpus
def test_a_late_caller_is_moved_onto_the_helpers_cpu_and_gets_its_mask_back():
    mine = os.sched_getaffinity(0)
    for attempt in range(5):
        time.sleep(0.6 if attempt else 0)
        counts, workers, (before, after), _ = _run(2, 64, slow_worker=0, slow_us=30000, spin_us=50)
        assert (counts == 1).all()
        if (workers == 1).any() and len(after) == 1 and after != before:
            break
    else:
        pytest.skip("the pool thread never finished its items while the caller slept (machine too busy)")
    # during its slow item the caller ran where the helper was (one CPU), afterwards its own mask again
    assert os.sched_getaffinity(0) == mine


def _thread_cpu_ns():
    """{thread id: CPU time in ns} of this process's threads (Linux schedstat)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            out[tid] = int(open(f"/proc/self/task/{tid}/schedstat").read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def _assert_other_threads_idle():
    """Over 300 ms, the process's threads other than this one use a few ms of CPU at most."""
    before = _thread_cpu_ns()
    time.sleep(0.3)
    after = _thread_cpu_ns()
    me = str(threading.get_native_id())
    grew = {t: after[t] - before[t] for t in after if t in before and t != me}
    assert sum(grew.values()) < 5e6, grew


@two_cpus
@pytest.mark.skipif(not os.path.exists("/proc/self/task/%d/schedstat" % os.getpid()),
                    reason="needs Linux's /proc/self/task/<tid>/schedstat to read each thread's CPU time")
def test_idle_pool_threads_sleep_after_a_short_poll():
    """Done with a job, a pool thread polls for the next one for EM_POOL_HOT_NS (20 us), then sleeps:
    idle for 300 ms, the process's threads other than this one use a few ms at most (a pool that kept
    spinning would use the whole 300 ms)."""
    _run(2, 64, spin_us=50)
    time.sleep(0.01)
    _assert_other_threads_idle()


@two_cpus
@pytest.mark.skipif(not os.path.exists("/proc/self/task/%d/schedstat" % os.getpid()),
                    reason="needs Linux's /proc/self/task/<tid>/schedstat to read each thread's CPU time")
def test_after_a_train_of_jobs_pool_threads_poll_longer_then_sleep():
    """Jobs that come one right behind another (a compiled step's GEMMs and loops) make a train: a pool
    thread then polls for up to EM_POOL_HOT_MAX_NS (400 us) after each instead of 20 us, and reports
    itself hot meanwhile. Every item still runs once; idle afterwards, the pool is cold again and its
    threads sleep (300 ms idle: a few ms of their CPU at most)."""
    _run(2, 16, spin_us=10)
    # the compilers of this process's background builds (earlier tests' -O3 libraries) would take the other
    # CPU, and a pool thread stops polling when another process wants its CPU (the module text)
    from ember.compiler import tiers
    tiers.wait_background()
    # a helper sent out by an earlier test (up to 0.5 s) runs no train, and a job judged poor (on a loaded
    # machine: the helper was late) ends one: up to 5 trains of 200 back-to-back jobs, after 0.6 s each
    longest = []
    for attempt in range(5):
        time.sleep(0.6)
        longest.append(_LIB[3](200, 16, 10))
        assert longest[-1] >= 0                  # every item ran once
        if longest[-1] == 400_000:
            break
    assert longest[-1] == 400_000, longest
    time.sleep(0.05)
    assert _LIB[1]() == 0
    _assert_other_threads_idle()


def test_one_thread_and_more_threads_than_items():
    for nt, n in ((1, 10), (4, 3), (3, 1)):
        counts, workers, _, _ = _run(nt, n)
        assert (counts == 1).all() and (workers < min(nt, n)).all() and (workers >= 0).all()


_BUSY_GEMMS = r"""
import os, sys, numpy as np
from ember.compiler import gemm
mine = os.sched_getaffinity(0)
rng = np.random.default_rng(0)
bad = 0
for i in range(60):
    M, N, K = (int(x) for x in rng.integers(1, 400, 3))
    nb = int(rng.choice([1, 1, 3, 64]))
    if nb == 64:
        M, N, K = M % 70 + 1, N % 70 + 1, K % 70 + 1
    ta, tb = (int(x) for x in rng.integers(0, 2, 2))
    a = rng.standard_normal((nb, K, M) if ta else (nb, M, K)).astype(np.float32)
    b = rng.standard_normal((nb, N, K) if tb else (nb, K, N)).astype(np.float32)
    a = a.transpose(0, 2, 1) if ta else a
    b = b.transpose(0, 2, 1) if tb else b
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    base = rng.standard_normal((nb, M, N)).astype(np.float32)
    for rep in range(3):
        c = gemm.sgemm(a, b, threads=2, exact_threads=True)
        acc = base.copy()
        gemm.sgemm(a, b, threads=2, out=acc, accumulate=True, exact_threads=True)
        tol = 2e-6 * max(1, K)
        bad += not np.allclose(c, ref, rtol=1e-5, atol=tol) or not np.allclose(acc, ref + base, rtol=1e-5, atol=tol)
    bad += os.sched_getaffinity(0) != mine
print(bad)
"""


@two_cpus
@pytest.mark.skipif(not gemm.available(), reason="this CPU has neither AVX-512 nor AVX2+FMA: ember's GEMM "
                                                 "is not compiled (the BLAS runs)")
def test_gemm_on_two_threads_with_a_busy_core_gives_numpys_results():
    cpu = max(os.sched_getaffinity(0))
    busy = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    try:
        r = subprocess.run([sys.executable, "-c", _BUSY_GEMMS], cwd=ROOT, capture_output=True, text=True,
                           timeout=600, env={**os.environ, "PYTHONPATH": ROOT})
    finally:
        busy.kill()
        busy.wait()
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "0", r.stdout


@two_cpus
def test_a_mask_the_user_narrowed_between_jobs_is_the_one_restored():
    mine = os.sched_getaffinity(0)
    try:
        _run(2, 16, spin_us=20)                    # the pool notes the caller's CPU and mask
        here = {ctypes.CDLL(None).sched_getcpu()}
        os.sched_setaffinity(0, here)              # the user narrows the caller to the CPU it is on
        for attempt in range(5):
            time.sleep(0.6 if attempt else 0)
            counts, workers, (before, after), _ = _run(2, 64, slow_worker=0, slow_us=30000, spin_us=50)
            assert (counts == 1).all()
            assert os.sched_getaffinity(0) == here  # never the wider mask of the first job
            if (workers == 1).any() and after != before:
                return
        pytest.skip("the pool thread never moved the late caller in 5 jobs (machine too busy)")
    finally:
        os.sched_setaffinity(0, mine)
