"""Adafactor (factored second moments, relative step size), ``torch.optim.Adafactor``'s update rule.

For a parameter of 2+ dims the second moment is kept as a row factor (mean of squares over the last dim)
and a column factor (over the second-to-last dim), whose outer product over the row factor's mean
estimates it; a vector keeps it whole. Per step ``t``: ``beta2_t = 1 - t**beta2_decay``, the relative
step ``rho = min(lr, 1/sqrt(t))``, ``alpha = max(eps2, rms(param)) * rho`` (taken before weight decay,
which shrinks the parameter by ``1 - lr * wd``); the update ``grad / sqrt(max(v, eps1**2))`` is scaled
down by ``max(1, rms(update) / d)``.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..tensor import wrap
from .optimizer import Optimizer, _lerp_, _to_scalar

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """Adafactor as ``torch.optim.Adafactor``. State per parameter: ``step`` and ``row_var``/``col_var``
    (2+ dims, shaped like the parameter with the last / second-to-last dim 1) or ``variance``."""

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        if hasattr(lr, "numel") and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def _init_state(self, p, st, group):
        g = p.grad._data
        if g.ndim > 1:
            st["row_var"] = wrap(np.zeros(g.shape[:-1] + (1,), g.dtype), p.grad._dtype)
            st["col_var"] = wrap(np.zeros(g.shape[:-2] + (1, g.shape[-1]), g.dtype), p.grad._dtype)
        else:
            st["variance"] = wrap(np.zeros_like(g), p.grad._dtype)

    def _step_group(self, group):
        lr = _to_scalar(group["lr"])
        beta2_decay, d, wd = group["beta2_decay"], group["d"], group["weight_decay"]
        eps1, eps2 = group["eps"]
        params = [p for p in group["params"] if p.grad is not None]
        for p in params:
            if p._dtype.is_complex:
                raise RuntimeError("Adafactor does not support complex parameters")
            if getattr(p.grad, "is_sparse", False):
                raise RuntimeError("Adafactor does not support sparse gradients")
        for p in params:
            data = p._data
            if type(data) is not np.ndarray:
                self._step_on_host(p, group)
                continue
            g = p.grad._data
            if group["maximize"]:
                g = -g
            st = self.state[p]
            if not st:
                self._start_state(p, group)
            if eps1 is None:        # (torch takes it from the first parameter's dtype for the whole group)
                eps1 = float(_dt.finfo(p._dtype).eps)
            step_arr = st["step"]._data
            step_arr += 1
            t = float(step_arr)
            beta = t ** beta2_decay
            rho = min(lr, 1 / t ** 0.5)
            alpha = max(eps2, _rms(data)) * rho
            if wd != 0:
                data *= 1 - lr * wd
            if g.ndim > 1:
                rv, cv = st["row_var"]._data, st["col_var"]._data
                sq = g * g
                _lerp_(rv, np.mean(sq, axis=-1, keepdims=True, dtype=g.dtype), beta)
                _lerp_(cv, np.mean(sq, axis=-2, keepdims=True, dtype=g.dtype), beta)
                v = np.matmul(rv, cv)
                v /= np.maximum(np.mean(rv, axis=-2, keepdims=True, dtype=g.dtype), eps1)
            else:
                var = st["variance"]._data
                _lerp_(var, g * g, beta)
                v = var.copy()
            upd = np.asarray(g / np.sqrt(np.maximum(v, eps1 * eps1)))
            denom = max(1.0, _rms(upd) / d)
            data += (upd * (-alpha / denom)).astype(data.dtype, copy=False)
            p._bump()


Adafactor.__module__ = "ember.optim"     # (torch defines it in torch/optim/_adafactor.py and sets the same)


def _rms(a: np.ndarray) -> float:
    """The root mean square of ``a``'s entries (``a.norm(2) / sqrt(numel)``)."""
    if a.size == 0:
        return 0.0
    f = a.reshape(-1).astype(np.float64, copy=False)
    return math.sqrt(float(np.dot(f, f))) / math.sqrt(a.size)
