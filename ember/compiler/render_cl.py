"""OpenCL C from the compiler's schedule: the loop IR of ``render_c.py`` in another dialect.

``Renderer.render_schedule(sched)`` turns each scheduled kernel into one or more ``__kernel`` functions
and a launch plan (``Launch``: function, buffers, NDRange); the statements, expressions, index arithmetic,
loop collapsing, hoisting and register forwarding are ``render_c.KernelGen``'s (the same code renders
C), parameterised by :class:`CLDialect`. What differs is where the work goes:

- the kernel's parallel loop (the outermost loop, which C runs under OpenMP) is shared out over
  work-items. On CPU devices (PoCL: work-items are loop iterations on a core) each of a few work-items
  per core takes a contiguous chunk, vectorised within the item; on GPUs the loop is grid-stride
  (``v = get_global_id(0); v < ext; v += get_global_size(0)``: neighbours take neighbours). Elementwise
  kernels: elements; row kernels (softmax, layer norm, sums over trailing dims): rows, one work-item
  each -- on GPUs rows of 64+ elements get a work-group each, reduced by a tree in local memory;
  reductions over leading dims: blocks of kept columns (one column per work-item on GPUs); scatter-adds:
  columns. A kernel without a parallel loop (a small whole-tensor reduction) runs as one work-item.
- statements C runs before the loop (a kernel's scalar prologue, e.g. an optimizer's step count
  ``t += 1``) become their own one-work-item kernel: run by every work-item they would race.
- matmuls are generated GEMM kernels (``cl_gemm.py``); their fused elementwise epilogue (bias, activation)
  is a function of one element that the GEMM's work-items call on each element they stored, when it
  reads the product only at that element (else it is the next kernel).
- primitives: OpenCL's overloaded math (``exp``, ``fabs``: the dialect renders the templates of
  ``prims.py`` with no libm suffix; ``nearbyint`` is ``rint``), the C99 integer type names and
  ``INT64_C`` come from typedefs and macros in :data:`CL_HEAD` (``long`` is 64-bit in OpenCL C, bool is
  ``uchar``), as do the ``em_*`` helpers of ``prims.C_PRELUDE`` (written here in OpenCL C). float64
  needs ``cl_khr_fp64`` (the program is built with ``-DEM_FP64`` when the device has it; a program
  with float64 values on a device without it is refused). float32 sums accumulate in double where the
  device has fp64 (as the C backend does), else in float.

Buffers are ``__global T *`` parameters with an element offset each (device tensors are views into
memory blocks); every intermediate the memory plan put in the arena is the arena block at its offset.
Identical kernel functions (the layers of a model, an optimizer's per-parameter updates) are emitted
once and launched with different arguments.
"""
from __future__ import annotations

import re

import numpy as np

from . import prims as P
from . import lower as L
from . import cl_gemm
from .fusion import Kernel
from .render_c import CDialect, KernelGen, _gen_kernel, _elidable
from .render_special import Block, Scope, minmax_update
from .lower import Aff

# rows at least this long are reduced by a work-group on GPU-style devices (shorter: a work-item per row)
WG_MIN_ROW = 64

