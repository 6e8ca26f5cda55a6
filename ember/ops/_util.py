"""Small helpers shared by the op families: argument normalisation and torch-style error text."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor, _wrap_dim, wrap
from .. import dtypes as _dt


def wrap_dim(dim: int, ndim: int) -> int:
    return _wrap_dim(dim, ndim)


def dims_arg(dim, ndim: int):
    """Normalise a ``dim`` argument (None, int, or sequence) to a sorted tuple of positive dims."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (int, np.integer)):
        return (_wrap_dim(int(dim), ndim),)
    out = tuple(sorted(_wrap_dim(int(d), ndim) for d in dim))
    if len(set(out)) != len(out):
        dup = next(d for d in out if out.count(d) > 1)
        raise RuntimeError(f"dim {dup} appears multiple times in the list of dims")
    return out


def shape_arg(args) -> tuple:
    """Accept ``f(2, 3)``, ``f((2, 3))``, ``f([2, 3])`` or ``f(ember.Size)`` as a shape."""
    if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
        a = args[0]
        if isinstance(a, Tensor):
            return tuple(int(x) for x in a.tolist()) if a.ndim else (int(a.item()),)
        args = a
    try:
        return tuple(int(a) if not isinstance(a, Tensor) else int(a.item()) for a in args)
    except TypeError:
        raise TypeError(f"expected a sequence of integers as a shape, got {args!r}") from None


def fmt_shape(s) -> str:
    return "[" + ", ".join(str(x) for x in s) + "]"


def broadcast_error(op: str, shapes) -> RuntimeError:
    """torch's message for incompatible broadcast shapes, naming the op."""
    a = shapes[0]
    for b in shapes[1:]:
        nd = max(len(a), len(b))
        pa = (1,) * (nd - len(a)) + tuple(a)
        pb = (1,) * (nd - len(b)) + tuple(b)
        for i in reversed(range(nd)):  # torch names the rightmost mismatching dim
            if pa[i] != pb[i] and pa[i] != 1 and pb[i] != 1:
                return RuntimeError(
                    f"{op}: The size of tensor a ({pa[i]}) must match the size of tensor b ({pb[i]}) "
                    f"at non-singleton dimension {i}")
        a = tuple(max(x, y) if min(x, y) != 0 else 0 for x, y in zip(pa, pb))
    return RuntimeError(f"{op}: shapes {', '.join(fmt_shape(s) for s in shapes)} cannot be broadcast")


def can_cast(src: _dt.dtype, dst: _dt.dtype) -> bool:
    """torch.can_cast: no float -> integral, no non-bool -> bool."""
    if src.category == 2 and dst.category < 2:
        return False
    if src.category > 0 and dst.category == 0:
        return False
    return True


def scalar_type_name(d) -> str:
    from .registry import dtype_name
    return dtype_name(d)


def zeros_like_t(t: Tensor) -> Tensor:
    return wrap(np.zeros(t._data.shape, dtype=t._dtype.np), t._dtype)


def check_tensor(x, op: str, arg: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' (position 1) must be Tensor, not {type(x).__name__}")
    return x


_INT_OF = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64,
           np.dtype(np.float16): np.int16}


def select(mask: np.ndarray, a, b=0):
    """``np.where(mask, a, b)`` computed with bit masks when it can be.

    On this machine's NumPy, ``np.where`` with an unpredictable mask runs ~20x slower than a
    branch-free bitwise select (measured: 2.2 ms vs 0.1 ms for 512x256 float32), so float arrays of
    the mask's shape take the bitwise path; everything else falls back to ``np.where``.
    """
    if (type(a) is np.ndarray and type(mask) is np.ndarray and a.shape == mask.shape and a.dtype in _INT_OF
            and mask.dtype == np.bool_ and mask.ndim > 0
            and a.flags.c_contiguous and mask.flags.c_contiguous):
        it = _INT_OF[a.dtype]
        if isinstance(b, (int, float)) and b == 0 and not (isinstance(b, float) and np.copysign(1.0, b) < 0):
            m = mask.view(np.uint8).astype(it)
            np.negative(m, out=m)
            return np.bitwise_and(a.view(it), m, out=m).view(a.dtype)
        if type(b) is np.ndarray and b.shape == a.shape and b.dtype == a.dtype and b.flags.c_contiguous:
            m = mask.view(np.uint8).astype(it)
            np.negative(m, out=m)                    # all ones where mask
            ai, bi = a.view(it), b.view(it)
            out = np.bitwise_and(ai, m)
            np.invert(m, out=m)
            np.bitwise_and(bi, m, out=m)
            np.bitwise_or(out, m, out=out)
            return out.view(a.dtype)
    return np.where(mask, a, b)
