"""Independent kernels of a compiled step run concurrently (ember/compiler/concurrent.py).

The dependency analysis orders every read-after-write, write-after-read and write-after-write; the
planner never puts dependent kernels in different lanes nor moves one past a barrier; the memory plan
made from the steps gives no two buffers of one job the same arena bytes (a buffer reused after its last
read must not be written while a concurrent lane still reads it). Whole training steps (the MLP with SGD
and Adam, a small GPT with AdamW) give the same bits with concurrent kernels on two threads as without
them, on one thread, and match eager mode.
"""
import ctypes
import re

import numpy as np
import pytest

import ember
from ember.bench import models as M
from ember.bench.compile import step_function
from ember.compiler import concurrent as C
from compile_support import _reset  # noqa: F401  (fresh compiler state per test)


# ---- the dependency analysis and the planner -------------------------------------------------------------

def test_dependencies_cover_raw_war_waw():
    rw = [({"a", "x"}, {"x"}),          # 0 writes x
          ({"x", "y"}, {"y"}),          # 1 reads x (after write: 0)
          ({"a", "z"}, {"z"}),          # 2 independent of 0 and 1
          ({"a"}, {"a"}),               # 3 writes a, which 0 and 2 read (write after read)
          ({"y"}, {"y"})]               # 4 writes y after 1 wrote it (write after write)
    deps = C.dependencies(rw)
    assert deps[0] == set()
    assert deps[1] == {0}
    assert deps[2] == set()
    assert deps[3] == {0, 2}
    assert deps[4] == {1}


def _lane_of(steps):
    out = {}
    for si, step in enumerate(steps):
        for li, lane in enumerate(step):
            for i in lane:
                out[i] = (si, li)
    return out


def _check_order(steps, preds, n):
    """Every kernel planned once; what a kernel depends on runs in an earlier step or earlier in its lane."""
    seen = sorted(i for step in steps for lane in step for i in lane)
    assert seen == list(range(n))
    where = _lane_of(steps)
    for j in range(n):
        for i in preds[j]:
            (si, li), (sj, lj) = where[i], where[j]
            assert si < sj or (si == sj and li == lj and steps[si][li].index(i) < steps[sj][lj].index(j))


def test_independent_gemms_pair_up_and_a_chain_does_not():
    big = 50e6 / C.GEMM_MACS_PER_NS
    # a linear layer's backward: dX and dW read dY; the update writes W after dX read it
    rw = [(set("g"), set("g")),                 # 0: dY
          (set("gWd"), set("d")),               # 1: dX = dY W
          (set("gXv"), set("v")),               # 2: dW = dY^T X
          (set("Wv"), set("W"))]                # 3: W -= lr dW (after 1 read W)
    preds = C.dependencies(rw)
    t1 = [big, big, big, 1000.0]
    t2 = [big / C.GEMM_SPLIT, big / C.GEMM_SPLIT, big / C.GEMM_SPLIT, 1000.0]
    steps = C.plan_segment(preds, t1, t2)
    _check_order(steps, preds, 4)
    where = _lane_of(steps)
    assert where[1][0] == where[2][0] and where[1][1] != where[2][1]      # dX and dW concurrently
    assert where[3][0] > where[1][0]                                      # the update after dX
    # a chain: nothing to run beside anything
    chain = [({str(i), str(i + 1)}, {str(i + 1)}) for i in range(4)]
    steps = C.plan_segment(C.dependencies(chain), [big] * 4, [big / C.GEMM_SPLIT] * 4)
    assert all(len(s) == 1 for s in steps)


def test_small_kernels_stay_split_and_barriers_hold():
    rw = [({"a"}, {"a"}), ({"b"}, {"b"}), ({"c"}, {"c"}), ({"d"}, {"d"})]
    preds = C.dependencies(rw)
    # tiny independent kernels: waking the pool costs more than running them one after another
    assert all(len(s) == 1 for s in C.plan_segment(preds, [500.0] * 4, [500.0] * 4))
    # large ones pair, but never across a barrier (a kernel that checks indices), which stays alone
    big = 1e6
    steps = C.plan_segment(preds, [big] * 4, [big / C.GEMM_SPLIT] * 4, alone=[2])
    where = _lane_of(steps)
    assert steps[where[2][0]] == [[2]]
    assert where[0][0] < where[2][0] and where[1][0] < where[2][0] and where[3][0] > where[2][0]
    assert len(steps[where[0][0]]) == 2


# ---- whole steps --------------------------------------------------------------------------------------------

def _jobs(cf):
    lib = cf.entries[-1].runner.native.lib
    return lib.get("ember_conc_jobs", (), ctypes.c_long)()


_SLOT = re.compile(r"\(char \*\)bufs\[0\] \+ (\d+)LL|\bbufs\[(\d+)\]")


def _memory(c, bid):
    """The memory of buffer ``bid`` of compiled part ``c``: ("arena", start, end) or ("slot", n)."""
    b = c.buffers[bid]
    if b.kind == "temp" and not b.escapes:
        return ("arena", b.data[1], b.data[1] + max(int(b.nbytes), 1))
    return ("slot", c.slots[bid])


