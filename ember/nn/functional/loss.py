"""torch.nn.functional's losses.

The losses on the training hot path are fused ops with hand-written derivatives:

- ``cross_entropy`` with class-index targets is ONE op (log-softmax + NLL, label smoothing, class
  weights, ``ignore_index``, K-dim inputs). Its forward also returns the log-probabilities as a hidden
  non-differentiable output, so the backward ``(softmax - onehot) * scale`` needs no second softmax;
- ``nll_loss`` (and its derivative ``nll_loss_backward``, which is linear: each is the other's
  derivative);
- ``binary_cross_entropy`` (torch's log clamp at -100 and its gradient rule) and
  ``binary_cross_entropy_with_logits`` (stable, with ``pos_weight``).

Their derivatives are written in ember ops, so double backward works. The other losses are short
compositions of ember ops that follow torch's formulas, so their gradients match torch's too.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap
from ...ops.registry import register, apply, dtype_name, node_class, rename
from ...autograd.grad_mode import no_grad
from .activation import logsigmoid as _logsigmoid, _clamp

# 0/0 for a 'mean' over nothing is NaN, as in torch, without NumPy's warning
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"ember\.nn\.functional\.loss$")

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "cosine_embedding_loss",
           "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
           "poisson_nll_loss", "gaussian_nll_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
           "multi_margin_loss", "multilabel_margin_loss", "ctc_loss"]


# ---- reduction arguments ------------------------------------------------------------------------------

def _legacy_reduction(size_average, reduce, emit_warning: bool = True) -> str:
    """torch's mapping of the deprecated ``size_average``/``reduce`` flags to a reduction string."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        ret = "mean"
    elif reduce:
        ret = "sum"
    else:
        ret = "none"
    if emit_warning:
        warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.",
                      UserWarning, stacklevel=3)
    return ret


def _reduction(size_average, reduce, reduction: str) -> str:
    """The effective reduction ('none' | 'mean' | 'sum'), validated as torch's ``_Reduction.get_enum``."""
    if size_average is not None or reduce is not None:
        return _legacy_reduction(size_average, reduce)
    if reduction == "none" or reduction == "mean" or reduction == "sum":
        return reduction
    if reduction == "elementwise_mean":
        warnings.warn("reduction='elementwise_mean' is deprecated. Please use reduction='mean' instead.",
                      UserWarning, stacklevel=3)
        return "mean"
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.mean()


def _ember():
    import ember
    return ember


def _tensor_arg(x, name: str, arg: str, pos: int) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, not {type(x).__name__}")
    return x


def _size_str(t: Tensor) -> str:
    return repr(t.shape)


def _size_warning(input: Tensor, target: Tensor) -> None:
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({_size_str(target)}) that is different to the input size "
                      f"({_size_str(input)}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", UserWarning, stacklevel=3)


def _need_float(x: Tensor, kernel: str) -> None:
    if x._dtype.category != 2:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{dtype_name(x._dtype)}\'')


def _no_grad_arg(t, fn: str, arg: str) -> None:
    """torch refuses a ``requires_grad`` tensor for arguments its kernels do not differentiate."""
    from ...autograd.grad_mode import GRAD
    if t is not None and GRAD[0] and t._rg:
        raise RuntimeError(f"The function '{fn}' is not differentiable with respect to argument '{arg}'. "
                           "This input cannot have requires_grad True.")


def _up(a):
    """2-byte floats are computed in float32 (torch's opmath)."""
    if a is not None and a.dtype.itemsize == 2 and a.dtype.kind not in "iub":
        return a.astype(np.float32)
    return a


# ---- class-index targets: shared NumPy helpers ----------------------------------------------------------

def _targets(t, n_classes, w, ignore_index):
    """Safe target indices, the valid mask and each position's weight (0 where ignored) for NLL-type losses."""
    t = t.astype(np.int64, copy=False)
    valid = t != ignore_index
    if t.size and (t.min() < 0 or t.max() >= n_classes):
        bad = valid & ((t < 0) | (t >= n_classes))
        if bad.any():
            raise IndexError(f"Target {int(t[bad].reshape(-1)[0])} is out of bounds.")
    ts = np.where(valid, t, 0)
    if w is None:
        wt = valid.astype(np.float64)
    else:
        wt = np.where(valid, w[ts], 0)
    return ts, valid, wt


