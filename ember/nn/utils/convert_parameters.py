"""parameters_to_vector / vector_to_parameters: flatten parameters into one vector and back."""
from __future__ import annotations

from ...tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters) -> Tensor:
    """Concatenate the flattened ``parameters`` into one 1-D tensor (differentiable, like ``torch.cat``)."""
    from ... import cat
    return cat([p.view(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Make each parameter's data the matching slice of ``vec`` (the parameters then share ``vec``'s memory)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected ember.Tensor, but got: {type(vec).__name__}")
    pointer = 0
    for p in parameters:
        n = p.numel()
        p.data = vec[pointer:pointer + n].view_as(p).data
        pointer += n
