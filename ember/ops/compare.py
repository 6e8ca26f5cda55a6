"""Comparisons, logical and bitwise ops: eq/ne/lt/le/gt/ge, equal/isclose/allclose, logical_*, bitwise_*.

Every op here is registered ``differentiable=False`` (results are bool or integer). Comparisons promote
their operands with torch's rules (``int_tensor < 2.5`` compares in float32; ``uint8_tensor > -1`` wraps
the scalar to uint8 exactly as torch does) and return bool. Logical ops do not promote: they only look at
truthiness. Bitwise ops work on bool and integer tensors only.

This module also holds ``ew_kernel``, the NumPy-kernel wrapper shared with ``ops/binary.py``.
"""
from __future__ import annotations

import numpy as np
import ml_dtypes

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from ..autograd.grad_mode import GRAD
from .registry import register, apply, attach, dtype_name
from .elementwise import binary, inplace, _run, _out
from ._layout_rule import first_wins

_NUM = (int, float, bool, complex, np.number, np.bool_)
_HALF = frozenset((np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)))
_COMPLEX_NP = frozenset((np.dtype(np.complex64), np.dtype(np.complex128)))
_CNAME = {np.dtype(np.complex64): "ComplexFloat", np.dtype(np.complex128): "ComplexDouble"}


# ---- the kernel wrapper shared by the binary families -------------------------------------------

def _cast(x, dt):
    return x.astype(dt, copy=False) if type(x) is np.ndarray else np.asarray(x).astype(dt)


def ew_kernel(f, *, half_up: bool = True, cmp: bool = False, complex_ok: bool = True, name: str = ""):
    """Wrap ``f(x, y)`` (NumPy arrays / Python scalars) as a registry kernel.

    ``dt`` casts both operands to the promoted dtype first; float16/bfloat16 are computed in float32
    (torch's "opmath" type) when ``half_up``; the result is cast to ``out_dt`` if given, else to the
    operand dtype (or bool for comparisons, ``cmp=True``). Floating-point warnings are silenced because
    inf/nan results are legitimate values, as in torch. Without ``complex_ok`` a complex operand raises
    torch's NotImplementedError naming ``name`` (the dtype test is the one the half check already makes).
    """
    special = (_HALF if half_up else frozenset()) | (frozenset() if complex_ok else _COMPLEX_NP)

    def k(x, y, dt=None, out_dt=None):
        with np.errstate(all="ignore"):
            if dt is not None:
                x = _cast(x, dt)
                y = _cast(y, dt)
            work = x.dtype if type(x) is np.ndarray else np.asarray(y).dtype
            if work in special:
                if work.kind == "c":
                    if name in ("maximum", "minimum"):
                        raise RuntimeError(f"{name} not implemented for complex tensors.")
                    raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_CNAME[work]}'")
                x = _cast(x, np.float32)
                y = _cast(y, np.float32)
            r = f(x, y)
            target = out_dt if out_dt is not None else (np.bool_ if cmp else work)
            r = np.asarray(r)
            if r.ndim > 1 and type(y) is np.ndarray and y.ndim > 1 and type(x) is np.ndarray \
                    and not x.flags.c_contiguous:
                r = first_wins(r, x)    # (torch's layout when the operands' layouts disagree)
            return r if r.dtype == target else r.astype(target)
    k.__name__ = getattr(f, "__name__", "kernel")
    return k


def is_number(x) -> bool:
    return isinstance(x, _NUM) and not isinstance(x, Tensor)


def need_tensor(x, op: str, arg: str, pos: int) -> None:
    """torch's TypeError for an argument that must be a Tensor."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' (position {pos}) must be Tensor, not {type(x).__name__}")


def need_tensor_or_number(x, op: str, arg: str, pos: int) -> None:
    if not isinstance(x, Tensor) and not is_number(x):
        raise TypeError(f"{op}(): argument '{arg}' (position {pos}) must be Tensor or Number, "
                        f"not {type(x).__name__}")


def not_implemented_for(kernel_name: str, d) -> NotImplementedError:
    """torch's error for a dtype a CPU kernel does not support, e.g. '"lshift_cpu" not implemented for 'Float''."""
    return NotImplementedError(f"\"{kernel_name}\" not implemented for '{dtype_name(d)}'")