CL_HEAD = r"""/* ember: generated OpenCL C (ember.compiler.render_cl) */
#ifdef EM_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
typedef long int64_t;
typedef ulong uint64_t;
typedef int int32_t;
typedef short int16_t;
typedef char int8_t;
typedef uchar uint8_t;
#define INT64_C(v) v##L
#define INT64_MIN LONG_MIN
#define INT64_MAX LONG_MAX
#define EM_MINMAX(T, S) \
  static inline T em_max_##S(T a, T b) { return (a > b || a != a) ? a : b; } \
  static inline T em_min_##S(T a, T b) { return (a < b || a != a) ? a : b; }
EM_MINMAX(float, f32) EM_MINMAX(long, i64) EM_MINMAX(int, i32) EM_MINMAX(short, i16) EM_MINMAX(char, i8)
EM_MINMAX(uchar, u8) EM_MINMAX(uchar, b8)
#define EM_INT(T, S) \
  static inline T em_abs_##S(T a) { return a < 0 ? (T)-a : a; } \
  static inline T em_sign_##S(T a) { return (T)((a > 0) - (a < 0)); }
EM_INT(long, i64) EM_INT(int, i32) EM_INT(short, i16) EM_INT(char, i8)
/* float helpers, for T = float (S = f32) and, with fp64, double (f64) */
#define EM_FLOAT(T, S) \
  static inline T em_sign_##S(T a) { return a > 0 ? (T)1 : (a < 0 ? (T)-1 : (T)0); } \
  static inline T em_sigmoid_##S(T x) { return (T)1 / (exp(-x) + (T)1); } \
  static inline T em_pow_##S(T a, T b) { \
    if (b == (T)2) return a * a; \
    if (b == (T)1) return a; \
    if (b == (T)0.5) return sqrt(a); \
    return pow(a, b); } \
  static inline T em_remainder_##S(T a, T b) { \
    T r = fmod(a, b); \
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; } \
  static inline T em_floordiv_##S(T a, T b) { \
    if (b == 0) return a / b; \
    T m = fmod(a, b), d = (a - m) / b; \
    if (m != 0 && ((b < 0) != (m < 0))) d -= (T)1; \
    T f = floor(d); \
    if (d - f > (T)0.5) f += (T)1; \
    return d == 0 ? copysign((T)0, a / b) : f; }
EM_FLOAT(float, f32)
#ifdef EM_FP64
EM_MINMAX(double, f64)
EM_FLOAT(double, f64)
#endif
static inline void em_memset(__global uchar *p, int v, long n) { for (long i = 0; i < n; i++) p[i] = (uchar)v; }
#define memset(p, v, n) em_memset((__global uchar *)(p), (v), (n))
"""

# templates that differ from prims.py's C (which OpenCL C renders with no libm suffix)
_OVERRIDES = {
    "exp": {"f": "exp({0})"},             # C uses ember's polynomial (for vectorisation); OpenCL's is native
    "round": {"f": "rint({0})", "i": "{0}", "u": "{0}"},
}
# without fp64: erf/erfc/lgamma of float32 in float (C goes through double)
_NO_FP64 = {
    "erf": {"f": "erf({0})"},
    "erfc": {"f": "erfc({0})"},
    "lgamma": {"f": "lgamma({0})"},
}


class Unsupported(Exception):
    """The schedule has something this renderer does not generate (the caller runs it elsewhere)."""


