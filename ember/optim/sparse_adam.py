"""SparseAdam: Adam for sparse gradients (``nn.Embedding(sparse=True)``-style), ``torch.optim.SparseAdam``'s
update rule. Only the entries the (coalesced) gradient holds are touched: their moments move towards the
gradient's values and their parameter entries take the bias-corrected Adam step; the rest stay as they
are (no decay of untouched moments)."""
from __future__ import annotations

import math

import numpy as np

from ..tensor import wrap
from .optimizer import Optimizer, _to_scalar

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    """SparseAdam as ``torch.optim.SparseAdam``. State per parameter: ``step`` (an int, as torch's),
    ``exp_avg``, ``exp_avg_sq``."""

    _scalar_state = ()

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if hasattr(lr, "numel") and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        sparse, cplx = [], []
        for gi, group in enumerate(self.param_groups):
            for pi, p in enumerate(group["params"]):
                if p.is_sparse:
                    sparse.append([gi, pi])
                if p.is_complex():
                    cplx.append([gi, pi])
        if sparse:
            raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense parameter tensors")
        if cplx:
            raise ValueError(f"Complex params at indices {cplx}: SparseAdam does not support complex parameters")

    def _step_group(self, group):
        lr = _to_scalar(group["lr"])
        b1, b2 = group["betas"]
        eps = group["eps"]
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            if not grad.is_sparse:
                raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
            if type(p._data) is not np.ndarray:
                self._step_on_host(p, group)
                continue
            st = self.state[p]
            if not st:
                st["step"] = 0
                st["exp_avg"] = wrap(np.zeros_like(p._data), p._dtype)
                st["exp_avg_sq"] = wrap(np.zeros_like(p._data), p._dtype)
            st["step"] += 1
            step = st["step"]
            grad = grad.coalesce()          # the update is not linear: each entry once
            vals = grad.values()._data
            if group["maximize"]:
                vals = -vals
            if vals.size == 0:
                continue
            idx = tuple(grad.indices()._data)
            m, v = st["exp_avg"]._data, st["exp_avg_sq"]._data
            new_m = m[idx] + (vals - m[idx]) * (1 - b1)
            new_v = v[idx] + (vals * vals - v[idx]) * (1 - b2)
            m[idx] = new_m
            v[idx] = new_v
            step_size = lr * math.sqrt(1 - b2 ** step) / (1 - b1 ** step)
            p._data[idx] += (new_m / (np.sqrt(new_v) + eps) * -step_size).astype(p._data.dtype, copy=False)
            p._bump()
