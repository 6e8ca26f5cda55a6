"""RAdam (rectified Adam), torch's update rule."""
from __future__ import annotations

import numpy as np

from .adam import _moments
from .optimizer import Optimizer, _check_options, _to_scalar

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """RAdam as ``torch.optim.RAdam``. State per parameter: ``step``, ``exp_avg``, ``exp_avg_sq``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        _check_options(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _group_options(self, group):
        b1, b2 = group["betas"]
        return _to_scalar(group["lr"]), b1, b2, group["eps"], 2 / (1 - b2) - 1

    def _init_state(self, p, st, group):
        st["exp_avg"] = self._zeros_state(p)
        st["exp_avg_sq"] = self._zeros_state(p)

    def _update(self, p, d, g, st, step, opts):
        lr, b1, b2, eps, rho_inf = opts
        m, v = _moments(st, g, b1, b2)
        bc1 = 1 - b1 ** step
        bc2 = 1 - b2 ** step
        upd = m / bc1
        upd *= lr
        rho_t = rho_inf - 2 * step * (b2 ** step) / bc2
        if rho_t > 5.0:
            # variance is tractable: rectified adaptive step
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            s = np.sqrt(v)
            s += eps
            adaptive = np.divide(bc2 ** 0.5, s, out=s)
            upd *= adaptive
            upd *= rect
        d -= upd
