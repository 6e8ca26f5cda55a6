"""One native pass per parameter for the eager Adam/AdamW and SGD steps (``ember._native``'s ``adam`` and
``sgd`` kernels), where the update is the plain float32 CPU case: options given as Python numbers and every
buffer a C-contiguous float32 ndarray of the parameter's shape.

Each ``*_group`` runs a whole param group and returns True, handing a parameter that does not fit (another
dtype, a device, a strided buffer) to the optimizer's NumPy loop
(``Optimizer._step_group`` on that parameter alone); it returns False, touching nothing, when the native
library is unavailable or an option is not a plain number, and the caller runs its NumPy loop. The kernels
do torch's single-tensor arithmetic in torch's order (``eager_source_optim.py``), so both paths agree to
float32 rounding.
"""
from __future__ import annotations

import math

import numpy as np

from .._native import eager_kernels as _k
from ..tensor import wrap
from .optimizer import Optimizer

_NUMBERS = (float, int)


def _numbers(*values) -> bool:
    for v in values:
        if type(v) not in _NUMBERS:
            return False
    return True


def _one(opt, p, group) -> None:
    """``p``'s update by the optimizer's NumPy loop."""
    Optimizer._step_group(opt, dict(group, params=[p]))
    return None


def _plain(opt, group):
    """(parameter, gradient, their buffers) for each parameter of ``group`` with a gradient whose buffers
    fit the kernels; the others are updated by the NumPy loop as they come."""
    fits = _k.optim_fits
    for p in group["params"]:
        grad = p.grad
        if grad is None:
            continue
        d, g = p._data, grad._data
        if fits(d, g):
            yield p, grad, d, g
        else:
            _one(opt, p, group)


def adam_group(opt, group) -> bool:
    """Adam/AdamW (amsgrad, L2 or decoupled weight decay, maximize) over ``group``."""
    lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
    if not _numbers(lr, b1, b2, eps, wd) or not _k.optim_ready():
        return False
    amsgrad, maximize = bool(group["amsgrad"]), bool(group["maximize"])
    decoupled = group.get("decoupled_weight_decay", False)
    decay, l2 = (1 - lr * wd, 0.0) if decoupled and wd != 0 else (1.0, wd)
    w1, w2 = 1 - b1, 1 - b2
    fits, update = _k.optim_fits, _k.adam_update
    state = opt.state
    for p, _, d, g in _plain(opt, group):
        st = state[p]
        if not st:
            opt._start_state(p, group)
        m, v = st["exp_avg"]._data, st["exp_avg_sq"]._data
        vmax = st["max_exp_avg_sq"]._data if amsgrad else None
        step_arr = st["step"]._data
        if not fits(d, m, v, vmax) or step_arr.shape != ():
            _one(opt, p, group)
            continue
        step_arr += 1
        step = float(step_arr)
        step_size = lr / (1 - b1 ** step)
        update(d, g, m, v, vmax, l2, decay, w1, b2, w2, -step_size, math.sqrt(1 - b2 ** step), eps, maximize)
        p._bump()
    return True


def sgd_group(opt, group) -> bool:
    """SGD (momentum, dampening, Nesterov, weight decay, maximize) over ``group``."""
    lr, mom, damp, wd = group["lr"], group["momentum"], group["dampening"], group["weight_decay"]
    if not _numbers(lr, mom, damp, wd) or not _k.optim_ready():
        return False
    nesterov, maximize = bool(group["nesterov"]), bool(group["maximize"])
    fits, update = _k.optim_fits, _k.sgd_update
    state = opt.state
    for p, grad, d, g in _plain(opt, group):
        buf, w = None, 1 - damp
        if mom != 0:
            st = state[p]
            b = st.get("momentum_buffer")
            if b is None:
                # the first step's buffer is the gradient itself: zeros updated with weight 1 (no dampening)
                st["momentum_buffer"] = b = wrap(np.zeros_like(g), grad._dtype)
                w = 1.0
            buf = b._data
        if buf is not None and not fits(d, buf):
            _one(opt, p, group)
            continue
        update(d, g, buf, wd, mom, w, nesterov, -lr, maximize)
        p._bump()
    return True