def _take_class(a, ts):
    """a[n, ts[n, ...], ...]: the class entry (axis 1) picked by each target."""
    if a.ndim == 2:
        return a[np.arange(a.shape[0]), ts]
    return np.take_along_axis(a, ts[:, None], axis=1)[:, 0]


def _add_at_class(a, ts, v):
    """a[n, ts[n, ...], ...] += v[n, ...] in place (one target per position, so no collisions)."""
    if a.ndim == 2:
        rows = np.arange(a.shape[0])
        a[rows, ts] += v
    else:
        idx = ts[:, None]
        np.put_along_axis(a, idx, np.take_along_axis(a, idx, axis=1) + v[:, None], axis=1)


def _batched(x, t):
    """View a (C,) input with a 0-d target as a batch of one: (1, C) and (1,)."""
    if x.ndim == 1:
        return x[None], t.reshape(1), True
    return x, t, False


def _inv_total(wt):
    """1 / (total weight) for the gradient of a 'mean': 0 when everything was ignored (torch's gradient is 0
    there, although the loss itself is NaN)."""
    total = float(wt.sum())
    return 1.0 / total if total != 0 else 0.0


def _class_bcast(w, nd):
    # weight (C,) broadcast against (N, C, d1, ...)
    return w.reshape((1, -1) + (1,) * (nd - 2))


# ---- nll_loss -------------------------------------------------------------------------------------------

def _nll_kernel(x, t, w, reduction, ignore_index):
    od = x.dtype
    x = _up(x)
    x, t, single = _batched(x, t)
    w = _up(w)
    ts, valid, wt = _targets(t, x.shape[1], w, ignore_index)
    loss = np.where(valid, -_take_class(x, ts) * wt, 0)
    if reduction == "none":
        r = loss[0] if single else loss
    elif reduction == "sum":
        r = loss.sum()
    else:
        r = loss.sum() / wt.sum()
    return np.asarray(r).astype(od, copy=False)


def _nll_bw_kernel(g, t, w, reduction, ignore_index, shape, dtype):
    """d nll / d input: -weight[target] * g at each target position (scaled for 'mean'), zero elsewhere."""
    single = len(shape) == 1
    full = (1,) + tuple(shape) if single else tuple(shape)
    t = t.reshape(1) if single else t
    ts, valid, wt = _targets(t, full[1], _up(w), ignore_index)
    gg = _up(g)
    if reduction == "none":
        coef = -(gg.reshape(1) if single else gg) * wt
    elif reduction == "sum":
        coef = -gg * wt
    else:
        coef = -(gg * _inv_total(wt)) * wt
    out = np.zeros(full, dtype=np.result_type(coef.dtype, np.float32) if dtype.itemsize == 2 else dtype)
    _add_at_class(out, ts, coef)
    out = out[0] if single else out
    return out.astype(dtype, copy=False)


def _nll_bw_bw(ctx, gg):
    # nll_loss_backward is linear in g: its derivative is nll_loss itself
    _, t, w = ctx.inputs
    a = ctx.attrs
    return apply(NLL, (gg, t, w), {"reduction": a["reduction"], "ignore_index": a["ignore_index"]}), None, None


NLL_BW = register("nll_loss_backward", _nll_bw_kernel, _nll_bw_bw, save="i")


def _nll_bw(ctx, g):
    x, t, w = ctx.inputs
    a = dict(ctx.attrs)
    a["shape"] = x._data.shape
    a["dtype"] = x._dtype.np
    return apply(NLL_BW, (g, t, w), a), None, None


NLL = register("nll_loss", _nll_kernel, _nll_bw, save="i")


def _nll_node_name(args, attrs):
    """torch runs nll_loss2d on (N, C, H, W) input, and on other spatial ranks reshapes to it (an
    unreduced loss is then viewed back); label smoothing adds a second term to the loss."""
    if attrs.get("label_smoothing", 0.0) > 0:
        return "AddBackward0"
    nd = args[0]._data.ndim
    if nd <= 2:
        return "NllLossBackward0"
    return "ViewBackward0" if nd != 4 and attrs["reduction"] == "none" else "NllLoss2DBackward0"


NLL.node_name = _nll_node_name
# losses ember composes from other ops, named after torch's fused op
_LOSS_NODES = {n: node_class(n + "Backward0") for n in (
    "MseLoss", "SmoothL1Loss", "HuberLoss", "SoftMarginLoss", "MultiMarginLoss", "MultilabelMarginLoss")}
