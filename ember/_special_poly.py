"""torch.special's orthogonal polynomials (Chebyshev T/U/V/W and their shifted forms, Hermite H/He,
Laguerre L, Legendre P), ``spherical_bessel_j0``, the Hurwitz ``zeta`` and the ``modified_bessel_i0/i1``
names. The polynomials run their three-term recurrences in float64 (``n`` a number or a tensor, truncated
to an integer; a negative degree gives 0) and, like torch's, carry no gradient. ``zeta(x, q)`` sums the
first terms and closes with the Euler-Maclaurin tail (Bernoulli numbers), as Cephes does; ``x == 1``
gives inf, ``x < 1`` NaN.
"""
from __future__ import annotations

import numpy as np

from . import dtypes as _dt
from .tensor import Tensor, wrap

__all__ = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
           "laguerre_polynomial_l", "legendre_polynomial_p", "spherical_bessel_j0", "zeta",
           "modified_bessel_i0", "modified_bessel_i1"]


def _operands(x, n, name):
    if not isinstance(x, Tensor) and not isinstance(n, Tensor):
        raise TypeError(f"special_{name}(): expected at least one Tensor argument")
    xt = x if isinstance(x, Tensor) else None
    dt = xt._dtype if xt is not None and xt._dtype.is_floating_point else _dt.get_default_dtype()
    xa = (x._data if isinstance(x, Tensor) else np.asarray(x)).astype(np.float64)
    with np.errstate(all="ignore"):
        na = np.trunc((n._data if isinstance(n, Tensor) else np.asarray(n)).astype(np.float64)).astype(np.int64)
    return xa, na, dt


def _recurrence(x, n, p0, p1, step):
    """``P_n(x)`` from ``P_0``, ``P_1`` and ``P_{k+1} = step(k, x, P_k, P_{k-1})``, elementwise in ``n``."""
    x, n = np.broadcast_arrays(x, n)
    out = np.where(n == 0, p0(x), 0.0)
    top = int(n.max()) if n.size else 0
    if top >= 1:
        prev, cur = p0(x), p1(x)
        out = np.where(n == 1, cur, out)
        for k in range(1, top):
            prev, cur = cur, step(k, x, cur, prev)
            out = np.where(n == k + 1, cur, out)
    return out


def _poly(name, p1, step, shifted=False):
    def fn(input, n, *, out=None):  # noqa: A002 - torch's names
        x, k, dt = _operands(input, n, name)
        if shifted:
            x = 2 * x - 1
        with np.errstate(all="ignore"):
            r = _recurrence(x, k, np.ones_like, p1, step)
        res = wrap(np.asarray(r, dtype=dt.np), dt)
        if out is not None:
            from .ops.elementwise import _out
            return _out(res, out)
        return res
    fn.__name__ = name
    fn.__doc__ = f"torch.special.{name}(input, n): the degree-n polynomial at ``input``."
    return fn


def _cheb(k, x, cur, prev):
    return 2 * x * cur - prev


chebyshev_polynomial_t = _poly("chebyshev_polynomial_t", lambda x: x, _cheb)
chebyshev_polynomial_u = _poly("chebyshev_polynomial_u", lambda x: 2 * x, _cheb)
chebyshev_polynomial_v = _poly("chebyshev_polynomial_v", lambda x: 2 * x - 1, _cheb)
chebyshev_polynomial_w = _poly("chebyshev_polynomial_w", lambda x: 2 * x + 1, _cheb)
shifted_chebyshev_polynomial_t = _poly("shifted_chebyshev_polynomial_t", lambda x: x, _cheb, shifted=True)
shifted_chebyshev_polynomial_u = _poly("shifted_chebyshev_polynomial_u", lambda x: 2 * x, _cheb, shifted=True)
shifted_chebyshev_polynomial_v = _poly("shifted_chebyshev_polynomial_v", lambda x: 2 * x - 1, _cheb, shifted=True)
shifted_chebyshev_polynomial_w = _poly("shifted_chebyshev_polynomial_w", lambda x: 2 * x + 1, _cheb, shifted=True)
hermite_polynomial_h = _poly("hermite_polynomial_h", lambda x: 2 * x, lambda k, x, c, p: 2 * x * c - 2 * k * p)
hermite_polynomial_he = _poly("hermite_polynomial_he", lambda x: x, lambda k, x, c, p: x * c - k * p)
laguerre_polynomial_l = _poly("laguerre_polynomial_l", lambda x: 1 - x,
                              lambda k, x, c, p: ((2 * k + 1 - x) * c - k * p) / (k + 1))
legendre_polynomial_p = _poly("legendre_polynomial_p", lambda x: x,
                              lambda k, x, c, p: ((2 * k + 1) * x * c - k * p) / (k + 1))


def spherical_bessel_j0(input, *, out=None):  # noqa: A002
    """``sin(x) / x`` (1 at 0), written with ember ops."""
    from .ops.creation import ones_like
    from . import where
    x = input if input._dtype.is_floating_point else input.to(_dt.get_default_dtype())
    small = x.abs() < 1e-4
    safe = where(small, ones_like(x), x)
    r = where(small, 1 - x * x / 6, safe.sin() / safe)
    if out is not None:
        from .ops.elementwise import _out
        return _out(r, out)
    return r


# B_2j / (2j)! for j = 1..12 (Bernoulli numbers over factorials)
_B2J = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330,
        854513 / 138, -236364091 / 2730]
_COEF = []
_f = 1.0
for _j, _b in enumerate(_B2J, start=1):
    _f *= (2 * _j - 1) * (2 * _j)
    _COEF.append(_b / _f)
del _f, _j, _b


def _hurwitz(s, q):
    s, q = np.broadcast_arrays(np.asarray(s, np.float64), np.asarray(q, np.float64))
    N = 12
    with np.errstate(all="ignore"):
        total = np.zeros(s.shape)
        for k in range(N):
            total = total + np.power(q + k, -s)
        a = q + N
        total = total + np.power(a, 1 - s) / (s - 1) + 0.5 * np.power(a, -s)
        rising = s.copy()                           # s (s+1) ... (s + 2j - 2)
        for j, c in enumerate(_COEF, start=1):
            total = total + c * rising * np.power(a, -s - 2 * j + 1)
            rising = rising * (s + 2 * j - 1) * (s + 2 * j)
        total = np.where(s == 1, np.inf, total)
        total = np.where(s < 1, np.nan, total)
        total = np.where((q <= 0) & (q == np.floor(q)) & (s > 1), np.inf, total)
    return total


def zeta(input, other, *, out=None):  # noqa: A002
    """The Hurwitz zeta function ``sum_k (other + k)^-input``."""
    x, _, dt = _operands(input, other if isinstance(other, Tensor) else 0, "zeta")
    if isinstance(other, Tensor) and not isinstance(input, Tensor):
        dt = other._dtype if other._dtype.is_floating_point else _dt.get_default_dtype()
    q = (other._data if isinstance(other, Tensor) else np.asarray(other)).astype(np.float64)
    res = wrap(np.asarray(_hurwitz(x, q), dtype=dt.np), dt)
    if out is not None:
        from .ops.elementwise import _out
        return _out(res, out)
    return res


def modified_bessel_i0(input, *, out=None):  # noqa: A002
    """torch.special.modified_bessel_i0: ``I0`` (ember.special.i0)."""
    from .special import i0
    return i0(input, out=out)


def modified_bessel_i1(input, *, out=None):  # noqa: A002
    """torch.special.modified_bessel_i1: ``I1`` (ember.special.i1)."""
    from .special import i1
    return i1(input, out=out)
