"""Transforms that join other transforms or distributions (torch.distributions.transforms):

- ``CatTransform(tseq, dim, lengths)``: ``tseq[i]`` on the i-th piece (``lengths[i]`` long) along ``dim``;
- ``StackTransform(tseq, dim)``: ``tseq[i]`` on ``x.select(dim, i)``;
- ``CorrCholeskyTransform``: an unconstrained vector of ``D (D - 1) / 2`` numbers -> the Cholesky factor of
  a correlation matrix (tanh, then stick-breaking on the squared entries of each row), as in Stan;
- ``CumulativeDistributionTransform(distribution)``: ``x -> distribution.cdf(x)`` (log-det: ``log_prob``).
"""
from __future__ import annotations

import math

from . import constraints
from .transforms import Transform
from .utils import _sum_rightmost, tril_matrix_to_vec, vec_to_tril_matrix

__all__ = ["CatTransform", "StackTransform", "CorrCholeskyTransform", "CumulativeDistributionTransform"]


class _JoinTransform(Transform):
    """Shared by Cat and Stack: a list of transforms (each given the cache size), bijective when all are."""

    def __init__(self, tseq, cache_size: int = 0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise TypeError(f"{type(self).__name__}: every entry of tseq must be a Transform")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    def _check_dim(self, x):
        if not -x.dim() <= self.dim < x.dim():
            raise AssertionError(f"{type(self).__name__}: dim {self.dim} is out of range for a {x.dim()}-d input")


class CatTransform(_JoinTransform):
    """``tseq[i]`` applied to the piece ``x.narrow(dim, start_i, lengths[i])``, the results concatenated."""

    def __init__(self, tseq, dim: int = 0, lengths=None, cache_size: int = 0):
        super().__init__(tseq, cache_size)
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.transforms)
        if len(self.lengths) != len(self.transforms):
            raise ValueError(f"CatTransform: {len(self.lengths)} lengths for {len(self.transforms)} transforms")
        self.dim = dim

    @property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _pieces(self, x):
        self._check_dim(x)
        if x.size(self.dim) != self.length:     # (torch asserts)
            raise AssertionError(f"CatTransform: x.size({self.dim}) = {x.size(self.dim)} must equal length "
                                 f"{self.length}")
        start = 0
        for t, n in zip(self.transforms, self.lengths):
            yield t, x.narrow(self.dim, start, n)
            start += n

    def _call(self, x):
        from .. import cat
        return cat([t(v) for t, v in self._pieces(x)], dim=self.dim)

    def _inverse(self, y):
        from .. import cat
        return cat([t.inv(v) for t, v in self._pieces(y)], dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        from .. import cat
        parts = []
        for (t, xs), (_, ys) in zip(self._pieces(x), self._pieces(y)):
            ld = t.log_abs_det_jacobian(xs, ys)
            if t.event_dim < self.event_dim:
                ld = _sum_rightmost(ld, self.event_dim - t.event_dim)
            parts.append(ld)
        dim = self.dim - x.dim() if self.dim >= 0 else self.dim
        dim += self.event_dim
        if dim < 0:                 # the joined dim is a batch dim of the log-det: the pieces lie side by side
            return cat(parts, dim=dim)
        return sum(parts)           # inside the event: the pieces' log-dets add up

    @property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(_JoinTransform):
    """``tseq[i]`` applied to ``x.select(dim, i)``, the results stacked along ``dim``."""

    def __init__(self, tseq, dim: int = 0, cache_size: int = 0):
        super().__init__(tseq, cache_size)
        self.dim = dim

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slices(self, z):
        return [z.select(self.dim, i) for i in range(z.size(self.dim))]

    def _map(self, z, inverse: bool):
        from .. import stack
        self._check_dim(z)
        parts = self._slices(z)
        if len(parts) != len(self.transforms):
            raise AssertionError(f"StackTransform: the input has size {len(parts)} along dim {self.dim}, "
                             f"there are {len(self.transforms)} transforms")
        return stack([(t.inv if inverse else t)(v) for t, v in zip(self.transforms, parts)], dim=self.dim)

    def _call(self, x):
        return self._map(x, inverse=False)

    def _inverse(self, y):
        return self._map(y, inverse=True)

    def log_abs_det_jacobian(self, x, y):
        from .. import stack
        self._check_dim(x)
        self._check_dim(y)
        xs, ys = self._slices(x), self._slices(y)
        return stack([t.log_abs_det_jacobian(a, b) for t, a, b in zip(self.transforms, xs, ys)], dim=self.dim)

    @property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CorrCholeskyTransform(Transform):
    """Real vector of length ``D (D - 1) / 2`` -> lower-triangular ``D x D`` Cholesky factor of a correlation
    matrix: the entries go through tanh (clamped inside (-1, 1)) into the strictly lower triangle, and
    each row is scaled by the running ``sqrt(1 - sum of squares)`` so it has unit norm. The log-det is that
    of the map onto the strictly lower triangle of the result."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _same(self, other):
        return isinstance(other, CorrCholeskyTransform)

    def _call(self, x):
        from .. import eye
        from ..nn.functional import pad
        x = x.tanh()
        eps = _finfo_eps(x)
        x = x.clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(x, diag=-1)
        left = (1 - r ** 2).sqrt().cumprod(-1)
        r = r + eye(r.shape[-1], dtype=r.dtype)
        return r * pad(left[..., :-1], [1, 0], value=1)

    def _inverse(self, y):
        from ..nn.functional import pad
        left = 1 - (y * y).cumsum(dim=-1)
        left = pad(left[..., :-1], [1, 0], value=1)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(left, diag=-1).sqrt()
        return (t.log1p() - t.neg().log1p()) / 2

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        from ..nn.functional import softplus
        left = tril_matrix_to_vec(1 - (y * y).cumsum(dim=-1), diag=-2)
        stick = 0.5 * left.log().sum(-1)
        tanh = -2 * (x + softplus(-2 * x) - math.log(2.0)).sum(dim=-1)
        return stick + tanh

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return tuple(shape[:-2]) + (d * (d - 1) // 2,)


def _finfo_eps(x):
    from .. import dtypes as _dt
    return _dt.finfo(x.dtype).eps


class CumulativeDistributionTransform(Transform):
    """``x -> distribution.cdf(x)`` onto the unit interval (inverse: ``icdf``; log |det|: ``log_prob``)."""

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)


# torch defines these in torch.distributions.transforms, where ember's transforms module also finds them
# (its __getattr__): pickles and ember.save name them by that path
for _cls in (CatTransform, StackTransform, CorrCholeskyTransform, CumulativeDistributionTransform):
    _cls.__module__ = "ember.distributions.transforms"
del _cls
