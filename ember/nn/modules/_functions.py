"""Autograd functions behind modules (torch.nn.modules._functions): ``SyncBatchNorm``, the batch norm
whose statistics cover the batch of every process in a group.

Forward: each rank sums its input per channel; one all-reduce gives the global sum and count, hence the
mean; a second all-reduce gives the global sum of squared deviations, hence the (biased) variance used
to normalize and the unbiased one for the running statistics. Two passes (not a sum of squares) keep the
variance exact to rounding. Backward: the per-channel sums of ``grad`` and ``grad * (x - mean)`` are
all-reduced (one call), which is all the input gradient needs; the weight and bias gradients stay local,
as in torch (DistributedDataParallel averages them with the other parameters). Sums run in float64.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...autograd.function import Function
from ...tensor import wrap


def _all_reduce(values: np.ndarray, group) -> np.ndarray:
    from ... import distributed as dist
    t = wrap(np.ascontiguousarray(values, dtype=np.float64), _dt.float64)
    dist.all_reduce(t, group=group)
    return t.numpy()


def _channel_view(v: np.ndarray, ndim: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (ndim - 2))


class SyncBatchNorm(Function):
    """``SyncBatchNorm.apply(input, weight, bias, running_mean, running_var, eps, momentum, process_group,
    world_size)`` (torch's argument order): normalize with the group's batch statistics and update the
    running statistics in place."""

    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum, process_group, world_size):
        x = input.detach().numpy()
        axes = (0,) + tuple(range(2, x.ndim))
        c = x.shape[1]
        local_n = x.size // c if c else 0
        first = _all_reduce(np.concatenate([x.sum(axes, dtype=np.float64), [local_n]]), process_group)
        count = first[-1]
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {list(x.shape)}")
        mean = first[:c] / count
        xmu = x.astype(np.float64) - _channel_view(mean, x.ndim)
        var = _all_reduce((xmu * xmu).sum(axes), process_group) / count
        invstd = 1.0 / np.sqrt(var + eps)
        xhat = xmu * _channel_view(invstd, x.ndim)
        w = np.ones(c) if weight is None else weight.detach().numpy().astype(np.float64)
        b = np.zeros(c) if bias is None else bias.detach().numpy().astype(np.float64)
        y = xhat * _channel_view(w, x.ndim) + _channel_view(b, x.ndim)
        if running_mean is not None:
            m = float(momentum)
            rm = running_mean.numpy()
            rv = running_var.numpy()
            rm[...] = (1 - m) * rm + m * mean
            rv[...] = (1 - m) * rv + m * var * count / (count - 1)
            running_mean._bump()
            running_var._bump()
        ctx.sync = (xhat, invstd, w, count, process_group, input.dtype)
        ctx.has_affine = (weight is not None, bias is not None)
        return wrap(y.astype(x.dtype), input.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        xhat, invstd, w, count, group, dt = ctx.sync
        gy = grad_output.detach().numpy().astype(np.float64)
        nd = gy.ndim
        axes = (0,) + tuple(range(2, nd))
        c = gy.shape[1]
        sum_dy = gy.sum(axes)
        sum_dy_xhat = (gy * xhat).sum(axes)
        glob = _all_reduce(np.concatenate([sum_dy, sum_dy_xhat]), group)
        mean_dy, mean_dy_xhat = glob[:c] / count, glob[c:] / count
        gx = (gy - _channel_view(mean_dy, nd) - xhat * _channel_view(mean_dy_xhat, nd)) \
            * _channel_view(invstd * w, nd)
        has_w, has_b = ctx.has_affine
        gw = wrap(sum_dy_xhat.astype(dt.np), dt) if has_w else None
        gb = wrap(sum_dy.astype(dt.np), dt) if has_b else None
        return (wrap(gx.astype(dt.np), dt), gw, gb, None, None, None, None, None, None)
