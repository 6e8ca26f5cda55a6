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
UNARY = {
    "copy": {"f": "{0}", "i": "{0}", "u": "{0}", "b": "{0}"},      # a value copy (clone): a fusion barrier target
    "neg": {"f": "(-{0})", "i": "(-{0})"},
    "abs": {"f": "fabs{F}({0})", "i": "em_abs_{S}({0})", "u": "{0}", "b": "{0}"},
    "exp": {"f": "em_exp_{S}({0})"},         # branch-free, so loops vectorize: <= 1 ulp (libm's: 0.5)
    "exp2": {"f": "exp2{F}({0})"},
    "expm1": {"f": "expm1{F}({0})"},
    "log": {"f": "log{F}({0})"},
    "log2": {"f": "log2{F}({0})"},
    "log10": {"f": "log10{F}({0})"},
    "log1p": {"f": "log1p{F}({0})"},
    "sqrt": {"f": "sqrt{F}({0})"},
    "rsqrt": {"f": "(({T})1 / sqrt{F}({0}))"},
    "reciprocal": {"f": "(({T})1 / ({0}))"},
    "sin": {"f": "sin{F}({0})"}, "cos": {"f": "cos{F}({0})"}, "tan": {"f": "tan{F}({0})"},
    "asin": {"f": "asin{F}({0})"}, "acos": {"f": "acos{F}({0})"}, "atan": {"f": "atan{F}({0})"},
    "sinh": {"f": "sinh{F}({0})"}, "cosh": {"f": "cosh{F}({0})"}, "tanh": {"f": "tanh{F}({0})"},
    "asinh": {"f": "asinh{F}({0})"}, "acosh": {"f": "acosh{F}({0})"}, "atanh": {"f": "atanh{F}({0})"},
    # erf/erfc of float32 go through double: glibc's float versions differ from NumPy's by a few ulp
    "erf": {"f": "(({T})erf((double)({0})))"},
    "erfc": {"f": "(({T})erfc((double)({0})))"},
    "lgamma": {"f": "(({T})lgamma((double)({0})))"},
    "sigmoid": {"f": "em_sigmoid_{S}({0})"},
    "floor": {"f": "floor{F}({0})", "i": "{0}", "u": "{0}", "b": "{0}"},
    "ceil": {"f": "ceil{F}({0})", "i": "{0}", "u": "{0}", "b": "{0}"},
    "trunc": {"f": "trunc{F}({0})", "i": "{0}", "u": "{0}", "b": "{0}"},
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
    "atan2": {"f": "atan2{F}({0}, {1})"},
    "hypot": {"f": "hypot{F}({0}, {1})"},
    "copysign": {"f": "copysign{F}({0}, {1})"},
    "nextafter": {"f": "nextafter{F}({0}, {1})"},
    "fmod": {"f": "fmod{F}({0}, {1})"},
    "remainder": {"f": "em_remainder_{S}({0}, {1})"},       # Python's %: the sign of the divisor
    "floordiv": {"f": "em_floordiv_{S}({0}, {1})"},
    "lt": {"f": "(({0}) < ({1}))", "i": "(({0}) < ({1}))", "u": "(({0}) < ({1}))", "b": "(({0}) < ({1}))"},
    "le": {"f": "(({0}) <= ({1}))", "i": "(({0}) <= ({1}))", "u": "(({0}) <= ({1}))", "b": "(({0}) <= ({1}))"},
    "gt": {"f": "(({0}) > ({1}))", "i": "(({0}) > ({1}))", "u": "(({0}) > ({1}))", "b": "(({0}) > ({1}))"},
    "ge": {"f": "(({0}) >= ({1}))", "i": "(({0}) >= ({1}))", "u": "(({0}) >= ({1}))", "b": "(({0}) >= ({1}))"},
    "eq": {"f": "(({0}) == ({1}))", "i": "(({0}) == ({1}))", "u": "(({0}) == ({1}))", "b": "(({0}) == ({1}))"},
    "ne": {"f": "(({0}) != ({1}))", "i": "(({0}) != ({1}))", "u": "(({0}) != ({1}))", "b": "(({0}) != ({1}))"},
    "and": {"f": "((({0}) != 0) & (({1}) != 0))", "i": "((({0}) != 0) & (({1}) != 0))",
            "u": "((({0}) != 0) & (({1}) != 0))", "b": "(({0}) & ({1}))"},
    "or": {"f": "((({0}) != 0) | (({1}) != 0))", "i": "((({0}) != 0) | (({1}) != 0))",
           "u": "((({0}) != 0) | (({1}) != 0))", "b": "(({0}) | ({1}))"},
    "xor": {"f": "((({0}) != 0) ^ (({1}) != 0))", "i": "((({0}) != 0) ^ (({1}) != 0))",
            "u": "((({0}) != 0) ^ (({1}) != 0))", "b": "(({0}) ^ ({1}))"},
    "bitand": {"i": "(({0}) & ({1}))", "u": "(({0}) & ({1}))", "b": "(({0}) & ({1}))"},
    "bitor": {"i": "(({0}) | ({1}))", "u": "(({0}) | ({1}))", "b": "(({0}) | ({1}))"},
    "bitxor": {"i": "(({0}) ^ ({1}))", "u": "(({0}) ^ ({1}))", "b": "(({0}) ^ ({1}))"},
}

