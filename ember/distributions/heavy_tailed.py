"""Weibull, Pareto and HalfCauchy (torch.distributions.weibull / pareto / half_cauchy): transformed
Exponential and Cauchy distributions with their closed-form moments and entropies."""
from __future__ import annotations

import math

from . import constraints
from .cauchy import Cauchy
from .exponential import Exponential
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform, AffineTransform, ExpTransform, PowerTransform
from .utils import broadcast_all

__all__ = ["Weibull", "Pareto", "HalfCauchy"]

_EULER_GAMMA = 0.57721566490153286061


class Weibull(TransformedDistribution):
    """``Weibull(scale, concentration)``: ``scale * E ** (1 / concentration)`` for ``E ~ Exponential(1)``."""

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, scale, concentration, validate_args=None):
        from ..ops.creation import ones_like
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base = Exponential(ones_like(self.scale), validate_args=validate_args)
        super().__init__(base, [PowerTransform(exponent=self.concentration_reciprocal),
                                AffineTransform(loc=0, scale=self.scale)], validate_args=validate_args)

    @property
    def mean(self):
        return self.scale * (1 + self.concentration_reciprocal).lgamma().exp()

    @property
    def mode(self):
        return self.scale * ((self.concentration - 1) / self.concentration) ** self.concentration_reciprocal

    @property
    def variance(self):
        return self.scale.pow(2) * ((1 + 2 * self.concentration_reciprocal).lgamma().exp()
                                    - (1 + self.concentration_reciprocal).lgamma().exp().pow(2))

    def entropy(self):
        return (_EULER_GAMMA * (1 - self.concentration_reciprocal) + (self.scale * self.concentration_reciprocal).log()
                + 1)


class Pareto(TransformedDistribution):
    """``Pareto(scale, alpha)``: ``scale * exp(E)`` for ``E ~ Exponential(alpha)``."""

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}
    has_rsample = True

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        super().__init__(Exponential(self.alpha, validate_args=validate_args),
                         [ExpTransform(), AffineTransform(loc=0, scale=self.scale)], validate_args=validate_args)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


class HalfCauchy(TransformedDistribution):
    """``HalfCauchy(scale)``: ``|X|`` for ``X ~ Cauchy(0, scale)``."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        base = Cauchy(0, scale, validate_args=False)
        super().__init__(base, AbsTransform(), validate_args=validate_args)

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        from ..ops.creation import full
        return full(self._extended_shape(), math.inf, dtype=self.scale.dtype)

    @property
    def mode(self):
        from ..ops.creation import zeros_like
        return zeros_like(self.scale)

    @property
    def variance(self):
        return self.base_dist.variance

    def log_prob(self, value):
        from .. import where
        if self._validate_args:
            self._validate_sample(value)
        value = value if hasattr(value, "dtype") else self.scale.new_tensor(value)
        lp = self.base_dist.log_prob(value) + math.log(2)
        return where(value >= 0, lp, float("-inf"))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)
