"""``ember.special``: torch.special's functions.

Most are ember ops under their usual names (``expit`` is ``sigmoid``, ``gammaln`` is ``lgamma``,
``psi`` is ``digamma``, ...). The rest are compositions of ember ops, so autograd and double backward
come from those ops: ``erfcx`` (a continued fraction for x >= 1, where exp(x^2) * erfc(x) would
overflow), ``ndtr``, ``ndtri``, ``log_ndtr``, ``entr``, ``xlog1py``, ``multigammaln``, and the
exponentially scaled Bessel functions ``i0e`` / ``i1e`` (an asymptotic series for |x| >= 30, where
exp(-|x|) * I(x) would overflow). The orthogonal polynomials, ``spherical_bessel_j0``, ``zeta`` and the
``modified_bessel_i0/i1`` names come from ``ember/_special_poly.py``. The Bessel functions
``bessel_j0/j1/y0/y1``, ``modified_bessel_k0/k1`` (and scaled) and ``airy_ai`` come from
``ember/_special_bessel.py``. ``gammainc`` / ``gammaincc`` (differentiable in x) live in ``distributions/_incomplete_gamma``.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes as _dt
from .tensor import Tensor, wrap

__all__ = ["expit", "logit", "erf", "erfc", "erfcx", "erfinv", "exp2", "expm1", "log1p", "gammaln", "digamma", "psi",
           "polygamma", "multigammaln", "i0", "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "entr", "sinc",
           "round", "softmax", "log_softmax", "logsumexp", "xlogy", "xlog1py", "gammainc", "gammaincc"]


def gammainc(input, other, *, out=None):  # noqa: A002
    """The regularized lower incomplete gamma function P(input, other)."""
    from .distributions._incomplete_gamma import gammainc as f
    return f(input, other, out=out)


def gammaincc(input, other, *, out=None):  # noqa: A002
    """The regularized upper incomplete gamma function Q(input, other)."""
    from .distributions._incomplete_gamma import gammaincc as f
    return f(input, other, out=out)


Tensor.igamma = lambda self, other: gammainc(self, other)        # torch.Tensor.igamma / igammac
Tensor.igammac = lambda self, other: gammaincc(self, other)

_SQRT1_2 = math.sqrt(0.5)


def _out(r, out):
    if out is None:
        return r
    from .ops.inplace import copy_out
    return copy_out(r, out)


def _E():
    import ember
    return ember


def _float(x) -> Tensor:
    """``x`` as a floating tensor (integers promote to the default dtype, as torch's special ops do)."""
    E = _E()
    if not isinstance(x, Tensor):
        x = E.tensor(x)
    return x if x.dtype.is_floating_point else x.to(_dt.get_default_dtype())


def expit(input, *, out=None):  # noqa: A002
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    return _out(_E().sigmoid(input), out)


def logit(input, eps=None, *, out=None):  # noqa: A002
    """``log(p / (1 - p))``, with p clamped to [eps, 1 - eps] when ``eps`` is given."""
    r = _E().logit(input, eps)
    return _out(r, out)


def _same(name):
    def fn(input, *args, out=None, **kwargs):  # noqa: A002
        return _out(getattr(_E(), name)(input, *args, **kwargs), out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``ember.{name}`` under its torch.special name."
    return fn


erf = _same("erf")
erfc = _same("erfc")
erfinv = _same("erfinv")
exp2 = _same("exp2")
expm1 = _same("expm1")
log1p = _same("log1p")
gammaln = _same("lgamma")
gammaln.__name__ = "gammaln"
digamma = _same("digamma")
psi = _same("digamma")
psi.__name__ = "psi"
i0 = _same("i0")
sinc = _same("sinc")
round = _same("round")  # noqa: A001
logsumexp = _same("logsumexp")
xlogy = _same("xlogy")


def polygamma(n: int, input, *, out=None):  # noqa: A002
    """The ``n``-th derivative of the digamma function."""
    r = _E().polygamma(n, input)
    return _out(r, out)


def softmax(input, dim, *, dtype=None):  # noqa: A002
    """``softmax`` along ``dim`` (computed in ``dtype`` when given)."""
    return _E().softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):  # noqa: A002
    """``log_softmax`` along ``dim`` (computed in ``dtype`` when given)."""
    return _E().log_softmax(input, dim, dtype=dtype)


def i1(input, *, out=None):  # noqa: A002
    """The modified Bessel function of the first kind, order 1."""
    from .ops.registry import apply
    from .ops.unary import I1
    r = apply(I1, (_float(input),))
    return _out(r, out)


def _bessel_asym_scaled(ax: Tensor, order: int, terms: int = 12) -> Tensor:
    """exp(-x) * I_order(x) for large positive x: the asymptotic series
    1/sqrt(2 pi x) * sum_k (-1)^k prod_{j<=k}(4 order^2 - (2j-1)^2) / (k! (8x)^k)."""
    mu = 4.0 * order * order
    total = None
    coef = 1.0
    inv8x = 1.0 / (8.0 * ax)
    power = None
    for k in range(terms):
        if k:
            coef *= -(mu - (2 * k - 1) ** 2) / k
            power = inv8x if power is None else power * inv8x
        term = coef if k == 0 else coef * power
        total = (ax * 0 + term) if total is None else total + term
    return total / (2 * math.pi * ax).sqrt()


def _scaled_bessel(x: Tensor, order: int) -> Tensor:
    E = _E()
    x = _float(x)
    ax = x.abs()
    big = ax >= 30.0
    small_x = x.clamp(-30.0, 30.0)          # the branch not taken must stay finite (and its gradient)
    base = E.i0(small_x) if order == 0 else i1(small_x)
    near = (-small_x.abs()).exp() * base
    far = _bessel_asym_scaled(ax.clamp(min=30.0), order)
    if order == 1:
        far = far * x.sign()
    return E.where(big, far, near)


def i0e(input, *, out=None):  # noqa: A002
    """``exp(-|x|) * I0(x)``, finite for large |x|."""
    r = _scaled_bessel(input, 0)
    return _out(r, out)


def i1e(input, *, out=None):  # noqa: A002
    """``exp(-|x|) * I1(x)``, finite for large |x|."""
    r = _scaled_bessel(input, 1)
    return _out(r, out)


def _erfc_cf_scaled(x: Tensor) -> Tensor:
    """exp(x^2) * erfc(x) for x >= 1, by the even contraction of Laplace's continued fraction."""
    xmin = float(x.detach().min()) if x.numel() else 1.0
    depth = 94
    for thr, d in ((10.0, 8), (6.0, 12), (4.0, 16), (3.0, 22), (2.5, 28), (2.0, 40), (1.5, 60), (1.25, 80)):
        if xmin >= thr:
            depth = d
            break
    z = 2.0 * x * x
    t = z + (4 * depth + 1)
    for k in range(depth, 0, -1):
        t = (z + (4 * k - 3)) - ((2 * k - 1) * (2 * k)) / t
    return (2.0 / math.sqrt(math.pi)) * x / t


def erfcx(input, *, out=None):  # noqa: A002
    """The scaled complementary error function ``exp(x^2) * erfc(x)``, accurate for large x."""
    E = _E()
    x = _float(input)

    def nonneg(u):                   # u >= 0: the direct product below 1, the continued fraction above
        lo = u.clamp(max=1.0)
        return E.where(u < 1.0, (lo * lo).exp() * E.erfc(lo), _erfc_cf_scaled(u.clamp(min=1.0)))
    pos = nonneg(x.clamp(min=0.0))
    neg_x = x.clamp(max=0.0)
    # reflection for x < 0: erfcx(x) = 2 exp(x^2) - erfcx(-x) (overflows to inf, gradient -inf, like torch)
    neg = 2 * (neg_x * neg_x).exp() - nonneg(-neg_x)
    r = E.where(x < 0, neg, pos)
    return _out(r, out)


def ndtr(input, *, out=None):  # noqa: A002
    """The standard normal CDF ``0.5 * erfc(-x / sqrt(2))``."""
    x = _float(input)
    r = 0.5 * _E().erfc(-x * _SQRT1_2)
    return _out(r, out)


def ndtri(input, *, out=None):  # noqa: A002
    """The inverse of ``ndtr``: ``sqrt(2) * erfinv(2p - 1)``."""
    p = _float(input)
    r = math.sqrt(2.0) * _E().erfinv(2 * p - 1)
    return _out(r, out)


def log_ndtr(input, *, out=None):  # noqa: A002
    """``log(ndtr(x))``, accurate in the far left tail (through ``erfcx``)."""
    E = _E()
    x = _float(input)
    left = x.clamp(max=-1.0)
    right = x.clamp(min=-1.0)
    tail = (erfcx(-left * _SQRT1_2) / 2).log() - left * left / 2
    body = (-E.erfc(right * _SQRT1_2) / 2).log1p()
    r = E.where(x < -1.0, tail, body)
    return _out(r, out)


def entr(input, *, out=None):  # noqa: A002
    """Elementwise entropy ``-x * log(x)`` (0 at 0, -inf for x < 0)."""
    E = _E()
    x = _float(input)
    safe = E.where(x > 0, x, E.ones_like(x))
    r = E.where(x > 0, -x * safe.log(), E.where(x == 0, E.zeros_like(x), E.full_like(x, -math.inf)))
    r = E.where(x != x, x, r)                   # NaN stays NaN
    return _out(r, out)


def xlog1py(input, other, *, out=None):  # noqa: A002
    """``x * log1p(y)``, with 0 where ``x == 0`` (unless y is NaN)."""
    E = _E()
    x = input if isinstance(input, Tensor) else None
    y = other if isinstance(other, Tensor) else None
    if x is None and y is None:
        raise TypeError("xlog1py(): at least one of 'input' and 'other' must be a Tensor")
    dt = _dt.result_type(input, other)
    if not dt.is_floating_point:
        dt = _dt.get_default_dtype()
    x = x.to(dt) if x is not None else E.tensor(input, dtype=dt)
    y = y.to(dt) if y is not None else E.tensor(other, dtype=dt)
    x, y = E.broadcast_tensors(x, y)
    r = E.where((x == 0) & (y == y), E.zeros_like(x), x * y.log1p())
    return _out(r, out)


def multigammaln(input, p: int, *, out=None):  # noqa: A002
    """The multivariate log-gamma ``log Gamma_p(a) = p(p-1)/4 log(pi) + sum_{i<p} lgamma(a - i/2)``."""
    E = _E()
    a = _float(input)
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    r = p * (p - 1) / 4 * math.log(math.pi) + sum(E.lgamma(a - i / 2) for i in range(p))
    return _out(r, out)


def mvlgamma(input, p: int):  # noqa: A002
    """``torch.mvlgamma``: the multivariate log-gamma function (see ``multigammaln``)."""
    return multigammaln(input, p)


def _install():
    from .ops.registry import attach
    attach("mvlgamma", mvlgamma)

    def mvlgamma_(self, p: int):
        from .ops.inplace import write_result
        return write_result(self, lambda t: multigammaln(t, p), "mvlgamma_")
    attach("mvlgamma_", mvlgamma_, function=False)


_install()
from ._special_poly import *  # noqa: E402,F401,F403
from ._special_poly import __all__ as _poly_all  # noqa: E402
__all__ = __all__ + list(_poly_all)
del np, wrap
from ._special_bessel import *  # noqa: E402,F401,F403
from ._special_bessel import __all__ as _bessel_all  # noqa: E402
__all__ = __all__ + list(_bessel_all)
