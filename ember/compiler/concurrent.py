"""Independent kernels of a segment run at the same time, each on one core (issue 16, item 3).

Why: on two cores a GEMM split across both threads ran 1.3-1.6x faster than on one (packing repeated per
thread, the join, memory traffic), while two independent GEMMs, each on its own core, lose none of that.
A training step is full of independent work: a linear layer's backward computes dX = dY W and
dW = dY^T X from the same dY, the bias gradient beside them, and every parameter's optimizer update is on
its own.

What: :func:`plan` turns a segment's kernel list into *steps*, each either one kernel (run as before,
its loops and GEMM split over the threads) or a *job* of two lanes, lists of kernels that share no
memory. render_c writes a job as one function of ``(bufs, lane)`` and the entry calls it through
``em_conc_run`` (render_par.POOL_STUB_C): on two threads the pool runs the lanes as its two items, each
lane's kernels on their thread alone; on one thread, or more than two (where a split uses every core),
lane 0 then lane 1 on the caller, as a sequential program would.

The dependency analysis (:func:`dependencies`) is over buffer ids, what each kernel reads and writes
(its statements' leaf buffers, its access table): kernel j depends on an earlier kernel i when i writes
what j reads or writes, or reads what j writes (read after write, write after read, write after write).
Buffers are distinct memory except the arena's intermediates, which the memory plan lets share bytes
when their lifetimes do not overlap; that plan is made again from the steps (``memplan.plan_buffers``
with every kernel of a job at one position), so no two buffers a job touches share memory: reuse can
neither race nor add a dependency the analysis did not see. (Inputs never overlap when a program writes:
the runner checks and falls back to the interpreter.) A kernel that checks indices (an error ends the
segment early), a program timed per kernel, symbolic sizes and kernels whose code still forks OpenMP
regions stay steps of their own.

Choice by cost: a job is formed from the kernels ready to run (all they depend on done), dealt to the two
lanes largest first, then grown by kernels that depend on one lane only while that shortens the estimate.
It is worth taking when its estimate (the longer lane, slowed ~10% by the shared memory bus, plus waking
the pool) beats running its kernels one after another each split over both threads, and taken unless
running one ready kernel first and forming the job after it does more work per time; otherwise the
first ready kernel runs alone. The estimates (:func:`costs`) count multiply-adds and elements, with the split
gains measured here (GEMMs of 8M+ multiply-adds 1.45x, loops above the parallel threshold 1.3x).
"""
from __future__ import annotations

import math
import os
import re

from .memplan import _leaf_buffers
from .symbolic import SymInt

__all__ = ["dependencies", "costs", "plan_segment", "plan", "enabled", "laneable", "job_body"]

GEMM_MACS_PER_NS = 100.0      # one core of ember's GEMM, ~200 GFLOP/s on the step's shapes
ELEM_NS = 0.4                 # an element of a memory-bound loop
CALL_NS = 300.0               # a kernel call
JOB_NS = 15000.0              # waking the pool's second thread and joining it
CONC_SLOW = 1.1               # two lanes share the memory bus and caches
GEMM_SPLIT = 1.45             # measured two-thread gains of one kernel split
LOOP_SPLIT = 1.3
GEMM_SPLIT_MIN = 8 << 20      # ember's GEMM uses two threads from this many multiply-adds


def enabled() -> bool:
    """``EMBER_CONCURRENT=1`` turns concurrent kernels on; off by default. Measured on 2 cores (one
    process, both settings interleaved, medians of 7): the GPT b16 AdamW step on two threads took 157 ms
    with jobs against 105 ms with every kernel split (MLP b512 SGD 14.6 against 11.5 ms): a lane's GEMM
    on one thread leaves the other core idle whenever the lanes are unbalanced, and the cost model's
    constants are not fitted yet. Kept behind the switch until a plan beats splitting."""
    return os.environ.get("EMBER_CONCURRENT", "0") not in ("0", "")


def _prod(shape) -> int:
    return math.prod(shape) if shape else 1


def access_sets(k, sched, used=None) -> tuple:
    """(ids read, ids written) by kernel ``k``: every buffer it touches counts as read (conservative).
    ``used``: the ids its rendered C names, which are all the memory it touches (its C reaches memory
    through those parameters only); without it, the buffers its statements read."""
    reads, writes = set(used or ()), set()
    for bid, acc in k.accesses.items():
        reads.add(bid)
        if acc.get("w"):
            writes.add(bid)
    for st in k.prologue + k.stmts:
        if used is None:
            reads |= _leaf_buffers(st.node, sched, own=(st.kind == "store"))
            if st.target is not None:
                reads |= _leaf_buffers(st.target, sched, own=False)
        if st.buffer is not None:
            writes.add(st.buffer.id)
    reads |= writes
    return reads, writes


