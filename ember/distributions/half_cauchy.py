"""``HalfCauchy`` (torch.distributions.half_cauchy): ``|X|`` for a centred Cauchy ``X``."""
from __future__ import annotations

import math

from . import constraints
from .cauchy import Cauchy
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform

__all__ = ["HalfCauchy"]


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
