"""``Gamma`` (torch.distributions.gamma) and the gamma sampler that Beta, Dirichlet and StudentT draw from.

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

__all__ = ["Gamma"]


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