def dependencies(rw) -> list:
    """For kernels with access sets ``rw`` (a list of (reads, writes) in program order), the set of
    earlier kernels each depends on directly: the last writer of every buffer it touches, and the readers
    since that write of every buffer it writes. (Enough for :func:`plan_segment`: a kernel placed in a
    lane has everything it depends on done or in that lane, so transitively too.)"""
    last_w: dict = {}
    readers: dict = {}
    preds = []
    for j, (r, w) in enumerate(rw):
        p = set()
        for b in r:
            if b in last_w:
                p.add(last_w[b])
        for b in w:
            p |= readers.get(b, set())
        for b in r:
            readers.setdefault(b, set()).add(j)
        for b in w:
            last_w[b] = j
            readers[b] = {j}
        p.discard(j)
        preds.append(p)
    return preds


def _symbolic(k) -> bool:
    """Whether a size of kernel ``k`` is known at run time only (comparing it would make guards)."""
    for st in k.prologue + k.stmts:
        for d in st.shape:
            if type(d) is SymInt:
                return True
        for x in st.node.inputs:
            for d in x.shape:
                if type(d) is SymInt:
                    return True
    return False


def costs(k, work=None, parallel_min=1 << 20):
    """(ns on one thread, ns split over two) estimated for kernel ``k``, or None for symbolic sizes.
    ``work`` is render_par's work of its parallel loop (None: it has none). (Sizes are not checked for
    symbols here: :func:`plan` does, once per kernel.)"""
    if type(work) is SymInt:
        return None
    try:
        if k.kind == "matmul":
            n = k.stmts[0].node
            nb, M, N = n.shape
            K = n.inputs[0].shape[2]
            macs = int(nb) * int(M) * int(N) * int(K)
            epi = sum(int(_prod(st.shape)) for st in k.stmts[1:] + k.prologue)
            t1 = macs / GEMM_MACS_PER_NS + epi * ELEM_NS + CALL_NS
            t2 = t1 / GEMM_SPLIT if macs >= GEMM_SPLIT_MIN else t1
            return t1, t2
        elems = 0
        for st in k.prologue + k.stmts:
            shape = st.node.inputs[0].shape if st.node.op == "reduce" and st.node.inputs else st.shape
            elems += int(_prod(shape))
        t1 = elems * ELEM_NS + CALL_NS
        if work is not None:
            t1 += int(work) * 0.02         # (render_par's cost factor: an exp weighs 16)
        t2 = t1 / LOOP_SPLIT if work is not None and int(work) >= parallel_min else t1
        return t1, t2
    except (TypeError, ValueError, IndexError):     # (a kernel shaped unlike the above: no estimate)
        return None


def _job_time(lanes, tot, t2):
    """The estimated time of a job, or None when it is not worth one (see the module text)."""
    if not lanes[0] or not lanes[1]:
        return None
    conc = max(tot) * CONC_SLOW + JOB_NS
    return conc if conc < sum(t2[i] for lane in lanes for i in lane) else None


def _form(window, done, preds, t1, t2):
    """(ready kernels, lanes, lane totals) of the job formed from the kernels of ``window`` whose
    dependencies are all ``done``: dealt largest first (after the first two, only those that fit beside the
    longer lane), then the shorter lane grown by kernels that depend on it alone while that costs less
    than running them split afterwards."""
    ready = [i for i in window if preds[i] <= done]
    lanes, tot = [[], []], [0.0, 0.0]
    placed = set()
    for i in sorted(ready, key=lambda i: -t1[i]):
        x = 0 if tot[0] <= tot[1] else 1
        if lanes[1] and tot[x] + t1[i] > FIT * max(tot):
            continue                    # (it would lengthen the job: left for a later step)
        lanes[x].append(i)
        tot[x] += t1[i]
        placed.add(i)
    while lanes[0] and lanes[1]:
        x = 0 if tot[0] <= tot[1] else 1
        mine = done | set(lanes[x])
        cand = next((j for j in window if j not in placed and preds[j] <= mine), None)
        if cand is None or max(tot[x] + t1[cand], tot[1 - x]) - max(tot) >= t2[cand]:
            break
        lanes[x].append(cand)
        tot[x] += t1[cand]
        placed.add(cand)
    return ready, lanes, tot


FIT = 1.05                    # a ready kernel joins a job when its lane stays within this of the longer one
LOOKAHEAD = 8                 # ready kernels tried as "run this one first" (below)


