"""Adam (amsgrad, L2 or decoupled weight decay, maximize), torch's update rule step by step; AdamW, the
decoupled-decay default, is in ``adamw.py`` as in torch."""
from __future__ import annotations

import math

import numpy as np

from ..tensor import Tensor
from . import _fused
from .optimizer import Optimizer, _check_fused, _check_options, _lerp_, _to_scalar

__all__ = ["Adam", "adam"]


def _check_betas(betas) -> tuple:
    b0, b1 = betas
    if not ((isinstance(b0, float) and isinstance(b1, float)) or (isinstance(b0, Tensor) and isinstance(b1, Tensor))):
        raise ValueError("betas must be either both floats or both Tensors")
    if isinstance(b0, Tensor) and b0.numel() != 1:
        raise ValueError("Tensor betas[0] must be 1-element")
    if isinstance(b1, Tensor) and b1.numel() != 1:
        raise ValueError("Tensor betas[1] must be 1-element")
    return (b0, b1)


def _moments(st: dict, g: np.ndarray, b1, b2) -> tuple:
    """Adam's moment estimates updated in place (``exp_avg.lerp_(grad, 1 - beta1)``,
    ``exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)``); returns both buffers.
    Shared by Adam/AdamW, NAdam and RAdam."""
    m = st["exp_avg"]._data
    v = st["exp_avg_sq"]._data
    _lerp_(m, g, 1 - b1)
    v *= b2
    v += g * (1 - b2) * g
    return m, v


class Adam(Optimizer):
    """Adam (Kingma & Ba) with optional AMSGrad, as ``torch.optim.Adam``.

    State per parameter: ``step`` (float32 0-dim tensor), ``exp_avg``, ``exp_avg_sq`` and, with amsgrad,
    ``max_exp_avg_sq``.
    """

    _group_fallbacks = dict(amsgrad=False, maximize=False, foreach=None, capturable=False, differentiable=False,
                            decoupled_weight_decay=False, fused=None)

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        if isinstance(lr, Tensor) and foreach and not capturable:
            raise ValueError("lr as a Tensor is not supported for capturable=False and foreach=True")
        _check_options(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        betas = _check_betas(betas)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)

    def _step_group(self, group):
        # float32 CPU parameters with real-number options: one native call per group (_fused.py)
        if type(self)._update is not Adam._update or not _fused.adam_group(self, group):
            super()._step_group(group)

    def _group_options(self, group):
        b1, b2 = (_to_scalar(b) for b in group["betas"])
        return _to_scalar(group["lr"]), b1, b2, group["eps"], group["amsgrad"]

    def _init_state(self, p, st, group):
        st["exp_avg"] = self._zeros_state(p)
        st["exp_avg_sq"] = self._zeros_state(p)
        if group["amsgrad"]:
            st["max_exp_avg_sq"] = self._zeros_state(p)

    def _update(self, p, d, g, st, step, opts):
        lr, b1, b2, eps, amsgrad = opts
        m, v = _moments(st, g, b1, b2)
        step_size = lr / (1 - b1 ** step)
        bc2_sqrt = math.sqrt(1 - b2 ** step)
        if amsgrad:
            mx = st["max_exp_avg_sq"]._data
            np.maximum(mx, v, out=mx)
            denom = np.sqrt(mx)
        else:
            denom = np.sqrt(v)
        denom /= bc2_sqrt
        denom += eps
        upd = m * -step_size                   # addcdiv_(exp_avg, denom, value=-step_size)
        upd /= denom
        d += upd


def adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, foreach=None, capturable=False,
         differentiable=False, fused=None, grad_scale=None, found_inf=None, has_complex=False,
         decoupled_weight_decay=False, *, amsgrad, beta1, beta2, lr, weight_decay, eps, maximize):
    """torch.optim.adam.adam: one Adam update of the given lists in place (``state_steps`` advanced), by
    ``Adam``'s own loop (``_functional_step``)."""
    from ._functional_step import check_steps, functional_step
    check_steps("adam", state_steps)
    if fused or grad_scale is not None or found_inf is not None:
        raise RuntimeError("adam: fused=True and grad_scale/found_inf (the fused CUDA path) are not supported by ember")
    states = []
    for i in range(len(params)):
        st = {"step": state_steps[i], "exp_avg": exp_avgs[i], "exp_avg_sq": exp_avg_sqs[i]}
        if amsgrad:
            st["max_exp_avg_sq"] = max_exp_avg_sqs[i]
        states.append(st)
    defaults = dict(lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                    maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                    fused=fused, decoupled_weight_decay=decoupled_weight_decay)
    functional_step(Adam, "adam", defaults, params, grads, states)
