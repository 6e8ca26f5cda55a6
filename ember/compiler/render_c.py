"""Rendering: a Schedule -> one C translation unit (all kernels + one entry function per segment).

Each kernel is a ``static`` function over ``void **bufs`` (slot 0: the arena of intermediates, slot 1:
the error record, then one slot per other buffer). Expressions are emitted in SSA form; a value is
placed in the outermost loop where all the indices it depends on are defined (loop-invariant code is
hoisted: a per-row ``rstd`` is computed once per row, a scalar once per kernel) and reused within its
scope. Adjacent loop dimensions are collapsed into one loop when every access advances uniformly
across them, so contiguous elementwise kernels are one flat, vectorizable loop. The outermost loop is
``EMBER_PARALLEL_FOR(work)``; render_par.py runs it in chunks on ember's work pool above a size threshold. Matmuls call
``cblas_sgemm``/``cblas_dgemm`` with transposes expressed as BLAS flags, or a generated loop when no
BLAS is available (or when autotuning found it faster); see ``render_special.py``.

Kernels are emitted as functions of their buffers (``p0, p1 ...``), so identical kernels over different
buffers (the layers of a model, the optimizer update of same-shaped parameters) are one C function:
the translation unit of a small GPT shrinks about 4x, and so does its compile time.
"""
from __future__ import annotations

import math
import re

import numpy as np

from . import prims as P
from . import lower as L
from . import render_special, render_par, concurrent
from .memplan import plan_buffers
from .lower import Aff
from .render_special import Scope, Block, _text, minmax_update, arg_update

_VIEWS = P.VIEWS


PARALLEL_MIN = 1 << 20


class Options:
    """Code generation choices (autotune varies them)."""

    def __init__(self, parallel_min=None, use_blas=True, small_gemm_loops=0, blas_available=None, blas_threads=1,
                 gemm_split_min=1 << 62, timing=None, native_gemm=None, concurrent=None):
        if blas_available is None:
            from . import blas as _blas
            blas_available = _blas.blas_available()
        # a kernel's outer loop runs on ember's work pool (render_par.py) from this much work: elements x
        # statements x render_par.cost_factor (an exp or libm call per element weighs 16). One million
        # (EMBER_PARALLEL_MIN overrides it): cheap elementwise loops gained nothing from two threads below
        # it on this 2-core machine (memory-bound), exp-heavy ones (GELU, softmax rows) gained from 64K
        # elements; on cores shared with another process a split waits for a thread on the busy core, which
        # the pool's dynamic items limit to the item it holds
        if parallel_min is None:
            import os
            parallel_min = int(os.environ.get("EMBER_PARALLEL_MIN", "") or PARALLEL_MIN)
        self.parallel_min = parallel_min
        # GEMMs with M*N*K above this are split over the OpenMP threads (off by default: on a machine whose
        # cores are busy the split loses; max-autotune measures it)
        self.gemm_split_min = gemm_split_min
        self.use_blas = use_blas and blas_available
        self.small_gemm_loops = small_gemm_loops     # matmuls with M*N*K below this use generated loops
        self.blas_available = blas_available
        # threads of the BLAS library for our GEMMs (0: leave its setting alone). One by default: its
        # pthread pool spin-waits, and on a busy machine (more runnable threads than cores) a descheduled
        # worker makes every GEMM wait for a time slice (measured 5x slower steps on 2 cores under load);
        # mode="max-autotune" measures the multi-threaded variant
        self.blas_threads = blas_threads
        # EMBER_KERNEL_TIMING=1: every kernel call is timed (clock_gettime around it) into a table the
        # runner reads back (``NativeRunner.kernel_times()``, the profiler's kernel events)
        if timing is None:
            import os
            timing = os.environ.get("EMBER_KERNEL_TIMING", "") not in ("", "0")
        self.timing = bool(timing)
        # float32 GEMMs through ember's GEMM where the CPU has AVX-512 or AVX2+FMA (gemm.py; EMBER_NATIVE_GEMM=0: off)
        from . import gemm as _gemm
        self.native_gemm = _gemm.enabled() if native_gemm is None else bool(native_gemm)
        # independent kernels of a segment run at the same time on two threads (concurrent.py;
        # EMBER_CONCURRENT=0: off)
        from . import concurrent as _conc
        self.concurrent = _conc.enabled() if concurrent is None else bool(concurrent)

    def key(self):
        return (self.parallel_min, self.use_blas, self.small_gemm_loops, self.blas_threads, self.gemm_split_min,
                self.timing, self.native_gemm, self.concurrent)

    def __repr__(self):
        return (f"Options(parallel_min={self.parallel_min}, use_blas={self.use_blas}, "
                f"small_gemm_loops={self.small_gemm_loops}, blas_threads={self.blas_threads}, "
                f"gemm_split_min={self.gemm_split_min}, timing={self.timing}, native_gemm={self.native_gemm}, "
                f"concurrent={self.concurrent})")


