"""Kernels and the legality of fusion: what a kernel is, and whether a statement may join one.

A statement joins a kernel when every buffer either of them writes is accessed by both at the same
offset in each loop iteration (computed with the affine index forms of ``lower.py``), so no iteration
reads what another writes and the loop stays parallel and vectorizable. Row kernels also require that
a reduction held in registers is only read at the row being computed. ``NotFusable`` says why a
statement starts a new kernel; ``NeedMaterialize`` asks the scheduler to give a value a buffer first
(an in-place write whose source reads its own target elsewhere, as ``x.copy_(x.flip(0))``).
"""
from __future__ import annotations

from . import lower as L
from .lower import Aff, VIEWS as _VIEWS, view_root
from . import prims as P
from .prims import PNode


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


# ---- legality of a statement in a kernel ----------------------------------------------------------------------

class _Ctx:
    def __init__(self, mat, nb, by_id):
        self.mat = mat
        self.nb = nb
        self.by_id = by_id
        self.readers: dict = {}      # reduce node id -> set of id(kernel) whose statements read it

    def step_reads(self, rid, effects):
        for e in effects:
            for x in e.reads():
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


def _one_stmt_kernel(ctx, st: Stmt, kind, role, reduce_node=None):
    """A kernel of ``kind`` holding statement ``st`` alone (in ``role``): a column reduction, a matmul, a
    scatter."""
    k = Kernel(kind)
    k.reduce_node = reduce_node
    st.role = role
    _mark_readers(ctx, k, st.node)
    k.stmts.append(st)
    return k


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
        return _one_stmt_kernel(ctx, st, "colreduce", "colreduce", reduce_node=n)
    if st.kind == "store" and n.op == "matmul":
        return _one_stmt_kernel(ctx, st, "matmul", "gemm", reduce_node=n)
    if st.kind == "store" and n.op == "scatter_add":
        return _one_stmt_kernel(ctx, st, "scatter", "scatter")
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
        if not P.same_shape(st.shape, k.outer):
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
