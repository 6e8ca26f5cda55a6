"""Fractional max pooling (Graham, 2014): ``fractional_max_pool2d`` / ``fractional_max_pool3d``.

Each (sample, channel) plane gets one random number per pooled dim (``_random_samples``, uniform in
[0, 1), shape ``(N, C, 2)`` or ``(N, C, 3)``: for 2-d the first is for the width and the second for the
height, for 3-d they are time, height, width). A dim of input size ``n`` pooled to ``m`` windows of size
``k`` starts window ``i`` at ``int((i + u) * a) - int(u * a)`` with ``a = (n - k) / (m - 1)``, the last
window at ``n - k``; this arithmetic runs in the input's float type, as torch's kernel does, so the same
samples pick the same windows. A window's maximum is the first largest element in row-major order (a
NaN wins, the last one seen); the result is a differentiable ``gather`` at those positions.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap
from ...ops.registry import dtype_name
from ._autocast_fp32 import autocast_fp32

__all__ = ["fractional_max_pool2d", "fractional_max_pool3d", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d_with_indices"]


def _tuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _starts(u, n_in, n_out, k, ft):
    """Window starts per plane: ``u`` of shape (P,), result (P, n_out) int64."""
    u = u.astype(ft)
    seq = np.zeros((len(u), n_out), np.int64)
    if n_out > 1:
        alpha = ft(n_in - k) / ft(n_out - 1)
        i = np.arange(n_out - 1).astype(ft)
        a = ((i[None, :] + u[:, None]) * alpha).astype(ft)
        seq[:, :n_out - 1] = np.trunc(a).astype(np.int64) - np.trunc((u * alpha).astype(ft)).astype(np.int64)[:, None]
    if n_out > 0:
        seq[:, n_out - 1] = n_in - k
    return seq


def _indices(x, samples, kernel, out, nd):
    """The flat (within-plane) index of each window's maximum: (P, *out) int64."""
    spatial = x.shape[1:]
    ft = np.float64 if x.dtype == np.float64 else np.float32
    # samples' columns: 2-d (w, h), 3-d (t, h, w); order them as the spatial dims
    cols = (1, 0) if nd == 2 else (0, 1, 2)
    starts = [_starts(samples[:, c], spatial[d], out[d], kernel[d], ft) for d, c in enumerate(cols)]
    P = x.shape[0]
    flat = x.reshape(P, -1)
    strides = [int(np.prod(spatial[d + 1:])) for d in range(nd)]
    grids = np.meshgrid(*[np.arange(o) for o in out], indexing="ij")
    base = sum(starts[d][:, grids[d]] * strides[d] for d in range(nd))      # (P, *out)
    best_i = base.copy()
    best_v = np.full(base.shape, -np.inf, dtype=x.dtype)
    rows = np.arange(P).reshape((P,) + (1,) * nd)
    for off in np.ndindex(*kernel):
        pos = base + sum(o * s for o, s in zip(off, strides))
        v = flat[rows, pos]
        with np.errstate(invalid="ignore"):
            take = (v > best_v) | np.isnan(v)
        best_v = np.where(take, v, best_v)
        best_i = np.where(take, pos, best_i)
    return best_i


def _fractional(input, kernel_size, output_size, output_ratio, return_indices, samples, nd):
    name = f"fractional_max_pool{nd}d"
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got: {list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"check_uniform_bounds\" not implemented for '{dtype_name(input.dtype)}'")
    kernel = _tuple(kernel_size, nd)
    spatial = tuple(input.shape[-nd:])
    if output_size is None:
        ratio = _tuple(output_ratio, nd)
        out = tuple(int(s * r) for s, r in zip(spatial, ratio))
    else:
        out = _tuple(output_size, nd)
    batched = input.ndim == nd + 2
    n = input.shape[0] if batched else 1
    c = input.shape[-nd - 1]
    if samples is None:
        from ...ops.random_ops import rand
        samples = rand(n, c, nd, dtype=input.dtype)
    if samples.shape[0] < n:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    if samples.shape[1] != c:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if samples.shape[2] != nd:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {nd}; got {samples.shape[2]}.")
    words = ("height", "width") if nd == 2 else ("time", "height", "width")
    for d in range(nd):
        ok = out[d] + kernel[d] - 1 <= spatial[d] if nd == 2 else out[d] + kernel[d] - 1 < spatial[d]
        if not ok:
            where = f"{name}()" if nd == 2 else f"{name}_out()"
            raise RuntimeError(f"{where}: pool {words[d]} {kernel[d]} too large relative to input {words[d]} "
                               f"{spatial[d]}")
    x = input.detach().cpu().numpy()
    planes = x.reshape((-1,) + spatial)
    u = samples.detach().cpu().numpy()[:n].reshape(-1, nd)
    idx = _indices(planes, u, kernel, out, nd)
    lead = tuple(input.shape[:-nd])
    ind = wrap(np.ascontiguousarray(idx.reshape(lead + out)), _dt.int64)
    flat_in = input.flatten(-nd)
    values = flat_in.gather(-1, ind.flatten(-nd)).reshape(lead + out)
    return (values, ind) if return_indices else values


def _public(nd: int, always_indices: bool):
    """torch's ``fractional_max_pool{nd}d`` (``always_indices``: its ``_with_indices`` form), float32
    under CPU autocast (it is on torch's fp32 list)."""
    @autocast_fp32
    def fn(input, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None):
        return _fractional(input, kernel_size, output_size, output_ratio, always_indices or return_indices,
                           _random_samples, nd)
    fn.__name__ = fn.__qualname__ = f"fractional_max_pool{nd}d" + ("_with_indices" if always_indices else "")
    fn.__doc__ = (f"{nd}-d fractional max pooling to ``output_size`` (or ``output_ratio`` of the input size)"
                  + (", returning (values, indices)." if always_indices else "."))
    return fn


fractional_max_pool2d = _public(2, False)
fractional_max_pool2d_with_indices = _public(2, True)
fractional_max_pool3d = _public(3, False)
fractional_max_pool3d_with_indices = _public(3, True)
