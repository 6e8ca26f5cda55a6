"""Adamax (Adam with the infinity norm), torch's update rule."""
from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _check_options, _lerp_, _to_scalar

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """Adamax as ``torch.optim.Adamax``. State per parameter: ``step``, ``exp_avg``, ``exp_inf``."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check_options(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _group_options(self, group):
        b1, b2 = group["betas"]
        return _to_scalar(group["lr"]), b1, b2, group["eps"]

    def _init_state(self, p, st, group):
        st["exp_avg"] = self._zeros_state(p)
        st["exp_inf"] = self._zeros_state(p)

    def _update(self, p, d, g, st, step, opts):
        lr, b1, b2, eps = opts
        m = st["exp_avg"]._data
        u = st["exp_inf"]._data
        _lerp_(m, g, 1 - b1)
        u *= b2
        a = np.abs(g)
        a += eps
        np.maximum(u, a, out=u)
        clr = lr / (1 - b1 ** step)
        upd = m * -clr                         # param.addcdiv_(exp_avg, exp_inf, value=-clr)
        upd /= u
        d += upd
