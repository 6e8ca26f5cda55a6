"""``Gamma`` (torch.distributions.gamma) and the gamma sampler that Beta, Dirichlet and StudentT draw from.

Draws come from the default generator's NumPy gamma sampler (so ``ember.manual_seed`` fixes them) and
are clamped to the dtype's smallest normal number, as torch does. ``rsample`` carries gradients to the
``rate`` and, by implicit reparameterisation (dx/da = -(dP/da) / density, ``_incomplete_gamma.py``), to the
concentration: Beta, Dirichlet and StudentT draws, made from gamma draws, get theirs through it.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Size
from ..autograd.grad_mode import is_grad_enabled
from .. import dtypes as _dt
from . import constraints
from .distribution import Distribution
from .exp_family import ExponentialFamily

__all__ = ["Gamma"]


def _standard_gamma(concentration, shape, dist):
    """Gamma(concentration, 1) draws of ``shape`` from the default generator (differentiable in the
    concentration)."""
    from ..random import _gen
    from ..ops.creation import tensor
    alpha = np.broadcast_to(concentration.detach().cpu().numpy().astype(np.float64), tuple(shape))
    draw = _gen(None).standard_gamma(alpha)
    tiny = float(_dt.finfo(concentration.dtype).tiny)
    x = tensor(np.maximum(draw, tiny), dtype=concentration.dtype)
    if concentration.requires_grad and is_grad_enabled():
        from ._incomplete_gamma import gamma_reparam
        x = gamma_reparam(concentration, x)
    return x


class Gamma(ExponentialFamily):
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
        from .. import as_tensor
        from ._incomplete_gamma import gammainc
        value = as_tensor(value, dtype=self.rate.dtype)
        if self._validate_args:
            self._validate_sample(value)
        return gammainc(self.concentration, self.rate * value)

    def entropy(self):
        from .. import lgamma, digamma
        return (self.concentration - self.rate.log() + lgamma(self.concentration)
                + (1.0 - self.concentration) * digamma(self.concentration))

    @property
    def _natural_params(self):
        return self.concentration - 1, -self.rate

    def _log_normalizer(self, x, y):
        return (x + 1).lgamma() + (x + 1) * (-y.reciprocal()).log()
