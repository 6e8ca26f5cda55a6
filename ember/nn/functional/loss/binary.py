"""Binary cross entropy: ``binary_cross_entropy`` (torch's log clamp at -100 and its gradient rule) and
``binary_cross_entropy_with_logits`` (stable, with ``pos_weight``), fused ops with derivatives in ember ops.
"""
from __future__ import annotations


import numpy as np

from ....ops.registry import register, apply, dtype_name
from ..activation import logsigmoid as _logsigmoid, _clamp
from ._common import _ember, _need_float, _no_grad_arg, _reduction, _size_str, _tensor_arg, _up

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits"]


# ---- binary cross entropy ----------------------------------------------------------------------------------

def _weighted_reduce(loss, w, reduction: str, od):
    """The elementwise ``loss`` times the weight ``w`` (if any), reduced, as dtype ``od``."""
    if w is not None:
        loss = loss * w
    r = loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()
    return np.asarray(r).astype(od, copy=False)


def _bce_kernel(x, t, w, reduction):
    od = x.dtype
    x, t, w = _up(x), _up(t), _up(w)
    if not ((x >= 0) & (x <= 1)).all():         # (NaN too)
        raise RuntimeError("all elements of input should be between 0 and 1")
    if not ((t >= 0) & (t <= 1)).all():
        raise RuntimeError("all elements of target should be between 0 and 1")
    # torch clamps each log at -100 so that x = 0 or 1 gives a finite loss
    loss = t * _clamp(np.log(x), lo=-100)
    loss += (1 - t) * _clamp(np.log1p(-x), lo=-100)
    loss = -loss
    return _weighted_reduce(loss, w, reduction, od)


def _bce_bw(ctx, g):
    e = _ember()
    x, t, w = ctx.inputs
    reduction = ctx.attrs["reduction"]
    if reduction == "mean":
        g = g / max(x.numel(), 1) if x.numel() else g * float("nan")
    gx = gt = None
    if ctx.edges[0] is not None:
        # torch's rule: (x - t) / max(x (1 - x), 1e-12)
        gx = g * (x - t) / e.clamp_min((1 - x) * x, 1e-12)
        if w is not None:
            gx = gx * w
    if ctx.edges[1] is not None:
        gt = g * (e.clamp_min((-x).log1p(), -100) - e.clamp_min(x.log(), -100))
        if w is not None:
            gt = gt * w
    return gx, gt, None


BCE = register("binary_cross_entropy", _bce_kernel, _bce_bw, save="i")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
    """-w (t log x + (1 - t) log(1 - x)) with each log clamped at -100, as torch."""
    _tensor_arg(input, "binary_cross_entropy", "input", 1)
    _tensor_arg(target, "binary_cross_entropy", "target", 2)
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({_size_str(target)}) that is different to the input size "
                         f"({_size_str(input)}) is deprecated. Please ensure they have the same size.")
    _need_float(input, "binary_cross_entropy")
    if target._dtype is not input._dtype:
        raise RuntimeError(f"Found dtype {dtype_name(target._dtype)} but expected {dtype_name(input._dtype)}")
    if weight is not None:
        _tensor_arg(weight, "binary_cross_entropy", "weight", 3)
        try:
            np.broadcast_shapes(tuple(weight.shape), tuple(target.shape))
            if np.broadcast_shapes(tuple(weight.shape), tuple(target.shape)) != tuple(target.shape):
                raise ValueError
        except ValueError:
            raise RuntimeError(f"binary_cross_entropy: weight of shape {list(weight.shape)} cannot be broadcast "
                               f"to the input shape {list(input.shape)}") from None
        if weight._dtype is not input._dtype:
            raise RuntimeError(f"Found dtype {dtype_name(weight._dtype)} but expected {dtype_name(input._dtype)}")
        _no_grad_arg(weight, "binary_cross_entropy", "weight")
    return apply(BCE, (input, target, weight), {"reduction": reduction})


def _bcel_kernel(x, t, w, pw, reduction):
    od = np.result_type(*[a.dtype for a in (x, t, w, pw) if a is not None])
    x, t, w, pw = _up(x), _up(t), _up(w), _up(pw)
    # log sigmoid(x) without overflow
    log_sig = _clamp(x, hi=0) - np.log1p(np.exp(-np.abs(x)))
    if pw is not None:
        log_sig = log_sig * ((pw - 1) * t + 1)
    loss = (1 - t) * x - log_sig
    return _weighted_reduce(loss, w, reduction, od)


def _bcel_bw(ctx, g):
    e = _ember()
    x, t, w, pw = ctx.inputs
    reduction = ctx.attrs["reduction"]
    if reduction == "mean":
        n = int(np.prod(np.broadcast_shapes(*[tuple(a.shape) for a in (x, t, w, pw) if a is not None])))
        g = g / n if n else g * float("nan")
    if w is not None:
        g = g * w
    gx = gt = None
    if ctx.edges[0] is not None:
        s = x.sigmoid()
        gx = g * (s - t) if pw is None else g * (((pw - 1) * t + 1) * s - pw * t)
    if ctx.edges[1] is not None:
        gt = -g * x if pw is None else g * (-x - (pw - 1) * _logsigmoid(x))
    return gx, gt, None, None


BCEL = register("binary_cross_entropy_with_logits", _bcel_kernel, _bcel_bw, save="i")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction: str = "mean", pos_weight=None):
    """Sigmoid + binary cross entropy in one numerically stable op; ``pos_weight`` weighs positives."""
    _tensor_arg(input, "binary_cross_entropy_with_logits", "input", 1)
    _tensor_arg(target, "binary_cross_entropy_with_logits", "target", 2)
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({_size_str(target)}) must be the same as input size ({_size_str(input)})")
    _need_float(input, "binary_cross_entropy_with_logits")
    _no_grad_arg(weight, "binary_cross_entropy_with_logits", "weight")
    _no_grad_arg(pos_weight, "binary_cross_entropy_with_logits", "pos_weight")
    shapes = [tuple(input.shape)] + [tuple(a.shape) for a in (weight, pos_weight) if a is not None]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        from ....ops._util import broadcast_error
        raise broadcast_error("binary_cross_entropy_with_logits", shapes) from None
    return apply(BCEL, (input, target, weight, pos_weight), {"reduction": reduction})
