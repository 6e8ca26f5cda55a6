"""NAdam (Adam with Nesterov momentum and momentum decay), torch's update rule."""
from __future__ import annotations

import numpy as np

from .adam import _moments
from .optimizer import Optimizer, _check_options, _scalar_step, _to_scalar

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """NAdam as ``torch.optim.NAdam``.

    State per parameter: ``step``, ``mu_product`` (float32 0-dim tensors), ``exp_avg``, ``exp_avg_sq``.
    """

    _scalar_state = ("step", "mu_product")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_options(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay, momentum_decay=momentum_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _group_options(self, group):
        b1, b2 = group["betas"]
        return _to_scalar(group["lr"]), b1, b2, group["eps"], group["momentum_decay"]

    def _init_state(self, p, st, group):
        st["mu_product"] = _scalar_step(1.0)
        st["exp_avg"] = self._zeros_state(p)
        st["exp_avg_sq"] = self._zeros_state(p)

    def _update(self, p, d, g, st, step, opts):
        lr, b1, b2, eps, mdecay = opts
        bc2 = 1 - b2 ** step
        mu = b1 * (1.0 - 0.5 * (0.96 ** (step * mdecay)))
        mu_next = b1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * mdecay)))
        mp = st["mu_product"]._data
        mp *= mu                               # rounded to the state tensor's dtype, as torch
        mu_product = float(mp)
        mu_product_next = mu_product * mu_next
        m, v = _moments(st, g, b1, b2)
        denom = v / bc2
        np.sqrt(denom, out=denom)
        denom += eps
        upd = g * (-lr * (1.0 - mu) / (1.0 - mu_product))
        upd /= denom
        d += upd
        upd = m * ((-lr * mu_next) / (1.0 - mu_product_next))
        upd /= denom
        d += upd
