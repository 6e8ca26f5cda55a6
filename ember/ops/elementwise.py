"""Elementwise arithmetic: the binary-op machinery (promotion, scalars, in-place forms) and the core ops.

A binary op is registered once with a NumPy kernel ``k(x, y)``. Its public function settles the result
dtype by torch's promotion rules (``dtypes.result_type``); when operand dtypes differ from it the kernel
receives ``dt`` and casts its inputs. Same-dtype tensor/tensor and tensor/Python-number calls skip all
of that: they are the hot path.
"""
from __future__ import annotations

import warnings as _warnings

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from ..autograd.grad_mode import GRAD
from .registry import register, apply, attach, HOOKS, dtype_name, node_class, rename, observed, _EMPTY
from ..autograd.node import Node
from .._numpy_quiet import FILTER as _FP_FILTER
from ._util import broadcast_error, can_cast
from ._layout_rule import first_wins

_FLOAT = 2
_num = (int, float, bool, complex)


def _cast_kernel(f, result_cast=True):
    """Wrap a NumPy function ``f(x, y)`` so that ``dt`` (compute dtype) casts inputs and result."""
    def k(x, y, dt=None, out_dt=None):
        if dt is not None:
            x = x.astype(dt, copy=False) if type(x) is np.ndarray else np.asarray(x).astype(dt)
            y = y.astype(dt, copy=False) if type(y) is np.ndarray else np.asarray(y).astype(dt)
        r = f(x, y)
        if r.ndim > 1 and type(y) is np.ndarray and y.ndim > 1 and type(x) is np.ndarray \
                and not x.flags.c_contiguous:
            r = first_wins(r, x)        # (torch's layout when the operands' layouts disagree)
        if out_dt is not None and r.dtype != out_dt:
            r = r.astype(out_dt)
        return r
    return k


def binary(op, a, b, kind: str = "same", name: str | None = None):
    """Dispatch a binary elementwise op with torch's promotion.

    kind: "same" (result = promoted dtype), "float" (integers promote to the default float),
    "bool" (computed in the promoted dtype, result bool).
    """
    ta = type(a) is Tensor or isinstance(a, Tensor)
    tb = type(b) is Tensor or isinstance(b, Tensor)
    if ta and tb:
        da, db = a._dtype, b._dtype
        if da is db and (kind != "float" or da.category == _FLOAT) and da is not _dt.bfloat16:
            return _run(op, (a, b), None)
        dt = _dt.result_type(a, b)
    elif ta:
        da = a._dtype
        tb_ = type(b)
        if tb_ is float and da.category == _FLOAT and da is not _dt.bfloat16:
            # (not for Python ints: a dynamic-shape trace passes sizes as symbolic ints, which take the
            # path below, and a static trace must record the same op and attributes as it)
            return _run(op, (a, b), None)       # (NumPy computes in the tensor's float dtype, as torch)
        if not isinstance(b, _num) and not isinstance(b, (np.number, np.bool_)):
            raise TypeError(f"{name or op.name}(): argument 'other' must be Tensor or Number, not {type(b).__name__}")
        dt = _dt.result_type(a, b)
    elif tb:
        if not isinstance(a, _num) and not isinstance(a, (np.number, np.bool_)):
            raise TypeError(f"{name or op.name}(): argument 'input' must be Tensor or Number, not {type(a).__name__}")
        dt = _dt.result_type(a, b)
    else:
        raise TypeError(f"{name or op.name}(): expected at least one Tensor argument, got "
                        f"{type(a).__name__} and {type(b).__name__}")
    if kind == "float" and dt.category < _FLOAT:
        dt = _dt.get_default_dtype()
    out_dt = _dt.bool.np if kind == "bool" else dt.np
    return _run(op, (a, b), {"dt": dt.np, "out_dt": out_dt})


def _run(op, args, attrs):
    try:
        return apply(op, args, attrs) if attrs else apply(op, args)
    except ValueError as e:
        if "broadcast" in str(e):
            shapes = [a._data.shape if isinstance(a, Tensor) else () for a in args]
            raise broadcast_error(op.name, shapes) from None
        raise
    except OverflowError as e:
        raise RuntimeError(f"{op.name}: value cannot be converted to the tensor's type without overflow: {e}") from None


