"""Unary elementwise math: exp/log, powers, trigonometric and hyperbolic functions, sigmoid/logit, special
functions (erf, lgamma, digamma, polygamma, i0); the piecewise ops that keep the dtype (sign, abs,
rounding, relu, classification, nan_to_num, clamp) are in ``unary_piecewise``, on the helpers here.

Each op is registered once with a NumPy kernel and a derivative written in ember ops.

- Float-valued ops (exp, sin, sigmoid, erf, ...) come from one factory, ``_float_unary``: integer and
  bool inputs are cast to the default float dtype first, as torch does; float16/bfloat16 stay in their
  dtype (composite kernels compute them in float32, the special functions in float64).
- Ops that keep the input dtype (square here; abs, sign, floor/ceil/trunc/round, relu, nan_to_num,
  clamp in ``unary_piecewise``) are written out, since each has its own rules for integer and bool inputs.

The hot path of a float op on a float tensor is one class check, one dtype check and ``apply``.
``_inplace_of`` makes the in-place methods (``exp_``) and ``_expose`` attaches names and aliases.
Derivatives of piecewise ops (clamp, relu, logit with eps, sinc at 0, nan_to_num, i1 at 0) go through
one masking op, ``where_mask``, so they follow torch's conventions at the kinks and stay differentiable.

NumPy's floating-point warnings (log(0), overflow in exp, ...) are silenced for the kernels in this
module: torch returns inf/nan there without warnings, and a per-call ``np.errstate`` would double
the cost of a small op.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from .registry import register, apply, attach, dtype_name
from .elementwise import _out
from .inplace import write_result
from . import _special
from .._native import eager_kernels as _native

warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"ember\.ops\.(unary|unary_piecewise|_special)$")

_FLOAT = 2
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_number = (int, float, bool, np.number, np.bool_)

__all__: list = []


# ---- argument checks and kernel wrappers ------------------------------------------------------------

def _check(x, name: str) -> Tensor:
    """The slow-path check of a unary op's ``input``: a Tensor, or a TypeError naming the op."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")
    return x


def _to_float(x, name: str) -> Tensor:
    """Input of a float-valued op: integer and bool tensors become the default float dtype."""
    _check(x, name)
    if x._dtype.category == _FLOAT:
        return x
    if x._dtype.is_complex:
        if name in COMPLEX_OK:
            return x
        raise _not_implemented(name, x._dtype)
    return x.to(_dt.get_default_dtype())


# the float-valued ops torch also computes on complex tensors (their derivatives follow
# complex_ops.holomorphic); any other one refuses a complex input
COMPLEX_OK = frozenset({"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
                        "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
                        "atanh", "sigmoid", "sinc", "arcsin", "arccos", "arctan", "arcsinh", "arccosh",
                        "arctanh"})


def _not_implemented(name: str, dt) -> NotImplementedError:
    # torch's wording for a kernel missing for a dtype (NotImplementedError is a RuntimeError)
    return NotImplementedError(f'"{name}" not implemented for \'{dtype_name(dt)}\'')


def _half_in_float32(f):
    """Kernel wrapper: float16/bfloat16 inputs are computed in float32 and rounded back (torch's opmath)."""
    def k(x, **kw):
        if x.dtype.itemsize == 2:
            return np.asarray(f(x.astype(np.float32), **kw)).astype(x.dtype)
        return f(x, **kw)
    return k


def _in_float64(f, takes_tol: bool = False):
    """Kernel wrapper for the special functions, which are written for flat float64 arrays."""
    def k(x, **kw):
        if x.dtype != np.float64 and takes_tol:
            kw["tol"] = 1e-10       # float32 and narrower need far fewer series terms
        flat = x.astype(np.float64).reshape(-1)      # a fresh 1-d copy (0-d inputs included)
        return f(flat, **kw).reshape(x.shape).astype(x.dtype, copy=False)
    return k


def _quiet(f):
    """Call a NumPy ufunc from this module, so the module's warning filter covers its FP warnings."""
    def k(x):
        return f(x)
    k.__name__ = f.__name__
    return k


def _zeros_bw(ctx, g):
    """Derivative of a piecewise-constant op (floor, sign, ...): zeros, as torch gives."""
    from .creation import zeros_like
    return (zeros_like(g),) + (None,) * (len(ctx.edges) - 1)


def _cast_error(result_dtype, self) -> RuntimeError:
    """The error of an in-place op whose result (of ``result_dtype``) ``self`` cannot hold."""
    return RuntimeError(f"result type {dtype_name(result_dtype)} can't be cast to the desired output type "
                        f"{dtype_name(self._dtype)}")


