"""Closed-form KL divergences for the families beyond ``kl.py``'s first set, registered for the same pairs
as torch: Beta, Binomial, Cauchy, Dirichlet, Gamma (and so Chi2), Gumbel, HalfNormal, Poisson and
TransformedDistribution (so LogNormal) with their own kind, and Exponential with Gamma either way round.

Each is the textbook expression in ember ops, so it is differentiable in both distributions' parameters.
Imported by ``ember.distributions``: the ``register_kl`` calls run at import.
"""
from __future__ import annotations

from .kl import register_kl, kl_divergence
from .beta import Beta
from .binomial import Binomial
from .cauchy import Cauchy
from .dirichlet import Dirichlet
from .exponential import Exponential
from .gamma import Gamma
from .gumbel import Gumbel
from .half_normal import HalfNormal
from .poisson import Poisson
from .transformed_distribution import TransformedDistribution
from .utils import _sum_rightmost
from .exp_family import ExponentialFamily, _kl_bregman

_EULER = 0.57721566490153286060


def _ops():
    import ember
    return ember


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    E = _ops()
    p_sum = p.concentration1 + p.concentration0
    q_sum = q.concentration1 + q.concentration0
    log_norm = (E.lgamma(q.concentration1) + E.lgamma(q.concentration0) + E.lgamma(p_sum)
                - E.lgamma(p.concentration1) - E.lgamma(p.concentration0) - E.lgamma(q_sum))
    return (log_norm + (p.concentration1 - q.concentration1) * E.digamma(p.concentration1)
            + (p.concentration0 - q.concentration0) * E.digamma(p.concentration0)
            + (q_sum - p_sum) * E.digamma(p_sum))


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    E = _ops()
    a, b = p.concentration, q.concentration
    a0, b0 = a.sum(-1), b.sum(-1)
    return (E.lgamma(a0) - E.lgamma(b0) - (E.lgamma(a) - E.lgamma(b)).sum(-1)
            + ((a - b) * (E.digamma(a) - E.digamma(a0).unsqueeze(-1))).sum(-1))


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    E = _ops()
    return (q.concentration * (p.rate / q.rate).log() + E.lgamma(q.concentration) - E.lgamma(p.concentration)
            + (p.concentration - q.concentration) * E.digamma(p.concentration)
            + (q.rate - p.rate) * (p.concentration / p.rate))


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    E = _ops()
    ratio = q.rate / p.rate
    return (-q.concentration * ratio.log() + E.lgamma(q.concentration) + ratio
            + q.concentration * _EULER - (1 + _EULER))


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration / p.rate)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    E = _ops()
    if (p.total_count < q.total_count).any():
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return E.where(p.total_count > q.total_count, float("inf"), kl)


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    E = _ops()
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    return -ct1.log() - ct2 + ct3 + ct1 * _EULER + E.exp(ct2 + E.lgamma(1 + ct1) - ct3) - (1 + _EULER)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    return 0.5 * (var_ratio - 1 - var_ratio.log())


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    return (((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log() - (4 * p.scale * q.scale).log())


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms:
        raise NotImplementedError("kl_divergence(TransformedDistribution, TransformedDistribution): the two "
                                  "have different transforms; only equal transforms are supported")
    if p.event_shape != q.event_shape:
        raise NotImplementedError("kl_divergence(TransformedDistribution, TransformedDistribution): event "
                                  f"shapes differ ({tuple(p.event_shape)} vs {tuple(q.event_shape)})")
    extra = len(p.event_shape) - len(p.base_dist.event_shape)
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), extra)


# two members of one exponential family without a closed form here: the Bregman divergence of the
# log-normalizer (torch's fallback; different families raise NotImplementedError)
register_kl(ExponentialFamily, ExponentialFamily)(_kl_bregman)
