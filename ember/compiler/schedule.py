"""Scheduling: decide which primitive values get buffers, and group the stores into kernels.

``schedule(pgraph)`` is a pure function from the decomposed program to a :class:`Schedule`:

1. *Materialisation*: reductions, matmuls and scatters always produce a buffer (a reduction that
   only feeds its own kernel stays a local). Elementwise values are inlined into their consumers
   unless a buffer is needed: the value is returned, saved for backward, becomes a ``.grad``, feeds
   an extern kernel or a matmul operand BLAS cannot read in place, is expensive and used twice, or
   would be read after an in-place write changed one of its inputs (then it is computed before the
   write, at its own position).
2. *Statements*: one per materialised value (in program order), per in-place write, per ``.grad``
   copy; extern calls and graph-break reads are Python steps between native segments.
3. *Kernels*: consecutive statements join one loop nest when legal:
   - ``loop``: elementwise statements over the same shape (vertical fusion happened by inlining;
     this is horizontal fusion of writes such as an optimizer's updates). Scalar statements become
     the prologue of the following kernel.
   - ``row``: a reduction over trailing dims, then more reductions over the same rows and
     elementwise statements over the rows or per row (softmax, layer norm: one kernel).
   - ``colreduce``: a reduction over other dims (e.g. a bias gradient: sum over the batch).
   - ``matmul``: one BLAS call, then an elementwise epilogue over its result (bias, activation).
   - ``scatter``: a scatter-add (embedding backward).
   Two statements share a loop only if every buffer one of them writes is accessed by both at the
   same offset in each iteration (no iteration reads what another writes). A refusal is logged under
   ``EMBER_LOGS=kernels`` with its reason.
4. *Buffers*: intermediates get offsets in one arena, reusing memory whose lifetime (in kernels)
   ended; escaping values are fresh arrays each call.
"""
from __future__ import annotations

import numpy as np

from . import prims as P
from . import lower as L
from .lower import Aff
from .prims import PNode, Buffer, Effect
from .logs import log

_VIEWS = P.VIEWS
_EXPENSIVE = {"exp": 4, "exp2": 4, "expm1": 4, "log": 4, "log2": 4, "log10": 4, "log1p": 4, "tanh": 4,
              "sigmoid": 4, "erf": 4, "erfc": 4, "pow": 6, "sin": 4, "cos": 4, "tan": 4, "sqrt": 2, "rsqrt": 2,
              "div": 2, "lgamma": 8, "asin": 4, "acos": 4, "atan": 4, "sinh": 4, "cosh": 4, "atan2": 4}


class NotFusable(Exception):
    pass


class NeedMaterialize(Exception):
    def __init__(self, node, reason):
        super().__init__(reason)
        self.node = node
        self.reason = reason


class Stmt:
    """One store: ``node`` evaluated over ``shape`` into ``buffer`` (at ``target``'s view, if a write)."""

    __slots__ = ("kind", "node", "buffer", "target", "seq", "shape", "role", "effect", "label")

    def __init__(self, kind, node, buffer, target, seq, shape, effect=None, label=""):
        self.kind = kind            # store | write | copy
        self.node = node
        self.buffer = buffer
        self.target = target
        self.seq = seq
        self.shape = tuple(shape)
        self.role = "loop"          # loop | prologue | reduce | row | outer | gemm | epilogue | scatter
        self.effect = effect
        self.label = label

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __repr__(self):
        return f"{self.kind}({self.buffer.name if self.buffer else '-'} <- t{self.node.id} {self.node.op})"


class Kernel:
    __slots__ = ("kind", "index", "prologue", "stmts", "locals", "outer", "inner", "reduce_node", "epi_shape",
                 "accesses", "segment", "name", "notes")

    def __init__(self, kind):
        self.kind = kind
        self.index = -1
        self.prologue: list = []
        self.stmts: list = []
        self.locals: set = set()        # ids of reduce nodes held in registers (row kernels)
        self.outer = ()                 # row: outer shape O; loop: domain
        self.inner = ()                 # row: reduced shape R
        self.reduce_node = None
        self.epi_shape = None
        self.accesses: dict = {}        # buffer id -> {"w": set(keys), "r": set(keys)}
        self.segment = 0
        self.name = ""
        self.notes: list = []

    def describe(self) -> str:
        ops = []
        for s in self.prologue + self.stmts:
            ops.append(f"{s.role}:{s.label or s.node.op}")
        return f"{self.name} [{self.kind}] " + ", ".join(ops)


