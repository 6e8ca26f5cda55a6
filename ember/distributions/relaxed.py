"""The Concrete / Gumbel-softmax relaxations (torch.distributions.relaxed_bernoulli and
relaxed_categorical): ``LogitRelaxedBernoulli`` / ``RelaxedBernoulli`` and ``ExpRelaxedCategorical`` /
``RelaxedOneHotCategorical``, reparameterised samples at a ``temperature``."""
from __future__ import annotations

import math

from ..tensor import Size
from . import constraints
from .bernoulli import _BinaryProbsLogits
from .categorical import Categorical, _CategoricalParams
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform, SigmoidTransform
from .utils import broadcast_all, clamp_probs

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli", "ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


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


class ExpRelaxedCategorical(_CategoricalParams, Distribution):
    """The log of a relaxed one-hot categorical sample: ``log_softmax((logits + Gumbel) / temperature)``."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        gumbels = -((-_uniform(shape, self.logits).log()).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        from ..ops.creation import full_like, tensor
        K = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        t = self.temperature if hasattr(self.temperature, "log") else tensor(float(self.temperature))
        log_scale = full_like(t, float(K)).lgamma() - t.log() * -(K - 1)
        score = logits - value * t
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(_FromBase, TransformedDistribution):
    """``RelaxedOneHotCategorical(temperature, probs=None, logits=None)``: points of the simplex, the
    Gumbel-softmax relaxation of a one-hot categorical sample."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        super().__init__(ExpRelaxedCategorical(temperature, probs, logits), ExpTransform(),
                         validate_args=validate_args)
