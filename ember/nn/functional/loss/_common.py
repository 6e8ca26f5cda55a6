"""Shared pieces of the losses: the reduction arguments (torch's legacy ``size_average``/``reduce``),
argument checks, and the NumPy helpers for class-index targets.
"""
from __future__ import annotations

import warnings

import numpy as np

from ....tensor import Tensor
from ....ops.registry import dtype_name, node_class


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
    from ....autograd.grad_mode import GRAD
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


# losses ember composes from other ops, named after torch's fused op
_LOSS_NODES = {n: node_class(n + "Backward0") for n in (
    "MseLoss", "SmoothL1Loss", "HuberLoss", "SoftMarginLoss", "MultiMarginLoss", "MultilabelMarginLoss")}
