"""Binary and ternary elementwise math: pow/float_power, atan2, hypot, xlogy, fmod/remainder,
maximum/minimum/fmax/fmin, lerp, addcmul/addcdiv, logaddexp/logaddexp2, copysign, where, ldexp,
heaviside, nextafter.

Operands are promoted with torch's rules through ``elementwise.binary`` (ternary ops promote over all
three tensors). Derivatives follow torch's formulas term by term, including the tie and edge rules
(maximum splits the gradient in half at ties, pow's exponent gradient is 0 where the base is 0 and the
exponent non-negative, xlogy's is 0 where x == 0 and y <= 0), and are written with ember ops so double
backward works. ``log`` in the derivatives is ``xlogy(1, x)`` and ``exp`` is ``pow(e, x)``, which keeps
this family independent of the unary one.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ._util import select
from ._layout_rule import first_wins

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from .registry import register, attach, dtype_name, node_class, rename
from .elementwise import binary, _run, _out
from .inplace import write_result
from ._util import can_cast
from .compare import (ew_kernel, is_number, need_tensor, need_tensor_or_number, not_implemented_for,
                      logical_and, logical_or, _HALF, _cast)

_FLOAT = 2


# ---- shared helpers -------------------------------------------------------------------------------

def _check_cast(rt, self: Tensor) -> None:
    if not can_cast(rt, self._dtype):
        raise RuntimeError(f"result type {dtype_name(rt)} can't be cast to the desired output type "
                           f"{dtype_name(self._dtype)}")


def _inplace(self: Tensor, name: str, rt, fn) -> Tensor:
    """Write ``fn(self)`` into ``self`` after checking that the result dtype ``rt`` fits (torch's rule)."""
    _check_cast(rt, self)
    return write_result(self, fn, name)


def _float_type(*operands):
    """The result dtype of an op that computes in floating point (integers go to the default float)."""
    dt = _dt.result_type(*operands)
    return dt if dt.category == _FLOAT else _dt.get_default_dtype()


def _log(x: Tensor) -> Tensor:
    # log written as xlogy(1, x): identical values and the same derivative 1/x
    return xlogy(1.0, x)


def _np_log_scalar(v) -> float:
    with np.errstate(all="ignore"):
        return float(np.log(np.float64(v)))


def _zeros_like(t: Tensor) -> Tensor:
    return wrap(np.zeros(t._data.shape, dtype=t._dtype.np), t._dtype)


def _is_int_array(x) -> bool:
    return np.asarray(x).dtype.kind in "iub"


# ---- pow --------------------------------------------------------------------------------------------

def _pow_np(x, y):
    x = np.asarray(x) if not isinstance(x, np.ndarray) else x
    if x.dtype.kind in "iu" and _is_int_array(y):
        ya = np.asarray(y)
        neg = ya < 0
        if neg.any():
            # torch's integer pow with a negative exponent: 1 for base 1, +-1 for base -1, else 0
            r = np.power(x, np.where(neg, 0, ya).astype(ya.dtype))
            odd = (ya % 2) != 0
            alt = np.where(x == 1, 1, np.where(x == -1, np.where(odd, -1, 1), 0))
            return np.where(neg, alt, r).astype(r.dtype)
    return np.power(x, y)


def _pow_self_grad(g, a, b):
    # torch: where(exponent == 0, 0, grad * exponent * self^(exponent - 1))
    return where(b == 0.0, 0.0, g * (b * a.pow(b - 1)))


def _pow_exp_grad(g, a, b, out):
    # torch: grad * where(self == 0 & exponent >= 0, 0, result * log(self))
    cond = logical_and(a == 0, (b.real if b._dtype.is_complex else b) >= 0)
    a_ = a.to(_dt.result_type(a, b))
    return g * where(cond, 0.0, out * (_log(a_) if not a_._dtype.is_complex else a_.log()))


def _pow_tt_bw(ctx, g):
    a, b = ctx.inputs
    ga = _pow_self_grad(g, a, b) if ctx.edges[0] is not None else None
    gb = _pow_exp_grad(g, a, b, ctx.output) if ctx.edges[1] is not None else None
    return ga, gb


def _pow_ts_bw(ctx, g):
    a, b = ctx.inputs
    if b == 0:
        return _zeros_like(a), None
    return g * (b * a.pow(b - 1)), None


def _pow_st_bw(ctx, g):
    a, b = ctx.inputs
    out = ctx.output
    if a == 0:
        return None, g * where(b >= 0, 0.0, out * _np_log_scalar(a))
    return None, g * (out * _np_log_scalar(a))


_POW_KERNEL = ew_kernel(_pow_np)
_F32_F64 = (np.dtype(np.float32), np.dtype(np.float64))
_PY_REAL = (int, float)


def _pow_ts_kernel(x, y, dt=None, out_dt=None):
    """A tensor to a number's power. A float32/float64 array to a Python int or float power computed in its
    own dtype is one ufunc call (NumPy takes the number as a weak scalar, as torch does: the same values as
    casting it first); the rest goes through the shared kernel (promotion, halves, integer rules)."""
    if type(y) in _PY_REAL and type(x) is np.ndarray and (dt is None or (dt is out_dt and x.dtype == dt)) \
            and x.dtype in _F32_F64:
        return np.power(x, y)       # (its float warnings: apply's filter quiets them, as for mul)
    return _POW_KERNEL(x, y, dt, out_dt)


POW = register("pow", _POW_KERNEL, _pow_tt_bw, save="io")
POW_TS = register("pow_tensor_scalar", _pow_ts_kernel, _pow_ts_bw, save="i")
POW_ST = register("pow_scalar_tensor", _POW_KERNEL, _pow_st_bw, save="io")
# torch's node names for the three overloads
POW_TS.node_name, POW.node_name, POW_ST.node_name = "PowBackward0", "PowBackward1", "PowBackward2"


def pow(input, exponent, *, out=None) -> Tensor:  # noqa: A001
    """``input ** exponent`` elementwise; either (not both) may be a Python number."""
    if out is not None:
        return _out(pow(input, exponent), out)
    ti, te = isinstance(input, Tensor), isinstance(exponent, Tensor)
    if ti and type(exponent) is int and input._dtype.category == _FLOAT:
        # a float tensor to a Python int power: the attributes the general path below settles on
        # (result_type keeps the tensor's dtype); a dynamic-shape trace's symbolic int goes that way
        dt = input._dtype.np
        return _run(POW_TS, (input, exponent), {"dt": dt, "out_dt": dt})
    if ti and te:
        op = POW
    elif ti:
        need_tensor_or_number(exponent, "pow", "exponent", 2)
        op = POW_TS
    elif te:
        need_tensor_or_number(input, "pow", "self", 1)
        op = POW_ST
    else:
        raise TypeError(f"pow() received an invalid combination of arguments - got ({type(input).__name__}, "
                        f"{type(exponent).__name__}), but expected at least one Tensor")
    if not (op is POW_TS and input._dtype.category == _FLOAT):     # (a float tensor ** a number: neither check applies)
        dt = _dt.result_type(input, exponent)
        if dt is _dt.bool:
            raise NotImplementedError("\"pow\" not implemented for 'Bool'")
        if op is POW_TS and dt.category != _FLOAT and isinstance(exponent, (int, np.integer)) and exponent < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
    return binary(op, input, exponent, name="pow")


def _pow_(self, exponent):
    return _inplace(self, "pow_", _dt.result_type(self, exponent), lambda s: pow(s, exponent))


def float_power(input, exponent, *, out=None) -> Tensor:
    """``pow`` computed in float64 (the result is float64)."""
    if out is not None:
        return _out(float_power(input, exponent), out)
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError(f"float_power() received an invalid combination of arguments - got "
                        f"({type(input).__name__}, {type(exponent).__name__}), but expected at least one Tensor")
    a = input.to(_dt.float64) if isinstance(input, Tensor) else input
    b = exponent.to(_dt.float64) if isinstance(exponent, Tensor) else exponent
    if not isinstance(a, Tensor):
        need_tensor_or_number(a, "float_power", "self", 1)
        a = float(a)
    if not isinstance(b, Tensor):
        need_tensor_or_number(b, "float_power", "exponent", 2)
        b = float(b)
    return pow(a, b)


def _float_power_(self, exponent):
    if self._dtype is not _dt.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {dtype_name(self._dtype)} but the "
                           "operation's result requires dtype Double")
    return write_result(self, lambda s: float_power(s, exponent), "float_power_")