class Step:
    """A Python step between native segments: an extern call or a graph-break read."""

    __slots__ = ("effect", "kind")

    def __init__(self, effect):
        self.effect = effect
        self.kind = effect.kind


class Schedule:
    def __init__(self):
        self.kernels: list = []
        self.segments: list = []      # [(kernels, step or None)]
        self.node_buffer: dict = {}   # PNode id -> Buffer for materialised values
        self.mat: set = set()
        self.buffers: list = []
        self.setgrads: list = []      # (effect, buffer or None, layout)
        self.arena_size = 0
        self.fused_ops: dict = {}


# ---- helpers ---------------------------------------------------------------------------------------------

def view_root(n: PNode, mat=()) -> PNode:
    """The node under a chain of views (stopping at a materialised view)."""
    while n.op in _VIEWS and n.id not in mat:
        n = n.inputs[0]
    return n


def strided_layout(n: PNode, is_leaf):
    """(leaf, strides, offset) when ``n`` is a strided view of a leaf (load or materialised node)."""
    if is_leaf(n):
        return n, L.cstrides(n.shape), 0
    vars_ = [f"_d{i}" for i in range(len(n.shape))]
    ranges = {v: (0, max(s - 1, 0)) for v, s in zip(vars_, n.shape)}
    idx = [Aff.var(v) if s > 1 else Aff() for v, s in zip(vars_, n.shape)]
    leaf, lidx = L.view_index(n, idx, ranges, stop=is_leaf)
    if not is_leaf(leaf):
        return None
    off = L.offset(lidx, L.cstrides(leaf.shape))
    for a in off.terms:
        if not isinstance(a, str):
            return None
    strides = tuple(off.terms.get(v, 0) for v in vars_)
    return leaf, strides, off.const


def _cost(n: PNode, is_leaf, memo) -> int:
    c = memo.get(n.id)
    if c is not None:
        return c
    if is_leaf(n) or n.op in ("const", "iota"):
        c = 0
    else:
        c = _EXPENSIVE.get(n.op, 0 if n.op in _VIEWS else 1) + sum(_cost(i, is_leaf, memo) for i in n.inputs)
    memo[n.id] = c
    return c


# ---- the pass ----------------------------------------------------------------------------------------------

def schedule(pg, *, mat_extra=(), log_name="graph") -> Schedule:
    """PGraph -> Schedule (retries with more materialised values until every kernel is legal)."""
    extra = set(mat_extra)
    for _ in range(200):
        try:
            return _schedule_once(pg, extra, log_name)
        except NeedMaterialize as nm:
            log("kernels", f"{log_name}: materialise t{nm.node.id} ({nm.node.op}): {nm.reason}")
            extra.add(nm.node.id)
    raise RuntimeError("ember.compile: the native scheduler did not converge")


