"""The Adam/AdamW parameter update as one op, ``adam_update``, and torch's ``_fused_adam_`` /
``_fused_adamw_`` on it.

Why an op: while ``ember.compile`` traces a training step, the optimizer's update used to be recorded as
about 20 elementwise ops per parameter (the small GPT's AdamW step: ~1000 of the trace's nodes). Each
recorded op costs the trace, the plan cache's key and file, and the interpreter that runs a large graph
while its C builds. ``compiler/optim_capture.py`` records this one op per parameter instead (plus the
step count's ``add_`` and three writes); ``compiler/decompose_optim.py`` turns it back into the same
elementwise primitives, so the generated C fuses it as before.

The arithmetic is that of the per-op capture it replaces, in the same order and dtypes (float32 on the
tensors, float64 for the bias corrections from the step count), which is torch's single-tensor Adam.
``step`` is the step count already advanced (as torch's fused kernels take ``state_steps``).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from .registry import register, apply, attach


def adam_update_arrays(p, g, m, v, step, lr, beta1, beta2, eps, weight_decay, decoupled):
    """(new param, new exp_avg, new exp_avg_sq) as NumPy arrays; the inputs are not written."""
    with np.errstate(all="ignore"):
        if weight_decay != 0:
            if decoupled:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + p * weight_decay
        w = 1 - beta1                               # exp_avg.lerp_(grad, 1 - beta1)
        diff = g - m
        m = m + w * diff if abs(w) < 0.5 else g - diff * (1 - w)
        v = v * beta2                               # exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        v = v + ((1 - beta2) * g) * g
        s = np.asarray(step, dtype=np.float64)
        bc1 = np.subtract(1, np.power(beta1, s))
        bc2 = np.subtract(1, np.power(beta2, s))
        dt = p.dtype
        denom = np.sqrt(v) / np.sqrt(bc2).astype(dt) + eps
        p = p - (m / denom) * np.divide(lr, bc1).astype(dt)
    return np.asarray(p), np.asarray(m), np.asarray(v)


def _kernel(p, g, m, v, step, *, lr, beta1, beta2, eps, weight_decay, decoupled):
    return adam_update_arrays(p, g, m, v, step, lr, beta1, beta2, eps, weight_decay, decoupled)


ADAM_UPDATE = register("adam_update", _kernel, differentiable=False, nout=3)


def _settings(lr, beta1, beta2, eps, weight_decay, decoupled) -> dict:
    return {"lr": float(lr), "beta1": float(beta1), "beta2": float(beta2), "eps": float(eps),
            "weight_decay": float(weight_decay), "decoupled": bool(decoupled)}


def adam_update_(p: Tensor, g: Tensor, m: Tensor, v: Tensor, step: Tensor, settings: dict) -> None:
    """One parameter's update in place: ``p``, ``m`` (exp_avg) and ``v`` (exp_avg_sq) are written (as
    in-place writes a capturing compiler records), ``step`` (already advanced) is read."""
    from .inplace import write_result
    new = apply(ADAM_UPDATE, (p, g, m, v, step), settings)
    for target, value in zip((p, m, v), new):
        write_result(target, lambda _t, value=value: value, "adam_update")


def _fused(name, decoupled):
    def fused(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1, beta2,
              weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
        if amsgrad:
            raise NotImplementedError(f"{name}: amsgrad=True is not supported yet (supported: amsgrad=False)")
        if grad_scale is not None or found_inf is not None:
            raise NotImplementedError(f"{name}: grad_scale and found_inf are not supported yet (supported: None)")
        lists = (params, grads, exp_avgs, exp_avg_sqs, state_steps)
        n = len(params)
        if any(len(x) != n for x in lists):
            raise RuntimeError(f"{name}: the tensor lists must have the same length, got "
                               f"{[len(x) for x in lists]}")
        settings = _settings(lr, beta1, beta2, eps, weight_decay, decoupled)
        for p, g, m, v, s in zip(*lists):
            if not (p._data.shape == g._data.shape == m._data.shape == v._data.shape):
                raise RuntimeError(f"{name}: param, grad, exp_avg and exp_avg_sq must have one shape, got "
                                   f"{[tuple(t.shape) for t in (p, g, m, v)]}")
            if not p._dtype.is_floating_point or p._dtype in (_dt.float16, _dt.bfloat16):
                raise RuntimeError(f"{name}: parameters must be float32 or float64, got {p._dtype}")
            adam_update_(p, -g if maximize else g, m, v, s, settings)
        return None
    fused.__name__ = fused.__qualname__ = name
    return fused


_fused_adam_ = attach("_fused_adam_", _fused("_fused_adam_", False), method=False)
_fused_adamw_ = attach("_fused_adamw_", _fused("_fused_adamw_", True), method=False)