def _zero_grad_like(result: Tensor, self: Tensor) -> Tensor:
    """``result`` (cast to self's dtype) connected to ``self`` with a zero derivative.

    torch gives in-place comparisons such as ``x.eq_(y)`` a zero gradient rather than cutting the graph;
    ``where`` with an all-true mask has exactly that derivative for its third argument.
    """
    from .binary import where
    keep = wrap(np.ones((), dtype=np.bool_), _dt.bool)
    return where(keep, result.to(self._dtype), self)


# ---- comparisons ----------------------------------------------------------------------------------

EQ = register("eq", ew_kernel(np.equal, half_up=False, cmp=True), differentiable=False)
NE = register("ne", ew_kernel(np.not_equal, half_up=False, cmp=True), differentiable=False)
LT = register("lt", ew_kernel(complex_ok=False, name="lt", f=np.less, half_up=False, cmp=True), differentiable=False)
LE = register("le", ew_kernel(complex_ok=False, name="le", f=np.less_equal, half_up=False, cmp=True), differentiable=False)
GT = register("gt", ew_kernel(complex_ok=False, name="gt", f=np.greater, half_up=False, cmp=True), differentiable=False)
GE = register("ge", ew_kernel(complex_ok=False, name="ge", f=np.greater_equal, half_up=False, cmp=True), differentiable=False)

_CMP_OPS = {"eq": EQ, "ne": NE, "lt": LT, "le": LE, "gt": GT, "ge": GE}


def _make_compare(name: str, op, doc: str):
    def fn(input, other, *, out=None):
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}() received an invalid combination of arguments - got "
                            f"({type(input).__name__}, {type(other).__name__}), but expected one of: "
                            "(Tensor input, Tensor other) or (Tensor input, Number other)")
        need_tensor_or_number(other, name, "other", 2)
        r = binary(op, input, other, kind="bool", name=name)
        return r if out is None else _out(r, out)
    fn.__name__ = name
    fn.__doc__ = doc
    return fn


eq = _make_compare("eq", EQ, "Elementwise ``input == other`` (bool result), with broadcasting and promotion.")
ne = _make_compare("ne", NE, "Elementwise ``input != other`` (bool result).")
lt = _make_compare("lt", LT, "Elementwise ``input < other`` (bool result).")
le = _make_compare("le", LE, "Elementwise ``input <= other`` (bool result).")
gt = _make_compare("gt", GT, "Elementwise ``input > other`` (bool result).")
ge = _make_compare("ge", GE, "Elementwise ``input >= other`` (bool result).")


def _make_compare_(name: str, fn):
    def method(self, other):
        from .inplace import write_result

        def compute(s):
            r = fn(s, other)
            # torch keeps the graph with a zero derivative through in-place comparisons
            return _zero_grad_like(r, s) if GRAD[0] and s._rg else r
        return write_result(self, compute, name)
    method.__name__ = name
    method.__doc__ = f"In-place ``{name[:-1]}``: writes 1/0 (True/False) into ``self``, keeping its dtype."
    return method


_ALIASES = {"eq": ("eq",), "ne": ("ne", "not_equal"), "lt": ("lt", "less"), "le": ("le", "less_equal"),
            "gt": ("gt", "greater"), "ge": ("ge", "greater_equal")}
for _base, _names in _ALIASES.items():
    _f = globals()[_base]
    for _n in _names:
        attach(_n, _f)
        attach(_n + "_", _make_compare_(_n + "_", _f), function=False)


