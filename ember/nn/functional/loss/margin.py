"""Divergences, likelihoods, margin and embedding losses: short compositions of ember ops that follow
torch's formulas, so their gradients match torch's too.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .... import dtypes as _dt
from ....tensor import wrap
from ....ops.registry import rename
from ....autograd.grad_mode import no_grad
from ..activation import logsigmoid as _logsigmoid
from ._common import (_LOSS_NODES, _ember, _legacy_reduction, _no_grad_arg, _reduce, _reduction, _size_str,
    _tensor_arg)

__all__ = ["kl_div", "cosine_embedding_loss", "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
           "multilabel_soft_margin_loss", "poisson_nll_loss", "gaussian_nll_loss", "triplet_margin_loss",
           "triplet_margin_with_distance_loss", "multi_margin_loss", "multilabel_margin_loss"]


# ---- divergences and margins ------------------------------------------------------------------------------

def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False):
    """KL(target || exp(input)) pointwise: target (log target - input); ``reduction='batchmean'`` divides
    the sum by the batch size."""
    _tensor_arg(input, "kl_div", "input", 1)
    _tensor_arg(target, "kl_div", "target", 2)
    e = _ember()
    if size_average is not None or reduce is not None:
        red = _legacy_reduction(size_average, reduce)
    else:
        if reduction == "mean":
            warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                          "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                          "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                          UserWarning, stacklevel=2)
        red = "sum" if reduction == "batchmean" else _reduction(None, None, reduction)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = e.xlogy(target, target) - target * input
    out = _reduce(loss, red)
    if reduction == "batchmean" and input.ndim != 0:
        out = out / input.shape[0]
    return out


def cosine_embedding_loss(input1, input2, target, margin: float = 0, size_average=None, reduce=None,
                          reduction: str = "mean"):
    """1 - cos(x1, x2) for target 1, max(0, cos(x1, x2) - margin) for target -1."""
    for i, (a, n) in enumerate(((input1, "input1"), (input2, "input2"), (target, "target"))):
        _tensor_arg(a, "cosine_embedding_loss", n, i + 1)
    reduction = _reduction(size_average, reduce, reduction)
    e = _ember()
    td = target.ndim
    if td not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if td == 1 and not (input1.ndim == 2 and input2.ndim == 2):
        raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    if td == 0 and not (input1.ndim == 1 and input2.ndim == 1):
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    eps = 1e-12
    prod = (input1 * input2).sum(td)
    m1 = (input1 * input1).sum(td) + eps
    m2 = (input2 * input2).sum(td) + eps
    cos = prod / (m1 * m2).sqrt()
    zeros = e.zeros_like(cos)
    pos = e.where(target == 1, 1 - cos, zeros)
    neg = e.where(target == -1, e.clamp_min(cos - margin, 0), zeros)
    return _reduce(pos + neg, reduction)


def margin_ranking_loss(input1, input2, target, margin: float = 0, size_average=None, reduce=None,
                        reduction: str = "mean"):
    """max(0, -target (input1 - input2) + margin)."""
    for i, (a, n) in enumerate(((input1, "input1"), (input2, "input2"), (target, "target"))):
        _tensor_arg(a, "margin_ranking_loss", n, i + 1)
    reduction = _reduction(size_average, reduce, reduction)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {_size_str(input1)}, input2: {_size_str(input2)}, "
                           f"target: {_size_str(target)} ")
    return _reduce(_ember().clamp_min(-target * (input1 - input2) + margin, 0), reduction)


def hinge_embedding_loss(input, target, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """x where target is 1, max(0, margin - x) where target is -1."""
    _tensor_arg(input, "hinge_embedding_loss", "input", 1)
    _tensor_arg(target, "hinge_embedding_loss", "target", 2)
    reduction = _reduction(size_average, reduce, reduction)
    e = _ember()
    zeros = e.zeros_like(input)
    margin_clamp = e.clamp_min(margin - input, 0)
    out = e.where(target != 1, margin_clamp, zeros) + e.where(target != -1, input, zeros)
    return _reduce(out, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """log(1 + exp(-target * input))."""
    _tensor_arg(input, "soft_margin_loss", "input", 1)
    _tensor_arg(target, "soft_margin_loss", "target", 2)
    reduction = _reduction(size_average, reduce, reduction)
    _no_grad_arg(target, "soft_margin_loss", "target")
    return rename(_reduce((-input * target).exp().log1p(), reduction), _LOSS_NODES["SoftMarginLoss"])


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction: str = "mean"):
    """Mean over classes of the binary logistic loss of each label."""
    _tensor_arg(input, "multilabel_soft_margin_loss", "input", 1)
    _tensor_arg(target, "multilabel_soft_margin_loss", "target", 2)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    loss = -(target * _logsigmoid(input) + (1 - target) * _logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.ndim - 1
    n_classes = input.shape[class_dim]
    loss = loss.sum(class_dim) / n_classes
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(reduction + " is not valid")


def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction: str = "mean"):
    """Poisson negative log likelihood: exp(x) - t x (log_input) or x - t log(x + eps); ``full`` adds
    Stirling's term for targets > 1."""
    _tensor_arg(input, "poisson_nll_loss", "input", 1)
    _tensor_arg(target, "poisson_nll_loss", "target", 2)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not a valid value for reduction")
    e = _ember()
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + e.where(target <= 1, 0.0, stirling)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
    """Gaussian negative log likelihood 0.5 (log var + (input - target)^2 / var) (+ 0.5 log 2 pi if full)."""
    _tensor_arg(input, "gaussian_nll_loss", "input", 1)
    _tensor_arg(target, "gaussian_nll_loss", "target", 2)
    e = _ember()
    if isinstance(var, (float, int)) and not isinstance(var, bool):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = e.ones_like(input) * float(var)
    else:
        _tensor_arg(var, "gaussian_nll_loss", "var", 3)
        if bool((var < 0).any()):
            raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif input.ndim == var.ndim and sum(y for x, y in zip(input.shape, var.shape) if x != y) == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    # clamp for stability without blocking the gradient (torch clamps a clone under no_grad)
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def _pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    """||x1 - x2 + eps||_p over the last dim (torch's pairwise_distance)."""
    nd = max(x1.ndim, x2.ndim)
    d = x1 - x2 + eps
    if nd == 0:
        return d.abs()
    return _ember().norm(d, p, dim=nd - 1, keepdim=keepdim)


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, size_average=None, reduce=None, reduction: str = "mean"):
    """max(d(a, p) - d(a, n) + margin, 0) with d the p-norm distance (``swap``: the closer of d(a, n), d(p, n))."""
    for i, (a, n) in enumerate(((anchor, "anchor"), (positive, "positive"), (negative, "negative"))):
        _tensor_arg(a, "triplet_margin_loss", n, i + 1)
    reduction = _reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a_d, p_d, n_d = anchor.ndim, positive.ndim, negative.ndim
    if not (a_d == p_d == n_d):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a_d}D, positive {p_d}D, and negative {n_d}D inputs")
    e = _ember()
    d_pos = _pairwise_distance(anchor, positive, p, eps)
    d_neg = _pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = e.minimum(d_neg, _pairwise_distance(positive, negative, p, eps))
    return _reduce(e.clamp_min(margin + d_pos - d_neg, 0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin: float = 1.0, swap: bool = False, reduction: str = "mean"):
    """Triplet loss with any distance function (default: pairwise p=2 distance)."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                         "instead")
    a_d, p_d, n_d = anchor.ndim, positive.ndim, negative.ndim
    if not (a_d == p_d == n_d):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a_d}D, positive {p_d}D, and negative {n_d}D inputs")
    e = _ember()
    dist = distance_function if distance_function is not None else _pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = e.minimum(d_neg, dist(positive, negative))
    return _reduce(e.clamp_min(margin + d_pos - d_neg, 0), reduction)


def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None, size_average=None,
                      reduce=None, reduction: str = "mean"):
    """Multi-class hinge loss: sum over j != y of max(0, margin - x[y] + x[j])^p / C (weighted by w[y])."""
    _tensor_arg(input, "multi_margin_loss", "input", 1)
    _tensor_arg(target, "multi_margin_loss", "target", 2)
    reduction = _reduction(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    e = _ember()
    single = input.ndim <= 1
    x = input.reshape(1, -1) if single else input
    if x.ndim != 2:
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    t = target.reshape(-1)
    n_classes = x.shape[1]
    if t.numel() != x.shape[0]:
        raise RuntimeError(f"inconsistent target size, expected {x.shape[0]} but got {list(target.shape)}")
    td = t._data
    if ((td < 0) | (td >= n_classes)).any():
        raise RuntimeError("target out of range")
    xy = x.gather(1, t.unsqueeze(1))
    z = e.clamp_min(margin - xy + x, 0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight[t].unsqueeze(1)
    not_target = np.ones(x.shape, dtype=bool)
    not_target[np.arange(x.shape[0]), td] = False
    z = z * wrap(not_target.astype(x._dtype.np), x._dtype)
    loss = z.sum(1) / n_classes
    if single:
        loss = loss.reshape(tuple(target.shape))     # torch: a (1,) target keeps its dim
    return rename(_reduce(loss, reduction), _LOSS_NODES["MultiMarginLoss"])


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """Multi-label hinge loss: targets list class indices, ended by the first -1."""
    _tensor_arg(input, "multilabel_margin_loss", "input", 1)
    _tensor_arg(target, "multilabel_margin_loss", "target", 2)
    reduction = _reduction(size_average, reduce, reduction)
    e = _ember()
    single = input.ndim <= 1
    x = input.reshape(1, -1) if single else input
    td = target._data.reshape(x.shape)
    n, n_classes = x.shape
    # is_target[i, j]: j is among the labels of row i (those before the first -1)
    is_target = np.zeros((n, n_classes), dtype=bool)
    for i in range(n):
        for v in td[i]:
            if v < 0:
                break
            if v >= n_classes:
                raise RuntimeError(f"index {int(v)} is out of bounds for dimension 0 with size {n_classes}")
            is_target[i, v] = True
    total = None
    for k in range(n_classes):
        # for the k-th listed label y_k of each row: sum over non-target j of max(0, 1 - (x[y_k] - x[j]))
        col = td[:, k]
        active = np.ones(n, dtype=bool) if k == 0 else np.all(td[:, :k] >= 0, axis=1)
        active &= col >= 0
        if not active.any():
            break
        idx = wrap(np.where(active, col, 0).astype(np.int64), _dt.int64)
        xy = x.gather(1, idx.unsqueeze(1))
        z = e.clamp_min(1 - xy + x, 0)
        mask = (~is_target) & active[:, None]
        z = (z * wrap(mask.astype(x._dtype.np), x._dtype)).sum(1)
        total = z if total is None else total + z
    if total is None:
        total = e.zeros(n, dtype=x._dtype)
    loss = total / n_classes
    if single:
        loss = loss.reshape(())
    return rename(_reduce(loss, reduction), _LOSS_NODES["MultilabelMarginLoss"])
