"""torch's shape and matrix transforms: ``ReshapeTransform`` (event reshape, log-det 0),
``LowerCholeskyTransform`` (unconstrained square -> lower triangular with a positive diagonal, by ``exp`` of
the diagonal) and ``PositiveDefiniteTransform`` (that factor times its transpose). Exported by
``ember.distributions.transforms``."""
from __future__ import annotations

import math

from . import constraints
from .transforms import Transform

__all__ = ["ReshapeTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform"]


class ReshapeTransform(Transform):
    """Reshape the rightmost ``in_shape`` dims into ``out_shape`` (same number of elements)."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size: int = 0):
        from ..tensor import Size
        self.in_shape = Size(in_shape)
        self.out_shape = Size(out_shape)
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else ReshapeTransform(self.in_shape, self.out_shape,
                                                                            cache_size=cache_size)

    def _call(self, x):
        batch = tuple(x.shape[:x.dim() - len(self.in_shape)])
        return x.reshape(batch + tuple(self.out_shape))

    def _inverse(self, y):
        batch = tuple(y.shape[:y.dim() - len(self.out_shape)])
        return y.reshape(batch + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(tuple(x.shape[:x.dim() - len(self.in_shape)]))

    def _moved(self, shape, src, dst):
        from ..tensor import Size
        if len(shape) < len(src):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(src)
        if tuple(shape[cut:]) != tuple(src):
            raise ValueError(f"Shape mismatch: expected {tuple(shape[cut:])} but got {src}")
        return Size(tuple(shape[:cut]) + tuple(dst))

    def forward_shape(self, shape):
        return self._moved(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._moved(shape, self.out_shape, self.in_shape)


class LowerCholeskyTransform(Transform):
    """Square matrix -> its strict lower triangle plus ``exp`` of its diagonal."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def _same(self, other) -> bool:
        return isinstance(other, LowerCholeskyTransform)

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """Square matrix -> ``L L^T`` with ``L`` its LowerCholeskyTransform."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def _same(self, other) -> bool:
        return isinstance(other, PositiveDefiniteTransform)

    def _call(self, x):
        L = LowerCholeskyTransform()(x)
        return L @ L.mT

    def _inverse(self, y):
        from .. import linalg
        return LowerCholeskyTransform().inv(linalg.cholesky(y))