def inplace(self: Tensor, fn, other, name: str, **kw) -> Tensor:
    """Run ``fn(self, other, **kw)`` out of place and write the result into ``self`` (torch's ``op_``)."""
    from .inplace import write_result, _writable
    if isinstance(other, Tensor):
        rt = _dt.result_type(self, other)
    else:
        rt = _dt.result_type(self, other) if other is not None else self._dtype
    if not can_cast(rt, self._dtype):
        raise RuntimeError(f"result type {dtype_name(rt)} can't be cast to the desired output type "
                           f"{dtype_name(self._dtype)}")
    if not kw and rt is self._dtype and fn in _UFUNC_OF and _direct_ok(self, other):
        # nothing records or watches this write: compute straight into self's buffer (no temporary)
        _writable(self, name)
        _UFUNC_OF[fn](self._data, other._data if isinstance(other, Tensor) else other, out=self._data)
        self._bump()
        return self
    return write_result(self, lambda s: fn(s, other, **kw), name)


def _direct_ok(self: Tensor, other) -> bool:
    """Whether ``self op= other`` may run as one NumPy ufunc with ``out=self``: same dtype throughout
    (or a Python number into a float tensor), no autograd record, no hook watching ops."""
    d = self._dtype
    if d is _dt.bool or d is _dt.bfloat16 or (HOOKS and observed()):
        return False
    if isinstance(other, Tensor):
        if other._dtype is not d or (GRAD[0] and (self._rg or other._rg)):
            return False
        shp = self._data.shape
        return other._data.shape == shp or _broadcasts_to(other._data.shape, shp)
    t = type(other)
    return (t is float or t is int) and d.category == _FLOAT and not (GRAD[0] and self._rg)


def _broadcasts_to(src, dst) -> bool:
    if len(src) > len(dst):
        return False
    return all(s == 1 or s == t for s, t in zip(reversed(src), reversed(dst)))


# ---- add / sub / mul / div ------------------------------------------------------------------------

def _add_bw(ctx, g):
    alpha = ctx.attrs.get("alpha", 1) if ctx.attrs else 1
    return g, (g if alpha == 1 else g * alpha)


def _alpha_kernel(f):
    """``_cast_kernel`` with torch's ``alpha`` scaling the second operand (add, sub)."""
    def k(x, y, dt=None, out_dt=None, alpha=1):
        if dt is not None:
            x = x.astype(dt, copy=False) if type(x) is np.ndarray else np.asarray(x).astype(dt)
            y = y.astype(dt, copy=False) if type(y) is np.ndarray else np.asarray(y).astype(dt)
        if alpha != 1:
            y = y * alpha
        r = f(x, y)
        if r.ndim > 1 and type(y) is np.ndarray and y.ndim > 1 and type(x) is np.ndarray \
                and not x.flags.c_contiguous:
            r = first_wins(r, x)        # (torch's layout when the operands' layouts disagree)
        if out_dt is not None and r.dtype != out_dt:
            r = r.astype(out_dt)
        return r
    return k


def _subtract(x, y):
    if x.dtype == np.bool_ if type(x) is np.ndarray else False:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    return np.subtract(x, y)


_add_kernel = _alpha_kernel(np.add)
_sub_kernel = _alpha_kernel(_subtract)


ADD = register("add", _add_kernel, _add_bw)
SUB = register("sub", _sub_kernel, lambda ctx, g: (g, -g if (ctx.attrs or {}).get("alpha", 1) == 1 else g * (-ctx.attrs["alpha"])))


def _mul_bw(ctx, g):
    need = ctx.edges
    a, b = ctx.inputs_reading(*[i for i in (1, 0) if need[1 - i] is not None])     # b for a's grad, a for b's
    return (g * b if need[0] is not None else None), (g * a if need[1] is not None else None)


MUL = register("mul", _cast_kernel(np.multiply), _mul_bw, save="i")


def _div_bw(ctx, g):
    need = ctx.edges
    a, b = ctx.inputs_reading(*((1,) if need[1] is None else (0, 1)))     # a only for b's gradient
    ga = g / b if need[0] is not None else None
    gb = (-g * a / (b * b)) if need[1] is not None else None
    return ga, gb


DIV = register("div", _cast_kernel(np.true_divide), _div_bw, save="i")


def _floor_div(x, y):
    if np.issubdtype(x.dtype, np.integer) and x.size and np.any(np.asarray(y) == 0):     # (empty: no division)
        raise RuntimeError("ZeroDivisionError")
    return np.floor_divide(x, y)


def _trunc_div(x, y):
    if np.issubdtype(np.result_type(x, y), np.integer):
        if np.asarray(x).size and np.any(np.asarray(y) == 0):
            raise RuntimeError("ZeroDivisionError")
        q = np.floor_divide(x, y)
        # C semantics: round toward zero
        adjust = (np.remainder(x, y) != 0) & ((np.asarray(x) < 0) != (np.asarray(y) < 0))
        return (q + adjust).astype(q.dtype)
    return np.trunc(np.true_divide(x, y))


