"""``Dirichlet`` (torch.distributions.dirichlet): a distribution over the simplex."""
from __future__ import annotations

from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .gamma import _standard_gamma

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """``Dirichlet(concentration)``: a distribution over the simplex; the last dim of ``concentration``
    is the event."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = concentration.shape
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        def fill(new, shape):
            new.concentration = self.concentration.expand(Size(shape) + self.event_shape)
        return self._expand_into(Dirichlet, batch_shape, _instance, fill)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        g = _standard_gamma(self.concentration, shape, "Dirichlet")
        return g / g.sum(-1, keepdim=True)

    def log_prob(self, value):
        from .. import xlogy, lgamma
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return xlogy(c - 1.0, value).sum(-1) + lgamma(c.sum(-1)) - lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        from .. import where
        cm1 = (self.concentration - 1).clamp(min=0.0)
        total = cm1.sum(-1, keepdim=True)
        mode = cm1 / where(total > 0, total, float("nan"))     # 0/0 is NaN, as in torch, without a warning
        mask = (self.concentration < 1).all(dim=-1)
        if bool(mask.any()):      # torch takes the argmax of the all-NaN row there: the first class
            from ..nn.functional import one_hot
            hot = one_hot(mode.argmax(dim=-1), self.concentration.shape[-1]).to(mode.dtype)
            mode = where(mask.unsqueeze(-1), hot, mode)
        return mode

    @property
    def variance(self):
        con0 = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def entropy(self):
        from .. import lgamma, digamma
        k = self.concentration.size(-1)
        a0 = self.concentration.sum(-1)
        return (lgamma(self.concentration).sum(-1) - lgamma(a0) - (k - a0) * digamma(a0)
                - ((self.concentration - 1.0) * digamma(self.concentration)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - x.sum(-1).lgamma()
