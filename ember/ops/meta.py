"""Meta rules: the shape and dtype of an op's new outputs, computed from its arguments without running it.

``ember.memory`` uses them while a per-process memory limit is set, so that an op whose result would
pass the limit is refused *before* its kernel allocates and fills anything (``_limit_hook``). A rule is
``rule(*kernel_args, **attrs)`` -- the same NumPy arrays and Python values the kernel receives -- and
returns ``(shape, numpy_dtype)`` for one new array, a list of them for several, or None when the op
returns memory it did not allocate (a view, or its input unchanged).

A rule must never overstate: an op it sizes too big would be refused for no reason. One that raises
(arguments the kernel will reject anyway) is ignored. Ops without a rule are checked after their kernel
has run, when the result is wrapped (``ember.memory._track``): the rules cover the ops whose outputs
can be much bigger than their inputs (factories, broadcasting, concatenation, repetition, products,
padding) and the common elementwise families.

Importing this module attaches the rules to the registered ops (``OpDef.meta``); it is imported when a
memory limit is first set.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from .registry import REGISTRY


def output_bytes(op, args, attrs):
    """``(total bytes, shape, dtype)`` of ``op``'s new outputs for this call (the largest output's shape
    and dtype); ``(0, None, None)`` when the op has no rule or its rule does not apply."""
    from ..tensor import Tensor
    xs = [a._data if isinstance(a, Tensor) else a for a in args]
    try:
        res = op.meta(*xs, **attrs)
        if res is None:
            return 0, None, None
        if isinstance(res, tuple):
            res = [res]
        total, best = 0, (0, None, None)
        for shape, dtype in res:
            n = np.dtype(dtype).itemsize * math.prod(int(s) for s in shape)
            total += n
            if n >= best[0]:
                best = (n, tuple(int(s) for s in shape), dtype)
        return total, best[1], best[2]
    except Exception:        # noqa: BLE001 - the kernel raises the real error for bad arguments
        return 0, None, None


def _arrays(args):
    return [a for a in args if isinstance(a, np.ndarray)]


def _bshape(args):
    return np.broadcast_shapes(*[np.shape(a) for a in args if isinstance(a, (np.ndarray, np.generic))])


# ---- rule makers ------------------------------------------------------------------------------------


def elementwise(cmp=False):
    """Broadcasting ops: the broadcast shape; dtype ``out_dt``, else bool (comparisons), else the compute
    dtype ``dt``, else the arrays' common dtype."""
    def rule(*args, dt=None, out_dt=None, **_):
        shape = _bshape(args)
        if out_dt is not None:
            return shape, out_dt
        if cmp:
            return shape, np.bool_
        return shape, dt if dt is not None else np.result_type(*_arrays(args))
    return rule


def same_as_input(x, *args, **kw):
    """Same shape and dtype as the first argument."""
    return x.shape, x.dtype


def bool_like(x, *args, **kw):
    return x.shape, np.bool_


def _scan_rule(x, axis=None, reverse=False, dtype=None, **_):
    if dtype is None and x.dtype.kind in "biu":
        dtype = np.int64
    return x.shape, dtype if dtype is not None else x.dtype


def _where(c, x, y, dt=None):
    arrs = [a for a in (x, y) if isinstance(a, np.ndarray)]
    if dt is None and not arrs:
        raise ValueError("where: no dtype")                  # scalars only: not sized
    return _bshape((c, x, y)), dt if dt is not None else np.result_type(*arrs)


def _masked_fill(x, mask, value):
    return _bshape((x, mask)), x.dtype


def _clamp(x, lo, hi, dt=None):
    return _bshape((x, lo, hi)), dt if dt is not None else x.dtype


def _where_mask(v, x, lo, hi, mode, fill=0.0):
    return _bshape((v, x)), v.dtype


def _lerp(a, e, w):
    return _bshape((a, e, w)), a.dtype


def _addc(a, t1, t2, value, dt=None):
    return _bshape((a, t1, t2)), dt if dt is not None else a.dtype


def _isclose(x, y, *args, **kw):
    return _bshape((x, y)), np.bool_


def _cat(*xs, axis, dt, keep, sizes):
    if not keep:
        return (0,), dt
    ref = list(xs[keep[0]].shape)
    ref[axis] = builtins.sum(sizes[i] for i in keep)
    return tuple(ref), dt


def _repeat(x, reps):
    if not reps:
        return x.shape, x.dtype
    shp = (1,) * (len(reps) - x.ndim) + x.shape
    return tuple(r * s for r, s in zip(reps, shp)), x.dtype


def _repeat_interleave(x, reps, axis):
    shp = list(x.shape)
    shp[axis] = int(np.sum(reps)) if np.ndim(reps) else int(reps) * shp[axis]
    return tuple(shp), x.dtype


