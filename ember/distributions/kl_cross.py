"""KL divergences between different families, for the pairs torch registers: Beta, Exponential, Gamma,
Gumbel, Laplace, Normal, Pareto, Uniform and ContinuousBernoulli against one another (and
Bernoulli/Poisson/Binomial across), written once as

    KL(p || q) = -H(p) - E_p[log q(x)]

``E_p[log q]`` needs only a few expectations under ``p`` (its mean, ``E x^2``, ``E log x``, ``E exp(t x)``,
its support): :class:`_Moments` gives them per family of ``p``, ``_CROSS`` writes ``E_p[log q]`` per family of
``q`` from them. Where ``p`` puts mass outside ``q``'s support (or a needed moment diverges) the result is
inf, as in torch. Differentiable in both distributions' parameters. Imported by ``ember.distributions``.
"""
from __future__ import annotations

import math

from .kl import register_kl
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .continuous_bernoulli import ContinuousBernoulli
from .exponential import Exponential
from .gamma import Gamma
from .gumbel import Gumbel
from .laplace import Laplace
from .normal import Normal
from .pareto import Pareto
from .poisson import Poisson
from .uniform import Uniform

_EULER = 0.57721566490153286060


def _E():
    import ember
    return ember


def _xlogx(x):
    E = _E()
    return E.special.xlogy(x, x)


class _Moments:
    """The expectations under ``p`` that the cross entropies read (each computed when asked)."""

    def __init__(self, p):
        self.p = p
        E = _E()
        inf = math.inf
        if isinstance(p, Uniform):
            self.lo, self.hi = p.low, p.high
        elif isinstance(p, (Exponential, Gamma)):
            self.lo, self.hi = E.zeros_like(p.mean), E.full_like(p.mean, inf)
        elif isinstance(p, (Beta, ContinuousBernoulli)):
            self.lo, self.hi = E.zeros_like(p.mean), E.ones_like(p.mean)
        elif isinstance(p, Pareto):
            self.lo, self.hi = p.scale, E.full_like(p.scale, inf)
        else:                                            # Normal, Laplace, Gumbel: the whole line
            self.lo, self.hi = E.full_like(p.mean, -inf), E.full_like(p.mean, inf)

    def mean(self):
        p = self.p
        if isinstance(p, Pareto):                        # torch's Pareto.mean is inf for alpha <= 1 too
            E = _E()
            a = p.alpha
            return E.where(a > 1, a * p.scale / (a - 1).clamp(min=1e-30), E.full_like(a, math.inf))
        return p.mean

    def second(self):
        """``E x^2``."""
        p = self.p
        if isinstance(p, Uniform):
            a, b = p.low, p.high
            return (a * a + a * b + b * b) / 3
        if isinstance(p, Pareto):
            E = _E()
            a = p.alpha
            return E.where(a > 2, a * p.scale ** 2 / (a - 2).clamp(min=1e-30), E.full_like(a, math.inf))
        return p.variance + p.mean ** 2

    def log_mean(self, reflect=False):
        """``E log x`` (``E log(1 - x)`` with ``reflect``), for ``p`` on the positive half line."""
        E = _E()
        p = self.p
        if isinstance(p, Uniform):
            a, b = (1 - p.high, 1 - p.low) if reflect else (p.low, p.high)
            return (_xlogx(b) - b - _xlogx(a) + a) / (b - a)
        if isinstance(p, Exponential):
            return -_EULER - p.rate.log()
        if isinstance(p, Gamma):
            return E.digamma(p.concentration) - p.rate.log()
        if isinstance(p, Beta):
            c = p.concentration0 if reflect else p.concentration1
            return E.digamma(c) - E.digamma(p.concentration1 + p.concentration0)
        if isinstance(p, Pareto):
            return p.scale.log() + p.alpha.reciprocal()
        raise NotImplementedError(f"kl_divergence: no E[log x] for {type(p).__name__}")

    def mgf(self, t):
        """``E exp(t x)`` for a number or tensor ``t < 0``."""
        E = _E()
        p = self.p
        if isinstance(p, Normal):
            return (p.loc * t + p.scale ** 2 * t * t / 2).exp()
        if isinstance(p, Uniform):
            a, b = p.low, p.high
            return ((t * b).exp() - (t * a).exp()) / (t * (b - a))
        if isinstance(p, Exponential):
            return p.rate / (p.rate - t)
        if isinstance(p, Gamma):
            return (p.rate / (p.rate - t)) ** p.concentration
        raise NotImplementedError(f"kl_divergence: no moment generating function for {type(p).__name__}")


def _outside(m, lo=None, hi=None):
    """True where ``p``'s support leaves ``[lo, hi]``."""
    bad = None
    if lo is not None:
        bad = m.lo < lo
    if hi is not None:
        b = m.hi > hi
        bad = b if bad is None else bad | b
    return bad


def _cross_normal(m, q):
    var = q.scale ** 2
    return -q.scale.log() - 0.5 * math.log(2 * math.pi) - (m.second() - 2 * q.loc * m.mean() + q.loc ** 2) / (2 * var), None


def _cross_exponential(m, q):
    return q.rate.log() - q.rate * m.mean(), _outside(m, lo=0.0)