attach("pow", pow)
attach("pow_", _pow_, function=False)
attach("float_power", float_power)
attach("float_power_", _float_power_, function=False)


def _dunder_ok(other) -> bool:
    return isinstance(other, Tensor) or is_number(other)


Tensor.__pow__ = lambda self, other: pow(self, other) if _dunder_ok(other) else NotImplemented
Tensor.__rpow__ = lambda self, other: pow(other, self) if _dunder_ok(other) else NotImplemented
Tensor.__ipow__ = lambda self, other: _pow_(self, other) if _dunder_ok(other) else NotImplemented


# ---- a small factory for tensor/tensor float ops --------------------------------------------------

def _check_operands(name, input, other, scalar_self: bool, scalar_other: bool) -> None:
    """torch's argument rules for ``name(input, other)``: each a tensor, or a Python number where
    ``scalar_self``/``scalar_other`` allow one, and not both numbers."""
    if scalar_self:
        need_tensor_or_number(input, name, "self", 1)
    else:
        need_tensor(input, name, "input", 1)
    if scalar_other:
        need_tensor_or_number(other, name, "other", 2)
    else:
        need_tensor(other, name, "other", 2)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"{name}() received an invalid combination of arguments - got "
                        f"({type(input).__name__}, {type(other).__name__}), but expected at least one Tensor")


