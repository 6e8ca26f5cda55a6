"""``Cauchy`` (torch.distributions.cauchy), on normal's location-scale base."""
from __future__ import annotations

import math

from ..tensor import Size
from .normal import _LocScale

__all__ = ["Cauchy"]


class Cauchy(_LocScale):
    """``Cauchy(loc, scale)``: no mean (NaN) and infinite variance."""

    @property
    def mean(self):
        from ..ops.creation import full_like
        return full_like(self.loc, float("nan"))

    @property
    def variance(self):
        from ..ops.creation import full_like
        return full_like(self.loc, float("inf"))

    def rsample(self, sample_shape=Size()):
        from ..ops.creation import empty
        shape = self._extended_shape(sample_shape)
        eps = empty(tuple(shape), dtype=self.loc.dtype).cauchy_()
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - ((value - self.loc) / self.scale).pow(2).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
