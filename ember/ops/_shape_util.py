"""Argument helpers shared by the shape families (shape_join, shape_rearrange, copies): tensor lists,
int lists, ``out=`` and zeros."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor, wrap


# ---- argument helpers ---------------------------------------------------------------------------------


def _tensor_list(tensors, op: str) -> list:
    """Check a ``tensors`` sequence argument the way torch's argument parser does."""
    if isinstance(tensors, Tensor):
        raise TypeError(f"{op}(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor")
    if not isinstance(tensors, (list, tuple)):
        tensors = list(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
    return list(tensors)


def _varargs_tensors(tensors, op: str) -> list:
    """``f(a, b)`` or ``f([a, b])`` (as meshgrid, block_diag, atleast_*d accept)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    return _tensor_list(tensors, op)


def _int_list(x, op: str, arg: str) -> tuple:
    """An int or a sequence of ints (NumPy ints and integer tensors too); floats and strings are torch's
    TypeError, never truncated."""
    if isinstance(x, (int, np.integer)):
        return (int(x),)
    if isinstance(x, Tensor) and x._dtype.category == 1:
        x = x.tolist()
        return (x,) if isinstance(x, int) else tuple(x)
    if isinstance(x, (str, bytes, Tensor)) or not hasattr(x, "__iter__"):
        raise TypeError(f"{op}(): argument '{arg}' must be tuple of ints, not {type(x).__name__}")
    out = []
    for i, v in enumerate(x):
        if not isinstance(v, (int, np.integer)):
            raise TypeError(f"{op}(): argument '{arg}' must be tuple of ints, but found element of type "
                            f"{type(v).__name__} at pos {i}")
        out.append(int(v))
    return tuple(out)


def _out(result: Tensor, out) -> Tensor:
    from .inplace import copy_out
    return copy_out(result, out)


def _zeros(shape, dtype) -> Tensor:
    return wrap(np.zeros(shape, dtype=dtype.np), dtype)