def _binary_fn(name, op, *, kind="same", scalar_other=False, scalar_self=False, float_only=None, doc=""):
    """Build the public function for a binary op with torch's argument rules.

    ``scalar_other``/``scalar_self``: whether a Python number is accepted in that position.
    ``float_only``: a CPU-kernel name; integer results raise torch's NotImplementedError.
    """
    def fn(input, other, *, out=None):
        if out is not None:
            return _out(fn(input, other), out)
        _check_operands(name, input, other, scalar_self, scalar_other)
        if float_only is not None:
            dt = _dt.result_type(input, other)
            if dt.category != _FLOAT:
                raise not_implemented_for(float_only, dt)
        return binary(op, input, other, kind=kind, name=name)
    fn.__name__ = name
    fn.__doc__ = doc
    return fn


def _inplace_method(name, fn, kind="same"):
    def method(self, other):
        rt = _float_type(self, other) if kind == "float" else _dt.result_type(self, other)
        return _inplace(self, name, rt, lambda s: fn(s, other))
    method.__name__ = name
    method.__doc__ = f"In-place ``{name[:-1]}``."
    return method


def _register_fn(name, fn, kind="same", inplace=True, aliases=(), inplace_function=False):
    for n in (name,) + tuple(aliases):
        attach(n, fn)
        if inplace:
            attach(n + "_", _inplace_method(n + "_", fn, kind), function=inplace_function)


# ---- atan2 / hypot ----------------------------------------------------------------------------------

def _atan2_bw(ctx, g):
    a, b = ctx.inputs
    recip = 1 / (a * a + b * b)
    ga = g * b * recip if ctx.edges[0] is not None else None
    gb = g * -a * recip if ctx.edges[1] is not None else None
    return ga, gb


ATAN2 = register("atan2", ew_kernel(np.arctan2, complex_ok=False, name="atan2"), _atan2_bw, save="i")
atan2 = _binary_fn("atan2", ATAN2, kind="float",
                   doc="Elementwise arctangent of ``input / other`` choosing the quadrant (radians).")
_register_fn("atan2", atan2, kind="float", aliases=("arctan2",))


def _hypot_bw(ctx, g):
    a, b = ctx.inputs
    out = ctx.output
    ga = g * a / out if ctx.edges[0] is not None else None
    gb = g * b / out if ctx.edges[1] is not None else None
    return ga, gb


HYPOT = register("hypot", ew_kernel(np.hypot, complex_ok=False, name="hypot"), _hypot_bw, save="io")
hypot = _binary_fn("hypot", HYPOT, float_only="hypot_cpu",
                   doc="Elementwise ``sqrt(input**2 + other**2)`` without intermediate overflow.")
_register_fn("hypot", hypot)


# ---- xlogy --------------------------------------------------------------------------------------------

def _xlogy_np(x, y):
    with np.errstate(all="ignore"):
        r = x * np.log(y)
    # torch: NaN if y is NaN, else 0 where x == 0, else x * log(y)
    return np.where(np.isnan(y), np.nan, np.where(x == 0, 0, r))


