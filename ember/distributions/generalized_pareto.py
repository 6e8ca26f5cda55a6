"""``GeneralizedPareto(loc, scale, concentration)`` (torch.distributions.generalized_pareto): the
peaks-over-threshold law with survival function ``(1 + c z)^(-1/c)`` for ``z = (x - loc) / scale``
(``exp(-z)`` at ``c = 0``); support ``[loc, inf)`` for ``c >= 0`` and ``[loc, loc - scale / c]`` for ``c < 0``.
Sampling is ``icdf`` of a uniform draw, so ``rsample`` carries gradients to all three parameters.
"""
from __future__ import annotations

import math
import numbers

from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        if all(isinstance(v, numbers.Number) for v in (loc, scale, concentration)):
            batch_shape = Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(GeneralizedPareto, _instance)
        batch_shape = Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        super(GeneralizedPareto, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _safe(self):
        """(c == 0 up to isclose, c with those entries replaced by 1)."""
        from .. import isclose, where, ones_like, zeros_like
        c = self.concentration
        zero = isclose(c, zeros_like(c))
        return zero, where(zero, ones_like(c), c)

    def rsample(self, sample_shape=Size()):
        from ..ops.random_ops import rand
        u = rand(tuple(self._extended_shape(sample_shape)), dtype=self.loc.dtype)
        return self.icdf(u)

    def _z(self, x):
        return (x - self.loc) / self.scale

    def log_prob(self, value):
        from .. import where, ones_like
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        zero, c = self._safe()
        y = 1 / c + ones_like(z)
        nonzero = where(y == 0, y, y * (c * z).log1p())
        return -self.scale.log() - where(zero, z, nonzero)

    def log_survival_function(self, value):
        from .. import where
        z = self._z(value)
        zero, c = self._safe()
        return where(zero, -z, -(c * z).log1p() / c)

    def log_cdf(self, value):
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value):
        return self.log_cdf(value).exp()

    def icdf(self, value):
        from .. import where
        zero, c = self._safe()
        logu = (-value).log1p()
        return where(zero, self.loc - self.scale * logu, self.loc + self.scale / c * (-c * logu).expm1())

    @property
    def mean(self):
        from .. import where, full_like
        c = self.concentration
        ok = c < 1
        safe = where(ok, c, full_like(c, 0.5))
        return where(ok, self.loc + self.scale / (1 - safe), full_like(c, math.nan))

    @property
    def variance(self):
        from .. import where, full_like
        c = self.concentration
        ok = c < 0.5
        safe = where(ok, c, full_like(c, 0.25))
        return where(ok, self.scale ** 2 / ((1 - safe) ** 2 * (1 - 2 * safe)), full_like(c, math.nan))

    @property
    def mode(self):
        return self.loc

    def entropy(self):
        return (self.scale.log() + self.concentration + 1).broadcast_to(tuple(self._batch_shape))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        from .. import where, full_like
        lower = self.loc
        upper = where(self.concentration < 0, lower - self.scale / self.concentration,
                      full_like(lower, math.inf))
        return constraints.interval(lower, upper)
