"""Adam and AdamW (amsgrad, weight decay, maximize), following torch's update rule step by step."""
from __future__ import annotations

import math

import numpy as np

from ..tensor import wrap
from .optimizer import Optimizer, _scalar_step


class Adam(Optimizer):
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused)
        if type(self) is Adam:
            defaults["decoupled_weight_decay"] = decoupled_weight_decay
        super().__init__(params, defaults)

    def _step_group(self, group):
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        amsgrad, maximize = group["amsgrad"], group["maximize"]
        decoupled = self._decoupled or group.get("decoupled_weight_decay", False)
        for p in group["params"]:
            if p.grad is None:
                continue
            d = p._data
            g = self._grad_array(p, maximize)
            st = self.state[p]
            if not st:
                st["step"] = _scalar_step(0.0)
                st["exp_avg"] = wrap(np.zeros_like(d))
                st["exp_avg_sq"] = wrap(np.zeros_like(d))
                if amsgrad:
                    st["max_exp_avg_sq"] = wrap(np.zeros_like(d))
            step_t = st["step"]
            step_t._data[...] += 1
            step = float(step_t._data)
            if wd != 0:
                if decoupled:
                    d *= (1 - lr * wd)
                else:
                    g = g + wd * d
            m = st["exp_avg"]._data
            v = st["exp_avg_sq"]._data
            m += (g - m) * (1 - b1)            # torch: exp_avg.lerp_(grad, 1 - beta1)
            v *= b2
            v += (1 - b2) * g * g
            bc1 = 1 - b1 ** step
            bc2 = 1 - b2 ** step
            step_size = lr / bc1
            bc2_sqrt = math.sqrt(bc2)
            if amsgrad:
                mx = st["max_exp_avg_sq"]._data
                np.maximum(mx, v, out=mx)
                denom = np.sqrt(mx) / bc2_sqrt + eps
            else:
                denom = np.sqrt(v) / bc2_sqrt + eps
            d -= (step_size * (m / denom)).astype(d.dtype, copy=False)
            p._bump()


class AdamW(Adam):
    """Adam with decoupled weight decay (default weight_decay=1e-2, as torch)."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused)
