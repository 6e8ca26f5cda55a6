"""The closed set of primitives the native backend understands, in one place.

Every registered op reaches the code generator either as a graph of these primitives (its
decomposition, ``decompose.py``) or as an ``extern`` call of its NumPy kernel. Nothing else exists
for the scheduler and the C renderer.

Values (``PNode``) are pure and shape-specialised: each has a ``shape`` (tuple of ints) and a NumPy
``dtype``. The primitives, grouped:

leaves
    ``load``      the current contents of a buffer (attrs: buffer, version). A buffer changes only
                  through an in-place write; the version counts those writes, so two loads of the
                  same buffer on either side of a write are different values.
    ``const``     a Python scalar in a dtype, shape ``()``
    ``iota``      the index along one axis of a shape, as a value (attrs: axis)
elementwise       (all tensor inputs have the node's shape; broadcasting is an explicit ``expand``)
    unary         ``UNARY`` below: neg abs exp log sqrt rsqrt tanh sigmoid erf floor ... not
    binary        ``BINARY``: add sub mul div max min pow fmod lt le gt ge eq ne and or ...
    ternary       ``where(cond, a, b)``
    ``cast``      convert to the node's dtype (C conversion; bool is ``x != 0``)
views             index maps, no data movement (a view of a buffer is a strided layout of it)
    ``reshape``   row-major reinterpretation (attrs: none; the node's shape is the new shape)
    ``permute``   attrs: axes
    ``expand``    broadcast size-1 dims to the node's shape (same rank)
    ``slice``     attrs: starts, steps per dim (negative steps allowed: flip)
reductions        attrs: op, axes, keepdims
    ``reduce``    op in sum / prod / max / min / argmax / argmin (float32 sums accumulate in double)
indexing
    ``gather``    ``out[i] = x[i with axis -> index[i]]`` (attrs: axis, check); ``index`` int64 with
                  the output's shape. ``check`` records an out-of-range index in the error slot
    ``scatter_add`` ``out = zeros(shape); out[index[i], ...] += src[i, ...]`` along axis 0 (attrs: skip)
data movement
    ``matmul``    (B, M, K) @ (B, K, N) or 2-D; runs as cblas_sgemm/dgemm (transposes are BLAS flags)
    ``extern``    call the op's NumPy kernel from Python between native segments (its outputs are
                  buffers); ``extern_out`` picks output i

Dtypes handled natively: float32, float64, int64, int32, int16, int8, uint8, bool. Others (float16,
bfloat16, complex) make the op extern.

The C side of each elementwise primitive is a template per dtype class (``f`` float, ``i`` signed
integer, ``u`` unsigned, ``b`` bool) over C helper functions defined in ``C_PRELUDE``; a missing class
means "not native for that dtype" and the decomposition falls back to an extern call.
"""
from __future__ import annotations

import math

import numpy as np

from .symbolic import SymInt, C_TEXT as _SYMBOLIC

# ---- dtypes -------------------------------------------------------------------------------------------

C_TYPES = {
    np.dtype(np.float32): ("float", "f32"),
    np.dtype(np.float64): ("double", "f64"),
    np.dtype(np.int64): ("int64_t", "i64"),
    np.dtype(np.int32): ("int32_t", "i32"),
    np.dtype(np.int16): ("int16_t", "i16"),
    np.dtype(np.int8): ("int8_t", "i8"),
    np.dtype(np.uint8): ("uint8_t", "u8"),
    np.dtype(np.bool_): ("uint8_t", "b8"),
}


def native_dtype(dt) -> bool:
    """True when ``dt`` (a NumPy dtype) is computed by generated C."""
    try:
        return np.dtype(dt) in C_TYPES
    except TypeError:
        return False


def ctype(dt) -> str:
    return C_TYPES[np.dtype(dt)][0]


def suffix(dt) -> str:
    return C_TYPES[np.dtype(dt)][1]


def dclass(dt) -> str:
    """'f' float, 'i' signed int, 'u' unsigned int, 'b' bool."""
    k = np.dtype(dt).kind
    return {"f": "f", "i": "i", "u": "u", "b": "b"}[k]