def _float_result(self, iname: str, args, kw) -> None:
    """In-place check for an op with a floating result: an integral ``self`` cannot hold it."""
    if _check(self, iname)._dtype.category < _FLOAT:
        raise _cast_error(_dt.get_default_dtype(), self)


def _inplace_of(fn, name: str, check=None):
    """The ``op_`` method: ``check(self, "op_", args, kw)`` (when given) raises if ``self`` cannot hold the
    result, then ``fn(self, ...)`` is computed and written back into ``self``."""
    iname = name + "_"

    def method(self, *args, **kw):
        if check is not None:
            check(self, iname, args, kw)
        return write_result(self, lambda s: fn(s, *args, **kw), iname)
    method.__name__ = iname
    method.__doc__ = f"In-place version of :func:`{name}`."
    return method


def _expose(names, fn, fn_=None, fn_inplace: bool = True, into: list = __all__) -> None:
    """Attach ``fn`` as ``ember.<name>`` / ``Tensor.<name>`` and the in-place form as ``<name>_``; list the
    names in ``into`` (the defining module's ``__all__``)."""
    for n in names:
        attach(n, fn)
        into.append(n)
        if fn_ is not None:
            attach(n + "_", fn_, function=fn_inplace)


# ---- factories ----------------------------------------------------------------------------------------

def _float_unary(name, kernel, backward, save="i", doc="", aliases=(), fn_inplace=True):
    """Register a float-valued unary op and expose ``name``, its aliases and their in-place forms."""
    op = register(name, kernel, backward, save=save)

    def fn(input, *, out=None):
        if input.__class__ is not Tensor or input._dtype.category != _FLOAT:
            input = _to_float(input, name)
        r = apply(op, (input,))
        return r if out is None else _out(r, out)
    fn.__name__ = name
    fn.__doc__ = doc or f"torch.{name}, elementwise."
    _expose((name,) + tuple(aliases), fn, _inplace_of(fn, name, _float_result), fn_inplace)
    return op, fn


# ---- the op that masks gradients (clamp, relu, logit, sinc, nan_to_num, i1) --------------------------

def _mask(x, lo, hi, mode):
    """Boolean mask of where a piecewise op passes its gradient (mode names the rule)."""
    if mode == "self":          # clamp: min <= x <= max (NaN -> False)
        m = True
        if lo is not None:
            m = np.greater_equal(x, lo)
        if hi is not None:
            m = m & np.less_equal(x, hi)
        return m
    if mode == "min":           # clamp's min tensor: x < min and min < max
        m = np.less(x, lo)
        return m if hi is None else m & np.less(lo, hi)
    if mode == "max":           # clamp's max tensor: x > max or max < min
        m = np.greater(x, hi)
        return m if lo is None else m | np.less(hi, lo)
    if mode == "in":            # logit: not (x < lo or x > hi)  (NaN -> True)
        return ~(np.less(x, lo) | np.greater(x, hi))
    if mode == "pos":           # relu on its result: not (y <= 0)  (NaN -> True)
        return ~np.less_equal(x, 0)
    if mode == "finite":
        return np.isfinite(x)
    if mode == "nonzero":
        return np.not_equal(x, 0)
    if mode == "abs_gt":
        return np.greater(np.abs(x), lo)
    raise ValueError(f"unknown gradient mask mode {mode!r}")


_F32 = np.dtype(np.float32)


def _where_mask_kernel(v, x, lo, hi, mode, fill=0.0):
    if (mode == "pos" or mode == "nonzero") and v.dtype == _F32 and fill == 0 and math.copysign(1.0, fill) > 0:
        r = _native.mask_grad(v, x, mode)       # relu's gradient: one native pass (None: NumPy runs)
        if r is not None:
            return r
    from ._util import select
    r = select(_mask(x, lo, hi, mode), v, fill)
    return r if r.dtype == v.dtype else r.astype(v.dtype)


def _where_mask_bw(ctx, gg):
    _, x, lo, hi = ctx.inputs
    attrs = dict(ctx.attrs)
    attrs["fill"] = 0.0             # the filled positions are constants
    return apply(WHERE_MASK, (gg, x, lo, hi), attrs), None, None, None


# where(mask(x, lo, hi), v, fill): linear in v; the mask is piecewise constant in x, lo and hi
WHERE_MASK = register("where_mask", _where_mask_kernel, _where_mask_bw, save="i")