def _contiguous(x):
    return None if x.flags.c_contiguous else (x.shape, x.dtype)


def _reshape_copy(x, shape):
    return (x.size,), x.dtype


def _to_dtype(x, dt):
    return x.shape, dt


def _into(dst, *args, dt=None, **kw):
    # copy_ / fill_ / zero_: a fresh array of the destination's shape (written back in place)
    return dst.shape, dt if dt is not None else dst.dtype


def _matmul(a, b):
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: 0-d operand")
    sa = (1,) + a.shape if a.ndim == 1 else a.shape
    sb = b.shape + (1,) if b.ndim == 1 else b.shape
    shape = np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:]
    if b.ndim == 1:
        shape = shape[:-1]
    return shape, a.dtype


def _linear(x, w, b=None):
    return x.shape[:-1] + w.shape[:-1], x.dtype


def _index_select(x, index, dim):
    return x.shape[:dim] + np.shape(index) + x.shape[dim + 1:], x.dtype


def _gather(x, index, dim):
    return index.shape, x.dtype


def _embedding(w, idx, *args, **kw):
    return idx.shape + w.shape[1:], w.dtype


def _constant_pad(x, pads, value):
    return tuple(n + a + b for n, (a, b) in zip(x.shape, pads)), x.dtype


def _diag_embed(x, offset, dim1, dim2):
    n = x.shape[-1] + abs(offset)
    return x.shape[:-1] + (n, n), x.dtype


def _block_diag(*xs, dt, shapes):
    return (builtins.sum(s[0] for s in shapes), builtins.sum(s[1] for s in shapes)), dt


def _random_draw(gen=None, kind=None, shape=(), dt=None, a=None, b=None):
    return tuple(shape), dt.np


def _like_first(x, *args, **kw):
    return x.shape, x.dtype


# ---- the table ------------------------------------------------------------------------------------

_EW = ["add", "sub", "mul", "div", "div_floor", "div_trunc", "pow", "pow_tensor_scalar", "pow_scalar_tensor",
       "atan2", "hypot", "xlogy", "fmod", "remainder", "maximum", "minimum", "fmax", "fmin", "logaddexp",
       "logaddexp2", "copysign", "heaviside", "nextafter", "bitwise_and", "bitwise_or", "bitwise_xor",
       "bitwise_left_shift", "bitwise_right_shift"]
_CMP = ["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]
_SAME = ["neg", "abs", "square", "sign", "frac", "relu", "clone", "flip", "roll", "tril", "triu",
         "nan_to_num", "softmax", "log_softmax", "logcumsumexp", "logit", "bitwise_not", "bernoulli_p",
         # float-valued unary ops (ember.ops.unary._float_unary): inputs arrive as floats
         "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
         "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "deg2rad", "rad2deg",
         "sinc", "sigmoid", "erf", "erfc", "erfinv", "lgamma", "digamma", "i0"]

RULES = {
    **{n: elementwise() for n in _EW},
    **{n: elementwise(cmp=True) for n in _CMP},
    **{n: same_as_input for n in _SAME},
    "logical_not": bool_like, "signbit": bool_like,
    "where": _where, "masked_fill": _masked_fill, "clamp": _clamp, "where_mask": _where_mask,
    "lerp": _lerp, "addcmul": _addc, "addcdiv": _addc, "isclose": _isclose,
    "cumsum": _scan_rule, "cumprod": _scan_rule,
    "cat": _cat, "repeat": _repeat, "repeat_interleave": _repeat_interleave,
    "contiguous": _contiguous, "reshape_copy": _reshape_copy, "to_dtype": _to_dtype,
    "copy_": _into, "fill_": _into, "zero_": _into,
    "matmul": _matmul, "linear": _linear, "index_select": _index_select, "gather": _gather,
    "embedding": _embedding, "constant_pad_nd": _constant_pad, "diag_embed": _diag_embed,
    "block_diag": _block_diag, "random_draw": _random_draw,
}

# a meta result of these takes torch's elementwise layout (the softmaxes, flip, roll, tril/triu do not)
EW_NAMES = frozenset(_EW) | frozenset(_CMP) | frozenset(_SAME[_SAME.index("exp"):]) | frozenset(
    ["neg", "abs", "square", "sign", "frac", "relu", "clone", "nan_to_num", "logit", "bitwise_not", "where"])


def attach_rules() -> None:
    """Set ``OpDef.meta`` for every registered op with a rule (ops registered later keep theirs unset)."""
    for name, rule in RULES.items():
        op = REGISTRY.get(name)
        if op is not None and op.meta is None:
            op.meta = rule


attach_rules()