# ---- elementwise primitives ------------------------------------------------------------------------------
# templates: {0} {1} {2} are operands (already in the compute dtype), {T} the C type, {S} the dtype
# suffix (f32, f64, i64 ...), {F} the libm suffix ("f" for float, "" for double)

_F = "f"


def _libm(*names, arity=1):
    """Primitives that are the libm function of the same name on floats (``sinf`` / ``sin``)."""
    args = ", ".join(f"{{{i}}}" for i in range(arity))
    return {n: {"f": f"{n}{{F}}({args})"} for n in names}


def _every(expr):
    """The same C expression in every dtype class."""
    return {c: expr for c in "fiub"}


def _logical(op):
    """A logical and/or/xor: operands compare with zero, bools combine bitwise."""
    return {**_every(f"((({{0}}) != 0) {op} (({{1}}) != 0))"), "b": f"(({{0}}) {op} ({{1}}))"}


_INT_IDENTITY = {"i": "{0}", "u": "{0}", "b": "{0}"}   # rounding an integer leaves it as it is

UNARY = {
    "copy": {"f": "{0}", "i": "{0}", "u": "{0}", "b": "{0}"},      # a value copy (clone): a fusion barrier target
    "neg": {"f": "(-{0})", "i": "(-{0})"},
    "abs": {"f": "fabs{F}({0})", "i": "em_abs_{S}({0})", "u": "{0}", "b": "{0}"},
    "exp": {"f": "em_exp_{S}({0})"},         # branch-free, so loops vectorize: <= 1 ulp (libm's: 0.5)
    **_libm("exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt"),
    "rsqrt": {"f": "(({T})1 / sqrt{F}({0}))"},
    "reciprocal": {"f": "(({T})1 / ({0}))"},
    **_libm("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh"),
    # erf/erfc of float32 go through double: glibc's float versions differ from NumPy's by a few ulp
    "erf": {"f": "(({T})erf((double)({0})))"},
    "erfc": {"f": "(({T})erfc((double)({0})))"},
    "lgamma": {"f": "(({T})lgamma((double)({0})))"},
    "sigmoid": {"f": "em_sigmoid_{S}({0})"},
    **{n: {**f, **_INT_IDENTITY} for n, f in _libm("floor", "ceil", "trunc").items()},
    "round": {"f": "nearbyint{F}({0})", "i": "{0}", "u": "{0}"},          # half to even, as NumPy
    "sign": {"f": "em_sign_{S}({0})", "i": "em_sign_{S}({0})", "u": "(({0}) > 0)", "b": "{0}"},
    "signbit": {"f": "(signbit({0}) != 0)", "i": "(({0}) < 0)", "u": "0", "b": "0"},
    "isnan": {"f": "isnan({0})", "i": "0", "u": "0", "b": "0"},
    "isinf": {"f": "isinf({0})", "i": "0", "u": "0", "b": "0"},
    "isfinite": {"f": "isfinite({0})", "i": "1", "u": "1", "b": "1"},
    "not": {"f": "(({0}) == 0)", "i": "(({0}) == 0)", "u": "(({0}) == 0)", "b": "(!({0}))"},
    "bitnot": {"i": "(~({0}))", "u": "(({T})~({0}))", "b": "(!({0}))"},
}

