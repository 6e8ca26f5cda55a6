"""``HalfNormal`` (torch.distributions.half_normal): ``|X|`` for a centred Normal."""
from __future__ import annotations

import math

from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import _standard_normal

__all__ = ["HalfNormal"]


class HalfNormal(Distribution):
    """``HalfNormal(scale)``: ``|X|`` for ``X ~ Normal(0, scale)``."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        self._init_broadcast(("scale",), (scale,), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_broadcast(HalfNormal, ("scale",), batch_shape, _instance)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self):
        from ..ops.creation import zeros_like
        return zeros_like(self.scale)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        return (_standard_normal(shape, self.scale.dtype) * self.scale).abs()

    def log_prob(self, value):
        from .. import where
        if self._validate_args:
            self._validate_sample(value)
        lp = (-(value ** 2) / (2 * self.scale ** 2) - self.scale.log() - 0.5 * math.log(2 * math.pi)
              + math.log(2))
        return where(value >= 0, lp, float("-inf"))

    def cdf(self, value):
        from .. import erf
        return erf(value / (self.scale * math.sqrt(2)))

    def icdf(self, prob):
        from .. import erfinv
        return self.scale * erfinv(prob) * math.sqrt(2)

    def entropy(self):
        return 0.5 * math.log(math.pi / 2) + self.scale.log() + 0.5