def _xlogy_bw(ctx, g):
    a, b = ctx.inputs
    ga = gb = None
    if ctx.edges[0] is not None:
        if isinstance(b, Tensor):
            ga = where(logical_and(a == 0.0, b <= 0.0), 0.0, xlogy(g, b))
        elif b > 0:
            ga = xlogy(g, b)
        else:
            ga = where(a == 0.0, 0.0, xlogy(g, b))
    if ctx.edges[1] is not None:
        gb = g * a / b
    return ga, gb


XLOGY = register("xlogy", ew_kernel(_xlogy_np, complex_ok=False, name="xlogy"), _xlogy_bw, save="i")
xlogy = _binary_fn("xlogy", XLOGY, kind="float", scalar_self=True, scalar_other=True,
                   doc="Elementwise ``input * log(other)``, 0 where ``input == 0`` (NaN if ``other`` is NaN).")
_register_fn("xlogy", xlogy, kind="float", inplace_function=True)


# ---- fmod / remainder -------------------------------------------------------------------------------

def _check_int_divisor(x, y):
    # (an empty result divides nothing: no error, as torch)
    if np.asarray(x).dtype.kind in "iu" and np.asarray(x).size and np.any(np.asarray(y) == 0):
        raise RuntimeError("ZeroDivisionError")


def _fmod_np(x, y):
    _check_int_divisor(x, y)
    return np.fmod(x, y)


def _remainder_np(x, y):
    _check_int_divisor(x, y)
    if np.asarray(x).dtype.kind in "iu":
        return np.remainder(x, y)
    # torch's float remainder: fmod, moved into the divisor's sign; a zero keeps fmod's sign
    m = np.fmod(x, y)
    fix = (m != 0) & ((np.asarray(y) < 0) != (m < 0))
    return np.where(fix, m + y, m)


def _fmod_bw(ctx, g):
    a, b = ctx.inputs
    gb = -g * a.div(b, rounding_mode="trunc") if ctx.edges[1] is not None else None
    return g, gb


def _remainder_bw(ctx, g):
    a, b = ctx.inputs
    if not isinstance(a, Tensor):
        raise RuntimeError("derivative for aten::remainder is not implemented")
    gb = -g * a.div(b, rounding_mode="floor") if ctx.edges[1] is not None else None
    return g, gb


FMOD = register("fmod", ew_kernel(_fmod_np, complex_ok=False, name="fmod"), _fmod_bw, save="i")
REMAINDER = register("remainder", ew_kernel(_remainder_np, complex_ok=False, name="remainder"), _remainder_bw, save="i")


def _mod_fn(name, op, scalar_self):
    def fn(input, other, *, out=None):
        if out is not None:
            return _out(fn(input, other), out)
        _check_operands(name, input, other, scalar_self, True)
        dt = _dt.result_type(input, other)
        if dt is _dt.bool:
            raise not_implemented_for(f"{name}_cpu", dt)
        return binary(op, input, other, name=name)
    fn.__name__ = name
    return fn


fmod = _mod_fn("fmod", FMOD, scalar_self=False)
fmod.__doc__ = "C-style remainder of ``input / other`` (the result has the sign of ``input``)."
remainder = _mod_fn("remainder", REMAINDER, scalar_self=True)
remainder.__doc__ = "Python-style modulus of ``input / other`` (the result has the sign of ``other``)."
_register_fn("fmod", fmod)
_register_fn("remainder", remainder)
Tensor.__mod__ = lambda self, other: remainder(self, other) if _dunder_ok(other) else NotImplemented
Tensor.__rmod__ = lambda self, other: remainder(other, self) if _dunder_ok(other) else NotImplemented
Tensor.__imod__ = lambda self, other: Tensor.remainder_(self, other) if _dunder_ok(other) else NotImplemented


# ---- maximum / minimum / fmax / fmin --------------------------------------------------------------

def _maximum_bw(ctx, g):
    a, b = ctx.inputs
    # torch: ties split the gradient in half between the two inputs
    half = where(a == b, g / 2, g)
    ga = where(a < b, 0.0, half) if ctx.edges[0] is not None else None
    gb = where(a > b, 0.0, half) if ctx.edges[1] is not None else None
    return ga, gb


