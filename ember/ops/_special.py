"""Special functions on NumPy float64 arrays, written for ember (NumPy has no erf, gamma or Bessel).

Every function takes and returns float64 arrays and aims at full double precision (a few ulp); the
unary op family casts float32/float16/bfloat16 inputs up to float64 and rounds the result back, which
is what torch's own kernels give to within the last bit. ``tol`` lets float32 callers stop series early.

Methods (standard textbook formulas):
- erf: the everywhere-positive series ``erf x = 2/sqrt(pi) exp(-x^2) sum 2^n x^(2n+1) / (2n+1)!!`` for
  small |x|, and the even contraction of Laplace's continued fraction for erfc at larger x, with
  ``exp(-x^2)`` evaluated as two exact-split factors so large x keep their relative accuracy.
- erfinv: Winitzki's closed-form estimate refined by Halley steps on erf (on erfc near +-1).
- lgamma: Lanczos' approximation (g = 7, 9 terms) with the reflection formula for x < 0.5.
- digamma / polygamma: upward recurrence to x >= X, then the asymptotic (Bernoulli) series;
  digamma and trigamma use the reflection formula for negative x.
- i0 / i1: power series for |x| <= 20, Hankel's asymptotic series above.
"""
from __future__ import annotations

import math

import numpy as np

_SQRT_PI = math.sqrt(math.pi)
_TWO_OVER_SQRT_PI = 2.0 / _SQRT_PI


# ---- erf / erfc --------------------------------------------------------------------------------------

def _exp_neg_sq(x: np.ndarray) -> np.ndarray:
    """exp(-x*x) without the rounding error of x*x (which is amplified by large x)."""
    hi = x.astype(np.float32).astype(np.float64)   # 24-bit head: hi*hi is exact in float64
    return np.exp(-hi * hi) * np.exp(-(x - hi) * (x + hi))


def _series_terms(xmax: float, tol: float) -> int:
    """Number of terms the erf series needs at |x| = xmax (terms shrink fastest for smaller |x|)."""
    x2 = xmax * xmax
    term = s = 1.0
    n = 0
    while term > tol * s:
        n += 1
        term *= 2.0 * x2 / (2 * n + 1)
        s += term
    return n


def _erf_series(x: np.ndarray, tol: float) -> np.ndarray:
    if x.size == 0:
        return x.copy()
    n = _series_terms(float(np.max(np.abs(x))), tol)
    # Horner form of sum_k z^k / (2k+1)!! with z = 2x^2
    z = 2.0 * x * x
    p = np.full_like(x, 1.0 / _double_factorial_odd(n))
    for k in range(n - 1, -1, -1):
        p *= z
        p += 1.0 / _double_factorial_odd(k)
    return p * x * _TWO_OVER_SQRT_PI * _exp_neg_sq(x)


def _double_factorial_odd(k: int) -> float:
    """(2k+1)!! = 1 * 3 * 5 * ... * (2k+1), as a float."""
    return _ODD_DF[k]


_ODD_DF = [1.0]
for _k in range(1, 200):
    _ODD_DF.append(_ODD_DF[-1] * (2 * _k + 1))


# continued-fraction depth needed from x >= threshold on: (threshold, float64 depth, float32 depth)
_CF_DEPTH = ((10.0, 5, 3), (6.0, 8, 4), (4.0, 12, 6), (3.0, 16, 8), (2.5, 20, 9), (2.0, 30, 12),
             (1.5, 46, 18), (1.25, 64, 24), (1.0, 94, 36))


def _erfc_cf(x: np.ndarray, tol: float) -> np.ndarray:
    """erfc for x >= 1 by the even contraction of Laplace's continued fraction."""
    if x.size == 0:
        return x.copy()
    xmin = float(np.min(x))
    if not xmin >= 1.0:       # nan present: nan elements stay nan whatever the depth
        xmin = 1.0
    col = 1 if tol < 1e-12 else 2
    depth = next(row[col] for row in _CF_DEPTH if xmin >= row[0])
    z = 2.0 * x * x
    t = z + (4 * depth + 1)
    for k in range(depth, 0, -1):
        t = (z + (4 * k - 3)) - ((2 * k - 1) * (2 * k)) / t
    return (2.0 / _SQRT_PI) * x / t * _exp_neg_sq(x)


def erf(x: np.ndarray, tol: float = 1e-17) -> np.ndarray:
    """The error function, elementwise (float64)."""
    a = np.abs(x)
    small = a < 2.0
    if small.all():
        return _erf_series(x, tol)
    out = np.empty_like(x)
    out[small] = _erf_series(x[small], tol)
    big = ~small
    ab = a[big]
    # erf(inf) = 1 and erf(nan) = nan fall out of the continued fraction as 1 - 0 and nan
    r = 1.0 - _erfc_cf(np.minimum(ab, 30.0), tol)
    r[np.isnan(ab)] = np.nan
    out[big] = np.copysign(r, x[big])
    return out