def _where_mask(v, x, mode, lo=None, hi=None, fill=0.0):
    return apply(WHERE_MASK, (v, x, lo, hi), {"mode": mode, "fill": fill})


# ---- exponentials and logarithms ----------------------------------------------------------------------

EXP, exp = _float_unary("exp", _quiet(np.exp), lambda ctx, g: (g * ctx.output,), save="o",
                        doc="e to the power of each element.")
EXP2, exp2 = _float_unary("exp2", _quiet(np.exp2), lambda ctx, g: (g * ctx.output * _LN2,), save="o",
                          doc="2 to the power of each element.")
EXPM1, expm1 = _float_unary("expm1", _quiet(np.expm1), lambda ctx, g: (g * (ctx.output + 1.0),), save="o",
                            doc="exp(x) - 1, accurate for small x.")
LOG, log = _float_unary("log", _quiet(np.log), lambda ctx, g: (g / ctx.inputs[0],), doc="Natural logarithm.")
LOG2, log2 = _float_unary("log2", _quiet(np.log2), lambda ctx, g: (g / (ctx.inputs[0] * _LN2),),
                          doc="Base-2 logarithm.")
LOG10, log10 = _float_unary("log10", _quiet(np.log10), lambda ctx, g: (g / (ctx.inputs[0] * _LN10),),
                            doc="Base-10 logarithm.")
LOG1P, log1p = _float_unary("log1p", _quiet(np.log1p), lambda ctx, g: (g / (ctx.inputs[0] + 1.0),),
                            doc="log(1 + x), accurate for small x.")

# ---- powers -------------------------------------------------------------------------------------------

SQRT, sqrt = _float_unary("sqrt", _quiet(np.sqrt), lambda ctx, g: (g / (ctx.output * 2.0),), save="o",
                          doc="Square root.")


def _rsqrt_kernel(x):
    r = np.sqrt(x)
    return np.reciprocal(r, out=r) if type(r) is np.ndarray else np.reciprocal(r)


def _rsqrt_bw(ctx, g):
    o = ctx.output
    return (g * (o * o * o) * -0.5,)


RSQRT, rsqrt = _float_unary("rsqrt", _rsqrt_kernel, _rsqrt_bw, save="o", doc="1 / sqrt(x).")
RECIPROCAL, reciprocal = _float_unary("reciprocal", _quiet(np.reciprocal),
                                      lambda ctx, g: (-g * (ctx.output * ctx.output),), save="o",
                                      doc="1 / x (integers promote to the default float dtype).")

SQUARE = register("square", _quiet(np.square), lambda ctx, g: (g * (ctx.inputs[0] * 2.0),), save="i")
SQUARE.node_name = "PowBackward0"       # torch's square is pow(x, 2)


def square(input, *, out=None):
    """x * x; keeps integer dtypes (bool becomes int64, as torch's pow(x, 2))."""
    if input.__class__ is not Tensor:
        _check(input, "square")
    if input._dtype is _dt.bool:
        input = input.to(_dt.int64)
    r = apply(SQUARE, (input,))
    return r if out is None else _out(r, out)


def _square_(self):
    if _check(self, "square_")._dtype is _dt.bool:
        raise RuntimeError("result type Long can't be cast to the desired output type Bool")
    return write_result(self, square, "square_")


_square_.__doc__ = "In-place version of :func:`square`."
_expose(("square",), square, _square_)

# ---- trigonometric and hyperbolic ---------------------------------------------------------------------

SIN, sin = _float_unary("sin", _quiet(np.sin), lambda ctx, g: (g * cos(ctx.inputs[0]),), doc="Sine.")
COS, cos = _float_unary("cos", _quiet(np.cos), lambda ctx, g: (g * -sin(ctx.inputs[0]),), doc="Cosine.")


def _tan_bw(ctx, g):
    o = ctx.output
    return (g * (o * o + 1.0),)


TAN, tan = _float_unary("tan", _quiet(np.tan), _tan_bw, save="o", doc="Tangent.")


def _one_minus_sq(x):
    return 1.0 - x * x


ASIN, asin = _float_unary("asin", _quiet(np.arcsin), lambda ctx, g: (g * rsqrt(_one_minus_sq(ctx.inputs[0])),),
                          doc="Arcsine.", aliases=("arcsin",))
ACOS, acos = _float_unary("acos", _quiet(np.arccos), lambda ctx, g: (-g * rsqrt(_one_minus_sq(ctx.inputs[0])),),
                          doc="Arccosine.", aliases=("arccos",))