def _schedule_once(pg, extra: set, log_name: str) -> Schedule:
    items = pg.items
    nodes = [x for x in items if isinstance(x, PNode)]
    effects = [x for x in items if isinstance(x, Effect)]
    by_id = {n.id: n for n in nodes}
    users: dict = {}
    for n in nodes:
        for i in n.inputs:
            users.setdefault(i.id, []).append(n)
    for e in effects:
        for x in _effect_reads(e):
            users.setdefault(x.id, []).append(e)

    base = set(extra)
    for n in nodes:
        if n.op in ("reduce", "matmul", "scatter_add"):
            base.add(n.id)
    write_seqs: dict = {}
    for e in effects:
        if e.kind == "write":
            write_seqs.setdefault(e.buffer.id, []).append(e.seq)
    core = set(base)
    for _ in range(100):
        mat = set(core)
        escape, copies, given = _decide(pg, nodes, effects, users, mat)
        added = _hazards(nodes, effects, mat, write_seqs, copies, pg)
        if not added:
            break
        core |= added
    sched = Schedule()
    sched.mat = mat
    for n in nodes:
        if n.id in mat and n.op == "load":
            mat.discard(n.id)

    # ---- statements ----------------------------------------------------------------------------------------
    stmts_or_steps = []
    nb = {}
    next_id = [len(pg.buffers)]

    def new_buffer(kind, shape, dtype):
        b = Buffer(next_id[0], kind, shape, dtype)
        next_id[0] += 1
        return b

    for n in nodes:
        if n.id in mat:
            if n.op == "load":
                continue
            buf = new_buffer("out" if n.id in escape else "temp", n.shape, n.dtype)
            buf.escapes = n.id in escape
            nb[n.id] = buf
    sched.node_buffer = nb
    for x in items:
        if isinstance(x, PNode):
            if x.id in nb:
                st = Stmt("store", x, nb[x.id], None, x.seq, x.shape, label=_label(x))
                stmts_or_steps.append(st)
        else:
            e = x
            if e.kind == "write":
                stmts_or_steps.append(Stmt("write", e.source, e.buffer, e.target, e.seq, e.target.shape, e,
                                           label=f"write:{_label(e.source)}"))
            elif e.kind == "setgrad":
                if e in copies:
                    buf = new_buffer("out", e.source.shape, e.source.dtype)
                    buf.escapes = True
                    e.grad_buffer = buf
                    stmts_or_steps.append(Stmt("copy", e.source, buf, None, e.seq, e.source.shape, e,
                                               label="grad_copy"))
                elif isinstance(e.grad_buffer, PNode):
                    e.grad_buffer = nb[e.grad_buffer.id]
                sched.setgrads.append(e)
            elif e.kind in ("extern", "read"):
                stmts_or_steps.append(Step(e))

    # ---- kernels ------------------------------------------------------------------------------------------
    ctx = _Ctx(mat, nb, by_id)
    kernels = []
    segments = []
    cur = None
    pending = []
    seg_kernels = []

    def close():
        nonlocal cur
        if cur is not None:
            cur.index = len(kernels)
            cur.name = f"k{cur.index}_{cur.kind}"
            kernels.append(cur)
            seg_kernels.append(cur)
            cur = None

    def flush_pending():
        nonlocal pending
        if pending:
            k = Kernel("loop")
            k.outer = ()
            for s in pending:
                s.role = "prologue"
                k.prologue.append(s)
            pending = []
            k.index = len(kernels)
            k.name = f"k{k.index}_scalar"
            kernels.append(k)
            seg_kernels.append(k)

    for it in stmts_or_steps:
        if isinstance(it, Step):
            close()
            flush_pending()
            segments.append((seg_kernels, it))
            seg_kernels = []
            continue
        st = it
        if st.numel == 0:
            continue
        if _is_scalar_ew(st):
            if cur is not None and cur.kind == "row":
                try:
                    _try_add(ctx, cur, st)
                    continue
                except NotFusable:
                    pass
            close()
            _check_single(ctx, st)
            pending.append(st)
            continue
        if cur is not None:
            try:
                _try_add(ctx, cur, st)
                continue
            except NotFusable as nf:
                log("kernels", f"{log_name}: not fused into {cur.kind} kernel: {st.label or st.node.op} "
                               f"(t{st.node.id}): {nf}")
                close()
        cur = _new_kernel(ctx, st)
        if pending:
            for s in pending:
                s.role = "prologue"
            cur.prologue = pending
            pending = []
    close()
    flush_pending()
    segments.append((seg_kernels, None))
    sched.kernels = kernels
    sched.segments = segments

    # reductions read outside their kernel also go to a buffer
    reader_kernels = ctx.readers
    for k in kernels:
        for rid in list(k.locals):
            outside = {ki for ki in reader_kernels.get(rid, ()) if ki != id(k)}
            if outside or rid in escape or ctx.step_reads(rid, effects):
                st = Stmt("store", by_id[rid], nb[rid], None, by_id[rid].seq, by_id[rid].shape,
                          label=_label(by_id[rid]))
                st.role = "outer"
                # right after the stage that computes it
                pos = next(i for i, s in enumerate(k.stmts) if s.role == "reduce" and s.node.id == rid)
                k.stmts.insert(pos + 1, st)
            else:
                nb.pop(rid, None)
    for k in kernels:
        for s in k.prologue + k.stmts:
            for op in _fused_ops(s.node, ctx):
                sched.fused_ops[op] = sched.fused_ops.get(op, 0) + 1
    _plan_buffers(sched, pg, kernels, segments, effects)
    return sched


