"""RMSprop (optionally centered, with momentum), torch's update rule."""
from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _check_options, _lerp_, _to_scalar

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop as ``torch.optim.RMSprop``.

    State per parameter: ``step``, ``square_avg``, ``momentum_buffer`` (momentum > 0) and ``grad_avg``
    (centered).
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_options(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _group_options(self, group):
        return _to_scalar(group["lr"]), group["alpha"], group["eps"], group["momentum"], group["centered"]

    def _init_state(self, p, st, group):
        st["square_avg"] = self._zeros_state(p)
        if group["momentum"] > 0:
            st["momentum_buffer"] = self._zeros_state(p)
        if group["centered"]:
            st["grad_avg"] = self._zeros_state(p)

    def _update(self, p, d, g, st, step, opts):
        lr, alpha, eps, mom, centered = opts
        sq = st["square_avg"]._data
        sq *= alpha
        sq += g * (1 - alpha) * g
        if centered:
            ga = st["grad_avg"]._data
            _lerp_(ga, g, 1 - alpha)
            avg = ga * -1.0                    # square_avg.addcmul(grad_avg, grad_avg, value=-1)
            avg *= ga
            avg += sq
            np.sqrt(avg, out=avg)
        else:
            avg = np.sqrt(sq)
        avg += eps
        if mom > 0:
            buf = st["momentum_buffer"]._data
            buf *= mom
            buf += g / avg
            d -= buf * lr
        else:
            upd = g * -lr                      # param.addcdiv_(grad, avg, value=-lr)
            upd /= avg
            d += upd