class CDialect:
    """What the target language decides about the loop IR's text: expression templates of the
    primitives, reduction accumulator types, and loop headers (a parallel loop here is an OpenMP loop).
    ``render_cl.CLDialect`` gives the same IR as OpenCL C (the outermost parallel loop over work-items)."""

    def colreduce_block(self, kept: int) -> int:
        """How many kept-inner positions a reduction over leading dims accumulates at once
        (render_special.gen_colreduce; ``kept`` of them in all). Blocks are what threads share out: a
        bias gradient's 256 columns in blocks of 64 run on up to four threads (a size known only at run
        time keeps 256, so the C is the same at every size)."""
        if type(kept) is int and kept < 2048:
            return 64
        return 256

    def render(self, prim, dtype, operands) -> str:
        return P.render(prim, dtype, operands)

    def accumulator_type(self, op, dtype) -> str:
        return P.accumulator_type(op, dtype)

    def loop(self, var, ext, step=1, parallel_work=None, simd=None) -> tuple:
        """(header, pragma or None) of ``for var in range(0, ext, step)``; ``parallel_work`` (the
        kernel's element count) marks the parallel loop, ``simd`` an OpenMP simd-reduction pragma."""
        inc = f"{var}++" if step == 1 else f"{var} += {step}"
        pragma = f"EMBER_PARALLEL_FOR({parallel_work}LL)" if parallel_work is not None else simd
        return f"for (int64_t {var} = 0; {var} < {ext}LL; {inc})", pragma


C_DIALECT = CDialect()


class _ElideMiss(Exception):
    """A read of an elided buffer found no stored register to forward (the kernel is rendered again with
    that buffer stored)."""

    def __init__(self, bid):
        super().__init__(bid)
        self.bid = bid