def _dunder_compare(fn):
    def method(self, other):
        # unsupported operands (None, str, list) defer to Python: ``t == None`` is False, ``t < None`` a TypeError
        if not isinstance(other, Tensor) and not is_number(other):
            return NotImplemented
        return fn(self, other)
    return method


Tensor.__eq__ = _dunder_compare(eq)
Tensor.__ne__ = _dunder_compare(ne)
Tensor.__lt__ = _dunder_compare(lt)
Tensor.__le__ = _dunder_compare(le)
Tensor.__gt__ = _dunder_compare(gt)
Tensor.__ge__ = _dunder_compare(ge)
# defining __eq__ must not make tensors unhashable: identity hashing, as in torch
Tensor.__hash__ = lambda self: id(self)


# ---- equal / isclose / allclose ------------------------------------------------------------------

def equal(input, other) -> bool:
    """``True`` if both tensors have the same shape and equal elements (compared after promotion)."""
    need_tensor(input, "equal", "input", 1)
    need_tensor(other, "equal", "other", 2)
    if input._data.shape != other._data.shape:
        return False
    return _all_true(eq(input, other))


def _isclose_kernel(x, y, rtol, atol, equal_nan, cast_dt):
    with np.errstate(all="ignore"):
        close = np.equal(x, y)
        floating = x.dtype.kind == "f" or x.dtype in _HALF
        if equal_nan and floating:
            close = close | (np.isnan(x) & np.isnan(y))
        if rtol == 0 and atol == 0:
            return np.asarray(close)
        if not floating:
            # integers are compared in the default float dtype (no wrap-around in x - y)
            x = x.astype(cast_dt)
            y = y.astype(cast_dt)
        allowed = atol + np.abs(rtol * y)
        actual = np.abs(x - y)
        return np.asarray(close | (np.isfinite(actual) & (actual <= allowed)))


ISCLOSE = register("isclose", _isclose_kernel, differentiable=False)


