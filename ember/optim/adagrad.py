"""Adagrad with learning-rate decay, weight decay and an initial accumulator value (torch's rule)."""
from __future__ import annotations

import numpy as np

from ..tensor import wrap
from .optimizer import Optimizer, _check_fused, _check_options, _to_scalar

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
                self._start_state(p, group)

    def _init_state(self, p, st, group):
        # the constructor's value, also for parameters added later (whatever their group says), as torch
        st["sum"] = wrap(np.full_like(p._data, self.defaults["initial_accumulator_value"]), p._dtype)

    def share_memory(self) -> None:
        """No-op (ember tensors live in one process); kept for API parity with torch."""

    def _group_options(self, group):
        return _to_scalar(group["lr"]), group["lr_decay"], group["eps"]

    def _update(self, p, d, g, st, step, opts):
        lr, lr_decay, eps = opts
        clr = lr / (1 + (step - 1) * lr_decay)
        s = st["sum"]._data
        s += g * g
        std = np.sqrt(s)
        std += eps
        upd = g * -clr                         # param.addcdiv_(grad, std, value=-clr)
        upd /= std
        d += upd
