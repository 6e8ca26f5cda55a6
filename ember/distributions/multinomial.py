"""``Multinomial`` (torch.distributions.multinomial): counts of ``total_count`` categorical draws."""
from __future__ import annotations

from ..tensor import Size
from . import constraints
from .categorical import Categorical, _CategoricalParams
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Multinomial"]


class Multinomial(_CategoricalParams, Distribution):
    """``Multinomial(total_count=1, probs=None, logits=None)``: the last dim holds the K class counts."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial_args = None
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        def fill(new, shape):
            new.total_count = self.total_count
            new._categorical = self._categorical.expand(shape)
            new._binomial_args = None
        return self._expand_into(Multinomial, batch_shape, _instance, fill)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.independent(constraints.integer_interval(0, self.total_count), 1)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        from ..ops.creation import zeros
        from ..autograd.grad_mode import no_grad
        sample_shape = Size(sample_shape)
        with no_grad():
            draws = self._categorical.sample(Size((self.total_count,)) + sample_shape)   # (n, *sample, *batch)
            nd = draws.dim()
            draws = draws.permute(*range(1, nd), 0)                                      # (*sample, *batch, n)
            counts = zeros(tuple(self._extended_shape(sample_shape)), dtype=self.probs.dtype)
            from ..ops.creation import ones_like
            counts.scatter_add_(-1, draws, ones_like(draws, dtype=counts.dtype))
        return counts

    def log_prob(self, value):
        from .. import lgamma
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        logits = logits.clone()
        logits[(value == 0) & (logits == float("-inf"))] = 0
        log_factorial_n = lgamma(value.sum(-1) + 1)
        log_factorial_xs = lgamma(value + 1).sum(-1)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)

    def entropy(self):
        """``n H(cat) - log n! + sum_k E[log x_k!]``, each count ``x_k`` being Binomial(n, p_k) (torch's form)."""
        from .binomial import Binomial
        from ..ops.creation import tensor
        n = tensor(float(self.total_count), dtype=self.probs.dtype)
        term1 = n * self._categorical.entropy() - (n + 1).lgamma()
        binomial = Binomial(total_count=self.total_count, probs=self.probs)
        support = binomial.enumerate_support()[1:]
        weights = (support + 1).lgamma()
        return term1 + (binomial.log_prob(support).exp() * weights).sum([0, -1])