def _minimum_bw(ctx, g):
    a, b = ctx.inputs
    half = where(a == b, g / 2, g)
    ga = where(a > b, 0.0, half) if ctx.edges[0] is not None else None
    gb = where(a < b, 0.0, half) if ctx.edges[1] is not None else None
    return ga, gb


def _fmax_bw(ctx, g):
    a, b = ctx.inputs
    # input wins where a >= b or b is NaN; other gets the rest
    first = logical_or(a >= b, b != b)
    ga = where(first, g, 0.0) if ctx.edges[0] is not None else None
    gb = where(first, 0.0, g) if ctx.edges[1] is not None else None
    return ga, gb


def _fmin_bw(ctx, g):
    a, b = ctx.inputs
    first = logical_or(a <= b, b != b)
    ga = where(first, g, 0.0) if ctx.edges[0] is not None else None
    gb = where(first, 0.0, g) if ctx.edges[1] is not None else None
    return ga, gb


def _maximum_np(a, b):
    # torch returns the first operand at ties (so maximum(-0., 0.) is -0.) and propagates NaN
    keep = a >= b
    if np.asarray(a).dtype.kind == "f":
        keep = keep | np.isnan(a)
    return select(keep, a, b)


def _minimum_np(a, b):
    keep = a <= b
    if np.asarray(a).dtype.kind == "f":
        keep = keep | np.isnan(a)
    return select(keep, a, b)


MAXIMUM = register("maximum", ew_kernel(_maximum_np, complex_ok=False, name="maximum"), _maximum_bw, save="i")
MINIMUM = register("minimum", ew_kernel(_minimum_np, complex_ok=False, name="minimum"), _minimum_bw, save="i")
FMAX = register("fmax", ew_kernel(np.fmax, complex_ok=False, name="fmax"), _fmax_bw, save="i")
FMIN = register("fmin", ew_kernel(np.fmin, complex_ok=False, name="fmin"), _fmin_bw, save="i")
maximum = _binary_fn("maximum", MAXIMUM, doc="Elementwise maximum; NaN propagates.")
minimum = _binary_fn("minimum", MINIMUM, doc="Elementwise minimum; NaN propagates.")
fmax = _binary_fn("fmax", FMAX, doc="Elementwise maximum ignoring NaN (NaN only if both are NaN).")
fmin = _binary_fn("fmin", FMIN, doc="Elementwise minimum ignoring NaN (NaN only if both are NaN).")
for _n, _f in [("maximum", maximum), ("minimum", minimum), ("fmax", fmax), ("fmin", fmin)]:
    _register_fn(_n, _f, inplace=False)


# ---- logaddexp / logaddexp2 / copysign -------------------------------------------------------------

def _logaddexp_bw(ctx, g):
    a, b = ctx.inputs
    # exp written as pow(e, .) (see the module docstring)
    ga = g / (1 + pow(math.e, b - a)) if ctx.edges[0] is not None else None
    gb = g / (1 + pow(math.e, a - b)) if ctx.edges[1] is not None else None
    return ga, gb


def _logaddexp2_bw(ctx, g):
    a, b = ctx.inputs
    ga = g / (1 + pow(2.0, b - a)) if ctx.edges[0] is not None else None
    gb = g / (1 + pow(2.0, a - b)) if ctx.edges[1] is not None else None
    return ga, gb


LOGADDEXP = register("logaddexp", ew_kernel(np.logaddexp, complex_ok=False, name="logaddexp"), _logaddexp_bw, save="i")
LOGADDEXP2 = register("logaddexp2", ew_kernel(np.logaddexp2, complex_ok=False, name="logaddexp2"), _logaddexp2_bw, save="i")
logaddexp = _binary_fn("logaddexp", LOGADDEXP, float_only="logaddexp_cpu",
                       doc="Elementwise ``log(exp(input) + exp(other))``, computed stably.")
logaddexp2 = _binary_fn("logaddexp2", LOGADDEXP2, float_only="logaddexp2_cpu",
                        doc="Elementwise ``log2(2**input + 2**other)``, computed stably.")
_register_fn("logaddexp", logaddexp, inplace=False)
_register_fn("logaddexp2", logaddexp2, inplace=False)


def _copysign_bw(ctx, g):
    a, b = ctx.inputs
    ga = gb = None
    if ctx.edges[0] is not None:
        # torch: grad * (result / self), with 0 where self == 0
        ratio = where(a == 0, 0.0, ctx.output / a)
        ga = g * ratio
    if ctx.edges[1] is not None:
        gb = _zeros_like(b)
    return ga, gb