def _decide(pg, nodes, effects, users, mat):
    """Grow ``mat`` with the values effects, outputs and BLAS need as buffers; returns
    (escaping node ids, setgrad effects needing a copy, ids handed to a .grad)."""
    def is_leaf(n):
        return n.op == "load" or n.id in mat

    escape = set()
    given = set()
    copies = []
    for b in pg.buffers:
        if b.kind == "temp":
            b.escapes = False
    for e in effects:
        if e.kind == "setgrad":
            e.grad_buffer = None
            if e.source is None:
                continue
            s = e.source
            r = s
            while r.op == "reshape" and r.id not in mat:
                r = r.inputs[0]           # a reshape of a contiguous buffer is the same memory
            if r.op == "load" and r.buffer.kind == "temp" and ("buf", r.buffer.id) not in given:
                given.add(("buf", r.buffer.id))
                r.buffer.escapes = True
                e.grad_buffer = r.buffer
            elif r.op not in _VIEWS and r.op not in ("load", "const") and r.id not in given:
                given.add(r.id)
                mat.add(r.id)
                escape.add(r.id)
                e.grad_buffer = r          # resolved to the node's buffer later
            else:
                copies.append(e)
        elif e.kind == "extern":
            for a in list(e.args) + list((e.attrs or {}).values()):
                if isinstance(a, PNode) and not _viewable(a, is_leaf):
                    mat.add(a.id)
                    escape.add(a.id)
        elif e.kind == "read":
            if not _viewable(e.source, is_leaf):
                mat.add(e.source.id)
    for n in list(pg.outputs.values()) + list(pg.fwd_needed.values()):
        if _viewable(n, is_leaf):
            r = view_root(n, mat)
            if r.op == "load":
                if r.buffer.kind == "temp":
                    r.buffer.escapes = True
            else:
                escape.add(r.id)
        else:
            mat.add(n.id)
            escape.add(n.id)
    # expensive values used twice are computed once
    memo: dict = {}
    for n in nodes:
        if n.id in mat or n.op in _VIEWS or n.op in ("load", "const", "iota"):
            continue
        if _count_uses(n, users) >= 2 and _cost(n, is_leaf, memo) >= 8:
            mat.add(n.id)
    # matmul operands BLAS can read in place: a strided view with a unit stride in one matrix dim
    for n in nodes:
        if n.op == "matmul":
            for x in n.inputs:
                lay = strided_layout(x, is_leaf)
                if lay is not None and _blas_ok(lay[1], x.shape):
                    continue
                # prefer a buffer for the value under the views (other consumers can read it too)
                r = view_root(x, mat)
                if r is not x and r.op not in ("load", "const", "iota"):
                    lay = strided_layout(x, lambda q, r=r: is_leaf(q) or q is r)
                    if lay is not None and _blas_ok(lay[1], x.shape):
                        mat.add(r.id)
                        continue
                mat.add(x.id)
    return escape, copies, given


def _label(n):
    return n.op if n.op != "reduce" else f"{n.attrs['op']}"


def _fused_ops(n, ctx):
    return []


def _effect_reads(e):
    out = []
    if e.kind in ("write", "read", "setgrad"):
        if e.source is not None:
            out.append(e.source)
    elif e.kind == "extern":
        out += [a for a in e.args if isinstance(a, PNode)]
        out += [a for a in (e.attrs or {}).values() if isinstance(a, PNode)]
    return out


