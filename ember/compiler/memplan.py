"""Memory planning: intermediates share one arena where their lifetimes (in kernels) do not overlap.

Lifetimes are inclusive kernel positions (a Python step between segments counts as a position), so two
buffers used by the same kernel never share memory: kernels may declare all their pointers
``restrict``. Kernels that run concurrently (concurrent.py) share one position, so neither do two
buffers used by one concurrent job. Escaping buffers (outputs, ``.grad`` tensors, values the backward reads) are not
planned: they are fresh arrays each call.
"""
from __future__ import annotations

from .lower import view_root
from .symbolic import untracked as _untracked


def plan_buffers(sched, pg, kernels, segments, effects, steps=None):
    """Arena offsets for intermediates whose lifetimes (in kernel positions) do not overlap. ``steps``
    (segment index -> steps of ``concurrent.plan``) gives the positions of segments whose kernels run in
    concurrent jobs."""
    first, last = {}, {}
    temps = []
    for b in pg.buffers:
        if b.kind == "temp":
            temps.append(b)
    for b in sched.node_buffer.values():
        if b.kind == "temp":
            temps.append(b)
    temp_ids = {b.id: b for b in temps if not b.escapes}

    def touch(bid, t):
        if bid in temp_ids:
            first.setdefault(bid, t)
            first[bid] = min(first[bid], t)
            last[bid] = max(last.get(bid, t), t)

    nbuf = sched.node_buffer
    t = 0
    steps = steps or {}
    for si, (kernels_, step) in enumerate(segments):
        # one position per kernel, or per step of concurrent.plan: every kernel of a job at one position,
        # so buffers a job touches never share memory (its lanes run at the same time)
        for group in steps.get(si) or [[[i]] for i in range(len(kernels_))]:
            t += 1
            for lane in group:
                for i in lane:
                    k = kernels_[i]
                    for b in k.accesses:
                        touch(b, t)
                    for s in k.prologue + k.stmts:
                        if s.buffer is not None:
                            touch(s.buffer.id, t)
                        for leaf in _leaf_buffers(s.node, sched):
                            touch(leaf, t)
                        if s.kind == "write":
                            touch(s.buffer.id, t)
        if step is not None:
            t += 1
            e = step.effect
            for x in e.reads():
                r = view_root(x, sched.mat)
                bb = r.buffer if r.op == "load" else nbuf.get(r.id)
                if bb is not None:
                    touch(bb.id, t)
    # buffers read by setgrads/outputs at the end were marked escaping already
    order = sorted(first, key=lambda i: (first[i], i))
    sched.lifetimes = (order, first, last)      # (a build with sizes as arguments plans again per size)
    with _untracked():                          # (sizes compared here make no guards: see native_sym)
        offsets, size_total = first_fit(order, first, last, {bid: temp_ids[bid].nbytes for bid in order})
    for bid in order:
        temp_ids[bid].data = ("arena", offsets[bid])
    sched.arena_size = size_total
    # temps never touched by a kernel (e.g. zero-size) still need a place
    for b in temp_ids.values():
        if b.data is None:
            b.data = ("arena", 0)


def first_fit(order, first, last, nbytes) -> tuple:
    """({buffer id: arena offset}, arena size): buffers in ``order`` (by first use) take the first free
    block of their 64-byte rounded size, blocks being freed after a buffer's last use."""
    live = []   # (end, offset, size)
    free = []   # (offset, size)
    size_total = 0
    offsets = {}
    for bid in order:
        start = first[bid]
        # release blocks whose lifetime ended before this one starts
        still = []
        for end, off, sz in live:
            if end < start:
                free.append((off, sz))
            else:
                still.append((end, off, sz))
        live = still
        free = _coalesce(free)
        need = (nbytes[bid] + 63) // 64 * 64
        off = None
        for i, (fo, fs) in enumerate(free):
            if fs >= need:
                off = fo
                if fs > need:
                    free[i] = (fo + need, fs - need)
                else:
                    free.pop(i)
                break
        if off is None:
            off = size_total
            size_total += need
        offsets[bid] = off
        live.append((last[bid], off, need))
    return offsets, size_total


def _coalesce(free):
    free = sorted(free)
    out = []
    for off, sz in free:
        if out and out[-1][0] + out[-1][1] == off:
            out[-1] = (out[-1][0], out[-1][1] + sz)
        else:
            out.append((off, sz))
    return out


def _leaf_buffers(n, sched, own=True):
    """Buffer ids an inlined expression reads (loads and materialised values); with ``own``, ``n`` is the
    value a statement stores (its inputs are read), else a value read as it is (its buffer if it has one)."""
    out = set()
    stack = [n]
    seen = set()
    while stack:
        x = stack.pop()
        if x.id in seen:
            continue
        seen.add(x.id)
        if x.op == "load":
            out.add(x.buffer.id)
            continue
        if not own and x.id in sched.mat:
            b = sched.node_buffer.get(x.id)
            if b is not None:
                out.add(b.id)
            continue
        own = False
        stack.extend(x.inputs)
    return out
