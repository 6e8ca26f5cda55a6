"""The normal CDF Phi(x) and the exact GELU (x * Phi(x)) and its derivative, as NumPy kernels.

float32 is the hot case (every transformer's feed-forward): it is evaluated in float32, in place, over
blocks of ``_BLOCK`` elements so that the ~25 passes of one block stay in the cache, and without
``np.where`` (which branches per element and costs as much as the whole formula). float64 uses the
series erf of ``ember.ops._special``.

The fit: erfc(a) = t * exp(P(t) - a^2), t = 1 / (1 + a / 2), a = |z| (Numerical Recipes' Chebyshev fit
"erfcc", relative error < 1.2e-7 everywhere). Evaluated in float32 the rounding of a^2 adds up to
~3e-6 relative far in the tail (x < -8, where Phi < 1e-15); compiled code evaluates the same fit in
float32 (``ember/compiler/decompose_nn.py``).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ...ops import _special

# inf * 0 at x = +-inf in the derivative gives nan with an "invalid value" warning; torch is silent
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"ember\.nn\.functional\._normal_cdf$")

_ERFC_P = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418,
           0.37409196, 1.00002368, -1.26551223)
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_BLOCK = 1 << 16
# float32 constants; the last coefficient takes the 1/2 of Phi = erfc / 2 (exp(c + ln 1/2) = exp(c) / 2)
_P32 = tuple(np.float32(c) for c in _ERFC_P[:-1]) + (np.float32(_ERFC_P[-1] + math.log(0.5)),)
_H32, _SQH32, _C32 = np.float32(0.5), np.float32(_SQRT_HALF), np.float32(_INV_SQRT_2PI)


def _phi32(x, out, half_x2=None):
    """Phi(x) of a contiguous float32 block into ``out``; ``half_x2`` (a buffer like x) gets x^2 / 2."""
    a = np.abs(x)
    a *= _SQH32                                  # a = |z|, z = -x / sqrt(2)
    t = np.multiply(a, _H32)
    t += 1
    np.reciprocal(t, out=t)                      # t = 1 / (1 + a / 2)
    p = np.multiply(t, _P32[0])
    p += _P32[1]
    for c in _P32[2:]:
        p *= t
        p += c
    h = np.multiply(x, x, out=a if half_x2 is None else half_x2)
    h *= _H32                                    # z^2 = x^2 / 2 (one rounding less than a * a)
    p -= h
    np.exp(p, out=p)
    p *= t                                       # erfc(|z|) / 2: Phi(x) for x <= 0, 1 - Phi(x) for x > 0
    np.copysign(p, x, out=p)
    # x > 0 (sign bit clear): 1 - p; x < 0: p; x = +-0: p = 1/2 either way
    return np.subtract(np.logical_not(np.signbit(x)), p, out=out)


def _blocks(x, block_fn):
    """``block_fn(xb, outb)`` over cache-sized blocks of ``x``: a new array of x's shape and dtype."""
    if x.ndim == 0:
        return _blocks(x.reshape(1), block_fn).reshape(())
    out = np.empty(x.shape, x.dtype)
    if not x.flags.c_contiguous:
        x = x.copy()
    if x.size <= _BLOCK:
        block_fn(x, out)
        return out
    xf = x.reshape(-1)
    of = out.reshape(-1)
    for i in range(0, xf.size, _BLOCK):
        block_fn(xf[i:i + _BLOCK], of[i:i + _BLOCK])
    return out


def _gelu32(x, out):
    _phi32(x, out)
    out *= x


def _gelu_d1_32(x, out):
    e = np.empty_like(x)
    _phi32(x, out, half_x2=e)
    np.negative(e, out=e)
    np.exp(e, out=e)
    e *= x
    e *= _C32
    out += e                                     # Phi(x) + x * exp(-x^2 / 2) / sqrt(2 pi)


def normal_cdf(x):
    """Phi(x) = erfc(-x / sqrt(2)) / 2 in x's dtype (float32 or float64)."""
    if x.dtype == np.float32:
        return _blocks(x, _phi32)
    e = _special.erf((x * _SQRT_HALF).reshape(-1)).reshape(x.shape)
    e += 1
    e *= 0.5
    return e


def gelu_exact(x):
    """x * Phi(x)."""
    if x.dtype == np.float32:
        return _blocks(x, _gelu32)
    return x * normal_cdf(x)


def gelu_exact_d1(x):
    """d/dx of x * Phi(x): Phi(x) + x * phi(x)."""
    if x.dtype == np.float32:
        return _blocks(x, _gelu_d1_32)
    return normal_cdf(x) + x * np.exp(x * x * -0.5) * _INV_SQRT_2PI
