"""Piecewise unary ops, which keep the input dtype or give bool: sign/sgn/signbit, abs, floor/ceil/trunc/round
and frac, relu and positive, classification (isnan, isinf, isfinite, ...), nan_to_num and clamp.

Each has its own rules for integer and bool inputs, so each is written out; they share ``ember.ops.unary``'s
argument checks, in-place maker, warning filter and ``where_mask`` (the derivative at the kinks: clamp, relu, nan_to_num).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from .registry import register, apply, dtype_name, node_class, rename
from .elementwise import _out
from .inplace import write_result
from ._util import can_cast
from .unary import (_FLOAT, _number, _check, _not_implemented, _half_in_float32, _zeros_bw, _inplace_of, _cast_error,
                    _where_mask, WHERE_MASK, _expose as _expose_unary)

__all__: list = []
_expose = functools.partial(_expose_unary, into=__all__)

# ---- sign, abs and rounding: dtype-preserving ---------------------------------------------------------


def _sign_kernel(x):
    if x.dtype == np.bool_:
        return x.copy()
    if x.dtype.kind == "c":
        raise NotImplementedError("Unlike NumPy, torch.sign is not intended to support complex numbers. Please use "
                                  "torch.sgn instead.")
    r = np.sign(x)
    if x.dtype.kind not in "iu":
        nan = np.isnan(r)
        if nan.any():           # torch: sign(nan) = 0
            r[nan] = 0
    return r


SIGN = register("sign", _sign_kernel, _zeros_bw)


def sign(input, *, out=None):
    """-1, 0 or 1 by the sign of each element (0 for nan; bool stays bool)."""
    if input.__class__ is not Tensor:
        _check(input, "sign")
    r = apply(SIGN, (input,))
    return r if out is None else _out(r, out)


def sgn(input, *, out=None):
    """``sign`` for real tensors, ``z / |z|`` (0 at 0) for complex ones; an op of its own (SgnBackward0)."""
    if _check(input, "sgn")._dtype.is_complex:
        from .complex_ops import sgn_complex
        r = sgn_complex(input)
        return r if out is None else _out(r, out)
    r = sign(input)
    return rename(r, _SGN) if out is None else _out(r, out)


_SGN = node_class("SgnBackward0")
_sign_ = _inplace_of(sign, "sign")
_expose(("sign",), sign, _sign_, fn_inplace=False)
_expose(("sgn",), sgn, _inplace_of(sgn, "sgn"), fn_inplace=False)


def _signbit_kernel(x):
    if x.dtype.kind == "i":
        return np.less(x, 0)
    if x.dtype.kind in "ub":
        return np.zeros(x.shape, dtype=np.bool_)
    return np.signbit(x)          # floats, including bfloat16


SIGNBIT = register("signbit", _signbit_kernel, differentiable=False)


def signbit(input, *, out=None):
    """True where the sign bit is set (including -0.0 and negative NaNs)."""
    r = apply(SIGNBIT, (_check(input, "signbit"),))
    return r if out is None else _out(r, out)


_expose(("signbit",), signbit)

ABS = register("abs", np.abs, lambda ctx, g: (g * (sign(ctx.inputs[0]) if not ctx.inputs[0]._dtype.is_complex
                                                   else sgn(ctx.inputs[0])),), save="i")


def abs(input, *, out=None):  # noqa: A001 - torch's name
    """|x|; keeps the dtype (not defined for bool, as in torch)."""
    if input.__class__ is not Tensor:
        _check(input, "abs")
    if input._dtype is _dt.bool:
        raise _not_implemented("abs_cpu", input._dtype)
    r = apply(ABS, (input,))
    return r if out is None else _out(r, out)


def _abs_(self):
    if _check(self, "abs_")._dtype.is_complex:
        raise RuntimeError("In-place abs is not supported for complex tensors.")
    return write_result(self, abs, "abs_")


_abs_.__doc__ = "In-place version of :func:`abs`."
_expose(("abs",), abs, _abs_)
_expose(("absolute",), abs, _inplace_of(abs, "absolute"), fn_inplace=False)


def _rounding(name, npfn, kernel_name, doc):
    op = register(name, npfn, _zeros_bw)

    def fn(input, *, out=None):
        if input.__class__ is not Tensor:
            _check(input, name)
        dt = input._dtype
        if dt.category != _FLOAT:
            if dt.is_complex:
                raise NotImplementedError(f"{name} is not supported for complex inputs")
            if dt is _dt.bool:
                raise _not_implemented(kernel_name, dt)
            r = input.clone()             # integers are already rounded: a copy, as torch returns
        else:
            r = apply(op, (input,))
        return r if out is None else _out(r, out)
    fn.__name__ = name
    fn.__doc__ = doc
    return op, fn


FLOOR, floor = _rounding("floor", np.floor, "floor_vml_cpu", "Largest integer <= x (integers unchanged).")
CEIL, ceil = _rounding("ceil", np.ceil, "ceil_vml_cpu", "Smallest integer >= x (integers unchanged).")
TRUNC, trunc = _rounding("trunc", np.trunc, "trunc_vml_cpu", "x rounded toward zero (integers unchanged).")
_expose(("floor",), floor, _inplace_of(floor, "floor"))
_expose(("ceil",), ceil, _inplace_of(ceil, "ceil"))
_expose(("trunc",), trunc, _inplace_of(trunc, "trunc"))
_expose(("fix",), trunc, _inplace_of(trunc, "fix"))


def _round_kernel(x, decimals=0):
    if decimals == 0:
        return np.rint(x)
    # torch: nearbyint(x * 10^d) / 10^d, or nearbyint(x / 10^-d) * 10^-d for negative d
    if decimals > 0:
        p = 10.0 ** decimals
        return np.rint(x * p) / p
    p = 10.0 ** -decimals
    return np.rint(x / p) * p


ROUND = register("round", _half_in_float32(_round_kernel), _zeros_bw)


def round(input, *, decimals: int = 0, out=None):  # noqa: A001 - torch's name
    """Round half to even; with ``decimals``, to that many decimal places (floats only)."""
    if input.__class__ is not Tensor:
        _check(input, "round")
    dt = input._dtype
    if not isinstance(decimals, (int, np.integer)) or isinstance(decimals, bool):
        raise TypeError(f"round(): argument 'decimals' must be int, not {type(decimals).__name__}")
    if dt.category != _FLOAT:
        if dt is _dt.bool or decimals != 0 or dt.is_complex:
            raise _not_implemented("round_cpu" if decimals else "round_vml_cpu", dt)
        r = input.clone()
    else:
        r = apply(ROUND, (input,), {"decimals": int(decimals)}) if decimals else apply(ROUND, (input,))
    return r if out is None else _out(r, out)


_expose(("round",), round, _inplace_of(round, "round"))


def _frac_kernel(x):
    return x - np.trunc(x)


FRAC = register("frac", _frac_kernel, lambda ctx, g: (g,))


def frac(input, *, out=None):
    """x - trunc(x) (floats only)."""
    if input.__class__ is not Tensor:
        _check(input, "frac")
    if input._dtype.category != _FLOAT:
        raise _not_implemented("frac_cpu", input._dtype)
    r = apply(FRAC, (input,))
    return r if out is None else _out(r, out)


_expose(("frac",), frac, _inplace_of(frac, "frac"))


def _relu_kernel(x):
    # with the scalar first, NumPy's maximum keeps -0.0 (and NaN) as torch's relu does
    return np.maximum(0, x)


RELU = register("relu", _relu_kernel, lambda ctx, g: (_where_mask(g, ctx.output, "pos"),), save="o")


def relu(input):
    """max(x, 0); NaN stays NaN (and passes its gradient), integer dtypes are kept."""
    if input.__class__ is not Tensor:
        _check(input, "relu")
    if input._dtype in _NO_RELU:
        if input._dtype.is_complex:
            raise NotImplementedError("clamp is not supported for complex types")
        raise RuntimeError("Boolean inputs not supported for relu")
    return apply(RELU, (input,))


_NO_RELU = frozenset((_dt.bool, _dt.complex64, _dt.complex128))


_expose(("relu",), relu, _inplace_of(relu, "relu"))


def positive(input):
    """Returns ``input`` itself (torch.positive); not defined for bool."""
    _check(input, "positive")
    if input._dtype is _dt.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


_expose(("positive",), positive)

# ---- classification ------------------------------------------------------------------------------------


def _classify(name, float_kernel, int_value, out_arg):
    def kernel(x):
        if x.dtype.kind in "iub":           # integers are finite and never nan/inf
            return np.full(x.shape, int_value, dtype=np.bool_)
        return float_kernel(x)
    op = register(name, kernel, differentiable=False)

    if out_arg:
        def fn(input, *, out=None):
            r = apply(op, (_check(input, name),))
            return r if out is None else _out(r, out)
    else:
        def fn(input):
            return apply(op, (_check(input, name),))
    fn.__name__ = name
    fn.__doc__ = f"torch.{name}: a bool tensor, elementwise."
    _expose((name,), fn)
    return op, fn


ISNAN, isnan = _classify("isnan", np.isnan, False, False)
ISINF, isinf = _classify("isinf", np.isinf, False, False)
ISPOSINF, isposinf = _classify("isposinf", lambda x: np.equal(x, np.inf), False, True)
ISNEGINF, isneginf = _classify("isneginf", lambda x: np.equal(x, -np.inf), False, True)
ISFINITE, isfinite = _classify("isfinite", np.isfinite, True, False)
ISREAL, isreal = _classify("isreal", lambda x: (np.ones(x.shape, dtype=np.bool_) if x.dtype.kind != "c"
                                                else np.equal(x.imag, 0)), True, False)

# ---- nan_to_num ------------------------------------------------------------------------------------------


def _nan_to_num_kernel(x, nan, posinf, neginf):
    r = x.copy()
    r[np.isnan(x)] = nan
    r[np.equal(x, np.inf)] = posinf
    r[np.equal(x, -np.inf)] = neginf
    return r


NAN_TO_NUM = register("nan_to_num", _nan_to_num_kernel,
                      lambda ctx, g: (_where_mask(g, ctx.inputs[0], "finite"),), save="i")


def nan_to_num(input, nan=0.0, posinf=None, neginf=None, *, out=None):
    """Replace NaN by ``nan``, +inf by ``posinf`` and -inf by ``neginf`` (default: the dtype's limits)."""
    _check(input, "nan_to_num")
    for arg, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        if v is not None and not isinstance(v, _number):
            raise TypeError(f"nan_to_num(): argument '{arg}' must be float, not {type(v).__name__}")
    dt = input._dtype
    if dt.category != _FLOAT:
        r = input.clone()                  # integers have no nan/inf
    else:
        fi = _dt.finfo(dt)
        attrs = {"nan": 0.0 if nan is None else float(nan),
                 "posinf": fi.max if posinf is None else float(posinf),
                 "neginf": fi.min if neginf is None else float(neginf)}
        r = apply(NAN_TO_NUM, (input,), attrs)
    return r if out is None else _out(r, out)


_expose(("nan_to_num",), nan_to_num, _inplace_of(nan_to_num, "nan_to_num"))

# ---- clamp --------------------------------------------------------------------------------------------


def _clamp_kernel(x, lo, hi, dt=None):
    if dt is not None:
        x = x.astype(dt, copy=False)
        if type(lo) is np.ndarray:
            lo = lo.astype(dt, copy=False)
        if type(hi) is np.ndarray:
            hi = hi.astype(dt, copy=False)
    dtype = x.dtype
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    # bfloat16 with a Python float bound would otherwise come back as float32
    return x if x.dtype == dtype else x.astype(dtype)


def _clamp_bw(ctx, g):
    x, lo, hi = ctx.inputs
    need = ctx.edges
    gx = apply(WHERE_MASK, (g, x, lo, hi), {"mode": "self"}) if need[0] is not None else None
    glo = apply(WHERE_MASK, (g, x, lo, hi), {"mode": "min"}) if need[1] is not None else None
    ghi = apply(WHERE_MASK, (g, x, lo, hi), {"mode": "max"}) if need[2] is not None else None
    return gx, glo, ghi


CLAMP = register("clamp", _clamp_kernel, _clamp_bw, save="i")
# torch's clamp overloads: Number bounds (1, the common case) or Tensor bounds (0); clamp_min / clamp_max
# are ops of their own there, with the same numbering the other way round
CLAMP.node_name = "ClampBackward1"
_CLAMP_NODES = {(n, tb): node_class(f"{c}Backward{i}")
                for n, c in (("clamp_min", "ClampMin"), ("clamp_max", "ClampMax")) for tb, i in ((False, 0), (True, 1))}
_CLAMP_NODES["clamp", True] = node_class("ClampBackward0")


def _bound_arg(v, name, arg):
    if v is None or isinstance(v, Tensor):
        return v
    if isinstance(v, _number):
        return v.item() if isinstance(v, (np.number, np.bool_)) else v
    raise TypeError(f"{name}() received an invalid combination of arguments - got {arg}="
                    f"{type(v).__name__}, but expected min and max to be both Tensors or both Numbers")


def clamp(input, min=None, max=None, *, out=None):  # noqa: A002 - torch's names
    """Clamp every element into [min, max]; min/max may be numbers or (broadcastable) tensors.

    Where min > max the result is max. The result dtype follows torch's promotion of input, min and max.
    """
    return _clamp(input, min, max, "clamp", out)


def _clamp(input, lo, hi, name, out=None):
    if (out is None and input.__class__ is Tensor and input._dtype.category == _FLOAT
            and (lo.__class__ is float or lo is None) and (hi.__class__ is float or hi is None)
            and (lo is not None or hi is not None)):
        return apply(CLAMP, (input, lo, hi))       # hot path: float tensor, Python float bounds
    if input.__class__ is not Tensor:
        _check(input, name)
    lo = _bound_arg(lo, name, "min")
    hi = _bound_arg(hi, name, "max")
    if lo is None and hi is None:
        raise RuntimeError(f"torch.{name}: At least one of 'min' or 'max' must not be None")
    if lo is not None and hi is not None and isinstance(lo, Tensor) != isinstance(hi, Tensor):
        raise TypeError(f"{name}() received an invalid combination of arguments - got (Tensor, "
                        f"{type(lo).__name__}, {type(hi).__name__}), but expected min and max to be both "
                        "Tensors or both Numbers")
    dt = _dt.result_type(input, lo, hi)
    if dt.is_complex:
        raise NotImplementedError("clamp is not supported for complex types")
    if dt.category < _FLOAT:
        # integer bounds must fit the result dtype, as torch checks
        info = np.iinfo(dt.np) if dt is not _dt.bool else None
        for b in (lo, hi):
            # torch lets uint8 take negative bounds down to -255 (they wrap around)
            if info is not None and isinstance(b, int) and not (
                    info.min <= b <= info.max or (dt is _dt.uint8 and -255 <= b < 0)):
                raise RuntimeError(f"value cannot be converted to type {dt.c_name} without overflow")
    if dt is _dt.uint8:
        lo = lo + 256 if isinstance(lo, int) and lo < 0 else lo
        hi = hi + 256 if isinstance(hi, int) and hi < 0 else hi
    if out is not None and out._dtype is not dt and not isinstance(lo, Tensor) and not isinstance(hi, Tensor):
        # torch's Number-bound clamp writes out= only in the result dtype (Tensor bounds cast)
        raise RuntimeError(f"Found dtype {dtype_name(out._dtype)} but expected {dtype_name(dt)}")
    attrs = None
    if (input._dtype is not dt or (isinstance(lo, Tensor) and lo._dtype is not dt)
            or (isinstance(hi, Tensor) and hi._dtype is not dt)):
        attrs = {"dt": dt.np}
    try:
        r = apply(CLAMP, (input, lo, hi), attrs) if attrs else apply(CLAMP, (input, lo, hi))
    except ValueError as e:
        if "broadcast" in str(e):
            from ._util import broadcast_error
            shapes = [a._data.shape for a in (input, lo, hi) if isinstance(a, Tensor)]
            raise broadcast_error(name, shapes) from None
        raise
    if name == "clamp" and (isinstance(lo, Tensor) or isinstance(hi, Tensor)):
        rename(r, _CLAMP_NODES["clamp", True])
    return r if out is None else _out(r, out)


def clamp_min(input, min, *, out=None):  # noqa: A002
    """max(input, min)."""
    if min is None:
        raise TypeError("clamp_min(): argument 'min' must be Number or Tensor, not NoneType")
    r = _clamp(input, min, None, "clamp_min", out)
    return r if out is not None else rename(r, _CLAMP_NODES["clamp_min", isinstance(min, Tensor)])


def clamp_max(input, max, *, out=None):  # noqa: A002
    """min(input, max)."""
    if max is None:
        raise TypeError("clamp_max(): argument 'max' must be Number or Tensor, not NoneType")
    r = _clamp(input, None, max, "clamp_max", out)
    return r if out is not None else rename(r, _CLAMP_NODES["clamp_max", isinstance(max, Tensor)])


def _clamp_result(self, iname: str, args, kw) -> None:
    """In-place check for clamp: the result type of ``self`` and the bounds must cast to ``self``'s."""
    _check(self, iname)
    bounds = [a for a in args] + [v for k, v in kw.items() if k in ("min", "max")]
    rt = _dt.result_type(self, *[b for b in bounds if b is not None and not isinstance(b, str)])
    if not can_cast(rt, self._dtype):
        raise _cast_error(rt, self)


_expose(("clamp",), clamp, _inplace_of(clamp, "clamp", _clamp_result))
_expose(("clip",), clamp, _inplace_of(clamp, "clip", _clamp_result))
_expose(("clamp_min",), clamp_min, _inplace_of(clamp_min, "clamp_min", _clamp_result))
_expose(("clamp_max",), clamp_max, _inplace_of(clamp_max, "clamp_max", _clamp_result))

# Python's abs(tensor)
Tensor.__abs__ = lambda self: abs(self)