BINARY = {
    "add": {"f": "(({0}) + ({1}))", "i": "(({T})(({0}) + ({1})))", "u": "(({T})(({0}) + ({1})))",
            "b": "(({0}) | ({1}))"},
    "sub": {"f": "(({0}) - ({1}))", "i": "(({T})(({0}) - ({1})))", "u": "(({T})(({0}) - ({1})))"},
    "mul": {"f": "(({0}) * ({1}))", "i": "(({T})(({0}) * ({1})))", "u": "(({T})(({0}) * ({1})))",
            "b": "(({0}) & ({1}))"},
    "div": {"f": "(({0}) / ({1}))"},
    "max": {"f": "em_max_{S}({0}, {1})", "i": "em_max_{S}({0}, {1})", "u": "em_max_{S}({0}, {1})",
            "b": "(({0}) | ({1}))"},
    "min": {"f": "em_min_{S}({0}, {1})", "i": "em_min_{S}({0}, {1})", "u": "em_min_{S}({0}, {1})",
            "b": "(({0}) & ({1}))"},
    "fmax": {"f": "fmax{F}({0}, {1})", "i": "em_max_{S}({0}, {1})", "u": "em_max_{S}({0}, {1})"},
    "fmin": {"f": "fmin{F}({0}, {1})", "i": "em_min_{S}({0}, {1})", "u": "em_min_{S}({0}, {1})"},
    "pow": {"f": "em_pow_{S}({0}, {1})"},
    **_libm("atan2", "hypot", "copysign", "nextafter", "fmod", arity=2),
    "remainder": {"f": "em_remainder_{S}({0}, {1})"},       # Python's %: the sign of the divisor
    "floordiv": {"f": "em_floordiv_{S}({0}, {1})"},
    **{n: _every(f"(({{0}}) {op} ({{1}}))") for n, op in
       (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="), ("eq", "=="), ("ne", "!="))},
    "and": _logical("&"), "or": _logical("|"), "xor": _logical("^"),
    # bitwise ops on integers and bools (floats have none)
    **{n: {c: f"(({{0}}) {op} ({{1}}))" for c in "iub"}
       for n, op in (("bitand", "&"), ("bitor", "|"), ("bitxor", "^"))},
}

TERNARY = {
    # the condition is bool (0/1); both branches are evaluated (they are pure), which lets loops vectorize
    "where": _every("(({0}) ? ({1}) : ({2}))"),
}

# unary/binary primitives whose result is bool whatever the operand dtype
BOOL_RESULT = {"isnan", "isinf", "isfinite", "not", "signbit", "lt", "le", "gt", "ge", "eq", "ne",
               "and", "or", "xor"}

ELEMENTWISE = {**UNARY, **BINARY, **TERNARY}
VIEWS = ("reshape", "permute", "expand", "slice")
REDUCE_OPS = ("sum", "prod", "max", "min", "argmax", "argmin")
OTHER = ("load", "const", "iota", "cast", "reduce", "gather", "scatter_add", "matmul", "extern", "extern_out")
ALL = tuple(ELEMENTWISE) + VIEWS + OTHER


def supports(prim: str, dtype) -> bool:
    """Whether elementwise ``prim`` computes natively in ``dtype`` (the operand/compute dtype)."""
    if not native_dtype(dtype):
        return False
    table = ELEMENTWISE.get(prim)
    return table is not None and dclass(dtype) in table


def render(prim: str, dtype, operands: list) -> str:
    """The C expression of elementwise ``prim`` computed in ``dtype`` over operand expressions."""
    cls = dclass(dtype)
    tpl = ELEMENTWISE[prim][cls]
    dt = np.dtype(dtype)
    return tpl.format(*operands, T=ctype(dt), S=suffix(dt), F="f" if dt == np.float32 else "")


def literal(value, dtype) -> str:
    """A C literal of ``value`` converted to ``dtype`` the way NumPy converts a Python scalar."""
    dt = np.dtype(dtype)
    if type(value) is SymInt and dt.kind != "b":
        return f"(({ctype(dt)}){value})"        # a size (a mean's count): its C expression
    if dt.kind == "b":
        return "1" if bool(value) else "0"
    if dt.kind in "iu":
        v = int(value)
        if dt == np.int64:
            return f"INT64_C({v})" if v != -(1 << 63) else "INT64_MIN"
        return f"(({ctype(dt)}){v})"
    v = float(dt.type(value))           # round to the dtype first (float32(0.01), as NumPy does)
    t = ctype(dt)
    if math.isnan(v):
        return f"(({t})NAN)"
    if math.isinf(v):
        return f"(({t})INFINITY)" if v > 0 else f"(-({t})INFINITY)"
    if v == int(v) and abs(v) < 2 ** 53:
        s = f"{int(v)}.0"
        if v == 0 and math.copysign(1.0, v) < 0:
            s = "-0.0"
    else:
        # shortest text that parses back to exactly v in its own precision
        s = str(np.float32(v)) if dt == np.float32 else repr(v)
        if not any(ch in s for ch in ".en"):
            s += ".0"
    return s + ("f" if dt == np.float32 else "")


# identity elements of reductions, per dtype class
def reduce_init(op: str, dtype) -> str:
    dt = np.dtype(dtype)
    t = ctype(dt)
    if op == "sum":
        return "0"
    if op == "prod":
        return "1"
    if op not in ("max", "argmax", "min", "argmin"):
        raise ValueError(op)
    lowest = op.endswith("max")         # a max starts from the lowest value of the dtype, a min the highest
    if dt.kind == "f":
        return f"(-({t})INFINITY)" if lowest else f"(({t})INFINITY)"
    if dt.kind == "b":
        return "0" if lowest else "1"
    if dt == np.int64:
        return "INT64_MIN" if lowest else "INT64_MAX"
    return f"(({t}){np.iinfo(dt).min if lowest else np.iinfo(dt).max})"


def accumulator_type(op: str, dtype) -> str:
    """C type a reduction accumulates in: float32 sums/products in double (more accurate than NumPy's
    pairwise sum, so both stay within rounding of the exact result)."""
    dt = np.dtype(dtype)
    if op in ("sum", "prod") and dt == np.float32:
        return "double"
    return ctype(dt)


_PRELUDE_TEMPLATE = r"""/* ember primitives (ember.compiler.prims) */
#include <stdint.h>
#include <stddef.h>
#include <math.h>
#include <string.h>
#include <stdlib.h>
#define EM_MINMAX(T, S) \
  static inline T em_max_##S(T a, T b) { return (a > b || a != a) ? a : b; } \
  static inline T em_min_##S(T a, T b) { return (a < b || a != a) ? a : b; }
EM_MINMAX(float, f32) EM_MINMAX(double, f64) EM_MINMAX(int64_t, i64) EM_MINMAX(int32_t, i32)
EM_MINMAX(int16_t, i16) EM_MINMAX(int8_t, i8) EM_MINMAX(uint8_t, u8) EM_MINMAX(uint8_t, b8)
#define EM_INTABS(T, S) static inline T em_abs_##S(T a) { return a < 0 ? (T)-a : a; } \
  static inline T em_sign_##S(T a) { return (T)((a > 0) - (a < 0)); }
EM_INTABS(int64_t, i64) EM_INTABS(int32_t, i32) EM_INTABS(int16_t, i16) EM_INTABS(int8_t, i8)
{exp}/* float helpers, for T = float (S = f32, F = f: the libm names) and double (f64, F empty) */
#define EM_FLOAT(T, S, F) \
  static inline T em_sign_##S(T a) { return a > 0 ? (T)1 : (a < 0 ? (T)-1 : (T)0); } \
  static inline T em_sigmoid_##S(T x) { return (T)1 / (em_exp_##S(-x) + (T)1); } \
  static inline T em_pow_##S(T a, T b) { \
    if (b == (T)2) return a * a; \
    if (b == (T)1) return a; \
    if (b == (T)0.5) return sqrt##F(a); \
    return pow##F(a, b); } \
  static inline T em_remainder_##S(T a, T b) { \
    T r = fmod##F(a, b); \
    if (r != 0 && ((r < 0) != (b < 0))) r += b; \
    return r; } \
  static inline T em_floordiv_##S(T a, T b) { \
    if (b == 0) return a / b; \
    T m = fmod##F(a, b), d = (a - m) / b; \
    if (m != 0 && ((b < 0) != (m < 0))) d -= (T)1; \
    T f = floor##F(d); \
    if (d - f > (T)0.5) f += (T)1; \
    return d == 0 ? copysign##F((T)0, a / b) : f; }
EM_FLOAT(float, f32, f) EM_FLOAT(double, f64, )
"""

# branch-free exp per float type (the loops that call it vectorize; libm's does not):
# exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in two parts (n * ln2_hi is exact), exp(r) by a
# polynomial in Horner form (float32: a degree-7 minimax fit; float64: Taylor to r^13); 2^n is built from
# two exponent fields so that n up to the clamp does not overflow one.
_EXP = (  # (T, S, literal suffix, rint, int type, exponent bias, mantissa bits, clamp lo, clamp hi,
          #  1/ln2, ln2_hi, ln2_lo, coefficients from the highest, overflow above, underflow below)
    ("float", "f32", "f", "__builtin_rintf", "int32_t", 127, 23, "-103.5f", "88.8f", "1.44269504088896341f",
     "0.693359375f", "-2.12194440e-4f",
     ("1.9875691500e-4f", "1.3981999507e-3f", "8.3334519073e-3f", "4.1665795894e-2f", "1.6666665459e-1f",
      "5.0000001201e-1f"), "88.72283935546875f", "-103.972084045410f"),
    ("double", "f64", "", "__builtin_rint", "int64_t", 1023, 52, "-745.2", "709.8", "1.4426950408889634",
     "6.93147180369123816490e-01", "1.90821492927058770002e-10",
     ("1.0 / 6227020800.0", "1.0 / 479001600.0", "1.0 / 39916800.0", "1.0 / 3628800.0", "1.0 / 362880.0",
      "1.0 / 40320.0", "1.0 / 5040.0", "1.0 / 720.0", "1.0 / 120.0", "1.0 / 24.0", "1.0 / 6.0", "0.5"),
     "709.782712893384", "-745.1332191019412"),
)


def _exp_c(T, S, L, rint, I, bias, mant, lo, hi, inv_ln2, ln2_hi, ln2_lo, coeffs, over, under) -> str:
    horner = "".join(f"  p = p * r + {c};\n" for c in coeffs[1:])
    width = int(I[3:5]) // 8
    return (f"static inline {T} em_exp_{S}({T} x) {{\n"
            f"  {T} xc = x < {lo} ? {lo} : (x > {hi} ? {hi} : x);\n"
            f"  {T} n = {rint}(xc * {inv_ln2});\n"
            f"  {T} r = xc - n * {ln2_hi};\n"
            f"  r = r - n * {ln2_lo};\n"
            f"  {T} p = {coeffs[0]};\n{horner}"
            f"  p = p * (r * r) + r + 1.0{L};\n"
            f"  {I} ni = ({I})n, n1 = ni >> 1, n2 = ni - n1;\n"
            f"  {I} b1 = (n1 + {bias}) << {mant}, b2 = (n2 + {bias}) << {mant};\n"
            f"  {T} s1, s2;\n"
            f"  __builtin_memcpy(&s1, &b1, {width});\n"
            f"  __builtin_memcpy(&s2, &b2, {width});\n"
            f"  {T} y = (p * s1) * s2;\n"
            f"  y = x > {over} ? ({T})INFINITY : y;\n"
            f"  y = x < {under} ? 0.0{L} : y;\n"
            f"  return x != x ? x : y;\n}}\n")


C_PRELUDE = _PRELUDE_TEMPLATE.replace("{exp}", "".join(_exp_c(*row) for row in _EXP))



# ---- the primitive graph --------------------------------------------------------------------------------

def sizes(shape) -> tuple:
    """``shape`` as a tuple of Python ints, SymInts (symbolic sizes) kept."""
    return tuple(s if type(s) is SymInt else int(s) for s in shape)


def same_shape(a, b) -> bool:
    """``a == b`` for shapes; while a symbolic program compiles, a SymInt equals only a SymInt of the
    same expression (no guard: a size that equals a constant at the hint is not the constant)."""
    if not _SYMBOLIC[0]:
        return a == b
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if type(x) is SymInt or type(y) is SymInt:
            if type(x) is not type(y) or x.expr != y.expr:
                return False
        elif x != y:
            return False
    return True


def broadcast_shapes(*shapes) -> tuple:
    """NumPy's broadcast of ``shapes``, SymInts kept (a decision on one becomes a guard)."""
    if not any(type(s) is SymInt for sh in shapes for s in sh):
        return np.broadcast_shapes(*shapes)
    nd = max(len(sh) for sh in shapes)
    out = []
    for d in range(nd):
        n = 1
        for sh in shapes:
            k = len(sh) - nd + d
            if k < 0 or sh[k] == 1:
                continue
            if n == 1:
                n = sh[k]
            elif sh[k] != n:
                raise ValueError(f"shapes {shapes} do not broadcast")
        out.append(n)
    return tuple(out)


class Buffer:
    """A named piece of memory a native program reads or writes.

    kind: ``arg`` / ``lifted`` / ``const`` / ``grad_in`` / ``fwd`` (inputs bound per call), ``extern``
    (an extern kernel's result), ``temp`` (an intermediate the scheduler materialised: planned in the
    arena unless it escapes), ``out`` (a fresh array per call: outputs, new ``.grad`` tensors, values
    the backward reads). Buffers are C-contiguous; ``version`` counts in-place writes so far.
    """

    __slots__ = ("id", "kind", "shape", "dtype", "value", "version", "escapes", "data", "name", "written")

    def __init__(self, id, kind, shape, dtype, value=None):
        self.id = id
        self.kind = kind
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.value = value          # the program Value bound to it (inputs), if any
        self.version = 0
        self.escapes = False        # must be a fresh array each call (returned, saved, a .grad)
        self.data = None            # a persistent ndarray (baked consts)
        self.name = f"b{id}"
        self.written = False

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    def __repr__(self):
        return f"{self.name}:{self.kind}{list(self.shape)}{self.dtype.name}"


class PNode:
    """A pure primitive value: ``op`` over ``inputs`` (PNodes) with hashable ``attrs``."""

    __slots__ = ("id", "op", "inputs", "attrs", "shape", "dtype", "seq", "buffer", "version", "where")

    def __init__(self, id, op, inputs, attrs, shape, dtype, seq, buffer=None, version=0):
        self.id = id
        self.op = op
        self.inputs = tuple(inputs)
        self.attrs = attrs
        self.shape = sizes(shape)
        self.dtype = np.dtype(dtype)
        self.seq = seq
        self.buffer = buffer
        self.version = version
        self.where = ""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def __repr__(self):
        if self.op == "load":
            return f"t{self.id}=load({self.buffer.name}@v{self.version})"
        if self.op == "const":
            return f"t{self.id}=const({self.attrs['value']!r})"
        ins = ", ".join(f"t{i.id}" for i in self.inputs)
        at = {k: v for k, v in self.attrs.items() if k != "op_node"} if isinstance(self.attrs, dict) else {}
        a = (", " + ", ".join(f"{k}={v!r}" for k, v in at.items())) if at else ""
        return f"t{self.id}={self.op}({ins}{a}):{self.dtype.name}{list(self.shape)}"


class Effect:
    """Something a program does besides computing values, in program order (``seq``).

    kind ``write``: store ``source`` into ``target`` (a view chain over a load of ``buffer``);
    ``setgrad``: give ``leaf`` (a program Value) the buffer of ``source`` (or None) as its ``.grad``;
    ``extern``: run ``op_node``'s NumPy kernel on ``args`` into ``outs`` (buffers);
    ``read``: a graph break: Python reads ``source`` and checks it against ``read_node``.
    """

    __slots__ = ("kind", "seq", "buffer", "target", "source", "leaf", "op_node", "args", "attrs", "outs",
                 "read_node", "grad_buffer", "reason")

    def __init__(self, kind, seq, **kw):
        self.kind = kind
        self.seq = seq
        self.buffer = self.target = self.source = self.leaf = self.op_node = None
        self.args = self.attrs = self.outs = self.read_node = self.grad_buffer = None
        self.reason = ""
        for k, v in kw.items():
            setattr(self, k, v)

    def reads(self) -> list:
        """The primitive values this effect reads (its write target is an address, not a read)."""
        if self.kind in ("write", "read", "setgrad"):
            return [] if self.source is None else [self.source]
        if self.kind == "extern":
            return [a for a in list(self.args) + list((self.attrs or {}).values()) if isinstance(a, PNode)]
        return []

    def __repr__(self):
        if self.kind == "write":
            return f"write {self.buffer.name} <- t{self.source.id}"
        if self.kind == "setgrad":
            return f"setgrad %{self.leaf.id} <- {None if self.source is None else 't%d' % self.source.id}"
        if self.kind == "extern":
            return f"extern {self.op_node.op.name} -> {[b.name for b in self.outs]}  # {self.reason}"
        return f"read t{self.source.id}"
