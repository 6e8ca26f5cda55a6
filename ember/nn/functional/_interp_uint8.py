"""Bilinear / bicubic resampling of uint8 images the way torch's CPU kernels do it, bit for bit.

torch resamples uint8 separably, the last dim (width) first, then the height, each pass rounding and
clamping to uint8 (a dim whose size does not change is copied, even when a scale factor is given). A pass computes the float64 weights of each output position (the float path's source
index and fraction; taps outside the image fold onto the edge pixel), turns them into fixed-point
int16 weights with as many fraction bits ``p`` as keep the largest weight below 2**15, and computes
``clamp((2**(p-1) + sum(pixel * weight)) >> p, 0, 255)``: a rounded, clamped result.
"""
from __future__ import annotations

import math

import numpy as np


def _linear(x: float) -> float:
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


def _cubic(x: float, a: float = -0.75) -> float:
    x = abs(x)
    if x < 1.0:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    if x < 2.0:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return 0.0


def _fixed_point_weights(n: int, no: int, scale, align_corners: bool, cubic: bool):
    """(first tap index, number of taps, int weights (no, taps), fraction bits) of one pass."""
    taps = 4 if cubic else 2
    f = _cubic if cubic else _linear
    if align_corners:
        step = (n - 1) / (no - 1) if no > 1 else 0.0
    else:
        step = 1.0 / scale if scale is not None and scale > 0 else n / no
    first = np.zeros(no, dtype=np.int64)
    count = np.zeros(no, dtype=np.int64)
    w = np.zeros((no, taps))
    w_max = 0.0
    half = taps // 2
    for i in range(no):
        src = step * i if align_corners else step * (i + 0.5) - 0.5
        if not align_corners and not cubic and src < 0:
            src = 0.0
        base = min(int(math.floor(src)), n - 1)
        frac = min(max(src - base, 0.0), 1.0)
        lo, hi = base - half + 1, base + half + 1
        first[i] = max(lo, 0)
        count[i] = min(max(min(hi, n) - first[i], 0), taps)
        slot = 0
        for j in range(taps):
            # taps before the image fold onto the first slot, taps past its end onto the last one
            if lo + j <= 0:
                slot = 0
            elif lo + j >= n - 1:
                slot = count[i] - 1
            w[i, slot] += f(float(j + 1 - half) - frac)
            w_max = max(w_max, w[i, slot])
            slot += 1
    bits = 0
    while bits < 22 and int(0.5 + w_max * (1 << (bits + 1))) < (1 << 15):
        bits += 1
    v = w * (1 << bits)
    wi = np.where(v < 0, np.trunc(v - 0.5), np.trunc(v + 0.5)).astype(np.int64)
    wi[np.arange(taps)[None, :] >= count[:, None]] = 0
    return first, wi, bits


def _pass(x: np.ndarray, axis: int, no: int, scale, align_corners: bool, cubic: bool) -> np.ndarray:
    n = x.shape[axis]
    first, wi, bits = _fixed_point_weights(n, no, scale, align_corners, cubic)
    xm = np.moveaxis(x, axis, -1).astype(np.int64)
    acc = np.full(xm.shape[:-1] + (no,), 1 << (bits - 1) if bits else 0, dtype=np.int64)
    for k in range(wi.shape[1]):
        acc += xm[..., np.minimum(first + k, n - 1)] * wi[:, k]
    return np.moveaxis(np.clip(acc >> bits, 0, 255).astype(np.uint8), -1, axis)


def resample_uint8(x: np.ndarray, out_sizes, scales, mode: str, align_corners: bool) -> np.ndarray:
    """Resample the trailing ``len(out_sizes)`` dims of a uint8 array (width first, as torch)."""
    cubic = mode == "bicubic"
    nsp = len(out_sizes)
    for i in reversed(range(nsp)):
        axis = x.ndim - nsp + i
        if x.shape[axis] == int(out_sizes[i]):
            continue        # torch skips a pass that keeps the size, whatever the scale factor says
        sc = scales[i] if scales is not None else None
        x = _pass(x, axis, int(out_sizes[i]), sc, align_corners, cubic)
    return np.ascontiguousarray(x)