TERNARY = {
    # the condition is bool (0/1); both branches are evaluated (they are pure), which lets loops vectorize
    "where": {"f": "(({0}) ? ({1}) : ({2}))", "i": "(({0}) ? ({1}) : ({2}))", "u": "(({0}) ? ({1}) : ({2}))",
              "b": "(({0}) ? ({1}) : ({2}))"},
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
    if op in ("max", "argmax"):
        if dt.kind == "f":
            return f"(-({t})INFINITY)"
        if dt.kind == "b":
            return "0"
        return f"(({t}){np.iinfo(dt).min})" if dt != np.int64 else "INT64_MIN"
    if op in ("min", "argmin"):
        if dt.kind == "f":
            return f"(({t})INFINITY)"
        if dt.kind == "b":
            return "1"
        return f"(({t}){np.iinfo(dt).max})" if dt != np.int64 else "INT64_MAX"
    raise ValueError(op)


def accumulator_type(op: str, dtype) -> str:
    """C type a reduction accumulates in: float32 sums/products in double (more accurate than NumPy's
    pairwise sum, so both stay within rounding of the exact result)."""
    dt = np.dtype(dtype)
    if op in ("sum", "prod") and dt == np.float32:
        return "double"
    return ctype(dt)


C_PRELUDE = r"""/* ember primitives (ember.compiler.prims) */
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
static inline float em_sign_f32(float a) { return a > 0 ? 1.0f : (a < 0 ? -1.0f : 0.0f); }
static inline double em_sign_f64(double a) { return a > 0 ? 1.0 : (a < 0 ? -1.0 : 0.0); }
/* branch-free exp for float32 and float64: the loops that call them vectorize (libm's do not) */
static inline float em_exp_f32(float x) {
  /* exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln(2)/2; exp(r) by a degree-7 minimax fit */
  float xc = x < -103.5f ? -103.5f : (x > 88.8f ? 88.8f : x);
  float n = __builtin_rintf(xc * 1.44269504088896341f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  int32_t ni = (int32_t)n, n1 = ni >> 1, n2 = ni - n1;
  int32_t b1 = (n1 + 127) << 23, b2 = (n2 + 127) << 23;
  float s1, s2;
  __builtin_memcpy(&s1, &b1, 4);
  __builtin_memcpy(&s2, &b2, 4);
  float y = (p * s1) * s2;
  y = x > 88.72283935546875f ? (float)INFINITY : y;
  y = x < -103.972084045410f ? 0.0f : y;
  return x != x ? x : y;
}
static inline double em_exp_f64(double x) {
  /* n = round(x / ln 2), r = x - n ln 2 in two parts (n * ln2_hi is exact), exp(r) by Taylor to r^13 */
  double xc = x < -745.2 ? -745.2 : (x > 709.8 ? 709.8 : x);
  double n = __builtin_rint(xc * 1.4426950408889634);
  double r = xc - n * 6.93147180369123816490e-01;
  r = r - n * 1.90821492927058770002e-10;
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * (r * r) + r + 1.0;
  int64_t ni = (int64_t)n, n1 = ni >> 1, n2 = ni - n1;
  int64_t b1 = (n1 + 1023) << 52, b2 = (n2 + 1023) << 52;
  double s1, s2;
  __builtin_memcpy(&s1, &b1, 8);
  __builtin_memcpy(&s2, &b2, 8);
  double y = (p * s1) * s2;
  y = x > 709.782712893384 ? (double)INFINITY : y;
  y = x < -745.1332191019412 ? 0.0 : y;
  return x != x ? x : y;
}
static inline float em_sigmoid_f32(float x) { return 1.0f / (em_exp_f32(-x) + 1.0f); }
static inline double em_sigmoid_f64(double x) { return 1.0 / (em_exp_f64(-x) + 1.0); }
static inline float em_pow_f32(float a, float b) {
  if (b == 2.0f) return a * a;
  if (b == 1.0f) return a;
  if (b == 0.5f) return sqrtf(a);
  return powf(a, b);
}
static inline double em_pow_f64(double a, double b) {
  if (b == 2.0) return a * a;
  if (b == 1.0) return a;
  if (b == 0.5) return sqrt(a);
  return pow(a, b);
}
static inline float em_remainder_f32(float a, float b) {
  float r = fmodf(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
static inline double em_remainder_f64(double a, double b) {
  double r = fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
static inline float em_floordiv_f32(float a, float b) {
  if (b == 0) return a / b;
  float m = fmodf(a, b), d = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) d -= 1.0f;
  float f = floorf(d);
  if (d - f > 0.5f) f += 1.0f;
  return d == 0 ? copysignf(0.0f, a / b) : f;
}
static inline double em_floordiv_f64(double a, double b) {
  if (b == 0) return a / b;
  double m = fmod(a, b), d = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) d -= 1.0;
  double f = floor(d);
  if (d - f > 0.5) f += 1.0;
  return d == 0 ? copysign(0.0, a / b) : f;
}
"""


# ---- the primitive graph --------------------------------------------------------------------------------

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
        n = 1
        for s in self.shape:
            n *= s
        return n

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
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.seq = seq
        self.buffer = buffer
        self.version = version
        self.where = ""

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

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
