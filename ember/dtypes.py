"""ember's dtypes and torch's type-promotion rules.

A dtype is a small immutable object that knows its NumPy dtype, its C name (for the compiler) and its
category (bool < integer < floating < complex). Promotion follows torch: dimensioned tensors outrank zero-dim
tensors, which outrank Python scalars, and a lower-priority operand only wins when its category is
higher (``int32_tensor + 2.5 -> float32``, ``int8_tensor + 1000 -> int8``).
"""
from __future__ import annotations

import numpy as np
import ml_dtypes

__all__ = [
    "dtype", "float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
    "uint8", "bool", "promote_types", "result_type", "can_cast", "get_default_dtype", "set_default_dtype",
    "float", "double", "half", "long", "int", "short", "complex64", "complex128", "cfloat", "cdouble",
    "finfo", "iinfo",
]

_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3


class dtype:
    """A tensor element type, e.g. ``ember.float32``."""

    __slots__ = ("name", "np", "itemsize", "category", "is_floating_point", "is_complex", "is_signed", "c_name", "_order",
                 "grad_ok", "_real", "_complex")

    def __init__(self, name: str, npdt, category: int, c_name: str, order: int):
        self.name = name
        self.np = np.dtype(npdt)
        self.itemsize = self.np.itemsize
        self.category = category
        self.is_floating_point = category == _FLOAT
        self.is_complex = category == _COMPLEX
        self.grad_ok = category >= _FLOAT     # autograd tracks floating and complex tensors
        self.is_signed = name not in ("uint8", "bool")
        self.c_name = c_name
        self._order = order
        self._real = self._complex = self

    def __repr__(self) -> str:
        return "ember." + self.name

    def to_real(self) -> "dtype":
        """The real dtype of a complex one (complex64 -> float32); real dtypes return themselves."""
        return self._real

    def to_complex(self) -> "dtype":
        """The complex dtype holding this floating dtype (float32 -> complex64), as torch's to_complex."""
        if self._complex is self and not self.is_complex:
            raise RuntimeError(f"to_complex is not supported for {self}")
        return self._complex

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))


def _dtype_by_name(name: str) -> dtype:
    return _BY_NAME[name]


bool = dtype("bool", np.bool_, _BOOL, "bool", 0)  # noqa: A001 - mirrors torch.bool
uint8 = dtype("uint8", np.uint8, _INT, "uint8_t", 1)
int8 = dtype("int8", np.int8, _INT, "int8_t", 2)
int16 = dtype("int16", np.int16, _INT, "int16_t", 3)
int32 = dtype("int32", np.int32, _INT, "int32_t", 4)
int64 = dtype("int64", np.int64, _INT, "int64_t", 5)
float16 = dtype("float16", np.float16, _FLOAT, "_Float16", 6)
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, _FLOAT, "__bf16", 7)
float32 = dtype("float32", np.float32, _FLOAT, "float", 8)
float64 = dtype("float64", np.float64, _FLOAT, "double", 9)

# torch's aliases
float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16
complex64 = dtype("complex64", np.complex64, _COMPLEX, "float _Complex", 10)
complex128 = dtype("complex128", np.complex128, _COMPLEX, "double _Complex", 11)
complex64._real, complex128._real = float32, float64
float32._complex, float64._complex = complex64, complex128
cfloat = complex64
cdouble = complex128

