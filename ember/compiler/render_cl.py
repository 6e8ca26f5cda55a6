"""OpenCL C from the compiler's schedule: the loop IR of ``render_c.py`` in another dialect.

``render_schedule(sched, ...)`` turns each scheduled kernel into one or more ``__kernel`` functions and a
launch plan; the statements, expressions, index arithmetic, loop collapsing, hoisting and register
forwarding are ``render_c.KernelGen``'s (the same code renders C), parameterised by :class:`CLDialect`:

- the kernel's parallel loop (the outermost loop, which C runs under OpenMP) becomes a grid-stride loop
  over work-items: ``for (v = get_global_id(0) * step; v < ext; v += get_global_size(0) * step)``.
  Elementwise kernels: one work-item per (collapsed) element; row kernels (softmax, layer norm, sums
  over trailing dims): one work-item per row; reductions over leading dims: one work-item per kept
  column (``colreduce_block = 1``: C accumulates 256 columns per thread, a work-item one). A kernel
  without a parallel loop (a whole-tensor reduction, a scatter-add) runs as one work-item.
- statements C runs before the loop (a kernel's scalar prologue, e.g. an optimizer's step count
  ``t += 1``) become their own one-work-item kernel: run by every work-item they would race.
- matmuls are generated tiled GEMM kernels (``cl_gemm.py``); their fused epilogue is the next kernel.
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
from .render_special import Block

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
            inc = f"{var}++" if step == 1 else f"{var} += {step}"
            return f"for (int64_t {var} = 0; {var} < {ext}L; {inc})", None
        items = max(1, -(-int(ext) // step))
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

    def __init__(self, k, sched, slot_of, errors, options, dialect=None, dev=None):
        dev = dev or Device()
        super().__init__(k, sched, slot_of, errors, options, CLDialect(dev.fp64, cpu=dev.is_cpu,
                                                                       units=dev.compute_units))
        self.dialect.owner = self

    def gen(self):
        self.dialect.parallel = []
        out = super().gen()
        root = self.scopes[0]
        par = [ln for ln in root.lines if isinstance(ln, Block) and "get_global_id" in ln.header]
        if len(self.dialect.parallel) != len(par) or len(par) > 1:
            raise Unsupported(f"kernel {self.k.name}: the parallel loop is not the outermost one")
        return out

    def emit_gemm(self, st):
        raise Unsupported("internal: GEMMs are rendered by cl_gemm")


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
        return "-DEM_FP64" if self.dev.fp64 else ""

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
            launches.append(self._gemm(k, sched))
            if len(k.stmts) > 1:
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
        if g.dialect.parallel:
            gs, ls = self._grid(g.dialect.parallel[0][2])
        else:
            gs, ls = (1,), (1,)
        return Launch(fn, bufs, gs, ls, g.has_check, k.describe())

    def _gemm(self, k, sched):
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
        text, gs, ls = cl_gemm.kernel("__FNAME__", t, nb, M, N, K, (sab if nb > 1 else 0, sam, sak, aoff),
                                      (sbb if nb > 1 else 0, sbk, sbn, boff), self.dev)
        fn = self._function(text)
        return Launch(fn, [st.buffer, abuf, bbuf], gs, ls, False, k.describe())


def _ll(src: str) -> str:
    """``123LL`` literals (C's long long) as ``123L`` (OpenCL C's long is 64-bit)."""
    return re.sub(r"\b(\d+)LL\b", r"\1L", src)