class CLDialect(CDialect):
    """OpenCL C. ``cpu``: the device runs work-items as loops on CPU cores (PoCL), where each work-item
    should walk contiguous memory (chunks, vectorised within the work-item); on GPUs neighbouring
    work-items take neighbouring elements (grid-stride loops, coalesced accesses)."""

    def __init__(self, fp64: bool, owner=None, cpu=False, units=1):
        self.fp64 = fp64
        self.owner = owner
        self.cpu = cpu
        self.units = max(1, int(units))
        self.parallel = []          # (ext, step, work-items) of parallel loops of the final rendering pass
        self.wg = 0                 # work-group size of a row kernel reduced by work-groups (0: not one)
        self.lane_var = None        # its loop variable that the work-items of a group share out
        self.element = False        # rendering a function of one element em_e (a fused GEMM epilogue)

    def colreduce_block(self, kept: int) -> int:
        if not self.cpu:
            return 1                # one kept column per work-item, neighbours reading neighbours
        # CPU: blocks of contiguous columns (vectorised), two blocks per core when there are columns enough
        b = -(-kept // (2 * self.units))
        return max(8, min(256, -(-b // 8) * 8))

    def render(self, prim, dtype, operands) -> str:
        cls = P.dclass(dtype)
        tpl = _OVERRIDES.get(prim, {}).get(cls)
        if tpl is None and not self.fp64:
            tpl = _NO_FP64.get(prim, {}).get(cls)
        if tpl is None:
            tpl = P.ELEMENTWISE[prim][cls]
        dt = np.dtype(dtype)
        return tpl.format(*operands, T=P.ctype(dt), S=P.suffix(dt), F="")

    def accumulator_type(self, op, dtype) -> str:
        dt = np.dtype(dtype)
        if op in ("sum", "prod") and dt == np.float32:
            return "double" if self.fp64 else "float"
        return P.ctype(dt)

    def loop(self, var, ext, step=1, parallel_work=None, simd=None) -> tuple:
        if parallel_work is None:
            if var == self.lane_var:
                # the row loop a work-group shares: work-item l takes elements l, l + L, ...
                return (f"for (int64_t {var} = em_lid; {var} < {ext}L; {var} += {self.wg}L)", None)
            inc = f"{var}++" if step == 1 else f"{var} += {step}"
            return f"for (int64_t {var} = 0; {var} < {ext}L; {inc})", None
        items = max(1, -(-int(ext) // step))
        if self.wg:
            # one work-group per row (grid-stride over the rows)
            n = min(items, 1 << 14)
            if self.owner is None or self.owner.record is None:
                self.parallel.append((int(ext), int(step), n))
            return (f"for (int64_t {var} = (int64_t)get_group_id(0); {var} < {ext}L; "
                    f"{var} += (int64_t)get_num_groups(0))", None)
        if self.cpu:
            # a few work-items per core, each a contiguous chunk (tiny kernels: one work-item)
            n = max(1, min(items, 4 * self.units, int(parallel_work) // 4096))
            chunk = -(-items // n) * step
            header = (f"for (int64_t {var} = (int64_t)get_global_id(0) * {chunk}, {var}_end = min({var} + {chunk}L, "
                      f"{ext}L); {var} < {var}_end; {var} += {step})")
        else:
            n = min(items, 1 << 16)
            s = "" if step == 1 else f" * {step}"
            header = (f"for (int64_t {var} = (int64_t)get_global_id(0){s}; {var} < {ext}L; "
                      f"{var} += (int64_t)get_global_size(0){s})")
        if self.owner is None or self.owner.record is None:     # (not the dry run of KernelGen.gen)
            self.parallel.append((int(ext), int(step), n))
        return header, None


class CLKernelGen(KernelGen):
    """KernelGen with the OpenCL dialect (one per kernel: the dialect records the parallel loop)."""

    def __init__(self, k, sched, slot_of, errors, options, dialect=None, dev=None, element=False):
        dev = dev or Device()
        super().__init__(k, sched, slot_of, errors, options, CLDialect(dev.fp64, cpu=dev.is_cpu,
                                                                       units=dev.compute_units))
        self.dialect.owner = self
        self.dialect.element = element
        self.dev_wg = dev.max_work_group

    def gen(self):
        self.dialect.parallel = []
        self.dialect.wg = 0
        self.dialect.lane_var = None
        out = KernelGen.gen(self)
        root = self.scopes[0]
        par = [ln for ln in root.lines if isinstance(ln, Block) and "get_g" in ln.header]
        if len(self.dialect.parallel) != len(par) or len(par) > 1:
            raise Unsupported(f"kernel {self.k.name}: the parallel loop is not the outermost one")
        return out

    def emit_gemm(self, st):
        raise Unsupported("internal: GEMMs are rendered by cl_gemm")

    def gen_scatter(self, dry, records=None):
        """Scatter-add (embedding backward) parallel over the columns: each work-item zeroes its columns
        of the output and adds the rows in order (no two work-items touch one element: no atomics, and
        the sums are in the same order as the C backend's)."""
        k = self.k
        st = k.stmts[0]
        n = st.node
        g2, i1 = n.inputs
        rows, d = g2.shape
        nw = n.attrs["rows"]
        skip = n.attrs["skip"]
        out = self.bufname(st.buffer)
        t = P.ctype(n.dtype)
        self.ranges["sj"] = (0, max(d - 1, 0))
        self.ranges["si"] = (0, max(rows - 1, 0))
        self.var_level["sj"] = 1
        self.var_level["si"] = 2
        sj = Scope(1)
        self.scopes.append(sj)
        self.emit(1, f"for (int64_t sw = 0; sw < {nw}L; sw++) {out}[sw * {d}L + sj] = ({t})0;")
        si = Scope(2)
        self.scopes.append(si)
        iv = self.val(i1, [Aff.var("si") if rows > 1 else Aff()])
        self.has_check = True
        self.emit(2, f"const int64_t id = {iv};")
        if skip >= 0:
            self.emit(2, f"if (id == {skip}L) continue;")
        self.emit(2, f"if ((uint64_t)id >= (uint64_t){nw}L) {{ em_err[0] = -1; em_err[1] = id; continue; }}")
        gv = self.val(g2, [Aff.var("si") if rows > 1 else Aff(), Aff.var("sj") if d > 1 else Aff()])
        self.emit(2, f"{out}[id * {d}L + sj] += {gv};")
        self.scopes.pop()
        sj.lines.append(Block(f"for (int64_t si = 0; si < {rows}L; si++)", si))
        self.scopes.pop()
        header, _ = self.dialect.loop("sj", d, parallel_work=max(rows, 1) * d)
        self.scopes[-1].lines.append(Block(header, sj))

    def gen_loop(self, dry, records=None):
        """With ``element``: the statements at one element, ``em_e`` (the linear index over the kernel's
        domain: a fused GEMM epilogue), no loops."""
        if not self.dialect.element:
            return super().gen_loop(dry, records)
        shape = self.k.outer
        total = int(np.prod(shape, dtype=np.int64)) if shape else 1
        self.ranges["em_e"] = (0, max(total - 1, 0))
        self.var_level["em_e"] = 0
        lin = [Aff.var("em_e")] if total > 1 else [Aff()]
        idx = L.reshape_index(tuple(shape), (total,), lin, self.ranges)
        for st in self.k.stmts:
            self.store_stmt(st, idx, 0)

    # ---- row kernels reduced by work-groups (GPU-style devices) -------------------------------------------
    def gen_row(self, dry, records=None):
        """Rows of at least ``WG_MIN_ROW`` elements on a GPU-style device: one work-group per row. Its
        work-items share out the row's innermost loop, keep partial accumulators, and combine them by a
        tree in local memory after each pass (every work-item then holds the row's result); a per-row
        value is stored by work-item 0, behind a barrier before anything reads it back. Otherwise one
        work-item per row (``KernelGen.gen_row``)."""
        d = self.dialect
        k = self.k
        inner = 1
        for n in k.inner:
            inner *= n
        if d.cpu or inner < WG_MIN_ROW or self.dev_wg < 2:
            return super().gen_row(dry, records)
        L_ = 1
        while L_ * 2 <= min(self.dev_wg, 256, max(inner, 1)):
            L_ *= 2
        d.wg = L_
        O, R = k.outer, k.inner
        og, rg, oidx, ridx = self.row_loops(dry, records)
        d.lane_var = rg[-1][0] if rg else None
        # local scratch (kernel scope): one array per accumulator type, one for argmax indices, one for flags
        types = {}
        for st in k.stmts:
            if st.role == "reduce":
                op, x = st.node.attrs["op"], st.node.inputs[0]
                types.setdefault(d.accumulator_type(op, x.dtype), f"em_red{len(types)}")
        self.emit(0, "const int em_lid = get_local_id(0);")
        for t, nm in types.items():
            self.emit(0, f"__local {t} {nm}[{L_}];")
        self.emit(0, f"__local long em_redi[{L_}];")
        self.red_arrays = types
        rows = int(np.prod(O, dtype=np.int64)) if O else 1
        close_o = self.open_loops(og, 0, parallel_work=rows * inner * len(k.stmts)) if og else (lambda: None)
        row_level = len(og)
        passes = self.row_passes(k.stmts)
        full_idx = oidx + ridx
        for kind, sts in passes:
            if kind == "outer":
                st = sts[0]
                extra = len(st.shape) - len(O)
                if self.store_stmt(st, oidx + [Aff()] * extra, row_level, guard="em_lid == 0"):
                    self.emit(row_level, "barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);")
                continue
            reds = [s for s in sts if s.role == "reduce"]
            accs = {s.node.id: self.reduce_init(s.node, row_level) for s in reds}
            close_r = self.open_loops(rg, row_level)
            lvl = row_level + len(rg)
            for s in sts:
                if s.role == "reduce":
                    v = self.val(s.node.inputs[0], full_idx)
                    self.reduce_update(s.node, accs[s.node.id], v, lvl, ridx, R)
                else:
                    self.store_stmt(s, full_idx, lvl)
            close_r()
            for s in reds:
                self._tree(s.node, accs[s.node.id], row_level, L_)
                self.locals_map[s.node.id] = self.reduce_final(s.node, accs[s.node.id], row_level)
        close_o()

    def _tree(self, n, acc, level, L_):
        """Combine the work-items' accumulators of reduction ``n`` through local memory."""
        op = n.attrs["op"]
        x = n.inputs[0]
        a, ai = acc
        arr = self.red_arrays[self.dialect.accumulator_type(op, x.dtype)]
        e = lambda line: self.emit(level, line)         # noqa: E731
        sync = "barrier(CLK_LOCAL_MEM_FENCE);"
        if op in ("argmax", "argmin"):
            cmp = ">" if op == "argmax" else "<"
            e(f"{arr}[em_lid] = {a}; em_redi[em_lid] = {ai}; {sync}")
            e(f"for (int em_s = {L_ // 2}; em_s > 0; em_s >>= 1) {{")
            e(f"  if (em_lid < em_s) {{ const {P.ctype(x.dtype)} av = {arr}[em_lid], bv = {arr}[em_lid + em_s]; "
              "const long ai = em_redi[em_lid], bi = em_redi[em_lid + em_s];")
            # NumPy's rule: the first NaN wins, then the first extreme
            e(f"    if ((bv != bv) ? (av == av || bi < ai) : (av == av && (bv {cmp} av || (bv == av && bi < ai)))) "
              f"{{ {arr}[em_lid] = bv; em_redi[em_lid] = bi; }} }}")
            e(f"  {sync}")
            e("}")
            e(f"{a} = {arr}[0]; {ai} = em_redi[0]; {sync}")
            return
        if op == "sum":
            comb = f"{arr}[em_lid] += {arr}[em_lid + em_s];"
        elif op == "prod":
            comb = f"{arr}[em_lid] *= {arr}[em_lid + em_s];"
        elif ai is not None:          # float max/min: values by comparison, NaN flags separately
            c = ">" if op == "max" else "<"
            comb = (f"if ({arr}[em_lid + em_s] {c} {arr}[em_lid]) {arr}[em_lid] = {arr}[em_lid + em_s]; "
                    "em_redi[em_lid] |= em_redi[em_lid + em_s];")
        else:
            comb = minmax_update(op, P.suffix(x.dtype), f"{arr}[em_lid]", f"{arr}[em_lid + em_s]")
        e(f"{arr}[em_lid] = {a};" + (f" em_redi[em_lid] = {ai};" if ai is not None else "") + f" {sync}")
        e(f"for (int em_s = {L_ // 2}; em_s > 0; em_s >>= 1) {{ if (em_lid < em_s) {{ {comb} }} {sync} }}")
        e(f"{a} = {arr}[0];" + (f" {ai} = em_redi[0];" if ai is not None else "") + f" {sync}")


class Launch:
    """One kernel enqueue: ``fn`` over ``bufs`` (Buffers, in parameter order), NDRange sizes."""

    __slots__ = ("fn", "bufs", "gsize", "lsize", "check", "label")

    def __init__(self, fn, bufs, gsize, lsize, check, label):
        self.fn = fn
        self.bufs = bufs
        self.gsize = gsize
        self.lsize = lsize
        self.check = check
        self.label = label

    def __repr__(self):
        return f"Launch({self.fn}, {[b.name for b in self.bufs]}, g={self.gsize}, l={self.lsize})"


class Device:
    """What rendering needs to know of the device (from a ``cl_device.Runtime`` or given)."""

    def __init__(self, fp64=True, is_cpu=True, compute_units=2, max_work_group=256):
        self.fp64 = fp64
        self.is_cpu = is_cpu
        self.compute_units = compute_units
        self.max_work_group = max_work_group

    @classmethod
    def of(cls, rt):
        return cls(rt.fp64, rt.is_cpu, rt.compute_units, rt.max_work_group)


def _clone(k, **changes):
    c = Kernel(k.kind)
    for s in Kernel.__slots__:
        setattr(c, s, getattr(k, s))
    for a, v in changes.items():
        setattr(c, a, v)
    return c


def _uses_f64(sched) -> bool:
    for k in sched.kernels:
        for st in k.prologue + k.stmts:
            stack, seen = [st.node], set()
            while stack:
                n = stack.pop()
                if n.id in seen:
                    continue
                seen.add(n.id)
                if n.dtype == np.float64:
                    return True
                stack.extend(n.inputs)
    return False


class Renderer:
    """Renders schedules into one OpenCL program (several schedules share it: forward and backward)."""

    def __init__(self, device: Device):
        self.dev = device
        self.funcs: dict = {}        # function text (with a placeholder name) -> name
        self.parts: list = []

    def source(self) -> str:
        return _ll(CL_HEAD + "\n" + "\n\n".join(self.parts) + "\n")

    def options(self) -> str:
        # -w: the shared code compares integers with themselves in NaN tests (always false for them)
        return "-w -DEM_FP64" if self.dev.fp64 else "-w"

    def _function(self, text: str) -> str:
        fn = self.funcs.get(text)
        if fn is None:
            fn = self.funcs[text] = f"kern{len(self.funcs)}"
            self.parts.append(text.replace("__FNAME__", fn))
        return fn

    def _grid(self, items):
        """(global, local) sizes for ``items`` work-items of a parallel loop."""
        if self.dev.is_cpu:
            return (items,), (1,)
        local = min(128, self.dev.max_work_group) if items >= 128 else (32 if items >= 32 else 1)
        return (-(-items // local) * local,), (local,)

    def render_schedule(self, sched, errors=()) -> list:
        """[(launches, step or None)] per segment of ``sched`` (kernels are added to this program)."""
        if _uses_f64(sched) and not self.dev.fp64:
            raise Unsupported("float64 values on a device without cl_khr_fp64")
        elidable = _elidable(sched)
        by_kernel = {}
        for k in sched.kernels:
            by_kernel[id(k)] = self._kernel(k, sched, errors, elidable.get(id(k), set()))
        return [([ln for k in ks for ln in by_kernel[id(k)]], step) for ks, step in sched.segments]

    def _kernel(self, k, sched, errors, elide) -> list:
        launches = []
        if k.prologue and (k.stmts or k.kind != "loop"):
            pro = _clone(k, kind="loop", outer=(), stmts=[], name=k.name + "_prologue")
            launches.append(self._loop_like(pro, sched, errors, set()))
            k = _clone(k, prologue=[])
        if k.kind == "matmul":
            fused = self._epilogue_fn(k, sched, errors, elide) if len(k.stmts) > 1 else None
            launches.append(self._gemm(k, sched, fused))
            if len(k.stmts) > 1 and fused is None:
                epi = _clone(k, kind="loop", outer=k.epi_shape, stmts=k.stmts[1:], name=k.name + "_epilogue")
                launches.append(self._loop_like(epi, sched, errors, elide))
            return [x for x in launches if x is not None]
        launches.append(self._loop_like(k, sched, errors, elide))
        return launches

    def _loop_like(self, k, sched, errors, elide) -> Launch:
        dev = self.dev
        g = _gen_kernel(k, sched, lambda b: "", errors, None, elide, gen_class=lambda *a: CLKernelGen(*a, dev=dev))
        bufs = [g.used[bid] for bid in g.order]
        params = []
        decls = []
        for i, b in enumerate(bufs):
            t = P.ctype(b.dtype)
            params.append(f"__global {t} *p{i}_, const long p{i}_o")
            decls.append(f"  __global {t} *p{i} = p{i}_ + p{i}_o;")
        if g.has_check:
            params.append("__global long *em_err")
        text = (f"__kernel void __FNAME__({', '.join(params) or 'const long em_unused'}) {{\n"
                + "\n".join(decls) + ("\n" if decls else "") + g.body + "\n}")
        fn = self._function(text)
        if g.dialect.wg:
            groups = g.dialect.parallel[0][2] if g.dialect.parallel else 1
            gs, ls = (groups * g.dialect.wg,), (g.dialect.wg,)
        elif g.dialect.parallel:
            gs, ls = self._grid(g.dialect.parallel[0][2])
        else:
            gs, ls = (1,), (1,)
        return Launch(fn, bufs, gs, ls, g.has_check, k.describe())

    def _epilogue_fn(self, k, sched, errors, elide):
        """The matmul's elementwise epilogue as a function of one element (fused into the GEMM kernel,
        called by the work-item that stored that element), or None when it cannot be: the epilogue must
        read the GEMM result only at the element it computes (else it would read other work-items'
        results) and collapse to one loop over the elements."""
        st = k.stmts[0]
        mm = sched.node_buffer.get(st.node.id)
        shape = k.epi_shape
        idx = [Aff.var(f"i{d}") if n > 1 else Aff() for d, n in enumerate(shape)]
        want = L.offset(idx, L.cstrides(shape)).key()
        acc = k.accesses.get(mm.id) if mm is not None else None
        if acc is None or acc["w"] or acc["r"] != {want}:
            return None
        epi = _clone(k, kind="loop", outer=shape, stmts=k.stmts[1:], prologue=[], name=k.name + "_epilogue")
        dev = self.dev
        try:
            g = _gen_kernel(epi, sched, lambda b: "", errors, None, elide,
                            gen_class=lambda *a: CLKernelGen(*a, dev=dev, element=True))
        except Unsupported:
            return None
        if g.has_check or "for (" in g.body:
            return None
        bufs = [g.used[bid] for bid in g.order]
        params, decls = [], []
        for i, b in enumerate(bufs):
            t = P.ctype(b.dtype)
            params.append(f"__global {t} *p{i}_, const long p{i}_o")
            decls.append(f"  __global {t} *p{i} = p{i}_ + p{i}_o;")
        fn = self._function(f"static inline void __FNAME__(const long em_e, {', '.join(params)}) {{\n"
                            + "\n".join(decls) + "\n" + g.body + "\n}")
        return fn, bufs

    def _gemm(self, k, sched, fused=None):
        st = k.stmts[0]
        n = st.node
        A, B = n.inputs
        nb, M, N = n.shape
        K = A.shape[2]
        if M * N == 0 or nb == 0:
            return None
        mat = sched.mat

        def is_leaf(x):
            return x.op == "load" or x.id in mat

        def operand(x):
            lay = L.strided_layout(x, is_leaf)
            if lay is None:
                raise Unsupported("internal: a GEMM operand is not a strided view")
            leaf, strides, off = lay
            buf = leaf.buffer if leaf.op == "load" else sched.node_buffer[leaf.id]
            return buf, strides, off

        abuf, (sab, sam, sak), aoff = operand(A)
        bbuf, (sbb, sbk, sbn), boff = operand(B)
        t = P.ctype(n.dtype)
        epi, extra = None, []
        if fused is not None:
            efn, extra = fused
            params = "".join(f", __global {P.ctype(b.dtype)} *q{i}_, const long q{i}_o" for i, b in enumerate(extra))
            args = "".join(f", q{i}_, q{i}_o" for i in range(len(extra)))
            epi = (params, lambda e, efn=efn, args=args: f"{efn}({e}{args});")
        text, gs, ls = cl_gemm.kernel("__FNAME__", t, nb, M, N, K, (sab if nb > 1 else 0, sam, sak, aoff),
                                      (sbb if nb > 1 else 0, sbk, sbn, boff), self.dev, epi=epi)
        fn = self._function(text)
        return Launch(fn, [st.buffer, abuf, bbuf] + list(extra), gs, ls, False, k.describe())


def _ll(src: str) -> str:
    """``123LL`` literals (C's long long) as ``123L`` (OpenCL C's long is 64-bit)."""
    return re.sub(r"\b(\d+)LL\b", r"\1L", src)
