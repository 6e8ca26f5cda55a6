"""Adamax (Adam with the infinity norm), torch's update rule."""
from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _check_options, _lerp_, _scalar_step, _to_scalar

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """Adamax as ``torch.optim.Adamax``. State per parameter: ``step``, ``exp_avg``, ``exp_inf``."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check_options(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _step_group(self, group):
        lr = _to_scalar(group["lr"])
        b1, b2 = group["betas"]
        eps, wd, maximize = group["eps"], group["weight_decay"], group["maximize"]
        state = self.state
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            st = state[p]
            if len(st) == 0:
                st["step"] = _scalar_step(0.0)
                st["exp_avg"] = self._zeros_state(p)
                st["exp_inf"] = self._zeros_state(p)
            d = p._data
            g = grad._data
            if maximize:
                g = -g
            step_arr = st["step"]._data
            step_arr += 1
            if wd != 0:
                g = g + d * wd
            m = st["exp_avg"]._data
            u = st["exp_inf"]._data
            _lerp_(m, g, 1 - b1)
            u *= b2
            a = np.abs(g)
            a += eps
            np.maximum(u, a, out=u)
            clr = lr / (1 - b1 ** float(step_arr))
            upd = m * -clr                         # param.addcdiv_(exp_avg, exp_inf, value=-clr)
            upd /= u
            d += upd
            p._bump()
