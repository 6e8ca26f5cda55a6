"""NAdam (Adam with Nesterov momentum and momentum decay), torch's update rule."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from .optimizer import Optimizer, _check_options, _lerp_, _scalar_step, _to_scalar

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """NAdam as ``torch.optim.NAdam``.

    State per parameter: ``step``, ``mu_product`` (float32 0-dim tensors), ``exp_avg``, ``exp_avg_sq``.
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_options(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay, momentum_decay=momentum_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state.get(p)
                if st and "mu_product" in st and not isinstance(st["mu_product"], Tensor):
                    st["mu_product"] = _scalar_step(float(st["mu_product"]))

    def _step_group(self, group):
        lr = _to_scalar(group["lr"])
        b1, b2 = group["betas"]
        eps, wd, mdecay = group["eps"], group["weight_decay"], group["momentum_decay"]
        decoupled, maximize = group["decoupled_weight_decay"], group["maximize"]
        state = self.state
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            st = state[p]
            if len(st) == 0:
                st["step"] = _scalar_step(0.0)
                st["mu_product"] = _scalar_step(1.0)
                st["exp_avg"] = self._zeros_state(p)
                st["exp_avg_sq"] = self._zeros_state(p)
            d = p._data
            g = grad._data
            if maximize:
                g = -g
            step_arr = st["step"]._data
            step_arr += 1
            step = float(step_arr)
            bc2 = 1 - b2 ** step
            if wd != 0:
                if decoupled:
                    d *= 1 - lr * wd
                else:
                    g = g + d * wd
            mu = b1 * (1.0 - 0.5 * (0.96 ** (step * mdecay)))
            mu_next = b1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * mdecay)))
            mp = st["mu_product"]._data
            mp *= mu                               # rounded to the state tensor's dtype, as torch
            mu_product = float(mp)
            mu_product_next = mu_product * mu_next
            m = st["exp_avg"]._data
            v = st["exp_avg_sq"]._data
            _lerp_(m, g, 1 - b1)
            v *= b2
            v += g * (1 - b2) * g
            denom = v / bc2
            np.sqrt(denom, out=denom)
            denom += eps
            upd = g * (-lr * (1.0 - mu) / (1.0 - mu_product))
            upd /= denom
            d += upd
            upd = m * ((-lr * mu_next) / (1.0 - mu_product_next))
            upd /= denom
            d += upd
            p._bump()