class KernelGen:
    """Generates the C function of one kernel."""

    def __init__(self, k, sched, slot_of, errors, options, dialect=None):
        self.dialect = C_DIALECT if dialect is None else dialect
        self.k = k
        self.sched = sched
        self.slot_of = slot_of
        self.errors = errors
        self.opt = options
        self.used = {}              # buffer id -> Buffer
        self.n = 0
        self.var_level = {}
        self.local_level = {}
        self.dimmap = {}            # dim var -> (group var, keep coefficient?)
        self.record = None
        self.locals_map = {}        # reduce node id -> C local
        self.scopes = []
        self.ranges = {}
        self.has_check = False
        self.uses_blas = False
        # temp buffers this kernel alone writes and reads, each read at the offset just stored: the stores
        # are dropped and the reads forwarded from the register (see ``render_program``)
        self.elide: set = set()

    # ---- names ---------------------------------------------------------------------------------------
    def tmp(self, prefix="t"):
        self.n += 1
        return f"{prefix}{self.n}"

    def bufname(self, buf):
        self.used[buf.id] = buf
        return buf.name

    def atom_level(self, atom) -> int:
        if isinstance(atom, tuple):
            if atom[0] == "val":
                return self.local_level.get(atom[1], 0)
            lv = 0
            for a in dict(atom[1][0]):
                lv = max(lv, self.atom_level(a))
            return lv
        return self.var_level.get(atom, 0)

    def aff_level(self, a: Aff) -> int:
        lv = 0
        for atom in a.terms:
            lv = max(lv, self.atom_level(atom))
        return lv

    def name_level(self, name) -> int:
        return self.local_level.get(name, 0)

    def render_aff(self, a: Aff, tag="off") -> str:
        if self.record is not None:
            self.record.append((tag, a))
        if self.dimmap:
            t = {}
            for atom, c in a.terms.items():
                m = self.dimmap.get(atom) if isinstance(atom, str) else None
                if m is None:
                    t[atom] = t.get(atom, 0) + c
                elif m[1]:
                    t[m[0]] = t.get(m[0], 0) + c
            a = Aff({k: v for k, v in t.items() if v}, a.const)
        return L.render(a, self._name_of)

    def _name_of(self, atom):
        m = self.dimmap.get(atom)
        return m[0] if m is not None else atom

    # ---- emission ------------------------------------------------------------------------------------
    def emit(self, level, line, name=None, memo_key=None):
        sc = self.scopes[min(level, len(self.scopes) - 1)]
        sc.lines.append(line)
        if name is not None:
            self.local_level[name] = sc.level
            if memo_key is not None:
                sc.memo[memo_key] = name
        return name

    def lookup(self, key):
        for sc in reversed(self.scopes):
            v = sc.memo.get(key)
            if v is not None:
                return v
        return None

    def val(self, n, idx, own=False) -> str:
        """C expression (a local or a literal) of node ``n`` at index vector ``idx``."""
        if own and n.op == "reduce":
            return self.locals_map[n.id]          # a row kernel storing its register-held reduction
        if not own:
            if n.op == "load":
                return self.load(n.buffer, idx, ("ld", n.id))
            if n.id in self.sched.mat:
                loc = self.locals_map.get(n.id)
                if loc is not None:
                    return loc
                buf = self.sched.node_buffer[n.id]
                return self.load(buf, idx, ("mat", n.id))
        if n.op in _VIEWS:
            mat = self.sched.mat
            n2, idx2 = L.view_index(n, idx, self.ranges, stop=lambda q: q.op == "load" or q.id in mat)
            return self.val(n2, idx2)
        if n.op == "const":
            return P.literal(n.attrs["value"], n.dtype)
        key = (n.id, tuple(a.key() for a in idx))
        hit = self.lookup(key)
        if hit is not None:
            return hit
        t = P.ctype(n.dtype)
        if n.op == "iota":
            a = idx[n.attrs["axis"]]
            name = self.tmp()
            expr = self.render_aff(a, "val")
            return self.emit(self.aff_level(a), f"const {t} {name} = ({t})({expr});", name, key)
        if n.op == "gather":
            x, index = n.inputs
            ax = n.attrs["axis"]
            iv = self.val(index, idx)
            lv = self.name_level(iv)
            size = x.shape[ax]
            g = self.tmp("g")
            if n.attrs.get("check"):
                self.has_check = True
                code = n.attrs["check"]
                self.emit(lv, f"int64_t {g} = {iv};", g)
                self.emit(lv, f"if ((uint64_t){g} >= (uint64_t){size}LL) {{ em_err[0] = {code}; em_err[1] = {g}; "
                              f"{g} = 0; }}")
            else:
                self.emit(lv, f"const int64_t {g} = {iv};", g)
            xi = list(idx)
            xi[ax] = Aff.var(("val", g, size))
            r = self.val(x, xi)
            return r
        ops = [self.val(i, idx) for i in n.inputs]
        lv = max([self.name_level(o) for o in ops] + [0])
        hit = self.lookup(key)
        if hit is not None:
            return hit
        if n.op == "cast":
            src = n.inputs[0].dtype
            expr = f"({ops[0]} != 0)" if n.dtype.kind == "b" else f"({t})({ops[0]})"
            if src.kind == "b" and n.dtype.kind != "b":
                expr = f"({t})({ops[0]})"
        else:
            cdt = n.inputs[0].dtype if n.op != "where" else n.inputs[1].dtype
            expr = self.dialect.render(n.op, cdt, ops)
            if n.dtype.kind == "b":
                expr = f"(uint8_t)({expr})"
        name = self.tmp()
        return self.emit(lv, f"const {t} {name} = {expr};", name, key)

    def load(self, buf, idx, memo_id) -> str:
        off = L.offset(idx, L.cstrides(buf.shape))
        key = (memo_id, off.key())
        hit = self.lookup(key)
        if hit is not None:
            return hit
        if buf.id in self.elide:
            raise _ElideMiss(buf.id)
        lv = self.aff_level(off)
        name = self.tmp()
        t = P.ctype(buf.dtype)
        return self.emit(lv, f"const {t} {name} = {self.bufname(buf)}[{self.render_aff(off)}];", name, key)

    def store_stmt(self, st, idx, level, guard=None):
        """Emit statement ``st`` (store / write / copy) at index ``idx`` (under ``if (guard)`` when given:
        the OpenCL renderer lets one work-item of a group store a per-row value)."""
        v = self.val(st.node, idx, own=(st.kind == "store"))
        if st.kind == "store" and st.buffer.id in self.elide:
            off = L.offset(idx, L.cstrides(st.buffer.shape))
            lv = self.name_level(v)
            self.scopes[min(lv, len(self.scopes) - 1)].memo[(("mat", st.node.id), off.key())] = v
            return
        if st.kind == "write":
            tn, tix = L.view_index(st.target, idx, self.ranges, stop=lambda q: q.op == "load")
            off = L.offset(tix, L.cstrides(st.buffer.shape))
        else:
            off = L.offset(idx, L.cstrides(st.buffer.shape))
        self.emit(level, f"{'if (' + guard + ') ' if guard else ''}{self.bufname(st.buffer)}[{self.render_aff(off)}] = {v};")
        return True

    # ---- loop structure ---------------------------------------------------------------------------------
    def dim_idx(self, prefix, shape, level_base):
        vs = []
        idx = []
        for d, s in enumerate(shape):
            v = f"{prefix}{d}"
            vs.append(v)
            self.ranges[v] = (0, max(s - 1, 0))
            idx.append(Aff.var(v) if s > 1 else Aff())
        return vs, idx

    def groups(self, vs, shape, records, prefix):
        """Collapse adjacent dims (innermost first) when every recorded offset advances uniformly."""
        blocked = set()
        offs = []
        for tag, a in records:
            if tag != "off":
                blocked |= L.aff_vars(a)
            else:
                offs.append(a)
            for atom in a.terms:
                if isinstance(atom, tuple) and atom[0] in ("div", "mod"):
                    blocked |= L.atom_vars(atom)
        dims = [d for d, s in enumerate(shape) if s > 1]
        groups = []
        cur = []
        for d in reversed(dims):
            if cur and vs[d] not in blocked and vs[cur[0]] not in blocked:
                inner = cur[-1]
                ext = 1
                for e in cur:
                    ext *= shape[e]
                ok = all(a.terms.get(vs[d], 0) == a.terms.get(vs[inner], 0) * ext for a in offs)
                if ok:
                    cur.insert(0, d)
                    continue
            if cur:
                groups.insert(0, cur)
            cur = [d]
        if cur:
            groups.insert(0, cur)
        out = []
        for gi, g in enumerate(groups):
            ext = 1
            for d in g:
                ext *= shape[d]
            gname = f"{prefix}{gi}" if len(g) > 1 else vs[g[0]]
            out.append((gname, ext, [vs[d] for d in g]))
        return out

    def set_groups(self, groups, base_level):
        for gi, (gname, ext, dvs) in enumerate(groups):
            for j, v in enumerate(dvs):
                self.var_level[v] = base_level + gi + 1
                if len(dvs) > 1:
                    self.dimmap[v] = (gname, j == len(dvs) - 1)
            self.var_level[gname] = base_level + gi + 1
            self.ranges[gname] = (0, max(ext - 1, 0))

    def open_loops(self, groups, base_level, parallel_work=None, simd_reduction=None):
        """Push scopes for ``groups``; returns a closer that wraps them into Blocks on the parent."""
        opened = []
        for gi, (gname, ext, _) in enumerate(groups):
            sc = Scope(base_level + gi + 1)
            self.scopes.append(sc)
            opened.append((gname, ext, sc))

        def close():
            inner = None
            for gi in range(len(opened) - 1, -1, -1):
                gname, ext, sc = opened[gi]
                self.scopes.pop()
                par = parallel_work if gi == 0 else None
                simd = simd_reduction if gi == len(opened) - 1 and par is None else None
                header, pragma = self.dialect.loop(gname, ext, parallel_work=par, simd=simd or None)
                blk = Block(header, sc, pragma, (gname, ext, 1, par) if par is not None else None)
                self.scopes[-1].lines.append(blk)
                inner = blk
            return inner
        return close

    # ---- kernels -------------------------------------------------------------------------------------------
    def gen(self):
        """(C parameter list, C body, C arguments of the call) of this kernel."""
        k = self.k
        root = Scope(0)
        self.scopes = [root]
        body = {"loop": self.gen_loop, "row": self.gen_row, "colreduce": self.gen_colreduce,
                "matmul": self.gen_matmul, "scatter": self.gen_scatter}[k.kind]
        # dry run to learn the accesses (for loop collapsing), then the real run
        self.record = []
        body(dry=True)
        records = self.record
        self.record = None
        self.n = 0
        self.used = {}
        self.local_level = {}
        self.locals_map = {}
        self.has_check = False
        root = Scope(0)
        self.scopes = [root]
        body(dry=False, records=records)
        self.root = root            # (render_par.outline renders it again as a parallel-loop function)
        # the body names buffers b<id>; the function takes them as parameters p0, p1 ... (in order of first
        # use), so kernels that differ only in which buffers they touch share one C function
        body = "\n".join(_text(root.lines, 1))
        order = []
        for m in re.finditer(r"\bb(\d+)\b", body):
            bid = int(m.group(1))
            if bid in self.used and bid not in order:
                order.append(bid)
        names = self.names = {f"b{bid}": f"p{i}" for i, bid in enumerate(order)}
        body = re.sub(r"\bb\d+\b", lambda m: names.get(m.group(0), m.group(0)), body)
        self.order, self.body = order, body       # (the OpenCL renderer declares the parameters itself)
        params = ["void **bufs"] + [f"{P.ctype(self.used[bid].dtype)} *restrict {names[f'b{bid}']}" for bid in order]
        args = ["bufs"] + [f"({P.ctype(self.used[bid].dtype)} *)({self.slot_of(self.used[bid])})" for bid in order]
        pre = "  int64_t *restrict em_err = (int64_t *)bufs[1];\n" if self.has_check else ""
        return ", ".join(params), pre + body, args

    def prologue(self):
        for st in self.k.prologue:
            idx = [Aff() for _ in st.shape]
            self.store_stmt(st, idx, 0)

    def gen_loop(self, dry, records=None):
        k = self.k
        self.prologue()
        shape = k.outer
        vs, idx = self.dim_idx("i", shape, 0)
        groups = self.groups(vs, shape, records or [], "x") if not dry else [(v, s, [v]) for v, s in zip(vs, shape)
                                                                          if s > 1]
        self.set_groups(groups, 0)
        work = math.prod(shape) * max(1, len(k.stmts))
        close = self.open_loops(groups, 0, parallel_work=work if groups else None)
        lvl = len(groups)
        for st in k.stmts:
            self.store_stmt(st, idx, lvl)
        close()

    def gen_matmul(self, dry, records=None):
        k = self.k
        self.prologue()
        st = k.stmts[0]
        self.emit_gemm(st)
        if len(k.stmts) > 1:
            shape = k.epi_shape
            vs, idx = self.dim_idx("i", shape, 0)
            groups = self.groups(vs, shape, records or [], "x") if not dry else \
                [(v, s, [v]) for v, s in zip(vs, shape) if s > 1]
            self.set_groups(groups, 0)
            work = math.prod(shape) * (len(k.stmts) - 1)
            close = self.open_loops(groups, 0, parallel_work=work if groups else None)
            for s in k.stmts[1:]:
                self.store_stmt(s, idx, len(groups))
            close()

    def emit_gemm(self, st):
        render_special.emit_gemm(self, st)

    def gen_colreduce(self, dry, records=None):
        render_special.gen_colreduce(self, dry, records)

    def gen_scatter(self, dry, records=None):
        render_special.gen_scatter(self, dry, records)

    def gen_row(self, dry, records=None):
        k = self.k
        self.prologue()
        O, R = k.outer, k.inner
        og, rg, oidx, ridx = self.row_loops(dry, records)
        rows = math.prod(O) if O else 1
        inner = math.prod(R) if R else 1
        close_o = self.open_loops(og, 0, parallel_work=rows * inner * len(k.stmts) if og else None)
        row_level = len(og)
        passes = self.row_passes(k.stmts)
        full_idx = oidx + ridx
        for kind, sts in passes:
            if kind == "outer":
                st = sts[0]
                extra = len(st.shape) - len(O)
                self.store_stmt(st, oidx + [Aff()] * extra, row_level)
                continue
            reds = [s for s in sts if s.role == "reduce"]
            accs = {}
            for s in reds:
                accs[s.node.id] = self.reduce_init(s.node, row_level)
            simd = None
            if reds and len(reds) == len(sts) and all(s.node.attrs["op"] in ("sum", "max", "min") for s in reds):
                # a reduction-only pass: each lane keeps its own accumulators (and NaN flags)
                clauses = []
                for s in reds:
                    a, flag = accs[s.node.id]
                    op = s.node.attrs["op"]
                    clauses.append(f"reduction({'+' if op == 'sum' else op}:{a})")
                    if flag is not None:
                        clauses.append(f"reduction(|:{flag})")
                simd = f"_Pragma(\"omp simd {' '.join(clauses)}\")"
            close_r = self.open_loops(rg, row_level, simd_reduction=simd)
            lvl = row_level + len(rg)
            for s in sts:
                if s.role == "reduce":
                    x = s.node.inputs[0]
                    v = self.val(x, full_idx)
                    self.reduce_update(s.node, accs[s.node.id], v, lvl, ridx, R)
                else:
                    self.store_stmt(s, full_idx, lvl)
            close_r()
            for s in reds:
                self.locals_map[s.node.id] = self.reduce_final(s.node, accs[s.node.id], row_level)
        close_o()

    def row_loops(self, dry, records):
        """The loop groups over a row kernel's outer (row) and inner (reduced) axes, set up for
        ``open_loops``: (outer groups, inner groups, outer index, inner index). A dry run (sizing the
        kernel) gives every axis of size > 1 its own loop; otherwise ``records`` merge contiguous axes."""
        O, R = self.k.outer, self.k.inner
        ovs, oidx = self.dim_idx("o", O, 0)
        rvs, ridx = self.dim_idx("r", R, 0)
        if dry:
            og = [(v, s, [v]) for v, s in zip(ovs, O) if s > 1]
            rg = [(v, s, [v]) for v, s in zip(rvs, R) if s > 1]
        else:
            og = self.groups(ovs, O, records, "xo")
            rg = self.groups(rvs, R, records, "xr")
        self.set_groups(og, 0)
        self.set_groups(rg, len(og))
        return og, rg, oidx, ridx

    def row_passes(self, stmts) -> list:
        """Group a row kernel's statements into passes: ``("outer", [st])`` for a statement over the rows
        alone, ``("pass", sts)`` for consecutive statements that share one inner pass over the reduced
        axes (a statement starts a new pass when it needs the result of a reduction in the current one)."""
        passes = []
        for st in stmts:
            if st.role == "outer":
                passes.append(("outer", [st]))
                continue
            if passes and passes[-1][0] == "pass" and not self._reads_any(st.node, passes[-1][1]):
                passes[-1][1].append(st)
            else:
                passes.append(("pass", [st]))
        return passes

    def _reads_any(self, node, sts) -> bool:
        ids = {s.node.id for s in sts if s.role == "reduce"}
        if not ids:
            return False
        stack = [node]
        seen = set()
        first = True
        while stack:
            x = stack.pop()
            if x.id in seen:
                continue
            seen.add(x.id)
            if x.id in ids and not first:
                return True
            if not first and (x.op == "load" or (x.id in self.sched.mat)):
                continue
            first = False
            stack.extend(x.inputs)
        return False

    def reduce_init(self, n, level):
        op = n.attrs["op"]
        x = n.inputs[0]
        at = self.dialect.accumulator_type(op, x.dtype)
        acc = self.tmp("acc")
        self.emit(level, f"{at} {acc} = {P.reduce_init(op, x.dtype)};", acc)
        idx = None
        if op in ("argmax", "argmin"):
            idx = self.tmp("ai")
            self.emit(level, f"int64_t {idx} = 0;", idx)
        elif op in ("max", "min") and np.dtype(x.dtype).kind == "f":
            # NaN is tracked in a flag, so the comparison is a plain select and the loop vectorizes
            idx = self.tmp("nan")
            self.emit(level, f"int {idx} = 0;", idx)
        return acc, idx

    def reduce_update(self, n, acc, v, level, ridx, R):
        op = n.attrs["op"]
        a, ai = acc
        sfx = P.suffix(n.inputs[0].dtype)
        if op == "sum":
            self.emit(level, f"{a} += {v};")
        elif op == "prod":
            self.emit(level, f"{a} *= {v};")
        elif op in ("max", "min"):
            if ai is not None:
                self.emit(level, f"{a} = ({v}) {'>' if op == 'max' else '<'} {a} ? ({v}) : {a}; {ai} |= ({v}) != ({v});")
            else:
                self.emit(level, minmax_update(op, sfx, a, v))
        else:
            self.emit(level, arg_update(self, op, a, ai, v, ridx, R))

    def reduce_final(self, n, acc, level):
        a, ai = acc
        if n.attrs["op"] in ("argmax", "argmin"):
            return ai
        t = P.ctype(n.dtype)
        name = self.tmp()
        if ai is not None:
            self.emit(level, f"const {t} {name} = {ai} ? ({t})NAN : ({t}){a};", name)
        else:
            self.emit(level, f"const {t} {name} = ({t}){a};", name)
        return name



