"""``ContinuousBernoulli`` (torch.distributions.continuous_bernoulli): the density ``C(p) p^x (1-p)^(1-x)`` on
[0, 1] (Loaiza-Ganem & Cunningham, 2019), parameterised by ``probs`` or ``logits``. Its normaliser, mean,
variance and inverse cdf have removable singularities at ``p = 1/2``: inside ``lims`` (0.499, 0.501) the
closed forms are replaced by their Taylor expansions around 1/2, as torch does."""
from __future__ import annotations

import math

from ..tensor import Size
from . import constraints
from .bernoulli import _BinaryProbsLogits, _expand_probs_or_logits
from .distribution import Distribution
from .exp_family import ExponentialFamily

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(_BinaryProbsLogits, ExponentialFamily):
    """``ContinuousBernoulli(probs=None, logits=None, lims=(0.499, 0.501))``."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        self._lims = lims
        self._init_probs_or_logits(probs, logits, validate_args)

    def expand(self, batch_shape, _instance=None):
        def fill(new, shape):
            new._lims = self._lims
            _expand_probs_or_logits(self, new, shape)
        return self._expand_into(ContinuousBernoulli, batch_shape, _instance, fill)

    @property
    def param_shape(self):
        return self._param.size()

    def _outside(self):
        p = self.probs
        return (p <= self._lims[0]) | (p > self._lims[1])

    def _cut_probs(self):
        from .. import where, full_like
        return where(self._outside(), self.probs, full_like(self.probs, self._lims[0]))

    def _cont_bern_log_norm(self):
        """``log C(p)``."""
        from .. import where, zeros_like, ones_like
        cut = self._cut_probs()
        below = where(cut <= 0.5, cut, zeros_like(cut))
        above = where(cut >= 0.5, cut, ones_like(cut))
        log_norm = (cut.neg().log1p() - cut.log()).abs().log() \
            - where(cut <= 0.5, (-2.0 * below).log1p(), (2.0 * above - 1.0).log())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return where(self._outside(), log_norm, taylor)

    @property
    def mean(self):
        from .. import where
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / (cut.neg().log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return where(self._outside(), mus, taylor)

    @property
    def stddev(self):
        return self.variance.sqrt()

    @property
    def variance(self):
        from .. import where
        cut = self._cut_probs()
        vs = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / (cut.neg().log1p() - cut.log()).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return where(self._outside(), vs, taylor)

    def sample(self, sample_shape=Size()):
        from .. import no_grad
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        from .. import rand
        shape = self._extended_shape(sample_shape)
        u = rand(shape, dtype=self.probs.dtype)
        return self.icdf(u)

    def log_prob(self, value):
        from ..nn.functional import binary_cross_entropy_with_logits
        from .utils import broadcast_all
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value):
        from .. import where, zeros_like, ones_like
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = where(self._outside(), cdfs, value)
        return where(value <= 0.0, zeros_like(value), where(value >= 1.0, ones_like(value), unbounded))

    def icdf(self, value):
        from .. import where
        cut = self._cut_probs()
        inside = ((-cut + value * (2.0 * cut - 1.0)).log1p() - cut.neg().log1p()) \
            / (cut.log() - cut.neg().log1p())
        return where(self._outside(), inside, value)

    def entropy(self):
        log_p0 = self.probs.neg().log1p()
        log_p1 = self.probs.log()
        return self.mean * (log_p0 - log_p1) - self._cont_bern_log_norm() - log_p0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        """log((e^x - 1) / x), by its Taylor series where x is near 0 (the ``lims`` band)."""
        from .. import where, maximum, ones_like
        from ..special import expm1
        lo, hi = self._lims[0] - 0.5, self._lims[1] - 0.5
        outside = maximum(x <= lo, x > hi)
        cut = where(outside, x, lo * ones_like(x))
        exact = expm1(cut).abs().log() - cut.abs().log()
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return where(outside, exact, taylor)
