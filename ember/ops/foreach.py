"""torch's ``_foreach_*`` functions: one op applied to every tensor of a list (EMA updates, hand-written
optimizers and gradient utilities call them). Out-of-place forms return a tuple of new tensors; in-place
forms (``_``) update each tensor and return the list, as torch's. The second operand may be a scalar, a
list of scalars, a 0-d tensor, a tensor of one scalar per tensor (addcmul/addcdiv) or a list of tensors.
"""
from __future__ import annotations

import builtins
import numbers

from ..tensor import Tensor
from .registry import attach

_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
          "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin",
          "sinh", "sqrt", "tan", "tanh", "trunc")
_BINARY = ("add", "sub", "mul", "div", "pow", "clamp_min", "clamp_max", "maximum", "minimum")


def _check_list(tensors, op):
    if not isinstance(tensors, (list, tuple)) or not builtins.all(isinstance(t, Tensor) for t in tensors):
        raise TypeError(f"_foreach_{op}(): argument 'self' must be a list of Tensors")
    return list(tensors)


def _per_tensor(other, n, op):
    """``other`` spread over ``n`` tensors: one value each."""
    if isinstance(other, (list, tuple)):
        if len(other) != n:
            what = "Tensor list" if other and isinstance(other[0], Tensor) else "scalar list"
            raise RuntimeError(f"Tensor list must have same number of elements as {what}.")
        return list(other)
    if isinstance(other, Tensor) and other.ndim == 1 and other.shape[0] == n and n != 1:
        return [other[i] for i in range(n)]
    return [other] * n


def _call(t, name, inplace, *args, **kw):
    return getattr(t, name + ("_" if inplace else ""))(*args, **kw)


def _unary(name, inplace):
    def fn(self):
        ts = _check_list(self, name)
        out = [_call(t, name, inplace) for t in ts]
        return self if inplace else tuple(out)
    return fn


def _binary(name, inplace):
    method = {"clamp_min": "clamp_min", "clamp_max": "clamp_max"}.get(name, name)

    def fn(self, other, *, alpha=None):
        if name == "pow" and isinstance(self, numbers.Number):      # scalar ** each tensor
            return tuple(Tensor.__rpow__(t, self) for t in _check_list(other, name))
        ts = _check_list(self, name)
        kw = {} if alpha is None else {"alpha": alpha}
        outs = []
        for t, o in zip(ts, _per_tensor(other, len(ts), name)):
            if name in ("maximum", "minimum") and not isinstance(o, Tensor):
                o = t.new_tensor(o)
            outs.append(_call(t, method, inplace, o, **kw))
        return self if inplace else tuple(outs)
    return fn


def _pointwise(name, inplace):
    def fn(self, tensor1, tensor2, value=1):
        ts = _check_list(self, name)
        vals = _per_tensor(value, len(ts), name)
        outs = [_call(t, name, inplace, a, b, value=float(v) if isinstance(v, Tensor) else v)
                for t, a, b, v in zip(ts, tensor1, tensor2, vals)]
        return self if inplace else tuple(outs)
    return fn


def _lerp(inplace):
    def fn(self, tensors1, weight):
        ts = _check_list(self, "lerp")
        ws = _per_tensor(weight, len(ts), "lerp")
        outs = [_call(t, "lerp", inplace, e, w) for t, e, w in zip(ts, tensors1, ws)]
        return self if inplace else tuple(outs)
    return fn


def _foreach_norm(self, ord=2, dtype=None):
    from .. import linalg
    return tuple(linalg.vector_norm(t, ord, dtype=dtype) for t in _check_list(self, "norm"))


def _foreach_max(self):
    return tuple(t.max() for t in _check_list(self, "max"))


def _foreach_copy_(self, src, non_blocking=False):
    for t, s in zip(_check_list(self, "copy_"), src):
        t.copy_(s)
    return self


def _foreach_zero_(self):
    for t in _check_list(self, "zero_"):
        t.zero_()
    return self


def _foreach_clone(self):
    return tuple(t.clone() for t in _check_list(self, "clone"))


__all__: list = []


def _install():
    def put(name, fn):
        fn.__name__ = fn.__qualname__ = name
        attach(name, fn, method=False)
        globals()[name] = fn
        __all__.append(name)
    for n in _UNARY:
        put(f"_foreach_{n}", _unary(n, False))
        put(f"_foreach_{n}_", _unary(n, True))
    for n in _BINARY:
        put(f"_foreach_{n}", _binary(n, False))
        put(f"_foreach_{n}_", _binary(n, True))
    for n in ("addcmul", "addcdiv"):
        put(f"_foreach_{n}", _pointwise(n, False))
        put(f"_foreach_{n}_", _pointwise(n, True))
    put("_foreach_lerp", _lerp(False))
    put("_foreach_lerp_", _lerp(True))
    for fn in (_foreach_norm, _foreach_max, _foreach_copy_, _foreach_zero_, _foreach_clone):
        put(fn.__name__, fn)


_install()