_DIV_SCALAR = node_class("DivBackward1")


def _check_class_target(input: Tensor, target: Tensor, weight, name: str) -> None:
    """torch's shape/dtype checks for class-index targets (nll_loss_nd)."""
    nd = input.ndim
    if nd < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {nd})")
    if nd != 1 and target.ndim >= 1 and input.shape[0] != target.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                         f"({target.shape[0]}).")
    if nd == 1:
        if target.ndim != 0:
            if target.ndim > 1:
                raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
            raise RuntimeError(f"size mismatch (got input: {list(input.shape)}, target: {list(target.shape)})")
    elif nd == 2:
        if target.ndim != 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    else:
        want = (input.shape[0],) + tuple(input.shape[2:])
        if tuple(target.shape) != want:
            raise RuntimeError(f"Expected target size {list(want)}, got {list(target.shape)}")
    n_classes = input.shape[0] if nd == 1 else input.shape[1]
    if weight is not None:
        _tensor_arg(weight, name, "weight", 3)
        _no_grad_arg(weight, "nll_loss_forward", "weight")
        if weight.numel() != n_classes:
            raise RuntimeError(f"weight tensor should be defined either for all {n_classes} classes or no classes "
                               f"but got weight tensor of shape: {list(weight.shape)}")
        if weight._dtype is not input._dtype:
            raise RuntimeError(f"expected scalar type {dtype_name(input._dtype)} but found "
                               f"{dtype_name(weight._dtype)}")
    if target._dtype not in (_dt.int64, _dt.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {dtype_name(target._dtype)}")


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
             reduction: str = "mean"):
    """Negative log-likelihood of class-index targets given log-probabilities ``input`` (N, C, d1, ...)."""
    _tensor_arg(input, "nll_loss", "input", 1)
    _tensor_arg(target, "nll_loss", "target", 2)
    reduction = _reduction(size_average, reduce, reduction)
    _need_float(input, "nll_loss_forward_reduce_cuda_kernel_2d_index")
    _check_class_target(input, target, weight, "nll_loss")
    w = weight.reshape(-1) if weight is not None and weight.ndim != 1 else weight
    return apply(NLL, (input, target, w), {"reduction": reduction, "ignore_index": int(ignore_index)})


# ---- cross_entropy (class indices): one fused op -------------------------------------------------------

def _log_softmax1(x):
    s = x - x.max(axis=1, keepdims=True)
    s -= np.log(np.exp(s).sum(axis=1, keepdims=True))
    return s


def _ce_kernel(x, t, w, reduction, ignore_index, label_smoothing):
    od = x.dtype
    x = _up(x)
    x, t, single = _batched(x, t)
    w = _up(w)
    if x.shape[1] == 0 and x.size == 0 and x.shape[0] != 0:
        raise IndexError(f"Target {int(t.reshape(-1)[0])} is out of bounds.")
    logp = _log_softmax1(x) if x.size else x.copy()
    n_classes = x.shape[1]
    ts, valid, wt = _targets(t, n_classes, w, ignore_index)
    loss = np.where(valid, -_take_class(logp, ts) * wt, 0)
    if label_smoothing > 0:
        lw = logp if w is None else logp * _class_bcast(w, logp.ndim)
        smooth = np.where(valid, -lw.sum(axis=1), 0)
        loss = loss * (1 - label_smoothing) + smooth * (label_smoothing / n_classes)
    if reduction == "none":
        r = loss[0] if single else loss
    elif reduction == "sum":
        r = loss.sum()
    else:
        r = loss.sum() / wt.sum()
    return np.asarray(r).astype(od, copy=False), logp


def _ce_parts(shape, t, w, ignore_index, eps):
    """The constants of d cross_entropy / d x = scale * (softmax(x) * A - B), for the batched shape."""
    n_classes = shape[1]
    ts, valid, wt = _targets(t, n_classes, w, ignore_index)
    if eps > 0:
        wsum = float(n_classes) if w is None else float(w.sum())
        a = wt * (1 - eps) + valid * (eps / n_classes * wsum)
    else:
        a = wt
    return ts, valid, wt, a


def _ce_scale(g, reduction, wt, single):
    """g broadcast to (N, 1, d...) for 'none'; a scalar (divided by the weight total for 'mean') otherwise."""
    if reduction == "none":
        g = g.reshape(1) if single else g
        return g[:, None]
    if reduction == "sum":
        return g
    return g * _inv_total(wt)