def _viewable(n: PNode, is_leaf) -> bool:
    return strided_layout(n, is_leaf) is not None


def gemm_operand(s0, s1, rows, cols):
    """(transpose flag, leading dim) to pass a (rows x cols) matrix with element strides (s0, s1) to a
    row-major cblas call, or None when BLAS cannot read that layout in place."""
    if (s1 == 1 or cols == 1) and (rows == 1 or s0 >= max(cols, 1)):
        return "CblasNoTrans", (s0 if rows > 1 else max(cols, 1))
    if (s0 == 1 or rows == 1) and (cols == 1 or s1 >= max(rows, 1)):
        return "CblasTrans", (s1 if cols > 1 else max(rows, 1))
    return None


def _blas_ok(strides, shape) -> bool:
    _, s0, s1 = strides
    _, r, c = shape
    return gemm_operand(s0, s1, r, c) is not None


def _count_uses(n, users) -> int:
    total = 0
    for u in users.get(n.id, ()):
        if isinstance(u, PNode) and u.op in _VIEWS:
            total += _count_uses(u, users)
        else:
            total += 1
    return total


def _is_scalar_ew(st: Stmt) -> bool:
    return st.numel == 1 and st.node.op not in ("reduce", "matmul", "scatter_add")


def _hazards(nodes, effects, mat, write_seqs, copies, pg) -> set:
    """Inlined values (and views) that would be evaluated after a write changed one of their inputs:
    they must be materialised at their own position, before the write."""
    if not write_seqs:
        return set()

    def version_at(buf, seq):
        return sum(1 for w in write_seqs.get(buf.id, ()) if w < seq)

    added = set()
    roots = []                       # (node, seq it is evaluated at, node is the statement itself)
    for n in nodes:
        if n.id in mat and n.op != "load":
            roots.append((n, n.seq, True))
    end = max((x.seq for x in pg.items), default=0) + 1
    for e in effects:
        if e.kind == "write" or (e.kind == "setgrad" and e in copies):
            roots.append((e.source, e.seq, False))
        elif e.kind == "read":
            roots.append((e.source, e.seq, False))
        elif e.kind == "extern":
            for a in list(e.args) + list((e.attrs or {}).values()):
                if isinstance(a, PNode):
                    roots.append((a, e.seq, False))
    for n in list(pg.outputs.values()) + list(pg.fwd_needed.values()):
        roots.append((n, end, False))
    for root, seq, own in roots:
        stack = [(root, (), own)]
        seen = set()
        while stack:
            n, path, is_root = stack.pop()
            if not is_root and n.id in mat:
                continue
            if n.op == "load":
                if n.buffer.id in write_seqs and version_at(n.buffer, seq) != n.version:
                    w = min(x for x in write_seqs[n.buffer.id] if x > n.seq)
                    cand = [p for p in path if p.seq < w]
                    if not cand:
                        raise RuntimeError(f"ember.compile: internal: t{root.id} reads a stale buffer directly")
                    # the outermost value computed before the write
                    added.add(cand[0].id)
                continue
            if (n.id, is_root) in seen:
                continue
            seen.add((n.id, is_root))
            sub = path if is_root else path + (n,)
            for i in n.inputs:
                stack.append((i, sub, False))
    return added - mat


# ---- legality of a statement in a kernel ----------------------------------------------------------------------

class _Ctx:
    def __init__(self, mat, nb, by_id):
        self.mat = mat
        self.nb = nb
        self.by_id = by_id
        self.readers: dict = {}      # reduce node id -> set of id(kernel) whose statements read it

    def step_reads(self, rid, effects):
        for e in effects:
            for x in _effect_reads(e):
                if view_root(x, self.mat).id == rid:
                    return True
        return False


def _vars(prefix, shape):
    return [f"{prefix}{i}" for i in range(len(shape))]


