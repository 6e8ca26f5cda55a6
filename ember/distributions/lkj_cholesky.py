"""``LKJCholesky(dim, concentration=1.0)``: the LKJ distribution over correlation matrices, on their lower
Cholesky factors. The density of a factor ``L`` is proportional to ``prod_i L_ii^(dim - i + 2(eta - 1))``
(i = 2..dim), normalised as in Lewandowski, Kurowicka and Joe (2009). Draws use the onion method: row
``i`` is ``sqrt(y_i)`` times a uniform direction in its first ``i`` coordinates, ``y_i ~ Beta(i/2,
eta + (dim - 2 - i)/2)`` (``i`` from 0), with the diagonal completing the row to unit norm.
"""
from __future__ import annotations

import math

from ..tensor import Size
from . import constraints
from .beta import Beta
from .distribution import Distribution

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """``LKJCholesky(dim, concentration=1.0)``: batch shape the concentration's, event ``(dim, dim)``."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        from .. import arange, cat, zeros
        from .utils import broadcast_all
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        event_shape = Size((dim, dim))
        dtype = self.concentration.dtype
        marginal = self.concentration + 0.5 * (dim - 2)
        offset = cat([zeros(1, dtype=dtype), arange(dim - 1, dtype=dtype)])
        conc1 = offset + 0.5
        conc0 = marginal.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(conc1, conc0)
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=Size()):
        from .. import finfo, no_grad
        from .utils import _standard_normal
        with no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u = _standard_normal(tuple(self._extended_shape(sample_shape)), y.dtype).tril(-1)
            u = u / u.norm(dim=-1, keepdim=True)
            u[..., 0, :] = 0.0                      # (the first row is e_1: 0/0 above)
            w = y.sqrt() * u
            tiny = finfo(w.dtype).tiny
            diag = (1 - w.pow(2).sum(-1)).clamp(min=tiny).sqrt()
            return w + diag.diag_embed()

    def log_prob(self, value):
        from .. import arange, lgamma, mvlgamma
        if self._validate_args:
            self._validate_sample(value)
        diag = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = arange(2, self.dim + 1, dtype=value.dtype)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = (order * diag.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        normalize = 0.5 * dm1 * math.log(math.pi) + mvlgamma(alpha - 0.5, dm1) - lgamma(alpha) * dm1
        return unnormalized - normalize
