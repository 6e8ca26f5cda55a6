"""``OneHotCategorical`` (torch.distributions.one_hot_categorical): a Categorical with one-hot samples."""
from __future__ import annotations

from ..tensor import Size
from . import constraints
from .categorical import Categorical
from .distribution import Distribution

__all__ = ["OneHotCategorical", "OneHotCategoricalStraightThrough"]


class OneHotCategorical(Distribution):
    """A Categorical whose samples are one-hot vectors of length K."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        def fill(new, shape):
            new._categorical = self._categorical.expand(shape)
        return self._expand_into(OneHotCategorical, batch_shape, _instance, fill)

    @property
    def _param(self):
        return self._categorical._param

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        from ..nn.functional import one_hot
        probs = self._categorical.probs
        mode = probs.argmax(dim=-1)
        return one_hot(mode, num_classes=probs.shape[-1]).to(probs)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    def sample(self, sample_shape=Size()):
        from ..nn.functional import one_hot
        sample_shape = Size(sample_shape)
        probs = self._categorical.probs
        num_events = self._categorical._num_events
        indices = self._categorical.sample(sample_shape)
        return one_hot(indices, num_events).to(probs)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        indices = value.max(-1)[1]
        return self._categorical.log_prob(indices)

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True):
        from ..ops.creation import eye
        n = self.event_shape[0]
        values = eye(n, dtype=self._param.dtype)
        values = values.view((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + tuple(self.batch_shape) + (n,))
        return values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """``rsample`` returns the one-hot draw with the straight-through gradient of ``probs``
    (``sample + probs - probs.detach()``), as in discrete-latent models."""

    has_rsample = True

    def expand(self, batch_shape, _instance=None):
        def fill(new, shape):
            new._categorical = self._categorical.expand(shape)
        return self._expand_into(OneHotCategoricalStraightThrough, batch_shape, _instance, fill)

    def rsample(self, sample_shape=Size()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
