"""Helpers shared by the distributions: broadcasting parameters, probs <-> logits, lazy properties."""
from __future__ import annotations

import numbers

from .. import dtypes as _dt
from ..tensor import Tensor

__all__ = ["broadcast_all", "probs_to_logits", "logits_to_probs", "clamp_probs", "lazy_property",
           "vec_to_tril_matrix", "tril_matrix_to_vec"]


def broadcast_all(*values):
    """Broadcast tensors and Python numbers together; numbers become tensors of the tensors' dtype
    (the default dtype when all are numbers)."""
    from ..ops.creation import tensor
    from .. import broadcast_tensors
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, torch.Tensor or objects "
                         "implementing __torch_function__.")
    if not all(isinstance(v, Tensor) for v in values):
        dtype = _dt.get_default_dtype()
        for v in values:
            if isinstance(v, Tensor):
                dtype = v.dtype
                break
        values = [v if isinstance(v, Tensor) else tensor(v, dtype=dtype) for v in values]
    return broadcast_tensors(*values)


def _standard_normal(shape, dtype):
    from ..ops.random_ops import randn
    return randn(shape, dtype=dtype)


def _sum_rightmost(value, dim: int):
    """Sum out the ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    required_shape = value.shape[:value.dim() - dim] + (-1,)
    return value.reshape(required_shape).sum(-1)


def logits_to_probs(logits, is_binary: bool = False):
    """Probabilities from logits: sigmoid for binary events, softmax over the last dim otherwise."""
    from .. import sigmoid
    from ..nn.functional import softmax
    if is_binary:
        return sigmoid(logits)
    return softmax(logits, dim=-1)


def clamp_probs(probs):
    """Clamp probabilities into [eps, 1 - eps] of their dtype."""
    eps = _dt.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary: bool = False):
    """Logits from probabilities: log-odds for binary events, log-probabilities otherwise."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return ps_clamped.log() - (-ps_clamped).log1p()
    return ps_clamped.log()


class lazy_property:
    """A property computed on first access and then stored on the instance (torch's lazy_property)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        from ..autograd.grad_mode import enable_grad
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property, property):
    def __init__(self, wrapped):
        property.__init__(self, wrapped)


def _tril_mask(n, diag):
    from ..ops.creation import arange
    r = arange(n)
    return r < r.view(-1, 1) + (diag + 1)


def vec_to_tril_matrix(vec, diag: int = 0):
    """The ``(..., n, n)`` matrix whose entries on and below diagonal ``diag`` are ``vec``'s last dim
    (row by row), zeros elsewhere."""
    m = 1 + 2 * diag
    n = (-m + (m * m + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if round(n) - n > _dt.finfo(vec.dtype).eps:
        raise ValueError(f"The size of last dimension is {vec.shape[-1]} which cannot be expressed as the "
                         "lower triangular part of a square D x D matrix.")
    n = round(n)
    mat = vec.new_zeros(tuple(vec.shape[:-1]) + (n, n))
    mat[..., _tril_mask(n, diag)] = vec
    return mat


def tril_matrix_to_vec(mat, diag: int = 0):
    """The entries of ``mat`` on and below diagonal ``diag``, row by row, as the last dim."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    return mat[..., _tril_mask(n, diag)]
