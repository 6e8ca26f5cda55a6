"""``ember.autograd.Variable``: the pre-0.4 PyTorch wrapper, kept for old code as torch keeps it.

``Variable(t, requires_grad=False)`` returns a new tensor sharing ``t``'s data with no history (like
``t.detach()``), requiring grad if asked; ``volatile`` only warns. ``isinstance(x, Variable)`` is True
for every tensor.
"""
from __future__ import annotations

import warnings

from ..tensor import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class _ExecutionEngine:
    """``Variable._execution_engine``: what torch code reaches of the autograd engine."""

    @staticmethod
    def queue_callback(callback) -> None:
        from .engine import queue_callback
        queue_callback(callback)


class Variable(metaclass=_VariableMeta):
    """Deprecated: tensors are Variables. ``Variable(t, requires_grad=False, volatile=False)``."""

    _execution_engine = _ExecutionEngine()

    def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        if data is None:
            from ..ops.creation import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out
