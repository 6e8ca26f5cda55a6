"""More families with torch's formulas: Poisson and Binomial (counts), StudentT, Cauchy, Gumbel and
HalfNormal (heavy or one-sided tails)."""
from __future__ import annotations

import math

from ..tensor import Size
from ..autograd.grad_mode import no_grad
from .. import dtypes as _dt
from . import constraints
from .distribution import Distribution
from .gamma import _standard_gamma
from .normal import _LocScale
from .bernoulli import _BinaryProbsLogits, _expand_probs_or_logits
from .utils import broadcast_all, _standard_normal

__all__ = ["Poisson", "Binomial", "StudentT", "Cauchy", "Gumbel", "HalfNormal"]

_EULER_GAMMA = 0.57721566490153286061


def _uniform(shape, dtype, low, high):
    from ..ops.creation import empty
    return empty(tuple(shape), dtype=dtype).uniform_(low, high)


class Poisson(Distribution):
    """``Poisson(rate)``: counts with mean and variance ``rate``."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        self._init_broadcast(("rate",), (rate,), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_broadcast(Poisson, ("rate",), batch_shape, _instance)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=Size()):
        from .. import poisson
        with no_grad():
            return poisson(self.rate.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        from .. import lgamma
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - lgamma(value + 1)


class Binomial(_BinaryProbsLogits, Distribution):
    """``Binomial(total_count, probs=None, logits=None)``: successes out of ``total_count`` trials."""

    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.type_as(self.probs)
            param = self.probs
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.type_as(self.logits)
            param = self.logits
        self._param = param
        super().__init__(param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        def fill(new, shape):
            new.total_count = self.total_count.expand(shape)
            _expand_probs_or_logits(self, new, shape)
        return self._expand_into(Binomial, batch_shape, _instance, fill)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        from ..random import _gen
        from ..ops.creation import tensor
        import numpy as np
        shape = tuple(self._extended_shape(sample_shape))
        n = np.broadcast_to(self.total_count.detach().cpu().numpy().astype(np.int64), shape)
        p = np.broadcast_to(self.probs.detach().cpu().numpy().astype(np.float64), shape)
        return tensor(_gen(None).binomial(n, p).astype(np.float64), dtype=self._param.dtype)

    def log_prob(self, value):
        from .. import lgamma
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_factorial_n = lgamma(n + 1)
        log_factorial_k = lgamma(value + 1)
        log_factorial_nmk = lgamma(n - value + 1)
        clamp_by_zero = (logits.clamp(min=0) + logits - logits.clamp(max=0)) / 2
        normalize_term = n * clamp_by_zero + n * (-logits.abs()).exp().log1p() - log_factorial_n
        return value * logits - log_factorial_k - log_factorial_nmk - normalize_term


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


class Gumbel(_LocScale):
    """``Gumbel(loc, scale)``: the distribution of maxima; ``loc - scale * log(-log U)``."""

    @property
    def mean(self):
        return self.loc + self.scale * _EULER_GAMMA

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        finfo = _dt.finfo(self.loc.dtype)
        u = _uniform(shape, self.loc.dtype, finfo.tiny, 1 - finfo.eps)
        return self.loc - self.scale * (-u.log()).log()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value):
        return (-(-(value - self.loc) / self.scale).exp()).exp()

    def icdf(self, value):
        return self.loc - self.scale * (-value.log()).log()

    def entropy(self):
        return self.scale.log() + (1 + _EULER_GAMMA)


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
