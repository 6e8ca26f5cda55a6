"""``Chi2`` (torch.distributions.chi2): the chi-squared distribution, a Gamma with concentration
``df / 2`` and rate ``1/2``."""
from __future__ import annotations

from . import constraints
from .gamma import Gamma

__all__ = ["Chi2"]


class Chi2(Gamma):
    """``Chi2(df)``: ``Gamma(0.5 * df, 0.5)``; the moments, log_prob and entropy are Gamma's."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        from .utils import broadcast_all
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        return self.concentration * 2
