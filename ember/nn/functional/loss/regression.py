"""Regression losses: MSE, L1, smooth L1 and Huber, as compositions of ember ops with torch's formulas.
"""
from __future__ import annotations



from ....ops.registry import dtype_name, rename
from ._common import (_LOSS_NODES, _ember, _legacy_reduction, _need_float, _reduce, _reduction, _size_warning,
    _tensor_arg)

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"]


# ---- regression losses ----------------------------------------------------------------------------------

def _expand_pair(input, target, name):
    e = _ember()
    if tuple(input.shape) == tuple(target.shape):
        return input, target
    try:
        return tuple(e.broadcast_tensors(input, target))
    except RuntimeError:
        from ....ops._util import broadcast_error
        raise broadcast_error(name, [tuple(input.shape), tuple(target.shape)]) from None


def _weighted(loss, weight, input, reduction, mean_by_weight: bool):
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / weight.sum() if mean_by_weight else loss.mean()
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")


def _pair_args(input, target, name: str, size_average, reduce, reduction):
    """The checks every (input, target) loss starts with: tensors, torch's size warning, the legacy
    reduction flags; the pair broadcast together and the reduction."""
    _tensor_arg(input, name, "input", 1)
    _tensor_arg(target, name, "target", 2)
    _size_warning(input, target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    x, t = _expand_pair(input, target, name)
    return x, t, reduction


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    """Mean squared error ``(input - target)^2`` (optionally weighted elementwise)."""
    x, t, reduction = _pair_args(input, target, "mse_loss", size_average, reduce, reduction)
    if weight is not None:
        return _weighted((x - t).square(), weight, input, reduction, True)
    reduction = _reduction(None, None, reduction)
    if x._dtype.category != 2 or t._dtype.category != 2:
        _need_float(x if x._dtype.category != 2 else t, "mse_cpu")
    return rename(_reduce((x - t).square(), reduction), _LOSS_NODES["MseLoss"])


def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    """Mean absolute error ``|input - target|`` (optionally weighted elementwise)."""
    x, t, reduction = _pair_args(input, target, "l1_loss", size_average, reduce, reduction)
    if weight is not None:
        return _weighted((x - t).abs(), weight, input, reduction, True)
    reduction = _reduction(None, None, reduction)
    loss = (x - t).abs()
    if reduction == "mean" and loss._dtype.category != 2:
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           f"complex dtype. Got: {dtype_name(loss._dtype)}")
    return _reduce(loss, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target); L1 for beta = 0."""
    _tensor_arg(input, "smooth_l1_loss", "input", 1)
    _tensor_arg(target, "smooth_l1_loss", "target", 2)
    _size_warning(input, target)
    reduction = _reduction(size_average, reduce, reduction)
    x, t = _expand_pair(input, target, "smooth_l1_loss")
    if beta == 0.0:
        return _reduce((x - t).abs(), reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = x - t
    z = d.abs()
    loss = _ember().where(z < beta, d * d * (0.5 / beta), z - 0.5 * beta)
    return rename(_reduce(loss, reduction), _LOSS_NODES["SmoothL1Loss"])


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta) (d = input - target)."""
    _tensor_arg(input, "huber_loss", "input", 1)
    _tensor_arg(target, "huber_loss", "target", 2)
    _size_warning(input, target)
    x, t = _expand_pair(input, target, "huber_loss")
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = x - t
    z = d.abs()
    loss = _ember().where(z < delta, d * d * 0.5, (z - 0.5 * delta) * delta)
    if weight is not None:
        return _weighted(loss, weight, input, reduction, False)
    return rename(_reduce(loss, _reduction(None, None, reduction)), _LOSS_NODES["HuberLoss"])