COPYSIGN = register("copysign", ew_kernel(np.copysign, complex_ok=False, name="copysign"), _copysign_bw, save="io")
COPYSIGN.node_name = lambda args, attrs: "CopysignBackward0" if isinstance(args[1], Tensor) else "CopysignBackward1"
copysign = _binary_fn("copysign", COPYSIGN, kind="float", scalar_other=True,
                      doc="Elementwise ``|input|`` with the sign (sign bit) of ``other``.")
_register_fn("copysign", copysign, kind="float")


# ---- heaviside / nextafter / ldexp ------------------------------------------------------------------

def _heaviside_np(x, v):
    return np.where(x == 0, v, x > 0).astype(x.dtype)


def _no_derivative(name):
    def bw(ctx, g):
        raise RuntimeError(f"derivative for aten::{name} is not implemented")
    return bw


# torch records a node whose backward raises, so the output requires grad like the input
HEAVISIDE = register("heaviside", ew_kernel(_heaviside_np, half_up=False, complex_ok=False, name="heaviside"), _no_derivative("heaviside"))


def heaviside(input, values, *, out=None) -> Tensor:
    """Step function: 0 where ``input < 0``, ``values`` where ``input == 0``, 1 where ``input > 0``."""
    if out is not None:
        return _out(heaviside(input, values), out)
    need_tensor(input, "heaviside", "input", 1)
    need_tensor(values, "heaviside", "values", 2)
    if input._dtype is not values._dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return binary(HEAVISIDE, input, values, name="heaviside")


def _nextafter_bw(ctx, g):
    a, b = ctx.inputs
    ga = where(a == b, 0.0, g) if ctx.edges[0] is not None else None
    gb = _zeros_like(b) if ctx.edges[1] is not None else None
    return ga, gb


NEXTAFTER = register("nextafter", ew_kernel(np.nextafter, half_up=False, complex_ok=False, name="nextafter"), _nextafter_bw, save="i")
nextafter = _binary_fn("nextafter", NEXTAFTER, float_only="nextafter_cpu",
                       doc="The next floating-point value after ``input`` towards ``other``.")
_register_fn("heaviside", heaviside)
_register_fn("nextafter", nextafter)


def _ldexp_np(x, e, dt):
    x, e = _cast(x, dt), _cast(e, dt)
    if x.dtype in _HALF:
        x, e = x.astype(np.float32), e.astype(np.float32)
    with np.errstate(all="ignore"):
        return np.asarray(x * np.exp2(e)).astype(dt)


def _ldexp_bw(ctx, g):
    a, e = ctx.inputs
    # torch: grad * pow(2, other) with an *integer* 2, so an integer exponent < 0 gives a zero gradient
    ga = g * pow(2, e) if ctx.edges[0] is not None else None
    ge = g * (a * pow(2.0, e)) * math.log(2.0) if ctx.edges[1] is not None else None
    return ga, ge


LDEXP = register("ldexp", _ldexp_np, _ldexp_bw, save="i")


def ldexp(input, other, *, out=None) -> Tensor:
    """``input * 2 ** other``, computed in the promoted floating dtype."""
    if out is not None:
        return _out(ldexp(input, other), out)
    need_tensor(input, "ldexp", "input", 1)
    need_tensor(other, "ldexp", "other", 2)
    return _run(LDEXP, (input, other), {"dt": _float_type(input, other).np})


def _ldexp_(self, other):
    need_tensor(other, "ldexp_", "other", 2)
    return _inplace(self, "ldexp_", _float_type(self, other), lambda s: ldexp(s, other))


attach("ldexp", ldexp)
attach("ldexp_", _ldexp_)


# ---- where ------------------------------------------------------------------------------------------

def _where_np(c, x, y, dt=None):
    if dt is not None:
        x = _cast(x, dt)
        y = _cast(y, dt)
    r = select(c, x, y) if type(c) is np.ndarray else np.where(c, x, y)
    if r.ndim > 1 and type(c) is np.ndarray and not c.flags.c_contiguous:
        return first_wins(r, c)     # (torch's layout when the operands disagree; a C-ordered c: NumPy's is)
    return r


