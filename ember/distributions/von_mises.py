"""``VonMises(loc, concentration)``: the circular normal, density ``exp(k cos(x - loc)) / (2 pi I0(k))``.

Draws use Best and Fisher's (1979) rejection sampler (a wrapped Cauchy envelope), computed in float64
and wrapped into [-pi, pi); there is no ``rsample``. ``log I0`` and the mean resultant length
``I1(k)/I0(k)`` come from the exponentially scaled Bessel functions, so large concentrations do not
overflow.
"""
from __future__ import annotations

import math

import numpy as np

from ..tensor import Size
from . import constraints
from .distribution import Distribution, _CenteredAtLoc

__all__ = ["VonMises"]


def _log_i0(k):
    from .. import special
    return special.i0e(k).log() + k


class VonMises(_CenteredAtLoc, Distribution):
    """``VonMises(loc, concentration)`` on the circle (angles in radians)."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self._init_broadcast(("loc", "concentration"), (loc, concentration), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_broadcast(VonMises, ("loc", "concentration"), batch_shape, _instance)

    def log_prob(self, value):
        from .. import as_tensor
        value = as_tensor(value, dtype=self.loc.dtype)
        if self._validate_args:
            self._validate_sample(value)
        k = self.concentration
        return k * (value - self.loc).cos() - math.log(2 * math.pi) - _log_i0(k)

    @property
    def variance(self):
        from .. import special
        k = self.concentration
        return 1 - special.i1e(k) / special.i0e(k)

    def sample(self, sample_shape=Size()):
        from ..random import _gen
        from ..ops.creation import tensor
        shape = tuple(self._extended_shape(sample_shape))
        k = np.broadcast_to(self.concentration.detach().cpu().numpy().astype(np.float64), shape)
        loc = np.broadcast_to(self.loc.detach().cpu().numpy().astype(np.float64), shape)
        gen = _gen(None)
        with np.errstate(all="ignore"):
            tau = 1 + np.sqrt(1 + 4 * k * k)
            rho = (tau - np.sqrt(2 * tau)) / (2 * k)
            r = np.where(k < 1e-5, 1 / k + k, (1 + rho * rho) / (2 * rho))
            x = np.full(shape, np.nan)
            todo = np.ones(shape, bool)
            while todo.any():
                u1, u2, u3 = gen.random(shape), gen.random(shape), gen.random(shape)
                z = np.cos(np.pi * u1)
                f = (1 + r * z) / (r + z)
                c = k * (r - f)
                ok = ((c * (2 - c) - u2) > 0) | (np.log(c / u2) + 1 - c >= 0)
                theta = np.sign(u3 - 0.5) * np.arccos(np.clip(f, -1, 1))
                take = ok & todo
                x[take] = theta[take]
                todo &= ~ok
        out = np.mod(x + loc + np.pi, 2 * np.pi) - np.pi
        return tensor(out, dtype=self.loc.dtype)
