"""Rprop (resilient backpropagation), torch's update rule."""
from __future__ import annotations

import numpy as np

from ..tensor import wrap
from .optimizer import Optimizer, _check_options, _to_scalar

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """Rprop as ``torch.optim.Rprop``. State per parameter: ``step``, ``prev``, ``step_size``."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False,
                 foreach=None, maximize=False, differentiable=False):
        _check_options(lr=lr, etas=etas)
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _group_options(self, group):
        return (*group["etas"], *group["step_sizes"])

    def _init_state(self, p, st, group):
        st["prev"] = self._zeros_state(p)
        grad = p.grad
        st["step_size"] = wrap(np.full_like(grad._data, _to_scalar(group["lr"])), grad._dtype)

    def _update(self, p, d, g, st, step, opts):
        etaminus, etaplus, smin, smax = opts
        prev = st["prev"]._data
        ss = st["step_size"]._data
        sign = np.sign(g * prev)
        pos, neg = sign > 0, sign < 0
        sign[pos] = etaplus
        sign[neg] = etaminus
        sign[~(pos | neg)] = 1
        ss *= sign
        np.clip(ss, smin, smax, out=ss)
        g = np.array(g, copy=True)
        g[sign == etaminus] = 0                # no step (and no memory) right after a sign change
        upd = np.sign(g)
        upd *= ss
        d -= upd
        prev[...] = g
