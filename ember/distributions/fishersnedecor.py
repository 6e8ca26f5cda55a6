"""``FisherSnedecor`` (torch.distributions.fishersnedecor): the F distribution, ``(X1 / df1) / (X2 / df2)``
for independent chi-squared ``X1``, ``X2`` (drawn as ``Gamma(df/2, df/2)`` ratios, so ``rsample`` is
differentiable in both degrees of freedom)."""
from __future__ import annotations

import math

from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .gamma import Gamma

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    """``FisherSnedecor(df1, df2)``."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self._init_broadcast(("df1", "df2"), (df1, df2), validate_args)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_broadcast(FisherSnedecor, ("df1", "df2"), batch_shape, _instance)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    def _nan_unless(self, ok, value):
        from .. import where, full_like
        return where(ok, value, full_like(value, math.nan))

    @property
    def mean(self):
        df2 = self.df2
        return self._nan_unless(df2 > 2, df2 / (df2 - 2))

    @property
    def mode(self):
        df1, df2 = self.df1, self.df2
        return self._nan_unless(df1 > 2, (df1 - 2) / df1 * df2 / (df2 + 2))

    @property
    def variance(self):
        df1, df2 = self.df1, self.df2
        return self._nan_unless(df2 > 4, 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4)))

    def rsample(self, sample_shape=Size()):
        from .. import dtypes as _dt
        shape = self._extended_shape(sample_shape)
        x1 = self._gamma1.rsample(sample_shape).view(shape)
        x2 = self._gamma2.rsample(sample_shape).view(shape)
        tiny = _dt.finfo(x2.dtype).tiny
        x2 = x2.clamp(min=tiny)
        return (x1 / x2).clamp(min=tiny)

    def log_prob(self, value):
        from .. import lgamma
        if self._validate_args:
            self._validate_sample(value)
        h1, h2 = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        norm = lgamma(h1 + h2) - lgamma(h1) - lgamma(h2)
        return norm + h1 * ratio.log() + (h1 - 1) * value.log() - (h1 + h2) * (ratio * value).log1p()