def _where_bw(ctx, g):
    c = ctx.inputs[0]
    ga = where(c, g, 0.0) if ctx.edges[1] is not None else None
    gb = where(c, 0.0, g) if ctx.edges[2] is not None else None
    return None, ga, gb


WHERE = register("where", _where_np, _where_bw, save="0")


def where(condition, input=None, other=None, *, out=None):
    """``input`` where ``condition`` is true, else ``other`` (either may be a Python number).

    With only ``condition``, returns the indices of its nonzero elements as a tuple (``nonzero(as_tuple=True)``).
    """
    if input is None and other is None:
        need_tensor(condition, "where", "condition", 1)
        if type(condition._data) is not np.ndarray:         # a device tensor: nonzero on the device
            return condition.nonzero(as_tuple=True)
        return tuple(wrap(ix.astype(np.int64), _dt.int64) for ix in np.nonzero(np.atleast_1d(condition._data)))
    if out is not None:
        return _out(where(condition, input, other), out)
    need_tensor(condition, "where", "condition", 1)
    if input is None or other is None:
        raise TypeError("where() missing required argument 'input' or 'other'")
    need_tensor_or_number(input, "where", "input", 2)
    need_tensor_or_number(other, "where", "other", 3)
    if condition._dtype is not _dt.bool:
        if condition._dtype is not _dt.uint8:
            raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor with dtype "
                               f"{dtype_name(condition._dtype)}")
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated and will be "
                      "removed in a future version of PyTorch. Use a boolean condition instead.", UserWarning)
        condition = wrap(condition._data.astype(np.bool_), _dt.bool)
    dt = _dt.result_type(input, other)
    same = (isinstance(input, Tensor) and isinstance(other, Tensor) and input._dtype is dt and other._dtype is dt)
    return _run(WHERE, (condition, input, other), None if same else {"dt": dt.np})


attach("where", where, method=False)
attach("where", lambda self, condition, other: where(condition, self, other), function=False)


# ---- lerp -------------------------------------------------------------------------------------------

def _lerp_np(a, e, w):
    out_dt = a.dtype
    if out_dt in _HALF:
        a, e = a.astype(np.float32), e.astype(np.float32)
        w = w.astype(np.float32) if isinstance(w, np.ndarray) else w
    with np.errstate(all="ignore"):
        diff = e - a
        if isinstance(w, np.ndarray):
            # torch's two-sided formula keeps lerp exact at both ends
            r = np.where(np.abs(w) < 0.5, a + w * diff, e - diff * (1 - w))
        else:
            w = float(w)
            r = a + w * diff if abs(w) < 0.5 else e - diff * (1 - w)
    r = np.asarray(r)
    return r if r.dtype == out_dt else r.astype(out_dt)


def _lerp_bw(ctx, g):
    a, e, w = ctx.inputs
    ga = g * (1 - w) if ctx.edges[0] is not None else None
    ge = g * w if ctx.edges[1] is not None else None
    gw = g * (e - a) if ctx.edges[2] is not None else None
    return ga, ge, gw


LERP = register("lerp", _lerp_np, _lerp_bw, save="i")

_C_NAMES = {_dt.float32: "float", _dt.float64: "double", _dt.float16: "c10::Half", _dt.bfloat16: "c10::BFloat16",
            _dt.int64: "long int", _dt.int32: "int", _dt.int16: "short int", _dt.int8: "signed char",
            _dt.uint8: "unsigned char", _dt.bool: "bool"}


def lerp(input, end, weight, *, out=None) -> Tensor:
    """Linear interpolation ``input + weight * (end - input)``; ``weight`` is a number or a tensor."""
    if out is not None:
        return _out(lerp(input, end, weight), out)
    need_tensor(input, "lerp", "input", 1)
    need_tensor(end, "lerp", "end", 2)
    need_tensor_or_number(weight, "lerp", "weight", 3)
    for nm, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t._dtype is not input._dtype:
            raise RuntimeError(f"expected dtype {_C_NAMES[input._dtype]} for `{nm}` but got dtype {_C_NAMES[t._dtype]}")
    if not input._dtype.is_floating_point:
        kname = "lerp_kernel_tensor" if isinstance(weight, Tensor) else "lerp_kernel_scalar"
        raise not_implemented_for(kname, input._dtype)
    if not isinstance(weight, Tensor):
        return _run(LERP, (input, end, float(weight)), None)
    return rename(_run(LERP, (input, end, weight), None), _LERP_TENSOR)     # torch's lerp.Tensor overload


