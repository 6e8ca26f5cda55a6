"""Class-index losses: ``nll_loss`` and the fused ``cross_entropy`` (log-softmax + NLL in one op whose
forward also returns the log-probabilities, so the backward needs no second softmax; label smoothing,
class weights, ``ignore_index``, K-dim inputs). Their derivatives are written in ember ops (double
backward works); ``nll_loss``'s derivative is linear, so each is the other's derivative.
"""
from __future__ import annotations


import numpy as np

from .... import dtypes as _dt
from ....tensor import Tensor
from ....ops.registry import register, apply, dtype_name, node_class, rename
from ...._native import eager_kernels as _native
from ._common import (_add_at_class, _batched, _class_bcast, _ember, _inv_total, _need_float, _no_grad_arg,
    _reduction, _take_class, _targets, _tensor_arg, _up)

__all__ = ["nll_loss", "cross_entropy"]


# ---- nll_loss -------------------------------------------------------------------------------------------

def _nll_kernel(x, t, w, reduction, ignore_index):
    od = x.dtype
    x = _up(x)
    x, t, single = _batched(x, t)
    w = _up(w)
    ts, valid, wt = _targets(t, x.shape[1], w, ignore_index)
    loss = np.where(valid, -_take_class(x, ts) * wt, 0)
    return _reduce_np(loss, reduction, single, wt, od)


def _reduce_np(loss, reduction: str, single: bool, wt, od):
    """A class-index loss per sample reduced as torch does ('mean' divides by the total target weight)."""
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
_DIV_SCALAR = node_class("DivBackward1")


def _check_class_target(input: Tensor, target: Tensor, weight, name: str) -> None:
    """torch's shape/dtype checks for class-index targets (nll_loss_nd)."""
    nd, tnd = input._data.ndim, target._data.ndim
    if nd < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {nd})")
    if nd != 1 and tnd >= 1 and input.shape[0] != target.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                         f"({target.shape[0]}).")
    if nd == 1:
        if tnd != 0:
            if tnd > 1:
                raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
            raise RuntimeError(f"size mismatch (got input: {list(input.shape)}, target: {list(target.shape)})")
    elif nd == 2:
        if tnd != 1:
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
    if x.ndim == 2 and x.dtype == np.float32:
        r = _native.softmax(x, 1, True)        # one native pass per row (ember/_native); None: NumPy's
        if r is not None:
            return r
    s = x - x.max(axis=1, keepdims=True)
    s -= np.log(np.exp(s).sum(axis=1, keepdims=True))
    return s


def _ce_native(x, t, reduction, ignore_index):
    """The common case in one native call (float32 (N, C) logits, int64 targets, no class weights or
    smoothing): ``(loss, logp)`` as the NumPy kernel gives them, or None where it runs."""
    r = _native.cross_entropy(x, t, ignore_index, reduction == "none")
    if r is None:
        return None
    logp, losses, total, count, bad = r
    if bad >= 0:
        raise IndexError(f"Target {int(t[bad])} is out of bounds.")
    if reduction == "none":
        return losses, logp
    loss = total if reduction == "sum" else (total / count if count else float("nan"))
    return np.asarray(loss, dtype=np.float32), logp


def _ce_kernel(x, t, w, reduction, ignore_index, label_smoothing):
    if w is None and not label_smoothing and x.dtype == np.float32:
        r = _ce_native(x, t, reduction, ignore_index)
        if r is not None:
            return r
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
    return _reduce_np(loss, reduction, single, wt, od), logp


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


def _ce_bw_native(g, t, reduction, ignore_index, logp):
    """``_ce_bw_kernel``'s common case (see ``_ce_native``) in one native call; None where NumPy runs."""
    if g.dtype != np.float32:
        return None
    if reduction == "none":
        return _native.cross_entropy_backward(logp, t, ignore_index, 0.0, g)
    if reduction == "sum":
        return _native.cross_entropy_backward(logp, t, ignore_index, g)
    count = np.count_nonzero(t != ignore_index)
    return _native.cross_entropy_backward(logp, t, ignore_index, g * (1.0 / count if count else 0.0))


def _ce_bw_kernel(g, x, t, w, reduction, ignore_index, label_smoothing, logp=None):
    if w is None and not label_smoothing and logp is not None and x.dtype == np.float32 and x.ndim == 2:
        r = _ce_bw_native(g, t, reduction, ignore_index, logp)
        if r is not None:
            return r
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
    if input._data.ndim == target._data.ndim and tuple(input.shape) == tuple(target.shape):
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