def _overlap(a, b) -> bool:
    if a[0] != b[0]:
        return False
    return a == b if a[0] == "slot" else a[1] < b[2] and b[1] < a[2]


def _check_plans(cf):
    """Every job of the compiled step: the memory a lane's kernels touch (their buffers' arena bytes or
    slots; checked against the arguments its C calls pass) never overlaps memory the other lane writes,
    and no two buffers of one job share arena bytes. Returns the number of jobs."""
    native = cf.entries[-1].runner.native
    src = native.source
    jobs = 0
    for c in native.parts:
        sched = c.sched
        for si, steps in (getattr(sched, "conc", None) or {}).items():
            kernels = sched.segments[si][0]
            for j, step in enumerate(steps):
                if len(step) < 2:
                    continue
                jobs += 1
                fn = f"static void {c.prefix}_seg{si}_job{j}(void **bufs, long em_lane) {{"
                text = src[src.index(fn):]
                halves = text[:text.index("\n}\n")].split("  } else {")
                assert len(halves) == 2
                touched, written, mine = [], [], {}
                for lane, half in zip(step, halves):
                    ids = set().union(*(C.access_sets(kernels[i], sched)[0] for i in lane))
                    t = {_memory(c, b) for b in ids if b in c.buffers}
                    for b in ids:
                        if b in c.buffers and _memory(c, b)[0] == "arena":
                            mine[b] = _memory(c, b)
                    for m in _SLOT.finditer(half):         # what the C passes is what the ids say
                        if m.group(1) is not None:
                            assert any(x[0] == "arena" and x[1] == int(m.group(1)) for x in t)
                        elif m.group(2) not in ("0", "1", "2"):
                            assert ("slot", int(m.group(2))) in t
                    touched.append(t)
                    written.append({_memory(c, b) for i in lane for b in C.access_sets(kernels[i], sched)[1]
                                    if b in c.buffers})
                for a, b in ((0, 1), (1, 0)):
                    for x in written[a]:
                        assert not any(_overlap(x, y) for y in touched[b]), \
                            f"lane {b} of {c.prefix}_seg{si}_job{j} touches memory lane {a} writes"
                spans = sorted(mine.values())
                for x, y in zip(spans, spans[1:]):
                    assert not _overlap(x, y), "two buffers of one concurrent job share arena bytes"
    return jobs


def _train(kind, opt_name, batch, compiled, concurrent, threads, monkeypatch, steps=4):
    monkeypatch.setenv("EMBER_CONCURRENT", "1" if concurrent else "0")
    old = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        ember.manual_seed(0)
        if kind == "mlp":
            model = M.mlp(ember)
            data = M.mlp_batch(ember, batch)
        else:
            model = M.gpt(ember, M.GPTConfig(n_layer=2))
            data = M.gpt_batch(ember, batch, block_size=32)
        opt = M.optimizer(ember, opt_name, model.parameters())
        fn = step_function(ember, kind)
        run = ember.compile(fn) if compiled else fn
        losses = [float(run(model, opt, *data)) for _ in range(steps - 1)]
        before = _jobs(run) if compiled else 0
        losses.append(float(run(model, opt, *data)))
        params = [p.detach().numpy().copy() for p in model.parameters()]
        info = (_check_plans(run), _jobs(run) - before) if compiled else (0, 0)   # (jobs on the pool: last step)
        return losses, params, info
    finally:
        ember.set_num_threads(old)


@pytest.mark.parametrize("kind,opt_name,batch", [("mlp", "sgd", 512), ("mlp", "adam", 256),
                                                 ("gpt", "adamw", 4)])
def test_concurrent_steps_match_sequential_and_eager(kind, opt_name, batch, monkeypatch):
    conc2 = _train(kind, opt_name, batch, True, True, 2, monkeypatch)
    seq2 = _train(kind, opt_name, batch, True, False, 2, monkeypatch)
    conc1 = _train(kind, opt_name, batch, True, True, 1, monkeypatch)
    seq1 = _train(kind, opt_name, batch, True, False, 1, monkeypatch)
    eager = _train(kind, opt_name, batch, False, False, 1, monkeypatch)
    planned, ran = conc2[2]
    assert planned > 0 and ran > 0                 # jobs were planned and ran on the pool
    assert seq2[2] == (0, 0)                       # EMBER_CONCURRENT=0: none
    assert conc1[2] == (planned, 0)                # one thread: the lanes run one after another
    # one thread: the same kernels in another (valid) order give the same bits
    assert conc1[0] == seq1[0]
    for a, b in zip(conc1[1], seq1[1]):
        np.testing.assert_array_equal(a, b)
    # two threads: a kernel in a lane runs unsplit, so its bits are one thread's; split loops with a
    # vectorized exp (GELU) differ from one thread's in the last bit where chunks end (as without lanes)
    # (test_compiler_models' tolerances: Adam-type updates amplify rounding where gradients are tiny)
    rtol = 1e-3 if kind == "gpt" else 1e-4
    for other in (seq2, eager):
        np.testing.assert_allclose(conc2[0], other[0], rtol=1e-4)
        for a, b in zip(conc2[1], other[1]):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-5)
