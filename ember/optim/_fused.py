"""One native call per param group for the eager Adam/AdamW and SGD steps (``ember._native``'s ``adam_many``
and ``sgd_many`` kernels: one pass per parameter), where the update is the plain float32 CPU case: options
given as real numbers (Python or NumPy scalars) and every buffer a C-contiguous float32 ndarray of the
parameter's shape.

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
_NP_NUMBERS = (np.floating, np.integer)


def _numbers(*values):
    """The options as Python floats, or None when one is not a real number (a tensor, a bool, a complex):
    the NumPy loop handles those. NumPy scalars (what a scheduler's arithmetic can leave in ``lr``) count."""
    out = []
    for v in values:
        t = type(v)
        if t is float:
            out.append(v)
        elif t is int or isinstance(v, _NP_NUMBERS):
            out.append(float(v))
        else:
            return None
    return out


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


def _bump(params) -> None:
    for p in params:
        p._bump()


def adam_group(opt, group) -> bool:
    """Adam/AdamW (amsgrad, L2 or decoupled weight decay, maximize) over ``group``: one native call for
    the parameters that fit."""
    b1, b2 = group["betas"]
    nums = _numbers(group["lr"], b1, b2, group["eps"], group["weight_decay"])
    if nums is None or not _k.optim_ready():
        return False
    lr, b1, b2, eps, wd = nums
    amsgrad, maximize = bool(group["amsgrad"]), bool(group["maximize"])
    decoupled = group.get("decoupled_weight_decay", False)
    decay, l2 = (1 - lr * wd, 0.0) if decoupled and wd != 0 else (1.0, wd)
    fits, ptr = _k.optim_fits, _k.pointer()
    state = opt.state
    done, ptrs, sizes, ssn, bc2s = [], [], [], [], []
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
        ptrs += (ptr(d), ptr(g), ptr(m), ptr(v), 0 if vmax is None else ptr(vmax))
        sizes.append(d.size)
        ssn.append(-(lr / (1 - b1 ** step)))
        bc2s.append(math.sqrt(1 - b2 ** step))
        done.append(p)
    if done:
        _k.adam_many(ptrs, sizes, ssn, bc2s, l2, decay, 1 - b1, b2, 1 - b2, eps, maximize)
        _bump(done)
    return True


def sgd_group(opt, group) -> bool:
    """SGD (momentum, dampening, Nesterov, weight decay, maximize) over ``group``: one native call for the
    parameters that fit."""
    nums = _numbers(group["lr"], group["momentum"], group["dampening"], group["weight_decay"])
    if nums is None or not _k.optim_ready():
        return False
    lr, mom, damp, wd = nums
    nesterov, maximize = bool(group["nesterov"]), bool(group["maximize"])
    fits, ptr = _k.optim_fits, _k.pointer()
    state = opt.state
    done, ptrs, sizes, ws = [], [], [], []
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
        ptrs += (ptr(d), ptr(g), 0 if buf is None else ptr(buf))
        sizes.append(d.size)
        ws.append(w)
        done.append(p)
    if done:
        _k.sgd_many(ptrs, sizes, ws, wd, mom, nesterov, -lr, maximize)
        _bump(done)
    return True