def stmt_index(k: Kernel, st: Stmt, role: str):
    """(index vector over the statement's shape, ranges) in the kernel's loop variables."""
    ranges = {}
    if role in ("loop", "epilogue", "prologue"):
        shape = st.shape
        vs = _vars("i", shape)
        idx = []
        for v, s in zip(vs, shape):
            ranges[v] = (0, max(s - 1, 0))
            idx.append(Aff.var(v) if s > 1 else Aff())
        return idx, ranges
    O, R = k.outer, k.inner
    ov = _vars("o", O)
    rv = _vars("r", R)
    for v, s in zip(ov, O):
        ranges[v] = (0, max(s - 1, 0))
    for v, s in zip(rv, R):
        ranges[v] = (0, max(s - 1, 0))
    oidx = [Aff.var(v) if s > 1 else Aff() for v, s in zip(ov, O)]
    ridx = [Aff.var(v) if s > 1 else Aff() for v, s in zip(rv, R)]
    if role in ("reduce", "row"):
        return oidx + ridx, ranges
    # outer: the statement's shape is O, or O with trailing 1s
    extra = len(st.shape) - len(O)
    return oidx + [Aff()] * extra, ranges


def collect(ctx: _Ctx, k: Kernel, st: Stmt, role: str):
    """Reads [(buffer id, offset key)] and the write (buffer id, offset key) of a statement."""
    idx, ranges = stmt_index(k, st, role)
    reads = []
    memo = set()

    def walk(n, ix, own=False):
        key = (n.id, tuple(a.key() for a in ix))
        if key in memo:
            return
        memo.add(key)
        if not own:
            if n.op == "load":
                reads.append((n.buffer.id, L.offset(ix, L.cstrides(n.buffer.shape)).key()))
                return
            if n.id in ctx.mat:
                if n.op == "reduce" and n.id in k.locals:
                    _check_local(k, n, ix)
                    ctx.readers.setdefault(n.id, set()).add(id(k))
                    return
                if n.op == "reduce":
                    ctx.readers.setdefault(n.id, set()).add(id(k))
                buf = ctx.nb.get(n.id)
                if buf is None:
                    raise NotFusable(f"t{n.id} has no buffer")
                reads.append((buf.id, L.offset(ix, L.cstrides(buf.shape)).key()))
                return
        if n.op in _VIEWS:
            n2, ix2 = L.view_index(n, ix, ranges, stop=lambda q: q.op == "load" or q.id in ctx.mat)
            walk(n2, ix2)
            return
        if n.op in ("const", "iota"):
            return
        if n.op == "gather":
            x, index = n.inputs
            walk(index, ix)
            ax = n.attrs["axis"]
            xi = list(ix)
            xi[ax] = Aff.var(("val", f"g{n.id}", x.shape[ax]))
            walk(x, xi)
            return
        if n.op == "reduce":
            if not own:
                raise NotFusable("nested reduction")
            x = n.inputs[0]
            walk(x, _reduce_input_index(k, n, role, ranges))
            return
        if n.op in ("matmul", "scatter_add", "extern", "extern_out"):
            if own:
                return
            raise NotFusable(f"{n.op} inside an expression")
        for i in n.inputs:
            walk(i, ix)

    walk(st.node, idx, own=(st.kind == "store"))
    if st.kind == "write":
        widx = idx
        tn, tix = L.view_index(st.target, widx, ranges, stop=lambda q: q.op == "load")
        write = (st.buffer.id, L.offset(tix, L.cstrides(st.buffer.shape)).key())
    elif st.node.op == "reduce" and role == "reduce":
        write = None
    else:
        write = (st.buffer.id, L.offset(idx, L.cstrides(st.buffer.shape)).key()) if st.buffer is not None else None
    return reads, write


def _reduce_input_index(k, n, role, ranges):
    x = n.inputs[0]
    axes = n.attrs["axes"]
    if role == "reduce":
        O, R = k.outer, k.inner
        ov = _vars("o", O)
        rv = _vars("r", R)
        return [Aff.var(v) if s > 1 else Aff() for v, s in zip(ov, O)] + \
               [Aff.var(v) if s > 1 else Aff() for v, s in zip(rv, R)]
    # colreduce: kept dims from the statement index, reduced dims get their own variables
    idx = []
    for d, s in enumerate(x.shape):
        v = f"c{d}"
        ranges[v] = (0, max(s - 1, 0))
        idx.append(Aff.var(v) if s > 1 else Aff())
    return idx


