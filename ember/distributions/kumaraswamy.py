"""``Kumaraswamy`` (torch.distributions.kumaraswamy): ``(1 - U^(1/b))^(1/a)`` for ``U ~ Uniform(0, 1)``, a
Beta-like law on (0, 1) with a closed-form CDF. ``mode`` is ``((a - 1) / (a b - 1))^(1/a)`` (NaN where
``a < 1`` or ``b < 1``); torch 2.13's log-space formula returns NaN for ``b > 1`` too, the closed form is kept."""
from __future__ import annotations

import math

from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform

__all__ = ["Kumaraswamy"]

_EULER = 0.57721566490153286060


def _moment(a, b, n):
    """``E X^n = b B(1 + n/a, b)``."""
    from .. import lgamma
    t = 1 + n / a
    return b * (lgamma(t) + lgamma(b) - lgamma(t + b)).exp()


class Kumaraswamy(TransformedDistribution):
    """``Kumaraswamy(concentration1, concentration0)`` (``a``, ``b``)."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        from .. import zeros_like, ones_like
        from .utils import broadcast_all
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base = Uniform(zeros_like(self.concentration0), ones_like(self.concentration0), validate_args=validate_args)
        transforms = [PowerTransform(self.concentration0.reciprocal()), AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(self.concentration1.reciprocal())]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moment(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        from .. import where, full_like
        a, b = self.concentration1, self.concentration0
        m = ((a - 1) / (a * b - 1)).pow(a.reciprocal())
        return where((a < 1) | (b < 1), full_like(m, math.nan), m)

    @property
    def variance(self):
        a, b = self.concentration1, self.concentration0
        return _moment(a, b, 2) - _moment(a, b, 1).pow(2)

    def entropy(self):
        from .. import digamma
        a, b = self.concentration1, self.concentration0
        harmonic_b = digamma(b + 1) + _EULER
        return (1 - b.reciprocal()) + (1 - a.reciprocal()) * harmonic_b - (a * b).log()
