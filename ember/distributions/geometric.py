"""``Geometric`` (torch.distributions.geometric): the number of failures before the first success of
Bernoulli trials with success probability ``probs`` (or ``logits``)."""
from __future__ import annotations

from ..tensor import Size
from .. import dtypes as _dt
from . import constraints
from .distribution import Distribution
from .bernoulli import _BinaryProbsLogits, _expand_probs_or_logits

__all__ = ["Geometric"]


class Geometric(_BinaryProbsLogits, Distribution):
    """``Geometric(probs=None, logits=None)``: ``P(k) = (1 - p)^k p`` for ``k = 0, 1, 2, ...``."""

    arg_constraints = {"probs": constraints.interval(0.0, 1.0), "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._init_probs_or_logits(probs, logits, validate_args)
        if self._validate_args and probs is not None and not bool((self.probs > 0).all()):
            raise ValueError(f"Expected parameter probs of distribution {self!r} to satisfy the constraint "
                             f"HalfOpenInterval(lower_bound=0.0, upper_bound=1.0), but found invalid values:\n"
                             f"{self.probs}")

    def expand(self, batch_shape, _instance=None):
        return self._expand_into(Geometric, batch_shape, _instance,
                                 lambda new, shape: _expand_probs_or_logits(self, new, shape))

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        from ..ops.creation import zeros_like
        return zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=Size()):
        from ..ops.creation import empty
        from ..autograd.grad_mode import no_grad
        shape = self._extended_shape(sample_shape)
        tiny = float(_dt.finfo(self.probs.dtype).tiny)
        with no_grad():
            u = empty(tuple(shape), dtype=self.probs.dtype).uniform_(tiny, 1.0)
            return (u.log() / (-self.probs.expand(shape)).log1p()).floor()

    def log_prob(self, value):
        from .. import where, as_tensor
        value = as_tensor(value, dtype=self.probs.dtype)
        if self._validate_args:
            self._validate_sample(value)
        # k * log(1 - p) is 0 at k = 0 even where p = 1 (log(0) * 0 would be nan)
        fail = where(value == 0, value * 0, value * (-self.probs).log1p())
        return fail + self.probs.log()

    def entropy(self):
        from ..nn.functional import binary_cross_entropy_with_logits
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs
