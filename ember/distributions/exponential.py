"""``Exponential`` (torch.distributions.exponential)."""
from __future__ import annotations

from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .exp_family import ExponentialFamily

__all__ = ["Exponential"]


class Exponential(ExponentialFamily):
    """``Exponential(rate)``: density ``rate * exp(-rate * x)`` on ``x >= 0``."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        from ..ops.creation import zeros_like
        return zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def __init__(self, rate, validate_args=None):
        self._init_broadcast(("rate",), (rate,), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_broadcast(Exponential, ("rate",), batch_shape, _instance)

    def rsample(self, sample_shape=Size()):
        from ..ops.creation import empty
        shape = self._extended_shape(sample_shape)
        return empty(tuple(shape), dtype=self.rate.dtype).exponential_() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()

    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -(-x).log()