def _ce_bw_kernel(g, x, t, w, reduction, ignore_index, label_smoothing, logp=None):
    od = x.dtype
    x = _up(x)
    x, t, single = _batched(x, t)
    w = _up(w)
    g = _up(g)
    if logp is None:
        logp = _log_softmax1(x)
    elif single and logp.ndim == 1:
        logp = logp[None]
    n_classes = x.shape[1]
    eps = label_smoothing
    ts, valid, wt, a = _ce_parts(x.shape, t, w, ignore_index, eps)
    grad = np.exp(logp)
    grad *= a[:, None]
    # subtract the target term (1 - eps) * w[t] at each target position
    _add_at_class(grad, ts, wt * (eps - 1) if eps else -wt)
    if eps > 0:
        wb = 1.0 if w is None else _class_bcast(w, grad.ndim)
        grad -= (valid[:, None] * (eps / n_classes)) * wb
    grad *= _ce_scale(g, reduction, wt, single)
    if single:
        grad = grad[0]
    return grad.astype(od, copy=False)


def _ce_target_parts(t: Tensor, w, n_classes: int, ignore_index: int, eps: float):
    """``_targets`` / ``_ce_parts`` as ember ops on the target and weight tensors (for the double backward, so
    a compiled replay recomputes them from the targets it is given): safe targets, valid mask, per-position
    weight and the factor A. Dtypes follow the NumPy helpers (float64 where they compute in float64)."""
    e = _ember()
    f64 = _dt.float64
    tl = t.long()
    valid = tl != ignore_index
    ts = e.where(valid, tl, 0)
    wu = None if w is None else (w.float() if w._dtype.itemsize == 2 else w)      # _up
    wt = valid.to(f64) if wu is None else e.where(valid, wu[ts], 0)
    if eps > 0:
        wsum = float(n_classes) if wu is None else wu.sum().to(f64)
        a = wt * (1 - eps) + valid.to(f64) * (eps / n_classes * wsum)
    else:
        a = wt
    return ts, valid, wt, wu, a


def _inv_total_t(wt: Tensor) -> Tensor:
    """``_inv_total`` as a 0-d float64 tensor: 1 / (total weight), 0 when everything was ignored."""
    e = _ember()
    total = wt.sum().to(_dt.float64)
    nz = total != 0
    return e.where(nz, 1.0 / e.where(nz, total, 1.0), 0.0)


def _ce_bw_bw(ctx, gg):
    """Derivatives of ``scale * (softmax(x) * A - B)``: w.r.t. x (softmax's Jacobian) and w.r.t. g."""
    e = _ember()
    g, x, t, w = ctx.inputs
    at = ctx.attrs
    reduction, eps = at["reduction"], at["label_smoothing"]
    single = x.ndim == 1
    xb = x.unsqueeze(0) if single else x
    ggb = gg.unsqueeze(0) if single else gg
    tb = t.reshape(1) if single else t
    n_classes = xb.shape[1]
    ts, valid, wt, wu, a = _ce_target_parts(tb, w, n_classes, at["ignore_index"], eps)
    dt = x._dtype
    a_t = a.unsqueeze(1).to(dt)
    p = e.softmax(xb, 1)
    inv = _inv_total_t(wt).to(g._dtype) if reduction == "mean" else None
    dg = dx = None
    if ctx.edges[1] is not None:
        if reduction == "none":
            scale = (g.reshape(1) if single else g).unsqueeze(1)
        elif reduction == "sum":
            scale = g
        else:
            scale = g * inv
        dx = p * (ggb - (ggb * p).sum(1, keepdim=True)) * a_t * scale
        dx = dx[0] if single else dx
    if ctx.edges[0] is not None:
        # B: (1 - eps) * w[t] at each target's class, plus eps / C * w everywhere (valid positions)
        classes = e.arange(n_classes).reshape((1, n_classes) + (1,) * (xb.ndim - 2))
        b = e.where(ts.unsqueeze(1) == classes, (wt * (1 - eps)).to(dt).unsqueeze(1), 0.0)
        if eps > 0:
            spread = valid.unsqueeze(1).to(_dt.float64) * (eps / n_classes)
            if wu is not None:
                spread = spread * _class_bcast(wu, xb.ndim)
            b = b + spread.to(dt)
        prod = ggb * (p * a_t - b)
        if reduction == "none":
            dg = prod.sum(1)
            dg = dg[0] if single else dg
        elif reduction == "sum":
            dg = prod.sum()
        else:
            dg = prod.sum() * inv
    return dg, dx, None, None


