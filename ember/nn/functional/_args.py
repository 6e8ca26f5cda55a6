"""Argument helpers shared by the functional families (conv, pooling, vision): per-dim int tuples
with torch's checks, and shapes as torch's messages print them."""
from __future__ import annotations

import numpy as np

from ...tensor import Tensor


def shape_str(s) -> str:
    """A shape as torch's messages print it: ``[2, 3]``."""
    return "[" + ", ".join(str(v) for v in s) + "]"


def int_tuple(v, n: int, name: str, op: str, wrong_length: str, tensor_ok: bool = False) -> tuple:
    """``v`` (an int, or a sequence of 1 or ``n`` ints) as an ``n``-tuple (torch's _single/_pair with
    checks). A sequence of another length raises RuntimeError(``wrong_length``, formatted with ``name``,
    ``n``, ``op`` and ``vals``, the values as a list); anything else is torch's TypeError. ``tensor_ok``:
    a tensor is read as its values (convolutions accept that)."""
    if tensor_ok and isinstance(v, Tensor):
        v = v.tolist()
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v),) * n
    if isinstance(v, (tuple, list)):
        vals = tuple(int(x) for x in v)
        if len(vals) == 1:
            return vals * n
        if len(vals) == n:
            return vals
        raise RuntimeError(wrong_length.format(name=name, n=n, op=op, vals=list(vals)))
    raise TypeError(f"{op}(): argument '{name}' must be tuple of ints, not {type(v).__name__}")
