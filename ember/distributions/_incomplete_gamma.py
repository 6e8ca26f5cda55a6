"""The regularized incomplete gamma functions and the implicit reparameterisation gradient of gamma draws.

``P(a, x)`` (lower) and ``Q(a, x) = 1 - P`` (upper) in float64: the power series
P = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n)) where x < a + 1, and Lentz's continued
fraction for Q elsewhere, each computed where it keeps its relative precision.

A draw x ~ Gamma(a, 1) is a function of the concentration through its CDF, so (implicit
reparameterisation) dx/da = -(dP/da)(a, x) / p(a, x) with p the density. dP/da is a central difference of
the directly computed side (P by the series, or -Q by the fraction) in a, whose rounding error (~1e-15 /
step) and truncation error (~step^2) both stay near 1e-9 relative.

``gamma_reparam(concentration, draws)`` returns the draws with that derivative attached (an
``autograd.Function``); ``gammainc`` / ``gammaincc`` are ``torch.special``'s, differentiable in ``x``
(torch does not differentiate them in ``a`` either).
"""
from __future__ import annotations

import numpy as np

from ..ops import _special

__all__ = ["lower_regularized", "upper_regularized", "standard_gamma_grad", "gamma_reparam", "gammainc",
           "gammaincc"]

_EPS = 1e-16
_TINY = 1e-300
_MAX_ITER = 2000


def _log_prefactor(a, x):
    with np.errstate(divide="ignore"):
        return a * np.log(x) - x - _special.lgamma(a)


def _series_p(a, x):
    """P(a, x) by the power series (any x >= 0; used for x < a + 1)."""
    term = 1.0 / a
    total = term.copy()
    n = np.zeros_like(a)
    active = np.ones(a.shape, bool)
    for _ in range(_MAX_ITER):
        n = n + 1
        term = np.where(active, term * x / (a + n), 0.0)
        total = total + term
        active = active & (np.abs(term) > np.abs(total) * _EPS)
        if not active.any():
            break
    with np.errstate(over="ignore", under="ignore"):
        return np.where(x > 0, total * np.exp(_log_prefactor(a, x)), 0.0)


def _cf_q(a, x):
    """Q(a, x) by the continued fraction (x >= a + 1; modified Lentz)."""
    b = x + 1.0 - a
    c = np.full(a.shape, 1.0 / _TINY)
    d = 1.0 / np.where(np.abs(b) < _TINY, _TINY, b)
    h = d.copy()
    active = np.ones(a.shape, bool)
    for i in range(1, _MAX_ITER):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = np.where(np.abs(d) < _TINY, _TINY, d)
        c = b + an / c
        c = np.where(np.abs(c) < _TINY, _TINY, c)
        d = 1.0 / d
        delta = np.where(active, d * c, 1.0)
        h = h * delta
        active = active & (np.abs(delta - 1.0) > _EPS)
        if not active.any():
            break
    with np.errstate(over="ignore", under="ignore"):
        return np.exp(_log_prefactor(a, x)) * h


def _split(a, x):
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    return a, x, x < a + 1.0


def lower_regularized(a, x):
    """P(a, x) (torch.special.gammainc) for a > 0, x >= 0."""
    a, x, by_series = _split(a, x)
    out = np.empty(a.shape)
    out[by_series] = _series_p(a[by_series], x[by_series])
    out[~by_series] = 1.0 - _cf_q(a[~by_series], x[~by_series])
    return out


def upper_regularized(a, x):
    """Q(a, x) (torch.special.gammaincc)."""
    a, x, by_series = _split(a, x)
    out = np.empty(a.shape)
    out[by_series] = 1.0 - _series_p(a[by_series], x[by_series])
    out[~by_series] = _cf_q(a[~by_series], x[~by_series])
    return out


def standard_gamma_grad(a, x):
    """dx/da for draws x of Gamma(a, 1) (what torch._standard_gamma_grad approximates)."""
    a, x, by_series = _split(a, x)
    h = 1e-5 * np.maximum(a, 1.0)
    h = np.minimum(h, 0.5 * a)
    dp = np.empty(a.shape)
    s, c = by_series, ~by_series
    dp[s] = (_series_p(a[s] + h[s], x[s]) - _series_p(a[s] - h[s], x[s])) / (2 * h[s])
    dp[c] = -(_cf_q(a[c] + h[c], x[c]) - _cf_q(a[c] - h[c], x[c])) / (2 * h[c])
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        log_density = (a - 1.0) * np.log(x) - x - _special.lgamma(a)
        g = -dp * np.exp(-log_density)
    return np.where(x > 0, g, 0.0)


def _function():
    from ..autograd.function import Function
    from ..tensor import wrap

    class _GammaReparam(Function):
        """The draws, with dx/da attached for the concentration."""

        @staticmethod
        def forward(ctx, concentration, draws):
            ctx.save_for_backward(concentration, draws)
            return draws.clone()

        @staticmethod
        def backward(ctx, grad):
            concentration, draws = ctx.saved_tensors
            d = standard_gamma_grad(concentration.detach().numpy(), draws.detach().numpy())
            return grad * wrap(d.astype(draws._dtype.np), draws._dtype), None

    class _GammaInc(Function):
        @staticmethod
        def forward(ctx, a, x, upper):
            ctx.save_for_backward(a, x)
            ctx.upper = upper
            fn = upper_regularized if upper else lower_regularized
            return wrap(fn(a.detach().numpy(), x.detach().numpy()).astype(x._dtype.np), x._dtype)

        @staticmethod
        def backward(ctx, grad):
            a, x = ctx.saved_tensors
            if ctx.needs_input_grad[0]:
                raise NotImplementedError(f"the derivative for '{'igammac' if ctx.upper else 'igamma'}: input' is "
                                          "not implemented.")
            from .. import exp, xlogy, lgamma
            density = exp(xlogy(a - 1, x) - x - lgamma(a))
            return None, grad * (-density if ctx.upper else density), None

    return _GammaReparam, _GammaInc


_FNS = []


def _fns():
    if not _FNS:
        _FNS.extend(_function())
    return _FNS


def gamma_reparam(concentration, draws):
    """``draws`` (Gamma(concentration, 1) samples, shaped like the broadcast) carrying dx/dconcentration."""
    c = concentration.expand(draws.shape) if tuple(concentration.shape) != tuple(draws.shape) else concentration
    return _fns()[0].apply(c, draws)


def _gammainc(input, other, upper, name):
    from ..tensor import Tensor
    from ..ops.registry import to_tensor
    from .. import dtypes as _dt
    a = input if isinstance(input, Tensor) else to_tensor(input)
    x = other if isinstance(other, Tensor) else to_tensor(other)
    dt = _dt.promote_types(a.dtype, x.dtype)
    if not dt.is_floating_point:
        dt = _dt.get_default_dtype()
    shape = np.broadcast_shapes(tuple(a.shape), tuple(x.shape))
    return _fns()[1].apply(a.to(dt).expand(shape), x.to(dt).expand(shape), upper)


def gammainc(input, other, *, out=None):
    """torch.special.gammainc: the regularized lower incomplete gamma function P(input, other)."""
    r = _gammainc(input, other, False, "gammainc")
    if out is not None:
        from ..ops.inplace import copy_out
        return copy_out(r, out)
    return r


def gammaincc(input, other, *, out=None):
    """torch.special.gammaincc: the regularized upper incomplete gamma function Q(input, other)."""
    r = _gammainc(input, other, True, "gammaincc")
    if out is not None:
        from ..ops.inplace import copy_out
        return copy_out(r, out)
    return r
