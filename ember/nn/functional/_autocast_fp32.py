"""Ops that CPU autocast runs in float32, as torch's autocast does (its "fp32" list): inside
``ember.autocast("cpu")`` their float16/bfloat16 tensor arguments are cast up to float32 first, so losses
(cross entropy, MSE, BCE, KL, ...), ``cdist``, ``grid_sample``, 3-d pooling and reflection/replication
padding give float32 results from low-precision activations. Outside autocast the wrapper is one check.
"""
from __future__ import annotations

import functools

from ... import dtypes as _dt
from ...amp.state import AUTOCAST
from ...tensor import Tensor

__all__ = ["autocast_fp32", "to_fp32"]

_LOW = (_dt.float16, _dt.bfloat16)


def to_fp32(v):
    """``v`` cast to float32 when it is a float16/bfloat16 tensor (a list/tuple of them element-wise)."""
    if isinstance(v, Tensor):
        return v.float() if v._dtype in _LOW else v
    if isinstance(v, (list, tuple)) and any(isinstance(a, Tensor) for a in v):
        return type(v)(to_fp32(a) for a in v)
    return v


def autocast_fp32(fn):
    """``fn`` with its low-precision tensor arguments cast to float32 while CPU autocast is on."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if AUTOCAST[0] is None:
            return fn(*args, **kwargs)
        return fn(*[to_fp32(a) for a in args], **{k: to_fp32(v) for k, v in kwargs.items()})
    return wrapper
