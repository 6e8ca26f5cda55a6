"""``StudentT`` (torch.distributions.studentT)."""
from __future__ import annotations

import math

from ..tensor import Size
from .. import dtypes as _dt
from . import constraints
from .distribution import Distribution
from .gamma import _standard_gamma
from .utils import _standard_normal

__all__ = ["StudentT"]


class StudentT(Distribution):
    """``StudentT(df, loc=0, scale=1)``."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self._init_broadcast(("df", "loc", "scale"), (df, loc, scale), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_broadcast(StudentT, ("df", "loc", "scale"), batch_shape, _instance)

    @property
    def mean(self):
        from .. import where
        return where(self.df > 1, self.loc, float("nan"))

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        from .. import where
        var = self.scale.pow(2) * self.df / (self.df - 2).clamp(min=_dt.finfo(self.df.dtype).tiny)
        var = where(self.df > 2, var, float("inf"))
        return where(self.df > 1, var, float("nan"))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        X = _standard_normal(shape, self.df.dtype)
        Z = _standard_gamma(0.5 * self.df, shape, "StudentT") * 2.0            # Chi2(df)
        Y = X * (Z / self.df).rsqrt()
        return self.loc + self.scale * Y

    def log_prob(self, value):
        from .. import lgamma
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        Z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + lgamma(0.5 * self.df)
             - lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * (y.pow(2) / self.df).log1p() - Z

    def entropy(self):
        from .. import lgamma, digamma
        lbeta = lgamma(0.5 * self.df) + math.lgamma(0.5) - lgamma(0.5 * (self.df + 1))
        return (self.scale.log() + 0.5 * (self.df + 1) * (digamma(0.5 * (self.df + 1)) - digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)
