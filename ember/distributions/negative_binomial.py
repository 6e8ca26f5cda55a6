"""``NegativeBinomial`` (torch.distributions.negative_binomial): the number of successes (each with
probability ``probs``) before ``total_count`` failures; sampled as a Gamma-Poisson mixture."""
from __future__ import annotations

from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .bernoulli import _BinaryProbsLogits, _expand_probs_or_logits
from .utils import broadcast_all

__all__ = ["NegativeBinomial"]


class NegativeBinomial(_BinaryProbsLogits, Distribution):
    """``NegativeBinomial(total_count, probs=None, logits=None)``."""

    arg_constraints = {"total_count": constraints.greater_than_eq(0), "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.type_as(self.probs)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.type_as(self.logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        def fill(new, shape):
            new.total_count = self.total_count.expand(shape)
            _expand_probs_or_logits(self, new, shape)
        return self._expand_into(NegativeBinomial, batch_shape, _instance, fill)

    @property
    def param_shape(self):
        return self._param.size()

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / (-self.logits).sigmoid()

    def sample(self, sample_shape=Size()):
        from .gamma import Gamma
        from ..autograd.grad_mode import no_grad
        from .. import poisson
        with no_grad():
            rate = Gamma(self.total_count, (-self.logits).exp(), validate_args=False).sample(sample_shape)
            return poisson(rate)

    def log_prob(self, value):
        from ..nn.functional import logsigmoid
        if self._validate_args:
            self._validate_sample(value)
        unnormalized = self.total_count * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        norm = -(self.total_count + value).lgamma() + (1.0 + value).lgamma() + self.total_count.lgamma()
        norm = norm.masked_fill(self.total_count + value == 0.0, 0.0)
        return unnormalized - norm
