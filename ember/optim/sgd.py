"""SGD with momentum, dampening, Nesterov, weight decay and maximize (torch's update rule)."""
from __future__ import annotations

import numpy as np

from ..tensor import wrap
from . import _fused
from .optimizer import Optimizer, _check_fused, _check_options, _to_scalar

__all__ = ["SGD", "sgd"]


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with (Nesterov) momentum, as ``torch.optim.SGD``.

    State per parameter (only with ``momentum != 0``): ``momentum_buffer``.
    """

    _step_counter = False                       # no state['step']; the momentum buffer is seeded in _update
    _group_fallbacks = dict(nesterov=False, maximize=False, foreach=None, differentiable=False, fused=False)

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        _check_options(lr=lr, momentum=momentum, weight_decay=weight_decay, reject_nan=False)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)

    def _step_group(self, group):
        # float32 CPU parameters with real-number options: one native call per group (_fused.py)
        if type(self)._update is not SGD._update or not _fused.sgd_group(self, group):
            super()._step_group(group)

    def _group_options(self, group):
        return _to_scalar(group["lr"]), group["momentum"], group["dampening"], group["nesterov"]

    def _update(self, p, d, g, st, step, opts):
        lr, mom, damp, nesterov = opts
        if mom != 0:
            st = self.state[p]
            buf = st.get("momentum_buffer")
            if buf is None:
                # the first step seeds the buffer with the gradient itself (no dampening)
                st["momentum_buffer"] = buf = wrap(np.array(g, copy=True), p.grad._dtype)
            else:
                b = buf._data
                b *= mom
                if damp != 0:
                    b += g * (1 - damp)
                else:
                    b += g
            g = g + buf._data * mom if nesterov else buf._data
        d -= g * lr                             # param.add_(grad, alpha=-lr)


def sgd(params, d_p_list, momentum_buffer_list, has_sparse_grad=False, foreach=None, fused=None, grad_scale=None,
        found_inf=None, *, weight_decay, momentum, lr, dampening, nesterov, maximize):
    """torch.optim.sgd.sgd: one SGD update of ``params`` in place; a ``None`` entry of
    ``momentum_buffer_list`` is replaced by the new buffer (as torch), by ``SGD``'s own loop."""
    from ._functional_step import functional_step
    if fused or grad_scale is not None or found_inf is not None:
        raise RuntimeError("sgd: fused=True and grad_scale/found_inf are not supported by ember")
    if len(momentum_buffer_list) != len(params):
        raise ValueError("sgd: momentum_buffer_list must have one entry per parameter")
    states = [{} if b is None else {"momentum_buffer": b} for b in momentum_buffer_list]
    defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                    maximize=maximize, foreach=foreach, differentiable=False, fused=fused)
    for i, st in enumerate(functional_step(SGD, "sgd", defaults, params, d_p_list, states)):
        if momentum != 0 and momentum_buffer_list[i] is None:
            momentum_buffer_list[i] = st.get("momentum_buffer")