def plan_segment(preds, t1, t2, alone=()) -> list:
    """Steps for ``n`` kernels in program order: lists of lanes (lists of kernel positions); a step of
    one lane runs its kernel split as usual, one of two lanes is a concurrent job. ``preds[j]``: the
    earlier kernels j depends on; ``t1``/``t2``: estimated times on one thread / split over two;
    ``alone``: positions that must be steps of their own and never move (barriers).

    Greedy with one step of lookahead: the job formed from what is ready now is compared with running
    one ready kernel first (split) and forming the job after it, by work per estimated time (a small
    kernel, such as the ReLU derivative before a layer's dX and dW GEMMs, is better run first than
    paired against an unrelated update while the two GEMMs wait for it)."""
    n = len(t1)
    alone = set(alone)
    steps = []
    done: set = set()
    rem = list(range(n))

    def rate(lanes, tot):
        tj = _job_time(lanes, tot, t2)
        return None if tj is None else (sum(t1[i] for lane in lanes for i in lane), tj)
    while rem:
        if rem[0] in alone:
            steps.append([[rem[0]]])
            done.add(rem.pop(0))
            continue
        stop = next((i for i in rem if i in alone), None)     # nothing moves past a barrier
        window = rem if stop is None else rem[:rem.index(stop)]
        ready, lanes, tot = _form(window, done, preds, t1, t2)
        now = rate(lanes, tot)
        first = ready[0]
        if now is not None and len(ready) <= LOOKAHEAD:
            best = now[0] / now[1]
            for s in ready:
                r = rate(*_form([w for w in window if w != s], done | {s}, preds, t1, t2)[1:])
                if r is not None and (t1[s] + r[0]) / (t2[s] + r[1]) > 1.02 * best:
                    best, first, now = (t1[s] + r[0]) / (t2[s] + r[1]), s, None
        if now is not None:
            if tot[1] > tot[0]:             # the longer lane first: the caller starts it at once
                lanes = [lanes[1], lanes[0]]
            steps.append(lanes)
            placed = set(lanes[0]) | set(lanes[1])
            done |= placed
            rem = [i for i in rem if i not in placed]
        else:
            steps.append([[first]])
            done.add(first)
            rem.remove(first)
    return steps


_SIZE_SYMBOL = re.compile(r"\bem_s\d+\b")


def laneable(body, options) -> bool:
    """Whether a kernel with C ``body`` may run in a lane: it does not fork OpenMP regions (a team per
    lane), read run-time sizes, or call a BLAS left on its own threads."""
    if "EMBER_PARALLEL_FOR" in body or "omp parallel" in body or _SIZE_SYMBOL.search(body):
        return False
    return "cblas_" not in body or getattr(options, "blas_threads", 1) == 1


def job_body(lanes) -> str:
    """The body of a job's function ``(void **bufs, long em_lane)``: lane ``em_lane``'s kernel calls
    (``lanes``: per lane, the C call text of each kernel; render_par's em_conc_run calls it)."""
    out = []
    for li, calls in enumerate(lanes):
        out.append("  if (em_lane == 0) {" if li == 0 else "  } else {")
        out += ["  " + ln for call in calls for ln in call.split("\n")]
    out.append("  }")
    return "\n".join(out) + "\n"


def plan(sched, kernel_info, options) -> dict:
    """``{segment index: steps}`` for the segments of ``sched`` with at least one job (see
    :func:`plan_segment`; positions index the segment's kernel list). ``kernel_info[k.name]`` is
    ``(parallel work or None, may run in a lane, ids of the buffers its C names)`` from rendering."""
    if not getattr(options, "concurrent", True) or getattr(options, "timing", False):
        return {}
    pmin = getattr(options, "parallel_min", 1 << 20)
    if any(_symbolic(k) for k in sched.kernels):
        return {}                           # (native_sym plans the arena per size from the lifetimes)
    out = {}
    for si, (kernels, _step) in enumerate(sched.segments):
        if len(kernels) < 2:
            continue
        t1, t2, alone, rw = [], [], [], []
        ok = True
        for i, k in enumerate(kernels):
            work, laneable, used = kernel_info[k.name]
            c = costs(k, work, pmin)
            if c is None:
                ok = False
                break
            t1.append(c[0])
            t2.append(c[1])
            if not laneable:
                alone.append(i)
            rw.append(access_sets(k, sched, used))
        if not ok:
            continue
        steps = plan_segment(dependencies(rw), t1, t2, alone)
        if any(len(s) > 1 for s in steps):
            out[si] = steps
    return out
