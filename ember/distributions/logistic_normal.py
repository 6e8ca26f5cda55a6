"""``LogisticNormal`` (torch.distributions.logistic_normal): a Normal on ``R^(K-1)`` sent onto the K-simplex
by ``StickBreakingTransform``."""
from __future__ import annotations

from . import constraints
from .normal import Normal
from .transformed_distribution import TransformedDistribution
from .transforms import StickBreakingTransform

__all__ = ["LogisticNormal"]


class LogisticNormal(TransformedDistribution):
    """``LogisticNormal(loc, scale)``: ``loc``/``scale`` have K-1 entries, draws K."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        if not base.batch_shape:
            base = base.expand([1])
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogisticNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        return getattr(self.base_dist, "base_dist", self.base_dist).loc

    @property
    def scale(self):
        return getattr(self.base_dist, "base_dist", self.base_dist).scale