def _zero_bw(ctx, g):
    return tuple(g * 0 if e is not None else None for e in ctx.edges)


DIV_FLOOR = register("div_floor", _cast_kernel(_floor_div), _zero_bw)
DIV_TRUNC = register("div_trunc", _cast_kernel(_trunc_div), _zero_bw)
DIV_FLOOR.node_name = DIV_TRUNC.node_name = "DivBackward2"   # torch's div(..., rounding_mode=) overload


def add(input, other, *, alpha=1, out=None) -> Tensor:
    """``input + alpha * other`` with torch's type promotion."""
    if alpha == 1 and out is None:
        return binary(ADD, input, other, name="add")
    if out is not None:
        return _out(add(input, other, alpha=alpha), out)
    if isinstance(alpha, float) and not (_dt.result_type(input, other).is_floating_point):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    return _with_alpha(ADD, input, other, alpha)


def _with_alpha(op, a, b, alpha):
    dt = _dt.result_type(a, b)
    attrs = {"alpha": alpha}
    if not (isinstance(a, Tensor) and isinstance(b, Tensor) and a._dtype is b._dtype is dt) or dt is _dt.bool:
        attrs.update(dt=dt.np, out_dt=dt.np)
    return _run(op, (a, b), attrs)


def sub(input, other, *, alpha=1, out=None) -> Tensor:
    """``input - alpha * other``."""
    if out is not None:
        return _out(sub(input, other, alpha=alpha), out)
    nbool = sum(1 for x in (input, other) if (x._dtype is _dt.bool if isinstance(x, Tensor) else isinstance(x, bool)))
    if nbool == 2:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if nbool == 1:
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")
    if alpha == 1:
        return binary(SUB, input, other, name="sub")
    return _with_alpha(SUB, input, other, alpha)


# torch's rsub is its own op (other - alpha * input), numbered by whether other is a Tensor (0) or a
# Number (1); ``number / tensor`` is reciprocal then mul in torch
_RSUB, _RSUB_SCALAR, _MUL = node_class("RsubBackward0"), node_class("RsubBackward1"), node_class("MulBackward0")


def rsub(input, other, *, alpha=1) -> Tensor:
    """``other - alpha * input``."""
    return rename(sub(other, input, alpha=alpha), _RSUB if isinstance(other, Tensor) else _RSUB_SCALAR)


def mul(input, other, *, out=None) -> Tensor:
    if out is not None:
        return _out(mul(input, other), out)
    return binary(MUL, input, other, name="mul")


def div(input, other, *, rounding_mode=None, out=None) -> Tensor:
    """True division, or rounded with ``rounding_mode`` "trunc" / "floor"."""
    if out is not None:
        return _out(div(input, other, rounding_mode=rounding_mode), out)
    if rounding_mode is None:
        return binary(DIV, input, other, kind="float", name="div")
    if rounding_mode in ("floor", "trunc"):
        if getattr(input, "_dtype", None) is _dt.bool and _dt.result_type(input, other) is _dt.bool:
            raise NotImplementedError(f"\"div_{rounding_mode}_cpu\" not implemented for 'Bool'")
        return binary(DIV_FLOOR if rounding_mode == "floor" else DIV_TRUNC, input, other, name="div")
    raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'")


def floor_divide(input, other, *, out=None) -> Tensor:
    return div(input, other, rounding_mode="floor", out=out)


def true_divide(input, other, *, out=None) -> Tensor:
    return div(input, other, out=out)


def _out(result: Tensor, out: Tensor) -> Tensor:
    """Write ``result`` into a user-given ``out=`` tensor (resizing an empty one, as torch does)."""
    from .inplace import copy_out
    return copy_out(result, out)


# ---- unary core -----------------------------------------------------------------------------------

NEG = register("neg", np.negative, lambda ctx, g: (-g,))


def neg(input, *, out=None) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"neg(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if input._dtype is _dt.bool:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")
    r = apply(NEG, (input,))
    return r if out is None else _out(r, out)


negative = neg

_UFUNC_OF = {add: np.add, sub: np.subtract, mul: np.multiply, div: np.true_divide}   # for inplace()

for _n, _f in [("add", add), ("sub", sub), ("mul", mul), ("div", div), ("neg", neg),
               ("negative", neg), ("floor_divide", floor_divide), ("true_divide", true_divide)]:
    attach(_n, _f)