def _cross_gamma(m, q):
    E = _E()
    a, r = q.concentration, q.rate
    val = a * r.log() - E.lgamma(a) - r * m.mean()
    if not isinstance(m.p, (Normal, Laplace, Gumbel)):   # (else inf anyway: the support test below)
        val = val + (a - 1) * m.log_mean()
    return val, _outside(m, lo=0.0)


def _cross_gumbel(m, q):
    s = q.scale
    return -s.log() - (m.mean() - q.loc) / s - (q.loc / s).exp() * m.mgf(-1.0 / s), None


def _cross_laplace(m, q):
    p = m.p                                              # (torch registers Normal -> Laplace only)
    d = p.loc - q.loc
    abs_dev = p.scale * math.sqrt(2 / math.pi) * (-(d * d) / (2 * p.scale ** 2)).exp() \
        + d * (d / (p.scale * math.sqrt(2))).erf()
    return -(2 * q.scale).log() - abs_dev / q.scale, None


def _cross_beta(m, q):
    E = _E()
    a, b = q.concentration1, q.concentration0
    bad = _outside(m, lo=0.0, hi=1.0)
    if not isinstance(m.p, (Uniform, Beta)):             # no other family fits in [0, 1]
        return E.zeros_like(m.lo), bad | True
    lbeta = E.lgamma(a) + E.lgamma(b) - E.lgamma(a + b)
    return (a - 1) * m.log_mean() + (b - 1) * m.log_mean(reflect=True) - lbeta, bad


def _cross_continuous_bernoulli(m, q):
    E = _E()
    bad = _outside(m, lo=0.0, hi=1.0)
    if not isinstance(m.p, (Uniform, Beta)):
        return E.zeros_like(m.lo), bad | True
    if isinstance(m.p, Uniform):                         # torch: inf once the interval touches 0 or 1
        bad = (m.lo <= 0) | (m.hi >= 1)
    return m.mean() * q.logits + q.probs.neg().log1p() + q._cont_bern_log_norm(), bad


def _cross_uniform(m, q):
    if isinstance(m.p, ContinuousBernoulli):             # torch: inf unless q's interval strictly covers [0, 1]
        return -(q.high - q.low).log(), (q.low >= 0) | (q.high <= 1)
    return -(q.high - q.low).log(), _outside(m, lo=q.low, hi=q.high)


def _cross_pareto(m, q):
    E = _E()
    bad = _outside(m, lo=q.scale)
    if isinstance(m.p, (Normal, Laplace, Gumbel, ContinuousBernoulli)):     # (support reaches 0 or below)
        return E.zeros_like(m.lo), bad | True
    k = q.alpha
    return k.log() + k * q.scale.log() - (k + 1) * m.log_mean(), bad


_CROSS = {Normal: _cross_normal, Exponential: _cross_exponential, Gamma: _cross_gamma, Gumbel: _cross_gumbel,
          Laplace: _cross_laplace, Beta: _cross_beta, Uniform: _cross_uniform, Pareto: _cross_pareto,
          ContinuousBernoulli: _cross_continuous_bernoulli}

# the pairs torch registers that kl.py / kl_families.py do not
_CB = ContinuousBernoulli
_PAIRS = {
    Beta: (Exponential, Gamma, Normal, Pareto, Uniform, _CB),
    Exponential: (Beta, Gumbel, Normal, Pareto, Uniform, _CB),
    Gamma: (Beta, Gumbel, Normal, Pareto, Uniform, _CB),
    Gumbel: (Beta, Exponential, Gamma, Normal, Pareto, Uniform, _CB),
    Laplace: (Beta, Exponential, Gamma, Normal, Pareto, Uniform, _CB),
    Normal: (Beta, Exponential, Gamma, Gumbel, Laplace, Pareto, Uniform, _CB),
    Pareto: (Beta, Exponential, Gamma, Normal, Pareto, Uniform, _CB),
    Uniform: (Beta, Exponential, Gamma, Gumbel, Normal, Pareto, _CB),
    _CB: (Exponential, Normal, Pareto, Uniform),
}


def _kl_cross(p, q):
    E = _E()
    m = _Moments(p)
    val, bad = _CROSS[type(q) if type(q) in _CROSS else next(c for c in _CROSS if isinstance(q, c))](m, q)
    kl = -p.entropy() - val
    kl = kl.expand(E.broadcast_shapes(kl.shape, m.lo.shape))
    if bad is not None:
        kl = E.where(bad, E.full_like(kl, math.inf), kl)
    return E.where(kl.isnan() & (m.mean() == math.inf), E.full_like(kl, math.inf), kl)


for _p, _qs in _PAIRS.items():
    for _q in _qs:
        register_kl(_p, _q)(_kl_cross)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_cb_cb(p, q):
    return (p.mean * (p.logits - q.logits) + p._cont_bern_log_norm() + p.probs.neg().log1p()
            - q._cont_bern_log_norm() - q.probs.neg().log1p())


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_infinite(p, q):
    E = _E()
    return E.full_like(E.broadcast_tensors(p.rate, q.probs)[0], math.inf)
