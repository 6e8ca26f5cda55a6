"""Gamma, Beta and Dirichlet distributions, with torch's formulas.

Draws come from the default generator's NumPy gamma sampler (so ``ember.manual_seed`` fixes them) and
are clamped to the dtype's smallest normal number, as torch does. ``rsample`` carries gradients to a
Gamma's ``rate``; a gradient through a draw with respect to a *concentration* (torch's implicit
reparameterisation of the gamma sampler) is not implemented and raises when one is asked for.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Size
from ..autograd.grad_mode import is_grad_enabled
from .. import dtypes as _dt
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Gamma", "Beta", "Dirichlet"]


def _standard_gamma(concentration, shape, dist):
    """Gamma(concentration, 1) draws of ``shape`` (no gradient), from the default generator."""
    from ..random import _gen
    from ..ops.creation import tensor
    if concentration.requires_grad and is_grad_enabled():
        raise NotImplementedError(f"{dist}.rsample: gradients of a draw with respect to the concentration "
                                  "(implicit reparameterisation of the gamma sampler) are not implemented in ember; "
                                  "use sample(), or detach the concentration")
    alpha = np.broadcast_to(concentration.detach().cpu().numpy().astype(np.float64), tuple(shape))
    draw = _gen(None).standard_gamma(alpha)
    tiny = float(_dt.finfo(concentration.dtype).tiny)
    return tensor(np.maximum(draw, tiny), dtype=concentration.dtype)


class Gamma(Distribution):
    """``Gamma(concentration, rate)``: density ``rate^a x^(a-1) exp(-rate x) / Gamma(a)``."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self._init_broadcast(("concentration", "rate"), (concentration, rate), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_broadcast(Gamma, ("concentration", "rate"), batch_shape, _instance)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        value = _standard_gamma(self.concentration, shape, "Gamma") / self.rate.expand(shape)
        tiny = float(_dt.finfo(value.dtype).tiny)
        return value.clamp(min=tiny)

    def log_prob(self, value):
        from .. import xlogy, lgamma, as_tensor
        value = as_tensor(value, dtype=self.rate.dtype)
        if self._validate_args:
            self._validate_sample(value)
        return (xlogy(self.concentration, self.rate) + xlogy(self.concentration - 1, value)
                - self.rate * value - lgamma(self.concentration))

    def cdf(self, value):
        raise NotImplementedError("Gamma.cdf needs the regularized incomplete gamma function (torch.special."
                                  "gammainc), which ember does not have")

    def entropy(self):
        from .. import lgamma, digamma
        return (self.concentration - self.rate.log() + lgamma(self.concentration)
                + (1.0 - self.concentration) * digamma(self.concentration))


class Dirichlet(Distribution):
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


class Beta(Distribution):
    """``Beta(concentration1, concentration0)``: density ``x^(a-1) (1-x)^(b-1) / B(a, b)`` on [0, 1];
    built, as torch builds it, on a two-class Dirichlet."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        from .. import stack
        c1, c0 = broadcast_all(concentration1, concentration0)
        self._dirichlet = Dirichlet(stack([c1, c0], -1), validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        def fill(new, shape):
            new._dirichlet = self._dirichlet.expand(shape)
        return self._expand_into(Beta, batch_shape, _instance, fill)

    @property
    def concentration1(self):
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self):
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=Size()):
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value):
        from .. import stack, as_tensor
        value = as_tensor(value, dtype=self._dirichlet.concentration.dtype)
        if self._validate_args:
            self._validate_sample(value)
        return self._dirichlet.log_prob(stack([value, 1.0 - value], -1))

    def entropy(self):
        return self._dirichlet.entropy()