def _check_local(k: Kernel, n: PNode, ix):
    """A register-held reduction can only be read at the current row."""
    O = k.outer
    ov = _vars("o", O)
    want = [Aff.var(v) if s > 1 else Aff() for v, s in zip(ov, O)] + [Aff()] * (len(n.shape) - len(O))
    if len(ix) != len(want) or any(a != b for a, b in zip(ix, want)):
        raise NotFusable(f"reduction t{n.id} is read at another row")


def _mark_readers(ctx, k, root):
    """Record which materialised reductions an expression evaluated in ``k`` reads."""
    stack = list(root.inputs)
    seen = set()
    while stack:
        n = stack.pop()
        if n.id in seen:
            continue
        seen.add(n.id)
        if n.op == "load":
            continue
        if n.id in ctx.mat:
            if n.op == "reduce":
                ctx.readers.setdefault(n.id, set()).add(id(k))
            continue
        stack.extend(n.inputs)


def _check_single(ctx, st: Stmt):
    """A write whose source reads the target at other offsets needs the source computed first."""
    k = Kernel("loop")
    reads, write = collect(ctx, k, st, "loop")
    if st.kind == "write" and write is not None:
        for b, key in reads:
            if b == write[0] and key != write[1]:
                raise NeedMaterialize(st.node, "an in-place write reads its own target at other positions")
    return reads, write


def _add_accesses(k: Kernel, reads, write):
    # the statement's own reads of its target at the same offset are fine (read-modify-write)
    wb = {}
    for b, key in reads:
        acc = k.accesses.get(b)
        if acc is not None and acc["w"] and (acc["w"] != {key}):
            raise NotFusable("reads a buffer this kernel writes, at other positions")
    if write is not None:
        b, key = write
        acc = k.accesses.get(b)
        if acc is not None:
            if any(x != key for x in acc["w"]) or any(x != key for x in acc["r"]):
                raise NotFusable("writes a buffer this kernel accesses at other positions")
        wb[b] = key
    for b, key in reads:
        k.accesses.setdefault(b, {"w": set(), "r": set()})["r"].add(key)
    if write is not None:
        k.accesses.setdefault(write[0], {"w": set(), "r": set()})["w"].add(write[1])


def _new_kernel(ctx, st: Stmt) -> Kernel:
    n = st.node
    if st.kind == "store" and n.op == "reduce":
        x = n.inputs[0]
        axes = n.attrs["axes"]
        nd = len(x.shape)
        if axes == tuple(range(nd - len(axes), nd)):
            k = Kernel("row")
            k.outer = x.shape[:nd - len(axes)]
            k.inner = x.shape[nd - len(axes):]
            k.reduce_node = n
            k.locals.add(n.id)
            st.role = "reduce"
            reads, write = collect(ctx, k, st, "reduce")
            _add_accesses(k, reads, None)
            k.stmts.append(st)
            return k
        k = Kernel("colreduce")
        k.reduce_node = n
        st.role = "colreduce"
        _mark_readers(ctx, k, n)
        k.stmts.append(st)
        return k
    if st.kind == "store" and n.op == "matmul":
        k = Kernel("matmul")
        st.role = "gemm"
        _mark_readers(ctx, k, n)
        k.stmts.append(st)
        k.reduce_node = n
        return k
    if st.kind == "store" and n.op == "scatter_add":
        k = Kernel("scatter")
        st.role = "scatter"
        _mark_readers(ctx, k, n)
        k.stmts.append(st)
        return k
    k = Kernel("loop")
    k.outer = st.shape
    st.role = "loop"
    reads, write = _check_single(ctx, st)
    _add_accesses(k, reads, write)
    k.stmts.append(st)
    return k


