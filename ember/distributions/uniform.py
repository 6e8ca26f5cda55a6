"""Uniform distribution on ``[low, high)`` and the Exponential distribution."""
from __future__ import annotations

from ..tensor import Size
from . import constraints
from .distribution import Distribution

__all__ = ["Uniform", "Exponential"]


class Uniform(Distribution):
    """``Uniform(low, high)``: uniform on the half-open interval ``[low, high)``."""

    has_rsample = True

    @property
    def arg_constraints(self):
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return self.high * float("nan")

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def __init__(self, low, high, validate_args=None):
        self._init_broadcast(("low", "high"), (low, high), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_broadcast(Uniform, ("low", "high"), batch_shape, _instance)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    def rsample(self, sample_shape=Size()):
        from ..ops.random_ops import rand
        shape = self._extended_shape(sample_shape)
        r = rand(tuple(shape), dtype=self.low.dtype)
        return self.low + r * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lb = self.low.le(value).type_as(self.low)
        ub = self.high.gt(value).type_as(self.low)
        return lb.mul(ub).log() - (self.high - self.low).log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        result = (value - self.low) / (self.high - self.low)
        return result.clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return (self.high - self.low).log()


class Exponential(Distribution):
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
