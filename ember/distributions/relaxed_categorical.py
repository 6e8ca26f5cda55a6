"""The Gumbel-softmax relaxation of a one-hot categorical (torch.distributions.relaxed_categorical):
``ExpRelaxedCategorical`` and ``RelaxedOneHotCategorical``, reparameterised points of the simplex."""
from __future__ import annotations

from ..tensor import Size
from . import constraints
from .categorical import Categorical, _CategoricalParams
from .distribution import Distribution
from .relaxed_bernoulli import _FromBase, _uniform
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform
from .utils import broadcast_all

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


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