_LERP_TENSOR = node_class("LerpBackward1")


def _lerp_(self, end, weight):
    return write_result(self, lambda s: lerp(s, end, weight), "lerp_")


attach("lerp", lerp)
attach("lerp_", _lerp_, function=False)


# ---- addcmul / addcdiv -------------------------------------------------------------------------------

def _addc_kernel(combine):
    def k(a, t1, t2, value, dt=None):
        if dt is not None:
            a, t1, t2 = _cast(a, dt), _cast(t1, dt), _cast(t2, dt)
        out_dt = a.dtype
        if out_dt in _HALF:
            a, t1, t2 = a.astype(np.float32), t1.astype(np.float32), t2.astype(np.float32)
        with np.errstate(all="ignore"):
            r = np.asarray(a + combine(value * t1, t2))
        return r if r.dtype == out_dt else r.astype(out_dt)
    return k


def _addcmul_bw(ctx, g):
    _, t1, t2 = ctx.inputs
    v = ctx.attrs["value"]
    g1 = g * (t2 * v) if ctx.edges[1] is not None else None
    g2 = g * (t1 * v) if ctx.edges[2] is not None else None
    return g, g1, g2


def _addcdiv_bw(ctx, g):
    _, t1, t2 = ctx.inputs
    v = ctx.attrs["value"]
    g1 = g * (v / t2) if ctx.edges[1] is not None else None
    g2 = -g * (v * t1 / (t2 * t2)) if ctx.edges[2] is not None else None
    return g, g1, g2


ADDCMUL = register("addcmul", _addc_kernel(np.multiply), _addcmul_bw, save="i")
ADDCDIV = register("addcdiv", _addc_kernel(np.true_divide), _addcdiv_bw, save="i")


def _addc(name, op, input, tensor1, tensor2, value):
    need_tensor(input, name, "input", 1)
    need_tensor(tensor1, name, "tensor1", 2)
    need_tensor(tensor2, name, "tensor2", 3)
    if isinstance(value, Tensor):
        value = value.item()
    if not is_number(value):
        raise TypeError(f"{name}(): argument 'value' must be Number, not {type(value).__name__}")
    if op is ADDCDIV and tensor1._dtype.category < _FLOAT and tensor2._dtype.category < _FLOAT:
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will "
            "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented "
            "as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
            "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the "
            "latter implementation: (input + value * tensor1 / tensor2), for all dtypes.")
    dt = _dt.result_type(input, tensor1, tensor2)
    if dt is _dt.bool:
        raise not_implemented_for(f"{name}_cpu_out", dt)
    # the scalar is converted to the result dtype (an integer result truncates a float value)
    value = float(value) if dt.is_floating_point else int(value)
    attrs = {"value": value}
    if not (input._dtype is tensor1._dtype is tensor2._dtype is dt) or dt is _dt.bfloat16:
        attrs["dt"] = dt.np
    return _run(op, (input, tensor1, tensor2), attrs)


def addcmul(input, tensor1, tensor2, *, value=1, out=None) -> Tensor:
    """``input + value * tensor1 * tensor2`` elementwise, with broadcasting and promotion."""
    r = _addc("addcmul", ADDCMUL, input, tensor1, tensor2, value)
    return r if out is None else _out(r, out)


def addcdiv(input, tensor1, tensor2, *, value=1, out=None) -> Tensor:
    """``input + value * tensor1 / tensor2`` elementwise (true division)."""
    r = _addc("addcdiv", ADDCDIV, input, tensor1, tensor2, value)
    return r if out is None else _out(r, out)


def _addc_inplace(name, fn):
    def method(self, tensor1, tensor2, *, value=1):
        rt = _dt.result_type(self, tensor1, tensor2)
        return _inplace(self, name, rt, lambda s: fn(s, tensor1, tensor2, value=value))
    method.__name__ = name
    method.__doc__ = f"In-place ``{name[:-1]}``."
    return method


attach("addcmul", addcmul)
attach("addcdiv", addcdiv)
attach("addcmul_", _addc_inplace("addcmul_", addcmul), function=False)
attach("addcdiv_", _addc_inplace("addcdiv_", addcdiv), function=False)