ATAN, atan = _float_unary("atan", _quiet(np.arctan), lambda ctx, g: (g / (ctx.inputs[0] * ctx.inputs[0] + 1.0),),
                          doc="Arctangent.", aliases=("arctan",))
SINH, sinh = _float_unary("sinh", _quiet(np.sinh), lambda ctx, g: (g * cosh(ctx.inputs[0]),), doc="Hyperbolic sine.")
COSH, cosh = _float_unary("cosh", _quiet(np.cosh), lambda ctx, g: (g * sinh(ctx.inputs[0]),), doc="Hyperbolic cosine.")
TANH, tanh = _float_unary("tanh", _quiet(np.tanh), lambda ctx, g: (g * _one_minus_sq(ctx.output),), save="o",
                          doc="Hyperbolic tangent.")
ASINH, asinh = _float_unary("asinh", _quiet(np.arcsinh),
                            lambda ctx, g: (g * rsqrt(ctx.inputs[0] * ctx.inputs[0] + 1.0),),
                            doc="Inverse hyperbolic sine.", aliases=("arcsinh",))
ACOSH, acosh = _float_unary("acosh", _quiet(np.arccosh),
                            lambda ctx, g: (g * (rsqrt(ctx.inputs[0] * ctx.inputs[0] - 1.0)
                                                 if not ctx.inputs[0]._dtype.is_complex else   # torch's branch
                                                 rsqrt(ctx.inputs[0] - 1.0) * rsqrt(ctx.inputs[0] + 1.0)),),
                            doc="Inverse hyperbolic cosine.", aliases=("arccosh",))
ATANH, atanh = _float_unary("atanh", _quiet(np.arctanh), lambda ctx, g: (g / _one_minus_sq(ctx.inputs[0]),),
                            doc="Inverse hyperbolic tangent.", aliases=("arctanh",))

_D2R = math.pi / 180.0
DEG2RAD, deg2rad = _float_unary("deg2rad", _half_in_float32(lambda x: x * _D2R),
                                lambda ctx, g: (g * _D2R,), save="", doc="Degrees to radians.")
RAD2DEG, rad2deg = _float_unary("rad2deg", _half_in_float32(lambda x: x * (1.0 / _D2R)),
                                lambda ctx, g: (g * (1.0 / _D2R),), save="", doc="Radians to degrees.")


def _sinc_bw(ctx, g):
    # d/dx sin(pi x)/(pi x) = (cos(pi x) - sinc(x)) / x, and 0 at x = 0
    x = ctx.inputs[0]
    v = (cos(x * math.pi) - ctx.output) / x
    return (_where_mask(g * v, x, "nonzero"),)


SINC, sinc = _float_unary("sinc", _half_in_float32(np.sinc), _sinc_bw, save="io",
                          doc="Normalized sinc: sin(pi x) / (pi x), 1 at 0.")

# ---- sigmoid and logit --------------------------------------------------------------------------------


def _sigmoid_kernel(x):
    r = np.exp(-x)
    r += 1.0
    return np.reciprocal(r)


def _sigmoid_bw(ctx, g):
    o = ctx.output
    return (g * (o * (1.0 - o)),)


SIGMOID, sigmoid = _float_unary("sigmoid", _half_in_float32(_sigmoid_kernel), _sigmoid_bw, save="o",
                                doc="1 / (1 + exp(-x)).")


def _logit_kernel(x, eps=None):
    if eps is not None:
        if eps <= 0.5:
            x = np.clip(x, eps, 1.0 - eps)
        else:   # an empty range: torch's kernel tests the lower bound first, NumPy's clip the upper one
            x = np.where(x < eps, eps, np.where(x > 1.0 - eps, 1.0 - eps, x)).astype(x.dtype, copy=False)
    return np.log(x / (1.0 - x))


def _logit_bw(ctx, g):
    x = ctx.inputs[0]
    v = g / (x * (1.0 - x))
    eps = ctx.attrs.get("eps")
    if eps is None:       # outside [0, 1] the derivative is NaN, as torch defines it
        return (_where_mask(v, x, "in", 0.0, 1.0, fill=math.nan),)
    return (_where_mask(v, x, "in", eps, 1.0 - eps),)


LOGIT = register("logit", _half_in_float32(_logit_kernel), _logit_bw, save="i")


