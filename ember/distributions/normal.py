"""Normal (Gaussian) and Laplace distributions, with torch's formulas."""
from __future__ import annotations

import math
import numbers

from ..tensor import Size
from ..autograd.grad_mode import no_grad
from . import constraints
from .distribution import Distribution, _CenteredAtLoc
from .exp_family import ExponentialFamily
from .utils import _standard_normal

__all__ = ["Normal"]


class _LocScale(_CenteredAtLoc, Distribution):
    """A family with a location ``loc`` and a scale ``scale`` broadcast together: the shared constructor,
    ``expand``, and ``mean`` / ``mode`` at ``loc``."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self._init_broadcast(("loc", "scale"), (loc, scale), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_broadcast(_LocScale, ("loc", "scale"), batch_shape, _instance)


class Normal(_LocScale, ExponentialFamily):
    """``Normal(loc, scale)``: mean ``loc``, standard deviation ``scale``.

        >>> Normal(0.0, 1.0).log_prob(ember.tensor(0.0))
        tensor(-0.9189)
    """

    _mean_carrier_measure = 0

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return self.loc.expand(shape) + _standard_normal(shape, self.loc.dtype) * self.scale.expand(shape)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        log_scale = math.log(self.scale) if isinstance(self.scale, numbers.Real) else self.scale.log()
        return -((value - self.loc) ** 2) / (2 * var) - log_scale - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        from .. import erf
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        from .. import erfinv
        return self.loc + self.scale * erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        from .. import log
        return 0.5 + 0.5 * math.log(2 * math.pi) + log(self.scale)

    @property
    def _natural_params(self):
        return self.loc / self.scale.pow(2), -0.5 * self.scale.pow(2).reciprocal()

    def _log_normalizer(self, x, y):
        return -0.25 * x.pow(2) / y + 0.5 * (-math.pi / y).log()