attach("subtract", sub)
attach("rsub", rsub, method=False)      # torch has no Tensor.rsub
attach("multiply", mul)
attach("divide", div)

def _mk_div_(f, n):
    def method(self, other, **kw):
        # true division makes a float: an integral self cannot hold it (checked before anything is written)
        if kw.get("rounding_mode") is None and self._dtype.category < _FLOAT:
            raise RuntimeError(f"result type {dtype_name(_dt.get_default_dtype())} can't be cast to the desired "
                               f"output type {dtype_name(self._dtype)}")
        return inplace(self, f, other, n, **kw)
    method.__name__ = n
    return method


for _n, _f in [("add_", add), ("sub_", sub), ("mul_", mul), ("div_", div), ("floor_divide_", floor_divide),
               ("true_divide_", true_divide), ("subtract_", sub), ("multiply_", mul), ("divide_", div)]:
    def _mk(f, n):
        def method(self, other, **kw):
            return inplace(self, f, other, n, **kw)
        method.__name__ = n
        return method
    attach(_n, _mk(_f, _n) if _f not in (div, true_divide) else _mk_div_(_f, _n), function=False)


def _neg_(self):
    from .inplace import write_result
    return write_result(self, neg, "neg_")


attach("neg_", _neg_, function=False)
attach("negative_", _neg_, function=False)

# ---- Python operators -----------------------------------------------------------------------------

def _operator(op, ufunc, general, reflected=False):
    """Tensor's Python operator for ``op`` (``a + b`` and so on). The hot case, two float tensors of
    one dtype or a float tensor and a Python float with no hook installed, runs ``ufunc`` inline: the
    same arithmetic as the op's kernel, without the promotion logic or the generic ``apply``. Any other
    case, and any error (which the general path raises in torch's words), goes to ``general(self, other)``."""
    bf16 = _dt.bfloat16
    record = Node.record
    fp_filter = _FP_FILTER

    def method(self, other):
        d = self._dtype
        t = type(other) is not float
        filters = _warnings.filters
        if (not t or (isinstance(other, Tensor) and other._dtype is d)) and d.category == _FLOAT \
                and d is not bf16 and not HOOKS and filters and filters[0] is fp_filter[0]:
            o = other._data if t else other
            try:
                r = ufunc(o, self._data) if reflected else ufunc(self._data, o)
            except Exception:
                r = None
            if r is not None:
                if t and r.ndim > 1:          # (two tensors: their layouts may disagree)
                    x = o if reflected else self._data
                    if not x.flags.c_contiguous:
                        r = first_wins(r, x)
                out = wrap(r if type(r) is np.ndarray else np.asarray(r), d)
                if GRAD[0] and (self._rg or (t and other._rg)):
                    record(op, (other, self) if reflected else (self, other), _EMPTY, (out,))
                return out
        return general(self, other)
    return method


Tensor.__add__ = _operator(ADD, np.add, lambda self, other: binary(ADD, self, other, name="add"))
Tensor.__radd__ = _operator(ADD, np.add, lambda self, other: binary(ADD, other, self, name="add"), reflected=True)
Tensor.__iadd__ = lambda self, other: inplace(self, add, other, "add_")
Tensor.__sub__ = _operator(SUB, np.subtract, sub)
Tensor.__rsub__ = lambda self, other: rename(sub(other, self), _RSUB_SCALAR)
Tensor.__isub__ = lambda self, other: inplace(self, sub, other, "sub_")
Tensor.__mul__ = _operator(MUL, np.multiply, lambda self, other: binary(MUL, self, other, name="mul"))
Tensor.__rmul__ = _operator(MUL, np.multiply, lambda self, other: binary(MUL, other, self, name="mul"), reflected=True)
Tensor.__imul__ = lambda self, other: inplace(self, mul, other, "mul_")
Tensor.__truediv__ = _operator(DIV, np.true_divide, lambda self, other: binary(DIV, self, other, kind="float", name="div"))
Tensor.__rtruediv__ = lambda self, other: rename(binary(DIV, other, self, kind="float", name="div"), _MUL)
Tensor.__itruediv__ = lambda self, other: Tensor.div_(self, other)
Tensor.__floordiv__ = lambda self, other: floor_divide(self, other)
Tensor.__rfloordiv__ = lambda self, other: floor_divide(other, self)
Tensor.__ifloordiv__ = lambda self, other: inplace(self, floor_divide, other, "floor_divide_")
Tensor.__neg__ = lambda self: neg(self)
Tensor.__pos__ = lambda self: self
