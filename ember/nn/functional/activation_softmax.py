"""torch.nn.functional's activations that work along a dim: softmax, log_softmax, softmin (ember's
softmax ops, ``ember/ops/reduce_softmax.py``, with F's implicit-dim rule), glu and gumbel_softmax.
"""
from __future__ import annotations

import warnings

from ...ops.registry import node_class, rename, apply
from ...ops.reduce_softmax import SOFTMAX, LOG_SOFTMAX, softmax as _softmax, log_softmax as _log_softmax
from ...tensor import Tensor
from .activation import _check_tensor, _ember
from ._channels_last import contiguous_result

__all__ = ["softmin", "softmax", "log_softmax", "glu", "gumbel_softmax"]

_GLU_NODE = node_class("GluBackward0")


# ---- softmax family --------------------------------------------------------------------------------------

def _get_softmax_dim(name: str, ndim: int, stacklevel: int) -> int:
    """torch's implicit dim choice (deprecated): 0 for 0-, 1- and 3-d inputs, else 1, with a warning."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. "
                  "Change the call to include dim=X as an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    """exp(x) / sum(exp(x)) along ``dim`` (``dtype`` casts the input first)."""
    return _along(SOFTMAX, _softmax, "softmax", input, dim, _stacklevel, dtype)


def log_softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    """log(softmax(x)) along ``dim``, computed stably."""
    return _along(LOG_SOFTMAX, _log_softmax, "log_softmax", input, dim, _stacklevel, dtype)


def _along(op, fn, name, input, dim, stacklevel, dtype):
    """F.softmax / F.log_softmax: a floating tensor with an int dim in range goes straight to the op (the
    attributes ``fn`` would record); anything else through ``fn``, which checks and casts. torch's result
    is contiguous whatever the input's layout."""
    if type(input) is Tensor and type(dim) is int and dtype is None and input._dtype.is_floating_point:
        nd = input._data.ndim
        if -nd <= dim < nd:
            return contiguous_result(apply(op, (input,), {"axis": dim + nd if dim < 0 else dim}))
    _check_tensor(input, name)
    if dim is None:
        dim = _get_softmax_dim(name, input.ndim, stacklevel + 1)
    return contiguous_result(fn(input, dim, dtype=dtype))


def softmin(input, dim=None, _stacklevel: int = 3, dtype=None):
    """softmax(-x) along ``dim``."""
    _check_tensor(input, "softmin")
    if dim is None:
        dim = _get_softmax_dim("softmin", input.ndim, _stacklevel)
    return _ember().softmax(-input, dim, dtype=dtype)


def glu(input, dim: int = -1):
    """Gated linear unit: a * sigmoid(b) where a, b are the two halves of ``input`` along ``dim``."""
    _check_tensor(input, "glu")
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    from ...ops._util import wrap_dim
    d = wrap_dim(dim, input.ndim)
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    a, b = input.chunk(2, d)
    return rename(a * b.sigmoid(), _GLU_NODE)


def gumbel_softmax(logits, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1):
    """Samples from the Gumbel-softmax (concrete) distribution: ``softmax((logits + g) / tau)`` with
    Gumbel(0, 1) noise ``g``; ``hard=True`` returns one-hot vectors whose gradient is the soft sample's
    (straight-through)."""
    from ...ops.creation import empty_like, zeros_like
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = -empty_like(logits).exponential_().log()
    gumbels = (logits + gumbels) / tau
    y_soft = gumbels.softmax(dim)
    if hard:
        index = y_soft.max(dim, keepdim=True)[1]
        y_hard = zeros_like(logits).scatter_(dim, index, 1.0)
        return y_hard - y_soft.detach() + y_soft
    return y_soft
