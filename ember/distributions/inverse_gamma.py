"""``InverseGamma`` (torch.distributions.inverse_gamma): ``1 / X`` for ``X ~ Gamma(concentration, rate)``."""
from __future__ import annotations

import math

from . import constraints
from .gamma import Gamma
from .transformed_distribution import TransformedDistribution
from .transforms import PowerTransform

__all__ = ["InverseGamma"]


class InverseGamma(TransformedDistribution):
    """``InverseGamma(concentration, rate)``; ``rsample`` is differentiable (through Gamma's)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        from .. import tensor
        base = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = tensor(-1.0, dtype=base.rate.dtype)
        super().__init__(base, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self):
        return self.base_dist.concentration

    @property
    def rate(self):
        return self.base_dist.rate

    @property
    def mean(self):
        from .. import where, full_like
        c = self.concentration
        return where(c > 1, self.rate / (c - 1), full_like(c, math.inf))

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        from .. import where, full_like
        c = self.concentration
        return where(c > 2, self.rate.pow(2) / ((c - 1).pow(2) * (c - 2)), full_like(c, math.inf))

    def entropy(self):
        from .. import lgamma, digamma
        c = self.concentration
        return c + self.rate.log() + lgamma(c) - (1 + c) * digamma(c)
