"""nn.Parameter and nn.Buffer: tensors that modules register as learnable state."""
from __future__ import annotations

from ..tensor import Tensor, wrap


class Parameter(Tensor):
    """A Tensor that a Module registers as a parameter when assigned as an attribute.

    Shares memory with the tensor it wraps; ``requires_grad`` defaults to True.
    """

    _is_param = True

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            from ..ops.creation import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter data must be a Tensor, got {type(data).__name__}")
        p = object.__new__(cls)
        p._data = data._data
        p._dtype = data._dtype
        p.grad_fn = None
        p._rg = False
        p._vc = data._get_vc()
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, *args, **kwargs):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, proto):
        from ..serialization import _reduce_tensor
        return _reduce_tensor(self)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        new = Parameter(wrap(self._data.copy(), self._dtype), self._rg)
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = new
        return new


class UninitializedParameter(Parameter):
    pass


class Buffer(Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a Module (``persistent`` flag)."""

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        if data is None:
            from ..ops.creation import empty
            data = empty(0)
        b = object.__new__(cls)
        b._data = data._data
        b._dtype = data._dtype
        b.grad_fn = None
        b._rg = data._rg
        b.persistent = persistent
        return b

    def __init__(self, *a, **k):
        pass


def is_lazy(p) -> bool:
    return isinstance(p, UninitializedParameter)