CE_BW = register("cross_entropy_backward", _ce_bw_kernel, _ce_bw_bw, save="i")


def _ce_bw(ctx, g, _g_logp=None):
    x, t, w = ctx.inputs
    attrs = dict(ctx.attrs)
    attrs["logp"] = ctx.outputs[1]._data
    return apply(CE_BW, (g, x, t, w), attrs), None, None


CE = register("cross_entropy", _ce_kernel, _ce_bw, save="io", nout=2, nondiff_outputs=(1,))
CE.node_name = _nll_node_name       # torch's cross_entropy is log_softmax then nll_loss


def _ce_probs(input, target, weight, reduction, label_smoothing):
    """Cross entropy with class probabilities as targets (same shape as input), as ember ops."""
    nd = input.ndim
    cdim = 0 if nd == 1 else 1
    n_classes = input.shape[cdim]
    logp = _ember().log_softmax(input, cdim)
    if label_smoothing > 0:
        target = target * (1 - label_smoothing) + label_smoothing / n_classes
    prod = logp * target
    if weight is not None:
        prod = prod * (weight.reshape((-1,) + (1,) * (nd - 2)) if nd >= 2 else weight)
    if reduction == "none":
        return -prod.sum(cdim)
    if reduction == "sum":
        return -prod.sum()
    if input.numel() == 0:
        return -prod.sum() * float("nan")
    return rename(-prod.sum() / (input.numel() // n_classes), _DIV_SCALAR)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0):
    """Cross entropy between logits ``input`` (C), (N, C) or (N, C, d1, ...) and ``target``.

    ``target`` holds class indices (int64/uint8, shape without C) or class probabilities (same shape as
    input). Class indices run as one fused op: log-softmax + NLL forward, ``(softmax - onehot) * scale``
    backward.
    """
    _tensor_arg(input, "cross_entropy_loss", "input", 1)
    _tensor_arg(target, "cross_entropy_loss", "target", 2)
    reduction = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing:g}")
    if tuple(input.shape) == tuple(target.shape):
        if target._dtype.category != 2:
            raise RuntimeError(f"Expected floating point type for target with class probabilities, got "
                               f"{dtype_name(target._dtype)}")
        if input.ndim == 0:
            raise RuntimeError("cross_entropy: expected an input of at least 1 dimension (the classes), got a "
                               "0-d tensor")
        _need_float(input, "log_softmax_lastdim_kernel_impl")
        if weight is not None:
            n_classes = input.shape[0 if input.ndim == 1 else 1]
            if weight.numel() != n_classes:
                raise RuntimeError(f"weight tensor should be defined either for all {n_classes} classes or no "
                                   f"classes but got weight tensor of shape: {list(weight.shape)}")
        return _ce_probs(input, target, weight, reduction, label_smoothing)
    _need_float(input, "log_softmax_lastdim_kernel_impl")
    _check_class_target(input, target, weight, "cross_entropy_loss")
    w = weight.reshape(-1) if weight is not None and weight.ndim != 1 else weight
    return apply(CE, (input, target, w), {"reduction": reduction, "ignore_index": int(ignore_index),
                                          "label_smoothing": float(label_smoothing)})[0]


# ---- regression losses ----------------------------------------------------------------------------------

def _expand_pair(input, target, name):
    e = _ember()
    if tuple(input.shape) == tuple(target.shape):
        return input, target
    try:
        return tuple(e.broadcast_tensors(input, target))
    except RuntimeError:
        from ...ops._util import broadcast_error
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


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    """Mean squared error ``(input - target)^2`` (optionally weighted elementwise)."""
    _tensor_arg(input, "mse_loss", "input", 1)
    _tensor_arg(target, "mse_loss", "target", 2)
    _size_warning(input, target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    x, t = _expand_pair(input, target, "mse_loss")
    if weight is not None:
        return _weighted((x - t).square(), weight, input, reduction, True)
    reduction = _reduction(None, None, reduction)
    if x._dtype.category != 2 or t._dtype.category != 2:
        _need_float(x if x._dtype.category != 2 else t, "mse_cpu")
    return rename(_reduce((x - t).square(), reduction), _LOSS_NODES["MseLoss"])


def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    """Mean absolute error ``|input - target|`` (optionally weighted elementwise)."""
    _tensor_arg(input, "l1_loss", "input", 1)
    _tensor_arg(target, "l1_loss", "target", 2)
    _size_warning(input, target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    x, t = _expand_pair(input, target, "l1_loss")
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


# ---- binary cross entropy ----------------------------------------------------------------------------------

def _bce_kernel(x, t, w, reduction):
    od = x.dtype
    x, t, w = _up(x), _up(t), _up(w)
    if ((x < 0) | (x > 1)).any():
        raise RuntimeError("all elements of input should be between 0 and 1")
    if ((t < 0) | (t > 1)).any():
        raise RuntimeError("all elements of target should be between 0 and 1")
    # torch clamps each log at -100 so that x = 0 or 1 gives a finite loss
    loss = t * _clamp(np.log(x), lo=-100)
    loss += (1 - t) * _clamp(np.log1p(-x), lo=-100)
    loss = -loss
    if w is not None:
        loss = loss * w
    r = loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()
    return np.asarray(r).astype(od, copy=False)


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
    if w is not None:
        loss = loss * w
    r = loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()
    return np.asarray(r).astype(od, copy=False)


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
        from ...ops._util import broadcast_error
        raise broadcast_error("binary_cross_entropy_with_logits", shapes) from None
    return apply(BCEL, (input, target, weight, pos_weight), {"reduction": reduction})


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


# ---- CTC -------------------------------------------------------------------------------------------------

_CTC_NEG = -1e30      # "impossible" log-probability: finite, so logsumexp's gradient stays finite


def _lengths(v, name: str, n: int):
    """The lengths as an int64 tensor (n,), and their values when they came as Python / NumPy data (None for
    a tensor: its values are read through ``tolist``, a guarded read under ``ember.compile``)."""
    if isinstance(v, Tensor):
        t, arr = v.reshape(-1), None
        if t._dtype is not _dt.int64:
            t = t.long()
    else:
        arr = np.asarray(v, dtype=np.int64).reshape(-1)
        t = _ember().tensor(arr)
    if t.numel() != n:
        raise RuntimeError(f"ctc_loss: expected {name} to have {n} elements, but got {t.numel()}")
    return t, arr


def _ctc_padded(tg: Tensor, tgt_len: np.ndarray, N: int) -> Tensor:
    """Concatenated 1-D targets split by ``target_lengths`` into (N, max(L, 1)) rows padded with 0: an
    index op whose positions depend on the lengths only (values Python already holds)."""
    offs = np.concatenate([[0], np.cumsum(tgt_len)])
    L = int(tgt_len.max(initial=0))
    src = np.full((N, max(L, 1)), -1, dtype=np.int64)        # position in ``tg``, -1 for padding
    pos = np.arange(tg.numel(), dtype=np.int64)
    for b in range(N):
        src[b, :tgt_len[b]] = pos[offs[b]:offs[b + 1]]
    E = _ember()
    if not tg.numel():
        return E.zeros(src.shape, dtype=_dt.int64)
    return E.where(E.tensor(src < 0), 0, tg[E.tensor(np.maximum(src, 0))])


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0, reduction: str = "mean",
             zero_infinity: bool = False) -> Tensor:
    """Connectionist Temporal Classification loss of ``log_probs`` (T, N, C) (or unbatched (T, C)) against
    label sequences ``targets`` (padded (N, S) or concatenated 1-D), summing over all alignments with the
    forward (alpha) recursion. Written with ember ops, so autograd gives the gradient; the result equals
    torch's, and gradients agree once they pass through the usual ``log_softmax``.

    The targets and lengths enter as tensors (a compiled replay recomputes everything from the ones it is
    given); only what sets shapes or raises errors is read in Python: the largest lengths (and, for
    concatenated targets, every target length), a guarded read under ``ember.compile``."""
    E = _ember()
    if not isinstance(log_probs, Tensor):
        raise TypeError(f"ctc_loss(): argument 'log_probs' must be Tensor, not {type(log_probs).__name__}")
    unbatched = log_probs._data.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    T, N, C = lp._data.shape
    if isinstance(targets, Tensor):
        tg = targets if targets._dtype is _dt.int64 else targets.long()
    else:
        tg = E.tensor(np.asarray(targets, dtype=np.int64))
    if unbatched:
        tg = tg.reshape(1, -1)
    in_len, in_arr = _lengths(input_lengths, "input_lengths", N)
    tgt_len, tgt_arr = _lengths(target_lengths, "target_lengths", N)
    concatenated = tg.ndim == 1
    # the values Python needs, in one read (one graph break): the max input length (checked against T) and
    # the target lengths (all of them to split concatenated targets, else their max: it sets the width of
    # the extended label sequence)
    reads = []
    if in_arr is None and N:
        reads.append(in_len.max().reshape(1))
    if tgt_arr is None and N:
        reads.append(tgt_len if concatenated else tgt_len.max().reshape(1))
    vals = (reads[0] if len(reads) == 1 else E.cat(reads)).tolist() if reads else []
    if in_arr is None and N:
        in_max, vals = vals[0], vals[1:]
    else:
        in_max = int(in_arr.max()) if N else 0
    if tgt_arr is None and concatenated:
        tgt_arr = np.asarray(vals, dtype=np.int64)
    tgt_max = int(tgt_arr.max(initial=0)) if tgt_arr is not None else (vals[0] if N else 0)
    if in_max > T:
        raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {in_max} "
                           "(while checking arguments for ctc_loss_allocate_outputs)")
    if concatenated:                      # concatenated targets: split them by target_lengths
        tg = _ctc_padded(tg, tgt_arr, N)
    elif tgt_max > tg.shape[1]:
        raise RuntimeError(f"Expected tensor to have size at least {tgt_max} at dimension 1, but got size "
                           f"{tg.shape[1]} for argument #2 'targets' (while checking arguments for "
                           "ctc_loss_allocate_outputs)")
    L = tgt_max
    S = 2 * L + 1
    # blank, l1, blank, l2, ..., blank
    blanks = E.full((N, L + 1), blank, dtype=_dt.int64)
    if L:
        ext = E.cat([E.stack([blanks[:, :L], tg[:, :L]], 2).reshape(N, 2 * L), blanks[:, L:]], 1)
    else:
        ext = blanks
    pos = E.arange(S)
    valid = pos < (tgt_len * 2 + 1).unsqueeze(1)                # (N, S)
    if S > 2:                                                   # may jump from s-2 to s
        hop = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
        skip_t = E.cat([E.zeros((N, 2), dtype=_dt.bool), hop], 1) & valid
    else:
        skip_t = E.zeros((N, S), dtype=_dt.bool)
    dt = lp._dtype
    neg = E.full((N, S), _CTC_NEG, dtype=dt)
    emit0 = lp[0].gather(1, ext)                                # (N, S)
    alpha = E.where((pos < 2) & valid, emit0, neg)
    running = (in_len > E.arange(T).unsqueeze(1)).unsqueeze(2)  # (T, N, 1): step t still inside input b
    for t in range(1, T):
        prev1 = E.cat([neg[:, :1], alpha[:, :-1]], 1)
        prev2 = E.cat([neg[:, :2], alpha[:, :-2]], 1) if S > 2 else neg
        prev2 = E.where(skip_t, prev2, neg)
        new = E.logsumexp(E.stack([alpha, prev1, prev2]), 0) + lp[t].gather(1, ext)
        new = E.where(valid, new, neg)
        alpha = E.where(running[t], new, alpha)
    last = (tgt_len * 2).unsqueeze(1)
    before = (tgt_len * 2 - 1).clamp_min(0).unsqueeze(1)
    a_last = alpha.gather(1, last).squeeze(1)
    a_before = alpha.gather(1, before).squeeze(1)
    a_before = E.where(tgt_len > 0, a_before, neg[:, 0])
    nll = -E.logsumexp(E.stack([a_last, a_before]), 0)
    impossible = nll > -_CTC_NEG / 2
    fill = 0.0 if zero_infinity else math.inf
    nll = E.where(impossible, E.full_like(nll, fill), nll)
    if reduction == "none":
        return nll.squeeze(0) if unbatched else nll
    if reduction == "sum":
        return nll.sum()
    if reduction == "mean":
        denom = tgt_len.clamp_min(1).to(dt)
        return (nll / denom).mean()
    raise ValueError(f"{reduction} is not a valid value for reduction")