def erfc(x: np.ndarray, tol: float = 1e-17) -> np.ndarray:
    """The complementary error function 1 - erf(x), accurate in relative terms for large x."""
    big = x >= 1.0
    if not big.any():
        return 1.0 - erf(x, tol)
    out = np.empty_like(x)
    small = ~big
    out[small] = 1.0 - erf(x[small], tol)
    xb = x[big]
    r = _erfc_cf(np.minimum(xb, 40.0), tol)    # erfc underflows to 0 long before 40
    r[xb >= 40.0] = 0.0
    out[big] = r
    return out


def erfinv(y: np.ndarray) -> np.ndarray:
    """The inverse error function: erf(erfinv(y)) = y on [-1, 1]; +-inf at +-1, nan outside."""
    a = np.abs(y)
    inside = a < 1.0
    ai = np.where(inside, a, 0.0)
    # Winitzki's estimate (relative error ~2e-3), then Halley steps (cubic convergence)
    w = np.log((1.0 - ai) * (1.0 + ai))
    c = 0.147
    b = 2.0 / (math.pi * c) + 0.5 * w
    x = np.sqrt(np.sqrt(b * b - w / c) - b)
    tail = ai > 0.5
    one_minus = 1.0 - ai                      # exact for ai >= 0.5
    for _ in range(2):
        # f = erf(x) - a, computed as (1 - a) - erfc(x) in the tail to avoid cancellation
        if tail.any():
            f = np.where(tail, one_minus - erfc(np.where(tail, x, 1.0)), erf(x) - ai)
        else:
            f = erf(x) - ai
        u = f / (_TWO_OVER_SQRT_PI * _exp_neg_sq(x))
        x = x - u / (1.0 + x * u)
    x = np.where(inside, x, np.where(a == 1.0, np.inf, np.nan))
    return np.copysign(x, y)


# ---- gamma family ------------------------------------------------------------------------------------

_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _lgamma_pos(x: np.ndarray) -> np.ndarray:
    """log Gamma(x) for x >= 0.5 (Lanczos)."""
    z = x - 1.0
    s = np.full_like(z, _LANCZOS[0])
    for i in range(1, 9):
        s += _LANCZOS[i] / (z + i)
    t = z + (_LANCZOS_G + 0.5)
    return _HALF_LOG_2PI + (z + 0.5) * np.log(t) - t + np.log(s)


def _sin_pi(x: np.ndarray) -> np.ndarray:
    """|sin(pi x)| computed from x's distance to the nearest integer (exact argument reduction)."""
    return np.abs(np.sin(math.pi * (x - np.round(x))))


def lgamma(x: np.ndarray) -> np.ndarray:
    """log|Gamma(x)|; +inf at non-positive integers and at +-inf."""
    refl = x < 0.5
    out = np.empty_like(x)
    pos = ~refl
    out[pos] = _lgamma_pos(x[pos])
    # exact zeros at 1 and 2, and log Gamma(inf) = inf (Lanczos gives inf - inf there)
    out[(x == 1.0) | (x == 2.0)] = 0.0
    out[x == np.inf] = np.inf
    if not refl.any():
        return out
    xr = x[refl]
    # reflection: Gamma(x) Gamma(1 - x) = pi / sin(pi x)
    r = math.log(math.pi) - np.log(_sin_pi(xr)) - _lgamma_pos(1.0 - xr)
    r[(xr == np.floor(xr)) | np.isinf(xr)] = np.inf
    out[refl] = r
    return out


# Bernoulli numbers B_2 ... B_16
_BERN = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)


def _shift_up(x: np.ndarray, target: float, term):
    """Return (x + k, sum of term(x + j) for j < k) where k lifts every element to >= target."""
    acc = np.zeros_like(x)
    steps = np.ceil(target - x)
    steps = np.where(np.isfinite(steps) & (steps > 0), steps, 0.0)
    nmax = int(steps.max()) if steps.size else 0
    if nmax == 0:
        return x, acc
    xs = x.copy()
    for k in range(nmax):
        active = steps > k
        if active.all():
            acc += term(xs)
            xs += 1.0
        else:
            acc += np.where(active, term(np.where(active, xs, 1.0)), 0.0)
            xs += active
    return xs, acc


def _digamma_pos(x: np.ndarray) -> np.ndarray:
    xs, acc = _shift_up(x, 10.0, lambda v: 1.0 / v)   # psi(x) = psi(x + 1) - 1/x
    inv2 = 1.0 / (xs * xs)
    poly = np.zeros_like(xs)
    for k in range(len(_BERN) - 1, -1, -1):
        poly = poly * inv2 + _BERN[k] / (2 * k + 2)
    return np.log(xs) - 0.5 / xs - poly * inv2 - acc