def logit(input, eps=None, *, out=None):
    """log(x / (1 - x)); with ``eps``, x is first clamped to [eps, 1 - eps]."""
    if input.__class__ is not Tensor or input._dtype.category != _FLOAT:
        input = _to_float(input, "logit")
    if eps is not None:
        if not isinstance(eps, (int, float, np.number)) or isinstance(eps, bool):
            raise TypeError(f"logit(): argument 'eps' must be float, not {type(eps).__name__}")
        eps = float(eps)
        if eps < 0:           # torch: a negative eps means no clamping
            eps = None
    r = apply(LOGIT, (input,), {"eps": eps}) if eps is not None else apply(LOGIT, (input,))
    return r if out is None else _out(r, out)


_expose(("logit",), logit, _inplace_of(logit, "logit", _float_result))

# ---- error function -----------------------------------------------------------------------------------

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _erf_bw(ctx, g):
    x = ctx.inputs[0]
    return (g * exp(-(x * x)) * _TWO_OVER_SQRT_PI,)


def _erfc_bw(ctx, g):
    x = ctx.inputs[0]
    return (g * exp(-(x * x)) * -_TWO_OVER_SQRT_PI,)


def _erfinv_bw(ctx, g):
    o = ctx.output
    return (g * exp(o * o) * (math.sqrt(math.pi) / 2.0),)


ERF, erf = _float_unary("erf", _in_float64(_special.erf, True), _erf_bw, doc="The error function.")
ERFC, erfc = _float_unary("erfc", _in_float64(_special.erfc, True), _erfc_bw,
                          doc="The complementary error function 1 - erf(x).")
ERFINV, erfinv = _float_unary("erfinv", _in_float64(_special.erfinv), _erfinv_bw, save="o",
                              doc="The inverse error function (+-inf at +-1, nan outside [-1, 1]).",
                              fn_inplace=False)

# ---- gamma family and Bessel --------------------------------------------------------------------------

LGAMMA, lgamma = _float_unary("lgamma", _in_float64(_special.lgamma),
                              lambda ctx, g: (g * digamma(ctx.inputs[0]),),
                              doc="log|Gamma(x)|.", fn_inplace=False)
DIGAMMA, digamma = _float_unary("digamma", _in_float64(_special.digamma),
                                lambda ctx, g: (g * polygamma(1, ctx.inputs[0]),),
                                doc="The logarithmic derivative of Gamma, psi(x).", fn_inplace=False)


def _polygamma_kernel(x, n):
    flat = x.astype(np.float64).reshape(-1)
    return _special.polygamma(n, flat).reshape(x.shape).astype(x.dtype, copy=False)


POLYGAMMA = register("polygamma", _polygamma_kernel,
                     lambda ctx, g: (g * polygamma(ctx.attrs["n"] + 1, ctx.inputs[0]),), save="i")


def polygamma(n, input, *, out=None):
    """The n-th derivative of digamma: ``polygamma(n, x)`` (n >= 0)."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    input = _to_float(input, "polygamma")
    r = apply(POLYGAMMA, (input,), {"n": int(n)})
    return r if out is None else _out(r, out)


def _polygamma_method(self, n):
    return polygamma(n, self)


def _polygamma_(self, n):
    if _check(self, "polygamma_")._dtype.category != _FLOAT:
        raise RuntimeError(f"result type {dtype_name(_dt.get_default_dtype())} can't be cast to the "
                           f"desired output type {dtype_name(self._dtype)}")
    return write_result(self, lambda s: polygamma(n, s), "polygamma_")


attach("polygamma", polygamma, method=False)
attach("polygamma", _polygamma_method, function=False)
attach("polygamma_", _polygamma_, function=False)
__all__.append("polygamma")


def _i1_bw(ctx, g):
    # I1'(x) = I0(x) - I1(x)/x, with the limit 1/2 at x = 0 (x is kept away from 0 where it is tiny)
    x = ctx.inputs[0]
    eps = _dt.finfo(x._dtype).eps
    x_safe = _where_mask(x, x, "abs_gt", eps, fill=eps)
    v = i0(x_safe) - ctx.output / x_safe
    return (g * _where_mask(v, x, "abs_gt", eps, fill=0.5),)


# I1 is reached only as the derivative of i0 (torch exposes it as torch.special.i1)
I1 = register("special_i1", _in_float64(_special.i1), _i1_bw, save="io")
I0, i0 = _float_unary("i0", _in_float64(_special.i0), lambda ctx, g: (g * apply(I1, (ctx.inputs[0],)),),
                      doc="Modified Bessel function of the first kind, order 0.")
