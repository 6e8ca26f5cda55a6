"""torch.special's orthogonal polynomials (Chebyshev T/U/V/W and their shifted forms, Hermite H/He,
Laguerre L, Legendre P), ``spherical_bessel_j0``, the Hurwitz ``zeta`` and the ``modified_bessel_i0/i1``
names. The polynomials run torch's three-term recurrences in the result's dtype with torch's order of
operations and its closed forms (trigonometric ones for Chebyshev polynomials of high degree inside (-1, 1),
the values at the ends), so float32 results match torch's to the last bits rather than being more exact
(``n`` a number or a tensor, truncated to an integer; a negative degree gives 0); like torch's, they carry
no gradient. ``zeta(x, q)`` sums the
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
    """``x`` and the truncated degrees as arrays in the result dtype torch picks (the promoted dtype of
    ``x`` and ``n``, the default float dtype for integers), plus that dtype."""
    if not isinstance(x, Tensor) and not isinstance(n, Tensor):
        raise TypeError(f"special_{name}(): expected at least one Tensor argument")
    dts = [t._dtype for t in (x, n) if isinstance(t, Tensor)]
    floats = [d for d in dts if d.is_floating_point]
    dt = floats[0] if floats else _dt.get_default_dtype()
    if len(floats) == 2 and floats[1].itemsize > floats[0].itemsize:
        dt = floats[1]
    work = np.float64 if dt.np == np.float64 else np.float32
    xa = (x._data if isinstance(x, Tensor) else np.asarray(x)).astype(work)
    with np.errstate(all="ignore"):
        na = np.trunc((n._data if isinstance(n, Tensor) else np.asarray(n)).astype(np.float64)).astype(np.int64)
    return xa, na, dt


def _recurrence(x, n, p1, step):
    """torch's loop for ``P_n(x)``: ``P_0 = 1``, ``P_1 = p1(x)``, ``P_{j+1} = step(j, x, P_j, P_{j-1})``,
    elementwise in ``n``, in ``x``'s (working) dtype with torch's order of operations."""
    x, n = np.broadcast_arrays(x, n)
    one = np.ones_like(x)
    out = np.where(n <= 0, one, p1(x))
    top = int(n.max()) if n.size else 0
    prev, cur = one, p1(x)
    for j in range(1, top):
        prev, cur = cur, step(j, x, cur, prev)
        out = np.where(n == j + 1, cur, out)
    return x, n, out


def _poly(name, p1, step, edges=None, shifted=False):
    """A torch.special polynomial: the recurrence, then torch's early returns (``edges(x, n, r)``, for the
    values where torch answers in closed form) and 0 for a negative degree."""
    def fn(input, n, *, out=None):  # noqa: A002 - torch's names
        x, k, dt = _operands(input, n, name)
        with np.errstate(all="ignore"):
            x, k, r = _recurrence(x, k, p1, step)
            if edges is not None:
                r = edges(x, k, r)
            r = np.where(k < 0, 0, r)
        res = wrap(np.asarray(r, dtype=dt.np), dt)
        if out is not None:
            from .ops.elementwise import _out
            return _out(res, out)
        return res
    fn.__name__ = name
    fn.__doc__ = f"torch.special.{name}(input, n): the degree-n polynomial at ``input``."
    return fn


def _sgn(n, even, odd):
    return np.where(n % 2 == 0, even, odd)


def _fma(a, b, c):
    """``a * b + c`` rounded once, as torch's compiled loops contract it (float32 through float64, where the
    product is exact; float64 by an error-free product and sum)."""
    if a.dtype != np.float64:
        return (a.astype(np.float64) * b + c).astype(a.dtype)
    p = a * b
    sa, sb = a * 134217729.0, b * 134217729.0        # Veltkamp splits into 26-bit halves
    ah = sa - (sa - a)
    bh = sb - (sb - b)
    al, bl = a - ah, b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # p + e == a * b exactly
    s = p + c
    bb = s - p
    t = (p - (s - bb)) + (c - bb)                    # s + t == p + c exactly
    out = s + (t + e)
    return np.where(np.isfinite(out), out, p + c)


def _cheb(j, x, cur, prev):
    return _fma(x + x, cur, -prev)


def _s(x):                     # the shifted argument, spelled as torch spells it
    return x + x - 1


def _scheb(j, x, cur, prev):
    return _fma(_s(x) + _s(x), cur, -prev)


def _trig(x, n, r, lim, form):
    """Above degree ``lim`` and inside (-1, 1) torch uses the trigonometric closed form ``form``."""
    inside = (n > lim) & (np.abs(x) < 1)
    if not inside.any():
        return r
    t = np.arccos(np.where(inside, x, 0).astype(x.dtype))
    return np.where(inside, form(t, n.astype(x.dtype)), r)


def _t_form(t, n):
    return np.cos(n * t)


def _u_form(t, n):
    s = np.sin(t)
    return np.where(s != 0, np.sin((n + 1) * t) / s, (n + 1) * np.cos((n + 1) * t) * np.cos(t))


def _v_form(t, n):
    h = t / 2
    return np.where(np.sin(h) != 1, np.cos((n + t.dtype.type(0.5)) * t) / np.cos(h),
                    _sgn(n.astype(np.int64), n + n + 1, -(n + n + 1)))


def _w_form(t, n):
    h = t / 2
    return np.where(np.cos(h) != 1, np.sin((n + t.dtype.type(0.5)) * t) / np.sin(h), n + n + 1)


def _edges_t(x, n, r):
    r = _trig(x, n, r, 6, _t_form)
    return np.where(np.abs(x) == 1, np.where((x > 0) | (n % 2 == 0), 1, -1), r)


def _edges_u(x, n, r):
    r = _trig(x, n, r, 8, _u_form)
    return np.where(np.abs(x) == 1, np.where((x > 0) | (n % 2 == 0), n + 1, -(n + 1)), r)


def _edges_v(x, n, r):
    r = _trig(x, n, r, 8, _v_form)
    return np.where(np.abs(x) == 1, np.where(x > 0, 1, _sgn(n, n + n + 1, -(n + n + 1))), r)


def _edges_w(x, n, r):
    r = _trig(x, n, r, 8, _w_form)
    return np.where(np.abs(x) == 1, np.where(x > 0, n + n + 1, _sgn(n, 1, -1)), r)


def _shifted_edges(edges, at_one, at_zero):
    def fn(x, n, r):
        r = edges(_s(x), n, r)
        r = np.where(x == 0, at_zero(n), r)
        return np.where(x == 1, at_one(n), r)
    return fn


def _trig_only(lim, form):
    return lambda x, n, r: _trig(x, n, r, lim, form)


chebyshev_polynomial_t = _poly("chebyshev_polynomial_t", lambda x: x, _cheb, _edges_t)
chebyshev_polynomial_u = _poly("chebyshev_polynomial_u", lambda x: x + x, _cheb, _edges_u)
chebyshev_polynomial_v = _poly("chebyshev_polynomial_v", lambda x: x + x - 1, _cheb, _edges_v)
chebyshev_polynomial_w = _poly("chebyshev_polynomial_w", lambda x: x + x + 1, _cheb, _edges_w)
shifted_chebyshev_polynomial_t = _poly(
    "shifted_chebyshev_polynomial_t", _s, _scheb,
    _shifted_edges(_trig_only(6, _t_form), lambda n: 1, lambda n: _sgn(n, 1, -1)))
shifted_chebyshev_polynomial_u = _poly(
    "shifted_chebyshev_polynomial_u", lambda x: _s(x) + _s(x), _scheb,
    _shifted_edges(_trig_only(6, _u_form), lambda n: n + 1, lambda n: _sgn(n, n + 1, -(n + 1))))
shifted_chebyshev_polynomial_v = _poly(
    "shifted_chebyshev_polynomial_v", lambda x: _s(x) + _s(x) - 1, _scheb,
    _shifted_edges(_trig_only(6, _v_form), lambda n: 1, lambda n: _sgn(n, n + n + 1, -(n + n + 1))))
shifted_chebyshev_polynomial_w = _poly(
    "shifted_chebyshev_polynomial_w", lambda x: _s(x) + _s(x) + 1, _scheb,
    _shifted_edges(_trig_only(4, _w_form), lambda n: n + n + 1, lambda n: _sgn(n, 1, -1)))
hermite_polynomial_h = _poly("hermite_polynomial_h", lambda x: x + x,
                             lambda j, x, c, p: _fma(x + x, c, -((2 * j) * p)))
hermite_polynomial_he = _poly("hermite_polynomial_he", lambda x: x, lambda j, x, c, p: _fma(x, c, -(j * p)))
laguerre_polynomial_l = _poly("laguerre_polynomial_l", lambda x: 1 - x,
                              lambda j, x, c, p: _fma((j + j) + (1 - x), c, -(j * p)) / (j + 1),
                              lambda x, n, r: np.where(x == 0, 1, r))
legendre_polynomial_p = _poly("legendre_polynomial_p", lambda x: x,
                              lambda j, x, c, p: _fma((j + j + 1) * x, c, -(j * p)) / (j + 1),
                              lambda x, n, r: np.where(np.abs(x) == 1, np.where((x > 0) | (n % 2 == 0), 1, -1), r))


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
