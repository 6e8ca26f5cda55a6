"""SGD with momentum, dampening, Nesterov, weight decay and maximize (torch's update rule)."""
from __future__ import annotations

import numpy as np

from ..tensor import wrap
from .optimizer import Optimizer, required


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _step_group(self, group):
        lr, mom, damp, wd = group["lr"], group["momentum"], group["dampening"], group["weight_decay"]
        nesterov, maximize = group["nesterov"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            d = p._data
            g = self._grad_array(p, maximize)
            if wd != 0:
                g = g + wd * d
            if mom != 0:
                st = self.state[p]
                buf = st.get("momentum_buffer")
                if buf is None:
                    buf = wrap(np.array(g, dtype=d.dtype, copy=True))
                    st["momentum_buffer"] = buf
                else:
                    b = buf._data
                    b *= mom
                    b += (1 - damp) * g
                g = g + mom * buf._data if nesterov else buf._data
            d -= (lr * g).astype(d.dtype, copy=False)
            p._bump()
