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
   ended; escaping values are fresh arrays each call (``memplan.py``).

What a kernel is and when a statement may join one lives in ``fusion.py``.
"""
from __future__ import annotations

from . import prims as P
from .lower import view_root, strided_layout, gemm_operand
from .prims import PNode, Buffer, Effect
from .fusion import NotFusable, NeedMaterialize, Stmt, Kernel, Step, _Ctx, _try_add, _new_kernel, _check_single
from .memplan import plan_buffers
from .logs import log

_VIEWS = P.VIEWS
_EXPENSIVE = {"exp": 4, "exp2": 4, "expm1": 4, "log": 4, "log2": 4, "log10": 4, "log1p": 4, "tanh": 4,
              "sigmoid": 4, "erf": 4, "erfc": 4, "pow": 6, "sin": 4, "cos": 4, "tan": 4, "sqrt": 2, "rsqrt": 2,
              "div": 2, "lgamma": 8, "asin": 4, "acos": 4, "atan": 4, "sinh": 4, "cosh": 4, "atan2": 4}


class Schedule:
    def __init__(self):
        self.kernels: list = []
        self.segments: list = []      # [(kernels, step or None)]
        self.node_buffer: dict = {}   # PNode id -> Buffer for materialised values
        self.mat: set = set()
        self.buffers: list = []
        self.setgrads: list = []      # setgrad effects (each knows its .grad buffer)
        self.arena_size = 0


# ---- helpers ---------------------------------------------------------------------------------------------

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


# extern ops that draw from a generator: their relative order must stay the program's (the same stream)
_DRAWING_EXTERNS = frozenset({"normal", "bernoulli", "bernoulli_p", "poisson", "multinomial"})


def _hoist_draws(pg) -> None:
    """Move the ``random_draw`` externs (inputless: shapes and a generator only) to the start of the
    program, in their order, so a model with dropout runs its native code in one segment instead of one
    per mask. Skipped when another extern draws from a generator (the draws would change order) or the
    program has graph-break reads (a failed guard replays the rest eagerly, drawing again)."""
    draws, others = [], []
    for x in pg.items:
        if isinstance(x, Effect) and x.kind == "extern" and x.op_node.op.name == "random_draw":
            draws.append(x)
        else:
            others.append(x)
    if not draws or draws == pg.items[:len(draws)]:
        return
    for x in others:
        if isinstance(x, Effect) and (x.kind == "read" or
                                      (x.kind == "extern" and x.op_node.op.name in _DRAWING_EXTERNS)):
            return
    first = min(x.seq for x in pg.items)
    for i, d in enumerate(draws):
        d.seq = first - len(draws) + i
    pg.items = draws + others


def _schedule_once(pg, extra: set, log_name: str) -> Schedule:
    _hoist_draws(pg)
    items = pg.items
    nodes = [x for x in items if isinstance(x, PNode)]
    effects = [x for x in items if isinstance(x, Effect)]
    by_id = {n.id: n for n in nodes}
    users: dict = {}
    for n in nodes:
        for i in n.inputs:
            users.setdefault(i.id, []).append(n)
    for e in effects:
        for x in e.reads():
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
                st = Stmt("store", x, nb[x.id], None, x.seq, x.shape, label=_describe(x, mat))
                stmts_or_steps.append(st)
        else:
            e = x
            if e.kind == "write":
                stmts_or_steps.append(Stmt("write", e.source, e.buffer, e.target, e.seq, e.target.shape, e,
                                           label=f"write {e.buffer.name}:{_describe(e.source, mat, own=False)}"))
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
    plan_buffers(sched, pg, kernels, segments, effects)
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
    _mark_escaping(pg, mat, escape, is_leaf)
    # expensive values used twice are computed once
    memo: dict = {}
    for n in nodes:
        if n.id in mat or n.op in _VIEWS or n.op in ("load", "const", "iota"):
            continue
        if _count_uses(n, users) >= 2 and _cost(n, is_leaf, memo) >= 8:
            mat.add(n.id)
    # matmul operands BLAS can read in place: a strided view with a unit stride in one matrix dim.
    # Operands materialised here may be (or lie under) outputs and values the backward reads, whose
    # escape was decided above against a smaller ``mat``: decide again until neither pass adds a buffer
    # (both only add), so no escaping value is left pointing into the arena.
    while True:
        before = len(mat)
        _blas_operands(nodes, mat, is_leaf)
        _mark_escaping(pg, mat, escape, is_leaf)
        if len(mat) == before:
            break
    return escape, copies, given


def _mark_escaping(pg, mat, escape, is_leaf):
    """Outputs and values the backward reads need fresh arrays: the buffer under a viewable one (an
    argument's or a materialised node's) escapes; any other one is materialised and escapes."""
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


def _blas_operands(nodes, mat, is_leaf):
    """Materialise the matmul operands BLAS cannot read in place (a strided view with a unit stride in
    one matrix dim can be read as it is)."""
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


def _label(n):
    return n.op if n.op != "reduce" else f"{n.attrs['op']}"


def _describe(n, mat, own=True) -> str:
    """``op[fused ops]``: the primitive a statement stores and the ones inlined into it."""
    ops = []
    stack = [(n, own)]
    seen = set()
    while stack:
        x, is_root = stack.pop()
        if x.id in seen or x.op in ("load", "const") or (not is_root and x.id in mat):
            continue
        seen.add(x.id)
        name = _label(x)
        if x.op not in _VIEWS and name not in ops:
            ops.append(name)
        stack.extend((i, False) for i in reversed(x.inputs))
    head = _label(n) if own else (ops[0] if ops else n.op)
    rest = [o for o in ops if o != head]
    return head + (f"[{','.join(rest)}]" if rest else "")


def _viewable(n: PNode, is_leaf) -> bool:
    return strided_layout(n, is_leaf) is not None


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