def _gen_kernel(k, sched, slot_of, errors, options, elide, dialect=None, gen_class=None):
    """Render kernel ``k`` dropping the stores to ``elide`` (buffer ids); a buffer whose reads cannot
    all be forwarded is stored after all."""
    elide = set(elide)
    while True:
        g = (gen_class or KernelGen)(k, sched, slot_of, errors, options, dialect)
        g.elide = elide
        try:
            g.result = g.gen()
            return g
        except _ElideMiss as m:
            elide.discard(m.bid)


def _elidable(sched) -> dict:
    """id(kernel) -> ids of temp buffers only that kernel touches: a value stored and read back in one
    loop nest (an expensive value used twice, kept once) needs no memory at all."""
    touched: dict = {}
    stored: dict = {}
    for k in sched.kernels:
        if k.kind not in ("loop", "matmul"):
            continue
        for st in k.stmts:
            if st.kind == "store" and st.role in ("loop", "epilogue") and st.buffer is not None:
                stored[st.buffer.id] = k
    if not stored:
        return {}
    for k in sched.kernels:
        for st in k.prologue + k.stmts:
            for bid in _buffers_of(st, sched):
                touched.setdefault(bid, set()).add(id(k))
    mat = sched.mat
    for seg_kernels, step in sched.segments:
        if step is not None:
            for x in step.effect.reads():
                r = L.view_root(x, mat)
                b = r.buffer if r.op == "load" else sched.node_buffer.get(r.id)
                if b is not None:
                    touched.setdefault(b.id, set()).add("step")
    out: dict = {}
    for bid, k in stored.items():
        b = next((st.buffer for st in k.stmts if st.buffer is not None and st.buffer.id == bid), None)
        if b is None or b.kind != "temp" or b.escapes or touched.get(bid, set()) != {id(k)}:
            continue
        acc = k.accesses.get(bid)
        if acc is None or len(acc["w"]) != 1 or not acc["r"] <= acc["w"]:
            continue
        out.setdefault(id(k), set()).add(bid)
    return out


