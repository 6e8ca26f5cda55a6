"""``Gumbel`` (torch.distributions.gumbel), on normal's location-scale base."""
from __future__ import annotations

import math

from ..tensor import Size
from .. import dtypes as _dt
from .normal import _LocScale

__all__ = ["Gumbel"]


_EULER_GAMMA = 0.57721566490153286061


def _uniform(shape, dtype, low, high):
    from ..ops.creation import empty
    return empty(tuple(shape), dtype=dtype).uniform_(low, high)


class Gumbel(_LocScale):
    """``Gumbel(loc, scale)``: the distribution of maxima; ``loc - scale * log(-log U)``."""

    @property
    def mean(self):
        return self.loc + self.scale * _EULER_GAMMA

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        finfo = _dt.finfo(self.loc.dtype)
        u = _uniform(shape, self.loc.dtype, finfo.tiny, 1 - finfo.eps)
        return self.loc - self.scale * (-u.log()).log()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value):
        return (-(-(value - self.loc) / self.scale).exp()).exp()

    def icdf(self, value):
        return self.loc - self.scale * (-value.log()).log()

    def entropy(self):
        return self.scale.log() + (1 + _EULER_GAMMA)
