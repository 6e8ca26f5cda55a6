"""Adagrad with learning-rate decay, weight decay and an initial accumulator value (torch's rule)."""
from __future__ import annotations

import numpy as np

from ..tensor import wrap
from .optimizer import Optimizer, _check_fused, _check_options, _scalar_step, _to_scalar

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad as ``torch.optim.Adagrad``. State per parameter: ``step`` and ``sum``.

    As in torch the state is created for every parameter at construction (so ``state_dict()`` lists it
    before the first step).
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check_options(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                       initial_accumulator_value=initial_accumulator_value, eps=eps)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, initial_accumulator_value)

    def _init_state(self, p, init_value) -> dict:
        st = self.state[p]
        st["step"] = _scalar_step(0.0)
        st["sum"] = wrap(np.full_like(p._data, init_value), p._dtype)
        return st

    def share_memory(self) -> None:
        """No-op (ember tensors live in one process); kept for API parity with torch."""

    def _step_group(self, group):
        lr = _to_scalar(group["lr"])
        lr_decay, eps, wd, maximize = group["lr_decay"], group["eps"], group["weight_decay"], group["maximize"]
        state = self.state
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            st = state[p]
            if len(st) == 0:
                # parameters added after construction use the constructor's initial value (as torch)
                st = self._init_state(p, self.defaults["initial_accumulator_value"])
            d = p._data
            step_arr = st["step"]._data
            step_arr += 1
            step = float(step_arr)
            g = grad._data
            if maximize:
                g = -g
            if wd != 0:
                g = g + d * wd
            clr = lr / (1 + (step - 1) * lr_decay)
            s = st["sum"]._data
            s += g * g
            std = np.sqrt(s)
            std += eps
            upd = g * -clr                         # param.addcdiv_(grad, std, value=-clr)
            upd /= std
            d += upd
            p._bump()
