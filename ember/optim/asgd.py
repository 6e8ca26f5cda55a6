"""ASGD (averaged stochastic gradient descent), torch's update rule."""
from __future__ import annotations

from ..dtypes import get_default_dtype
from ..tensor import Tensor
from .optimizer import Optimizer, _check_options, _scalar_step, _to_scalar

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """ASGD as ``torch.optim.ASGD``.

    State per parameter: ``step``, ``eta``, ``mu`` (float32 0-dim tensors) and ``ax`` (the average).
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        _check_options(lr=lr, weight_decay=weight_decay)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state.get(p)
                if st:
                    for k in ("eta", "mu"):
                        if k in st and not isinstance(st[k], Tensor):
                            st[k] = _scalar_step(float(st[k]))

    def _step_group(self, group):
        lr = _to_scalar(group["lr"])
        lambd, alpha, t0, wd = group["lambd"], group["alpha"], group["t0"], group["weight_decay"]
        maximize = group["maximize"]
        state = self.state
        default_np = get_default_dtype().np.type
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            st = state[p]
            if len(st) == 0:
                st["step"] = _scalar_step(0.0)
                st["eta"] = _scalar_step(lr)
                st["mu"] = _scalar_step(1.0)
                st["ax"] = self._zeros_state(p)
            d = p._data
            g = grad._data
            if maximize:
                g = -g
            step_arr = st["step"]._data
            step_arr += 1
            if wd != 0:
                g = g + d * wd
            eta_arr, mu_arr = st["eta"]._data, st["mu"]._data
            eta = float(eta_arr)
            d *= 1 - lambd * eta
            d -= g * eta                           # param.add_(grad, alpha=-eta)
            ax = st["ax"]._data
            if float(mu_arr) != 1:
                # (param - ax) * mu with mu a 0-dim tensor: computed in the parameter's dtype
                t = d - ax
                t *= mu_arr.astype(t.dtype)
                ax += t
            else:
                ax[...] = d
            step = float(step_arr)
            # torch builds the new values as default-dtype tensors before copying them into the state
            eta_arr[...] = default_np(lr / ((1 + lambd * lr * step) ** alpha))
            mu_arr[...] = default_np(1 / max(1, step - t0))
            p._bump()