def _try_add(ctx, k: Kernel, st: Stmt):
    n = st.node
    if n.op in ("matmul", "scatter_add") and st.kind == "store":
        raise NotFusable(f"{n.op} starts its own kernel")
    if k.kind in ("colreduce", "scatter"):
        raise NotFusable(f"a {k.kind} kernel takes no epilogue")
    if k.kind == "loop":
        if st.kind == "store" and n.op == "reduce":
            raise NotFusable("a reduction does not join an elementwise loop")
        if st.shape != k.outer:
            raise NotFusable(f"different shape {list(st.shape)} vs {list(k.outer)}")
        _check_single(ctx, st)
        reads, write = collect(ctx, k, st, "loop")
        _add_accesses(k, reads, write)
        st.role = "loop"
        k.stmts.append(st)
        return
    if k.kind == "matmul":
        if st.kind == "store" and n.op == "reduce":
            raise NotFusable("a reduction does not join a matmul epilogue")
        mm = k.reduce_node
        if st.numel != mm.numel:
            raise NotFusable("epilogue shape differs from the matmul result")
        if k.epi_shape is not None and st.shape != k.epi_shape:
            raise NotFusable("epilogue statements of different shapes")
        _check_single(ctx, st)
        if k.epi_shape is None:
            k.epi_shape = st.shape
            k.outer = st.shape
        reads, write = collect(ctx, k, st, "epilogue")
        _add_accesses(k, reads, write)
        st.role = "epilogue"
        k.stmts.append(st)
        return
    # row kernel
    O, R = k.outer, k.inner
    X = O + R
    if st.kind == "store" and n.op == "reduce":
        x = n.inputs[0]
        nd = len(x.shape)
        if x.shape != X or n.attrs["axes"] != tuple(range(len(O), nd)):
            raise NotFusable("a reduction over other rows")
        k.locals.add(n.id)
        role = "reduce"
    elif st.shape == X:
        role = "row"
    elif st.shape[:len(O)] == O and all(s == 1 for s in st.shape[len(O):]):
        role = "outer"
    else:
        raise NotFusable(f"shape {list(st.shape)} is neither the rows {list(X)} nor one value per row")
    try:
        if st.kind == "write":
            # an in-place write must not read its target elsewhere
            r0, w0 = collect(ctx, k, st, role)
            for b, key in r0:
                if b == w0[0] and key != w0[1]:
                    raise NeedMaterialize(st.node, "an in-place write reads its own target at other positions")
        reads, write = collect(ctx, k, st, role)
        _add_accesses(k, reads, write)
    except NotFusable:
        if role == "reduce":
            k.locals.discard(n.id)
        raise
    st.role = role
    k.stmts.append(st)


# ---- buffer planning ------------------------------------------------------------------------------------------

def _plan_buffers(sched: Schedule, pg, kernels, segments, effects):
    """Arena offsets for intermediates whose lifetimes (in kernel positions) do not overlap."""
    pos = {}
    order = 0
    first, last = {}, {}
    by_buf = {}
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
    for kernels_, step in segments:
        for k in kernels_:
            t += 1
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
            for x in _effect_reads(e):
                r = view_root(x, sched.mat)
                bb = r.buffer if r.op == "load" else nbuf.get(r.id)
                if bb is not None:
                    touch(bb.id, t)
    # buffers read by setgrads/outputs at the end were marked escaping already
    # first-fit allocation over the sorted intervals
    live = []   # (end, offset, size)
    free = []   # (offset, size)
    size_total = 0
    for bid in sorted(first, key=lambda i: (first[i], i)):
        b = temp_ids[bid]
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
        need = (b.nbytes + 63) // 64 * 64
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
        b.data = ("arena", off)
        live.append((last[bid], off, need))
    sched.arena_size = size_total
    # temps never touched by a kernel (e.g. zero-size) still need a place
    for b in temp_ids.values():
        if b.data is None:
            b.data = ("arena", 0)


def _coalesce(free):
    free = sorted(free)
    out = []
    for off, sz in free:
        if out and out[-1][0] + out[-1][1] == off:
            out[-1] = (out[-1][0], out[-1][1] + sz)
        else:
            out.append((off, sz))
    return out


def _leaf_buffers(n, sched):
    """Buffer ids an inlined expression reads (loads and materialised values)."""
    out = set()
    stack = [n]
    seen = set()
    own = True
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
