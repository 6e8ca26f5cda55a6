"""``Laplace`` (torch.distributions.laplace), on normal's location-scale base."""
from __future__ import annotations

from ..tensor import Size
from .. import dtypes as _dt
from .normal import _LocScale

__all__ = ["Laplace"]


class Laplace(_LocScale):
    """``Laplace(loc, scale)``: density ``exp(-|x - loc| / scale) / (2 scale)``."""


    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=Size()):
        from ..ops.creation import empty
        shape = self._extended_shape(sample_shape)
        finfo = _dt.finfo(self.loc.dtype)
        u = empty(tuple(shape), dtype=self.loc.dtype).uniform_(finfo.eps - 1, 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() / self.scale).expm1()

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()
