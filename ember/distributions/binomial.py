"""``Binomial`` (torch.distributions.binomial), parameterised by probs or logits."""
from __future__ import annotations

from ..tensor import Size
from . import constraints
from .bernoulli import _BinaryProbsLogits, _expand_probs_or_logits
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Binomial"]


class Binomial(_BinaryProbsLogits, Distribution):
    """``Binomial(total_count, probs=None, logits=None)``: successes out of ``total_count`` trials."""

    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

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

    def _homogeneous_count(self, what: str) -> int:
        total = int(self.total_count.max())
        if not int(self.total_count.min()) == total:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total

    def enumerate_support(self, expand: bool = True):
        from ..ops.creation import arange
        values = arange(1 + self._homogeneous_count("enumerate_support"), dtype=self._param.dtype)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values

    def entropy(self):
        """``-sum_k p(k) log p(k)`` over the support (one total count for the whole batch, as torch)."""
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)