def _buffers_of(st, sched) -> set:
    """Ids of the buffers statement ``st`` reads or writes (materialised values are leaves)."""
    from .memplan import _leaf_buffers
    out = _leaf_buffers(st.node, sched, own=(st.kind == "store"))
    if st.buffer is not None:
        out.add(st.buffer.id)
    if st.target is not None:
        out |= _leaf_buffers(st.target, sched, own=False)
    return out


_SIZE_NAME = re.compile(r"\bem_s(\d+)\b")


def _size_locals(text) -> str:
    """Declarations of the size symbols ``em_sK`` that C text of a symbolic program uses (read from the
    sizes array in slot 2, see native_sym.py); '' for a program with constant sizes."""
    if "em_s" not in text:
        return ""
    ks = sorted({int(k) for k in _SIZE_NAME.findall(text)})
    return "".join(f"  const int64_t em_s{k} = ((const int64_t *)bufs[2])[{k}];\n" for k in ks)


def _args(g, slot_of) -> list:
    """The arguments of kernel ``g``'s call (the slots of its buffers, after the memory plan)."""
    return ["bufs"] + [f"({P.ctype(g.used[bid].dtype)} *)({slot_of(g.used[bid])})" for bid in g.order]


def render_program(sched, slot_of, errors, options, name="graph", shared=None, extern_calls=None,
                   pg=None) -> tuple:
    """(C text of the kernels and entries, entry names per segment, uses BLAS?, kernel bodies by name).

    ``shared`` (a dict body -> function name) deduplicates kernel functions across calls: the layers of
    a model produce the same kernels over different buffers, and each is compiled once.
    ``extern_calls`` (segment index -> C lines, from ``c_externs.prepare``) ends those segments' entries
    with the lines and a call of the next entry (the extern step runs natively). With ``pg`` (the
    primitive graph, whose temps the memory plan places) independent kernels may run concurrently
    (concurrent.py; the arena is planned again for them). The caller puts
    ``prims.C_PRELUDE``, the OpenMP prelude and (when used) the BLAS prelude on top."""
    shared = {} if shared is None else shared
    parts = []
    uses_blas = False
    checks = {}
    calls = {}
    kernel_src = {}
    elidable = _elidable(sched)
    tasks = []          # the pool tasks of parallel kernel functions (render_par), beside the entries
    pool = getattr(options, "pool_loops", True)
    made = []           # (kernel, its KernelGen, C function, parallel loop or None)
    info = {}           # kernel name -> (parallel work or None, may run in a lane, buffer ids it touches)
    for k in sched.kernels:
        g = _gen_kernel(k, sched, slot_of, errors, options, elidable.get(id(k), set()))
        params, body, args = g.result
        uses_blas |= g.uses_blas
        checks[k.name] = g.has_check
        par = render_par.outline(g, g.names) if pool else None
        if par is not None:
            body = ("  int64_t *restrict em_err = (int64_t *)bufs[1];\n" if g.has_check else "") + par[0]
            params = f"{params}, {render_par.PAR_PARAMS}"
            par = par[1]
        key = (params, body)
        fn = shared.get(key)
        if fn is None:
            fn = shared[key] = f"kern{len(shared)}"
            parts.append(f"static void {fn}({params}) {{\n{_size_locals(body)}{body}\n}}")
            if par is not None:
                tasks.append(render_par.task_text(fn, params))
        kernel_src[k.name] = body
        made.append((k, g, fn, par))
        info[k.name] = (par["work"] if par is not None else None,
                        not g.has_check and concurrent.laneable(body, options), set(g.used))
    conc = sched.conc = concurrent.plan(sched, info, options) if pg is not None else {}
    if conc:            # the arena again, every kernel of a job at one position (memplan.plan_buffers)
        plan_buffers(sched, pg, sched.kernels, sched.segments, None, steps=conc)
    for k, g, fn, par in made:
        args = _args(g, slot_of)
        if par is not None:
            calls[k.name] = render_par.call_text(fn, args, par, k.describe(), k.kind)
        else:
            calls[k.name] = f"  {fn}({', '.join(args)});  /* {k.describe()} */"
    parts += tasks
    entries = []
    timed = []          # kernel names in the order of the timing table (options.timing)
    for si, (kernels, step) in enumerate(sched.segments):
        ename = f"{name}_seg{si}"
        lines = []
        if options.blas_threads and uses_blas and any(k.kind == "matmul" for k in kernels):
            lines.append(f"  openblas_set_num_threads({int(options.blas_threads)});")
        plan = conc.get(si) or [[[i]] for i in range(len(kernels))]
        for j, step in enumerate(plan):
            if len(step) > 1:            # a concurrent job: its lanes in a function of their own
                jname = f"{name}_seg{si}_job{j}"
                text = concurrent.job_body([[calls[kernels[i].name] for i in lane] for lane in step])
                parts.append(f"static void {jname}(void **bufs, long em_lane) {{\n" + _size_locals(text) + text + "}")
                desc = " | ".join(", ".join(kernels[i].name for i in lane) for lane in step)
                lines.append(f"  em_conc_run({jname}, bufs);  /* concurrent: {desc} */")
                continue
            k = kernels[step[0][0]]
            if options.timing:
                ti = len(timed)
                timed.append(k.name)
                lines.append("  { struct timespec em_t0, em_t1; clock_gettime(CLOCK_MONOTONIC, &em_t0);")
                lines.append(calls[k.name])
                lines.append(f"    clock_gettime(CLOCK_MONOTONIC, &em_t1); {name}_ktime[{ti}] += "
                             "(double)(em_t1.tv_sec - em_t0.tv_sec) + 1e-9 * (double)(em_t1.tv_nsec - em_t0.tv_nsec); "
                             f"{name}_kcount[{ti}] += 1; }}")
            else:
                lines.append(calls[k.name])
            if checks.get(k.name):
                lines.append("  if (((int64_t *)bufs[1])[0]) return;")
        if extern_calls and si in extern_calls:
            lines += extern_calls[si]
            parts.append(f"void {name}_seg{si + 1}(void **bufs);")
            lines.append(f"  {name}_seg{si + 1}(bufs);")
        entries.append(ename)
        text = "\n".join(lines) + ("\n" if lines else "")
        parts.append(f"void {ename}(void **bufs) {{\n" + _size_locals(text) + text + "}")
    if options.timing:
        n = max(len(timed), 1)
        parts.insert(0, f"#include <time.h>\ndouble {name}_ktime[{n}];\nlong long {name}_kcount[{n}];")
    return "\n\n".join(parts) + "\n", entries, uses_blas, kernel_src