def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (or exact equality), bool result."""
    need_tensor(input, "isclose", "input", 1)
    need_tensor(other, "isclose", "other", 2)
    if input._dtype is not other._dtype:
        raise RuntimeError(f"{dtype_name(input._dtype)} did not match {dtype_name(other._dtype)}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    attrs = {"rtol": float(rtol), "atol": float(atol), "equal_nan": bool(equal_nan),
             "cast_dt": _dt.get_default_dtype().np}
    return _run(ISCLOSE, (input, other), attrs)


def allclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """``True`` if ``isclose`` holds for every element."""
    need_tensor(input, "allclose", "input", 1)
    need_tensor(other, "allclose", "other", 2)
    return _all_true(isclose(input, other, rtol, atol, equal_nan))


def _all_true(t) -> bool:
    """Whether every element of the bool tensor ``t`` is true (a device tensor reduces on the device)."""
    d = t._data
    return bool(d.all()) if type(d) is np.ndarray else bool(t.all().item())


attach("equal", equal)
attach("isclose", isclose)
attach("allclose", allclose)


# ---- logical ops ----------------------------------------------------------------------------------

def _truth(x):
    # nonzero (and NaN) is true; bfloat16 has no NumPy logical loops, so compare with zero instead
    return x if x.dtype == np.bool_ else np.not_equal(x, 0)


LOGICAL_AND = register("logical_and", lambda x, y: np.logical_and(_truth(x), _truth(y)), differentiable=False)
LOGICAL_OR = register("logical_or", lambda x, y: np.logical_or(_truth(x), _truth(y)), differentiable=False)
LOGICAL_XOR = register("logical_xor", lambda x, y: np.logical_xor(_truth(x), _truth(y)), differentiable=False)
LOGICAL_NOT = register("logical_not", lambda x: np.logical_not(_truth(x)), differentiable=False)


def _make_logical(name: str, op):
    def fn(input, other, *, out=None):
        need_tensor(input, name, "input", 1)
        need_tensor(other, name, "other", 2)
        r = _run(op, (input, other), None)
        return r if out is None else _out(r, out)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name.split('_')[1].upper()} of the truth values of ``input`` and ``other`` (bool result)."
    return fn


logical_and = _make_logical("logical_and", LOGICAL_AND)
logical_or = _make_logical("logical_or", LOGICAL_OR)
logical_xor = _make_logical("logical_xor", LOGICAL_XOR)


def logical_not(input, *, out=None) -> Tensor:
    """Elementwise NOT of the truth values of ``input`` (bool result)."""
    need_tensor(input, "logical_not", "input", 1)
    r = apply(LOGICAL_NOT, (input,))
    return r if out is None else _out(r, out)


def _logical_inplace(name: str, fn):
    def method(self, *args):
        from .inplace import _writable
        # any dtype may hold the 0/1 result, so there is no can-cast check (torch: f.logical_and_(i));
        # torch records nothing for these, so ``self`` keeps its autograd history as it was
        _writable(self, name)
        r = fn(self, *args)
        if r._data.shape != self._data.shape:
            raise RuntimeError(f"{name}: output with shape {list(self._data.shape)} doesn't match the "
                               f"broadcast shape {list(r._data.shape)}")
        np.copyto(self._data, r._data, casting="unsafe")
        self._bump()
        return self
    method.__name__ = name
    method.__doc__ = f"In-place ``{name[:-1]}``: writes 1/0 into ``self``, keeping its dtype."
    return method


for _n, _f in [("logical_and", logical_and), ("logical_or", logical_or), ("logical_xor", logical_xor),
               ("logical_not", logical_not)]:
    attach(_n, _f)
    attach(_n + "_", _logical_inplace(_n + "_", _f), function=False)


# ---- bitwise ops ----------------------------------------------------------------------------------

def _lshift(x, y):
    x = np.asarray(x)
    y = np.asarray(y)
    bits = x.dtype.itemsize * 8
    # torch: a shift by a negative amount or by >= the width gives 0
    bad = (y < 0) | (y >= bits)
    r = np.left_shift(x, np.where(bad, 0, y).astype(y.dtype))
    return np.where(bad, 0, r).astype(x.dtype)


def _rshift(x, y):
    x = np.asarray(x)
    y = np.asarray(y)
    max_shift = x.dtype.itemsize * 8 - (1 if x.dtype.kind == "i" else 0)
    # torch: out-of-range shifts fill with the sign bit (a >> max_shift)
    bad = (y < 0) | (y >= max_shift)
    return np.right_shift(x, np.where(bad, max_shift, y).astype(y.dtype)).astype(x.dtype)


BITWISE_AND = register("bitwise_and", ew_kernel(np.bitwise_and, half_up=False), differentiable=False)
BITWISE_OR = register("bitwise_or", ew_kernel(np.bitwise_or, half_up=False), differentiable=False)
BITWISE_XOR = register("bitwise_xor", ew_kernel(np.bitwise_xor, half_up=False), differentiable=False)
BITWISE_NOT = register("bitwise_not", np.invert, differentiable=False)
LSHIFT = register("bitwise_left_shift", ew_kernel(_lshift, half_up=False), differentiable=False)
RSHIFT = register("bitwise_right_shift", ew_kernel(_rshift, half_up=False), differentiable=False)

_KERNEL_NAMES = {"bitwise_and": "bitwise_and_cpu", "bitwise_or": "bitwise_or_cpu",
                 "bitwise_xor": "bitwise_xor_cpu", "bitwise_left_shift": "lshift_cpu",
                 "bitwise_right_shift": "rshift_cpu"}


def _make_bitwise(name: str, op, allow_bool: bool = True):
    def fn(input, other, *, out=None):
        if not isinstance(input, Tensor) and not isinstance(other, Tensor):
            raise TypeError(f"{name}() received an invalid combination of arguments - got "
                            f"({type(input).__name__}, {type(other).__name__}), but expected at least one Tensor")
        need_tensor_or_number(input, name, "input", 1)
        need_tensor_or_number(other, name, "other", 2)
        dt = _dt.result_type(input, other)
        if dt.is_floating_point or (dt is _dt.bool and not allow_bool):
            raise not_implemented_for(_KERNEL_NAMES[name], dt)
        r = binary(op, input, other, name=name)
        return r if out is None else _out(r, out)
    fn.__name__ = name
    return fn


bitwise_and = _make_bitwise("bitwise_and", BITWISE_AND)
bitwise_or = _make_bitwise("bitwise_or", BITWISE_OR)
bitwise_xor = _make_bitwise("bitwise_xor", BITWISE_XOR)
bitwise_left_shift = _make_bitwise("bitwise_left_shift", LSHIFT, allow_bool=False)
bitwise_right_shift = _make_bitwise("bitwise_right_shift", RSHIFT, allow_bool=False)
bitwise_and.__doc__ = "Elementwise bitwise AND of bool/integer tensors (logical AND for bool)."
bitwise_or.__doc__ = "Elementwise bitwise OR of bool/integer tensors."
bitwise_xor.__doc__ = "Elementwise bitwise XOR of bool/integer tensors."
bitwise_left_shift.__doc__ = "Elementwise ``input << other`` on integer tensors (shifts >= the width give 0)."
bitwise_right_shift.__doc__ = "Elementwise arithmetic ``input >> other`` on integer tensors."


def bitwise_not(input, *, out=None) -> Tensor:
    """Elementwise bitwise NOT of a bool/integer tensor (logical NOT for bool)."""
    need_tensor(input, "bitwise_not", "input", 1)
    if input._dtype.is_floating_point:
        raise not_implemented_for("bitwise_not_cpu", input._dtype)
    r = apply(BITWISE_NOT, (input,))
    return r if out is None else _out(r, out)


def _bitwise_not_(self):
    from .inplace import write_result
    if self._dtype.is_floating_point:
        raise not_implemented_for("bitwise_not_cpu", self._dtype)
    return write_result(self, bitwise_not, "bitwise_not_")


def _bitwise_inplace(name: str, fn):
    def method(self, other):
        return inplace(self, fn, other, name)
    method.__name__ = name
    method.__doc__ = f"In-place ``{name[:-1]}``."
    return method


for _n, _f in [("bitwise_and", bitwise_and), ("bitwise_or", bitwise_or), ("bitwise_xor", bitwise_xor),
               ("bitwise_left_shift", bitwise_left_shift), ("bitwise_right_shift", bitwise_right_shift)]:
    attach(_n, _f)
    attach(_n + "_", _bitwise_inplace(_n + "_", _f), function=False)
attach("bitwise_not", bitwise_not)
attach("bitwise_not_", _bitwise_not_, function=False)


def _dunder(fn, reflected: bool = False):
    def method(self, other):
        if not isinstance(other, Tensor) and not is_number(other):
            return NotImplemented
        return fn(other, self) if reflected else fn(self, other)
    return method


def _idunder(fn, name: str):
    def method(self, other):
        if not isinstance(other, Tensor) and not is_number(other):
            return NotImplemented
        return inplace(self, fn, other, name)
    return method


def _invert(self):
    if self._dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return bitwise_not(self)


for _dn, _f, _iname in [("and", bitwise_and, "bitwise_and_"), ("or", bitwise_or, "bitwise_or_"),
                        ("xor", bitwise_xor, "bitwise_xor_"), ("lshift", bitwise_left_shift, "bitwise_left_shift_"),
                        ("rshift", bitwise_right_shift, "bitwise_right_shift_")]:
    setattr(Tensor, f"__{_dn}__", _dunder(_f))
    setattr(Tensor, f"__r{_dn}__", _dunder(_f, reflected=True))
    setattr(Tensor, f"__i{_dn}__", _idunder(_f, _iname))
Tensor.__invert__ = _invert
