"""``F.interpolate(..., antialias=True)``: antialiased bilinear, bicubic and lanczos resampling of 4-D input,
with torch's weights (the PIL-style separable filter).

Along one spatial dim of input size ``n_in`` and output size ``n_out``, with ``scale`` = n_in / n_out (or
1 / scale_factor when a factor is given and not recomputed; (n_in - 1) / (n_out - 1) with
``align_corners``), output pixel i reads the input pixels j in [center - support, center + support)
around center = scale * (i + 0.5), weighted by filter((j - center + 0.5) / max(scale, 1)) and normalised to
sum to one. The filter widens with the scale when downsampling (support = radius * max(scale, 1)): a
triangle of radius 1 (bilinear), the cubic convolution kernel with a = -0.5 of radius 2 (bicubic), or
sinc(x) sinc(x / 3) of radius 3 (lanczos).

Each dim is a matrix product with a constant weight matrix (out x in), so the result is differentiable
through ember's matmul and its gradient is the transposed resampling, as torch's.
"""
from __future__ import annotations

import math

import numpy as np

from ...tensor import Tensor, wrap
from ...ops.registry import node_class, rename

__all__ = ["interpolate_antialias"]


def _triangle(x):
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


def _cubic(x, a=-0.5):
    x = np.abs(x)
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def _lanczos(x, a=3.0):
    return np.where(np.abs(x) < a, np.sinc(x) * np.sinc(x / a), 0.0)


_FILTERS = {"bilinear": (_triangle, 1.0), "bicubic": (_cubic, 2.0), "lanczos": (_lanczos, 3.0)}


def _scale(n_in: int, n_out: int, align_corners: bool, factor) -> float:
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    if factor is not None and factor > 0:
        return 1.0 / factor
    return n_in / n_out


def weights(n_in: int, n_out: int, mode: str, align_corners: bool, factor=None) -> np.ndarray:
    """The (n_out, n_in) float64 resampling matrix of one spatial dim."""
    filt, radius = _FILTERS[mode]
    scale = _scale(n_in, n_out, align_corners, factor)
    support = radius * scale if scale >= 1.0 else radius
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    width = int(math.ceil(support)) * 2 + 1
    W = np.zeros((n_out, n_in))
    for i in range(n_out):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)          # (int(): truncation, as the C++ cast)
        size = min(max(min(int(center + support + 0.5), n_in) - lo, 0), width)
        j = np.arange(lo, lo + size)
        w = filt((j - center + 0.5) * invscale)
        total = w.sum()
        if total != 0.0:
            w = w / total
        W[i, lo:lo + size] = w
    return W


def interpolate_antialias(input: Tensor, out_sizes, scales, mode: str, align_corners: bool) -> Tensor:
    """``input`` (N, C, H, W) resampled to ``out_sizes`` with the antialiasing filter of ``mode``."""
    dt = input._dtype
    (h, w), (oh, ow) = input._data.shape[2:], out_sizes
    fh, fw = (None, None) if scales is None else scales
    Wh = wrap(weights(h, oh, mode, align_corners, fh).astype(dt.np), dt)
    Ww = wrap(weights(w, ow, mode, align_corners, fw).astype(dt.np), dt)
    r = Wh @ input @ Ww.mT
    return rename(r, node_class(f"Upsample{mode.capitalize()}2DAaBackward0"))