def digamma(x: np.ndarray) -> np.ndarray:
    """psi(x) = d/dx log Gamma(x); -inf at +0, +inf at -0, nan at negative integers (as torch)."""
    refl = x < 0.5
    if not refl.any():
        out = _digamma_pos(x)
    else:
        out = np.empty_like(x)
        pos = ~refl
        out[pos] = _digamma_pos(x[pos])
        xr = x[refl]
        frac = xr - np.round(xr)
        # reflection: psi(1 - x) - psi(x) = pi cot(pi x)
        r = _digamma_pos(1.0 - xr) - math.pi / np.tan(math.pi * frac)
        r[(frac == 0) | np.isneginf(xr)] = np.nan
        out[refl] = r
    zero = x == 0
    if zero.any():
        out[zero] = np.where(np.signbit(x[zero]), np.inf, -np.inf)
    return out


def polygamma(n: int, x: np.ndarray) -> np.ndarray:
    """The n-th derivative of digamma (n >= 0)."""
    if n == 0:
        return digamma(x)
    if n == 1:
        refl = x < 0.5
        if refl.any():
            # reflection: psi1(1 - x) + psi1(x) = pi^2 / sin^2(pi x)
            out = np.empty_like(x)
            pos = ~refl
            out[pos] = _polygamma_pos(1, x[pos])
            xr = x[refl]
            s = _sin_pi(xr)
            r = math.pi ** 2 / (s * s) - _polygamma_pos(1, 1.0 - xr)
            r[s == 0] = np.inf
            out[refl] = r
            return out
        return _polygamma_pos(1, x)
    out = _polygamma_pos(n, x)
    at_pole = (x <= 0) & (x == np.floor(x))
    if at_pole.any():
        out[at_pole] = np.inf if n % 2 else -np.inf    # the sign of (-1)^(n+1)
    return out


def _polygamma_pos(n: int, x: np.ndarray) -> np.ndarray:
    sign = 1.0 if n % 2 else -1.0
    nfact = math.factorial(n)
    target = 10.0 + 2.0 * n
    # psi^(n)(x) = psi^(n)(x + 1) + (-1)^(n+1) n! / x^(n+1)
    xs, acc = _shift_up(x, target, lambda v: 1.0 / v ** (n + 1))
    inv = 1.0 / xs
    inv2 = inv * inv
    # sum_k B_2k (2k+n-1)! / (2k)! / x^(2k+n), Horner in 1/x^2
    poly = np.zeros_like(xs)
    for k in range(len(_BERN), 0, -1):
        coef = _BERN[k - 1] * math.factorial(2 * k + n - 1) / math.factorial(2 * k)
        poly = poly * inv2 + coef
    asym = inv ** n * (math.factorial(n - 1) + nfact * 0.5 * inv + poly * inv2)
    return sign * (asym + nfact * acc)


# ---- modified Bessel functions of the first kind ----------------------------------------------------

def _bessel_series(x: np.ndarray, order: int) -> np.ndarray:
    """sum_k (x/2)^(2k+order) / (k! (k+order)!) for |x| <= 20 (all terms positive: no cancellation)."""
    q = 0.25 * x * x
    term = np.ones_like(x) if order == 0 else 0.5 * x
    s = term.copy()
    for k in range(1, 60):
        term = term * q / (k * (k + order))
        s += term
    return s


def _bessel_asym(x: np.ndarray, order: int) -> np.ndarray:
    """Hankel's expansion of I_order(x) for x > 20."""
    mu = 4.0 * order * order
    term = np.ones_like(x)
    s = term.copy()
    for k in range(1, 30):
        term = term * -(mu - (2 * k - 1) ** 2) / (8.0 * k * x)
        s += term
    half = np.exp(0.5 * x)             # split e^x so values near the overflow edge stay finite
    return half * (half * s / np.sqrt(2.0 * math.pi * x))


def _bessel(x: np.ndarray, order: int) -> np.ndarray:
    a = np.abs(x)
    small = a <= 20.0
    if small.all():
        return _bessel_series(x, order)
    out = np.empty_like(x)
    out[small] = _bessel_series(x[small], order)
    big = ~small
    r = _bessel_asym(a[big], order)     # gives nan at +-inf, as torch's kernels do
    out[big] = r if order == 0 else np.copysign(r, x[big])
    return out


def i0(x: np.ndarray) -> np.ndarray:
    """Modified Bessel function of the first kind, order 0."""
    return _bessel(x, 0)


def i1(x: np.ndarray) -> np.ndarray:
    """Modified Bessel function of the first kind, order 1."""
    return _bessel(x, 1)