REAL = (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
COMPLEX = (complex64, complex128)
ALL = REAL + COMPLEX
_BY_NAME = {d.name: d for d in ALL}
_BY_NP = {d.np: d for d in ALL}


def from_numpy_dtype(npdt) -> dtype:
    """Map a NumPy dtype to ember's; raises TypeError for unsupported ones."""
    d = _BY_NP.get(npdt)
    if d is None:
        d = _BY_NP.get(np.dtype(npdt))
        if d is None:
            raise TypeError(
                f"can't convert np.ndarray of type {np.dtype(npdt)}. The only supported types are: "
                "float64, float32, float16, bfloat16, complex64, complex128, int64, int32, int16, int8, uint8, "
                "and bool.")
    return d


def _promote_pair(a: dtype, b: dtype) -> dtype:
    if a is b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == _INT:
        # uint8 with a signed type needs the next signed width that holds both ranges
        if a is uint8 or b is uint8:
            other = b if a is uint8 else a
            return int16 if other is int8 else other
        return a if a._order > b._order else b
    if a.category == _FLOAT:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a._order > b._order else b
    if b.category == _COMPLEX:   # both complex
        return a if a._order > b._order else b
    return a


def _promote_cat(a: dtype, b: dtype) -> dtype:
    # complex with a floating type keeps the wider value type (float64 + complex64 -> complex128)
    c, r = (a, b) if a.category == _COMPLEX else (b, a)
    if c.category == _COMPLEX and r.category == _FLOAT and r is float64:
        return complex128
    return _promote_pair(a, b)


_PROMOTE = {(a, b): _promote_cat(a, b) for a in ALL for b in ALL}


def promote_types(type1: dtype, type2: dtype) -> dtype:
    """torch.promote_types: the smallest dtype both can be cast to without losing category.

        >>> ember.promote_types(ember.uint8, ember.int8)
        ember.int16
    """
    for i, (name, d) in enumerate((("type1", type1), ("type2", type2))):
        if not isinstance(d, dtype):
            raise TypeError(f"promote_types(): argument '{name}' (position {i + 1}) must be torch.dtype, "
                            f"not {type(d).__name__}")
    return _PROMOTE[(type1, type2)]


def can_cast(from_: dtype, to: dtype) -> bool:
    """torch.can_cast: whether casting ``from_`` to ``to`` is allowed by the promotion rules (no
    floating -> integral, no non-bool -> bool).

        >>> ember.can_cast(ember.float32, ember.int32)
        False
    """
    for i, (name, d) in enumerate((("from_", from_), ("to", to))):
        if not isinstance(d, dtype):
            raise TypeError(f"can_cast(): argument '{name}' (position {i + 1}) must be torch.dtype, "
                            f"not {type(d).__name__}")
    if from_.category >= _FLOAT and to.category < from_.category:
        return False
    if from_.category > _BOOL and to.category == _BOOL:
        return False
    return True


_default = [float32]


def get_default_dtype() -> dtype:
    return _default[0]


def set_default_dtype(d: dtype) -> None:
    if d not in (float32, float64, float16, bfloat16):
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default[0] = d


def _combine(higher, lower):
    # torch's combine_categories
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.category == _COMPLEX:
        return higher
    if lower.category == _COMPLEX:
        # a complex operand of lower priority keeps a floating higher one's value type
        return _complex_of(higher) if higher.category == _FLOAT else lower
    if higher.category == _FLOAT:
        return higher
    if higher is bool or lower.category == _FLOAT:
        return _PROMOTE[(higher, lower)]
    return higher


def scalar_dtype(x) -> dtype:
    """The dtype a Python scalar takes when wrapped (bool, int64, or the default float)."""
    t = type(x)
    if t is builtins_bool or isinstance(x, (np.bool_,)):
        return bool
    if t is builtins_int or isinstance(x, np.integer):
        return int64
    if t is builtins_float or isinstance(x, np.floating):
        return _default[0]
    if isinstance(x, builtins_int):
        return int64        # an int subclass (ember.compile's symbolic sizes while tracing)
    if isinstance(x, (complex, np.complexfloating)):
        return complex128 if _default[0] is float64 else complex64
    raise TypeError(f"expected a Tensor or a Python number, got {type(x).__name__}")


import builtins as _b  # noqa: E402

builtins_bool, builtins_int, builtins_float = _b.bool, _b.int, _b.float


def result_type(*operands) -> dtype:
    """torch.result_type: the dtype an elementwise op on these tensors / Python scalars computes in.

    Dimensioned tensors outrank zero-dim tensors, which outrank Python scalars; a lower-ranked operand
    only matters when its category (bool < integer < floating) is higher.

        >>> ember.result_type(ember.tensor([1, 2], dtype=ember.int8), 2.5)
        ember.float32
    """
    dim = zero = wrapped = None
    for x in operands:
        dt = getattr(x, "_dtype", None)
        if dt is not None:
            if x._data.ndim:
                dim = dt if dim is None else _PROMOTE[(dim, dt)]
            else:
                zero = dt if zero is None else _PROMOTE[(zero, dt)]
        elif x is not None:
            dt = scalar_dtype(x)
            wrapped = dt if wrapped is None else _PROMOTE[(wrapped, dt)]
    return _combine(dim, _combine(zero, wrapped))


def _complex_of(d: dtype) -> dtype:
    """The complex dtype of a floating one; float16/bfloat16 would need complex32, which ember lacks."""
    if d is float64:
        return complex128
    if d is float32:
        return complex64
    raise TypeError(f"complex values with {d} need complex32 (torch.chalf), which ember does not support; "
                    "supported complex dtypes are complex64 and complex128")


class finfo:
    """torch.finfo: machine limits of a floating dtype."""

    def __init__(self, type: dtype | None = None):  # noqa: A002
        type = type or _default[0]
        type = type.to_real()
        if not type.is_floating_point:
            raise TypeError(f"torch.finfo() requires a floating point input type, got {type}")
        fi = ml_dtypes.finfo(type.np) if type is bfloat16 else np.finfo(type.np)
        self.bits = type.itemsize * 8
        self.eps = builtins_float(fi.eps)
        self.max = builtins_float(fi.max)
        self.min = builtins_float(fi.min)
        self.tiny = builtins_float(fi.tiny)
        self.smallest_normal = self.tiny
        self.resolution = builtins_float(fi.resolution)
        self.dtype = type.name

    def __repr__(self):
        return f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, eps={self.eps}, tiny={self.tiny}, dtype={self.dtype})"


class iinfo:
    """torch.iinfo: limits of an integer dtype."""

    def __init__(self, type: dtype):  # noqa: A002
        if type.category != _INT:
            raise TypeError(f"torch.iinfo() requires an integer input type, got {type}")
        ii = np.iinfo(type.np)
        self.bits = type.itemsize * 8
        self.max = builtins_int(ii.max)
        self.min = builtins_int(ii.min)
        self.dtype = type.name
