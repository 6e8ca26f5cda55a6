"""Bernoulli distribution over {0, 1}, parameterised by probs or logits."""
from __future__ import annotations

import math
import numbers

from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Bernoulli"]


def _expand_probs_or_logits(dist, new, shape) -> None:
    """The parameter a probs-or-logits family was built with (and the other, if computed), expanded."""
    for name in ("probs", "logits"):
        if name in dist.__dict__:
            setattr(new, name, dist.__dict__[name].expand(shape))
            new._param = getattr(new, name)


class _BinaryProbsLogits:
    """Mixin for families with a success probability given as ``probs`` or ``logits``: the other one is
    derived on first use."""

    def _init_probs_or_logits(self, probs, logits, validate_args) -> None:
        """Store the one parameter given (broadcast to a tensor); its shape is the batch shape."""
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, numbers.Number)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = isinstance(logits, numbers.Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = Size() if is_scalar else self._param.size()
        Distribution.__init__(self, batch_shape, validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)


class Bernoulli(_BinaryProbsLogits, ExponentialFamily):
    """``Bernoulli(probs=None, logits=None)``: 1 with probability ``probs``."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._init_probs_or_logits(probs, logits, validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_into(Bernoulli, batch_shape, _instance,
                                 lambda new, shape: _expand_probs_or_logits(self, new, shape))

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs)
        mode[self.probs == 0.5] = math.nan
        return mode

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    def sample(self, sample_shape=Size()):
        from .. import bernoulli
        from ..autograd.grad_mode import no_grad
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        from ..nn.functional import binary_cross_entropy_with_logits
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        from ..nn.functional import binary_cross_entropy_with_logits
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True):
        from ..ops.creation import arange
        values = arange(2, dtype=self._param.dtype)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values

    @property
    def _natural_params(self):
        from .. import logit
        return (logit(self.probs),)

    def _log_normalizer(self, x):
        return x.exp().log1p()
