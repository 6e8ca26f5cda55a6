"""torch.special's Bessel functions of the first and second kind (``bessel_j0/j1``, ``bessel_y0/y1``), the
modified ones of the second kind (``modified_bessel_k0/k1`` and their ``exp(x)``-scaled forms) and
``airy_ai``, computed in float64 with NumPy and cast back to the input's dtype.

How each is computed (own formulas, no tables): J and Y sum their power series for ``|x| <= 12`` and the
Hankel asymptotic expansion above (both are good to ~1e-11 there). K sums its power series for
``x <= 2``, integrates ``K_v(x) e^x = int_0^inf exp(-x (cosh t - 1)) cosh(v t) dt`` by the trapezoid rule
(exponentially accurate for this smooth, fast-decaying integrand) up to 30 and uses the asymptotic
expansion beyond. ``airy_ai`` sums its Maclaurin series on ``[-8, 1]``, uses ``K_{1/3}`` of
``zeta = 2/3 x^{3/2}`` above and the oscillating asymptotic expansion below. Like torch's, the results
carry no gradient; half precision and complex inputs raise NotImplementedError as torch's CPU kernels do.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes as _dt
from .tensor import Tensor, wrap

__all__ = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "airy_ai"]

_EULER = 0.57721566490153286061
_SERIES_TERMS = 60


def _hankel(x, nu):
    """``(P, Q)`` of the Hankel expansion of order ``nu`` (x large, > 12)."""
    mu = 4.0 * nu * nu
    p = np.ones_like(x)
    q = np.zeros_like(x)
    term = np.ones_like(x)
    for k in range(1, 40):
        term = term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * x)
        sign = -1.0 if (k // 2) % 2 else 1.0        # (-1)^floor(k/2): +a1 -a2 -a3 +a4 ...
        if k % 2:
            q = q + sign * term
        else:
            p = p + sign * term
    return p, q


def _j_series(x, n):
    """``J_n(x)`` by its power series (n = 0 or 1)."""
    h = x * x / 4.0
    term = np.ones_like(x) if n == 0 else x / 2.0
    total = term.copy()
    for k in range(1, _SERIES_TERMS):
        term = term * (-h) / (k * (k + n))
        total = total + term
    return total


def _y_series(x, n, j):
    """``Y_n(x)`` by its power series, ``j`` being ``J_n(x)``."""
    h = x * x / 4.0
    if n == 0:
        total = np.zeros_like(x)
        term = np.ones_like(x)
        harm = 0.0
        for k in range(1, _SERIES_TERMS):
            harm += 1.0 / k
            term = term * (-h) / (k * k)
            total = total - harm * term                # (-1)^(k+1) H_k (x^2/4)^k / (k!)^2
        return 2.0 / np.pi * ((np.log(x / 2.0) + _EULER) * j + total)
    total = np.zeros_like(x)
    term = x / 2.0                                     # (-1)^k (x/2)^(2k+1) / (k! (k+1)!)
    h_k, h_k1 = 0.0, 1.0                               # H_k, H_(k+1)
    for k in range(_SERIES_TERMS):
        if k:
            term = term * (-h) / (k * (k + 1))
            h_k = h_k1
            h_k1 += 1.0 / (k + 1)
        total = total + (h_k + h_k1 - 2.0 * _EULER) * term
    return 2.0 / np.pi * np.log(x / 2.0) * j - 2.0 / (np.pi * x) - total / np.pi


def _j(x, n):
    ax = np.abs(x)
    small = ax <= 12.0
    out = np.empty_like(x)
    s = ax[small]
    out[small] = _j_series(s, n)
    b = ax[~small]
    p, q = _hankel(b, n)
    chi = b - (n / 2.0 + 0.25) * np.pi
    out[~small] = np.sqrt(2.0 / (np.pi * b)) * (p * np.cos(chi) - q * np.sin(chi))
    if n == 1:
        out = np.where(x < 0, -out, out)
    return out


def _y(x, n):
    out = np.full_like(x, np.nan)
    small = (x > 0) & (x <= 12.0)
    s = x[small]
    out[small] = _y_series(s, n, _j_series(s, n))
    big = x > 12.0
    b = x[big]
    p, q = _hankel(b, n)
    chi = b - (n / 2.0 + 0.25) * np.pi
    out[big] = np.sqrt(2.0 / (np.pi * b)) * (p * np.sin(chi) + q * np.cos(chi))
    out[x == 0] = -np.inf
    return out


def _i_series(x, n):
    h = x * x / 4.0
    term = np.ones_like(x) if n == 0 else x / 2.0
    total = term.copy()
    for k in range(1, 40):
        term = term * h / (k * (k + n))
        total = total + term
    return total


def _k_series(x, n):
    """``K_n(x)`` by its power series (0 < x <= 2)."""
    h = x * x / 4.0
    lg = np.log(x / 2.0)
    if n == 0:
        total = np.zeros_like(x)
        term = np.ones_like(x)
        harm = 0.0
        for k in range(1, 40):
            harm += 1.0 / k
            term = term * h / (k * k)
            total = total + harm * term
        return -(lg + _EULER) * _i_series(x, 0) + total
    total = np.zeros_like(x)
    term = np.ones_like(x)                             # (x^2/4)^k / (k! (k+1)!)
    h_k, h_k1 = 0.0, 1.0
    for k in range(40):
        if k:
            term = term * h / (k * (k + 1))
            h_k = h_k1
            h_k1 += 1.0 / (k + 1)
        total = total + (h_k + h_k1 - 2.0 * _EULER) * term
    return 1.0 / x + lg * _i_series(x, 1) - x / 4.0 * total


def _k_scaled_large(x, nu):
    """``K_nu(x) e^x`` for x > 0.6: the trapezoid rule on the integral up to 30, the expansion above."""
    out = np.empty_like(x)
    mid = x <= 30.0
    m = x[mid]
    h = 0.05
    total = 0.5 * np.ones_like(m)                      # t = 0 carries half weight
    for j in range(1, 161):                            # t up to 8: x (cosh t - 1) > 800 for x > 0.6
        t = j * h
        total = total + np.exp(-m * (math.cosh(t) - 1.0)) * math.cosh(nu * t)
    out[mid] = h * total
    b = x[~mid]
    mu = 4.0 * nu * nu
    term = np.ones_like(b)
    s = np.ones_like(b)
    for k in range(1, 30):
        term = term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * b)
        s = s + term
    out[~mid] = np.sqrt(np.pi / (2.0 * b)) * s
    return out


def _k(x, n, scaled):
    out = np.full_like(x, np.nan)
    small = (x > 0) & (x <= 2.0)
    s = x[small]
    ks = _k_series(s, n)
    out[small] = ks * np.exp(s) if scaled else ks
    big = x > 2.0
    b = x[big]
    kb = _k_scaled_large(b, float(n))
    if scaled:
        out[big] = kb
    else:
        with np.errstate(under="ignore"):
            out[big] = kb * np.exp(-b)
    out[x == 0] = np.inf
    return out


_AI0 = 0.355028053887817239                            # Ai(0)
_DAI0 = 0.258819403792806798                           # -Ai'(0)


def _airy(x):
    out = np.full_like(x, np.nan)
    mid = (x >= -8.0) & (x <= 1.0)
    m = x[mid]
    c = m * m * m
    f = np.ones_like(m)
    g = m.copy()
    a, b = f.copy(), g.copy()
    for k in range(1, 40):
        a = a * c / ((3 * k - 1) * (3 * k))
        b = b * c / ((3 * k) * (3 * k + 1))
        f = f + a
        g = g + b
    out[mid] = _AI0 * f - _DAI0 * g
    up = (x > 1.0) & np.isfinite(x)
    u = x[up]
    zeta = 2.0 / 3.0 * u * np.sqrt(u)
    with np.errstate(under="ignore", over="ignore"):
        out[up] = np.sqrt(u / 3.0) / np.pi * _k_scaled_large(zeta, 1.0 / 3.0) * np.exp(-zeta)
    low = (x < -8.0) & np.isfinite(x)
    z = -x[low]
    zeta = 2.0 / 3.0 * z * np.sqrt(z)
    p = np.ones_like(z)
    q = np.zeros_like(z)
    term = np.ones_like(z)
    for k in range(1, 30):
        term = term * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216.0 * k * zeta)
        sign = -1.0 if (k // 2) % 2 else 1.0
        if k % 2:
            q = q + sign * term
        else:
            p = p + sign * term
    ph = zeta + np.pi / 4.0
    out[low] = (np.sin(ph) * p - np.cos(ph) * q) / (np.sqrt(np.pi) * np.sqrt(np.sqrt(z)))
    return out


def _run(name, arg, input, out, compute):  # noqa: A002 - torch's name
    if not isinstance(input, Tensor):
        raise TypeError(f"special_{name}(): argument '{arg}' (position 1) must be Tensor, "
                        f"not {type(input).__name__}")
    dt = input._dtype
    if dt.is_complex or dt in (_dt.float16, _dt.bfloat16):
        from .ops.compare import not_implemented_for
        raise not_implemented_for(f"{name}_cpu", dt)
    if not dt.is_floating_point:
        dt = _dt.get_default_dtype()
    x = np.asarray(input._data, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = compute(x.reshape(-1)).reshape(x.shape)
    res = wrap(np.asarray(r, dtype=dt.np), dt)
    if out is not None:
        from .ops.elementwise import _out
        return _out(res, out)
    return res


def _unary(name, compute):
    """The function ``name(input, *, out=None)``; torch calls the argument ``x`` for the scaled K's and Ai."""
    if name.startswith("scaled") or name == "airy_ai":
        def fn(x, *, out=None):
            return _run(name, "x", x, out, compute)
    else:
        def fn(input, *, out=None):  # noqa: A002 - torch's name
            return _run(name, "input", input, out, compute)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.special.{name} (float64 inside, no gradient)."
    return fn


bessel_j0 = _unary("bessel_j0", lambda x: _j(x, 0))
bessel_j1 = _unary("bessel_j1", lambda x: _j(x, 1))
bessel_y0 = _unary("bessel_y0", lambda x: _y(x, 0))
bessel_y1 = _unary("bessel_y1", lambda x: _y(x, 1))
modified_bessel_k0 = _unary("modified_bessel_k0", lambda x: _k(x, 0, False))
modified_bessel_k1 = _unary("modified_bessel_k1", lambda x: _k(x, 1, False))
scaled_modified_bessel_k0 = _unary("scaled_modified_bessel_k0", lambda x: _k(x, 0, True))
scaled_modified_bessel_k1 = _unary("scaled_modified_bessel_k1", lambda x: _k(x, 1, True))
airy_ai = _unary("airy_ai", _airy)
