"""Adadelta (Zeiler 2012) with weight decay and maximize, torch's update rule."""
from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _check_options, _to_scalar

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta as ``torch.optim.Adadelta``. State per parameter: ``step``, ``square_avg``, ``acc_delta``."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        _check_options(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _group_options(self, group):
        return _to_scalar(group["lr"]), group["rho"], group["eps"]

    def _init_state(self, p, st, group):
        st["square_avg"] = self._zeros_state(p)
        st["acc_delta"] = self._zeros_state(p)

    def _update(self, p, d, g, st, step, opts):
        lr, rho, eps = opts
        sq = st["square_avg"]._data
        acc = st["acc_delta"]._data
        sq *= rho
        sq += g * (1 - rho) * g
        std = sq + eps
        np.sqrt(std, out=std)
        delta = acc + eps
        np.sqrt(delta, out=delta)
        delta /= std
        delta *= g
        acc *= rho
        acc += delta * (1 - rho) * delta
        delta *= lr                            # param.add_(delta, alpha=-lr)
        d -= delta
