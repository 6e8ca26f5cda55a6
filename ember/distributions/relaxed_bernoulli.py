"""The Concrete relaxation of a Bernoulli (torch.distributions.relaxed_bernoulli): ``LogitRelaxedBernoulli``
and ``RelaxedBernoulli``, reparameterised samples in (0, 1) at a ``temperature``."""
from __future__ import annotations

import math

from ..tensor import Size
from . import constraints
from .bernoulli import _BinaryProbsLogits
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import SigmoidTransform
from .utils import broadcast_all, clamp_probs

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


def _uniform(shape, like):
    from ..ops.creation import empty
    return clamp_probs(empty(tuple(shape), dtype=like.dtype).uniform_(0.0, 1.0))


class _FromBase:
    """The relaxed distributions' parameters, read from their base distribution."""

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class LogitRelaxedBernoulli(_BinaryProbsLogits, Distribution):
    """The logit of a relaxed Bernoulli sample: ``(logit(U) + logits) / temperature``."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        self._init_probs_or_logits(probs, logits, validate_args)

    @property
    def param_shape(self):
        return self._param.size()

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        u = _uniform(shape, probs)
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        t = self.temperature
        log_t = t.log() if hasattr(t, "log") else math.log(t)
        return log_t + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(_FromBase, TransformedDistribution):
    """``RelaxedBernoulli(temperature, probs=None, logits=None)``: samples in (0, 1), differentiable."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        super().__init__(LogitRelaxedBernoulli(temperature, probs, logits), SigmoidTransform(),
                         validate_args=validate_args)
