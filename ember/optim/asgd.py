"""ASGD (averaged stochastic gradient descent), torch's update rule."""
from __future__ import annotations

from ..dtypes import get_default_dtype
from .optimizer import Optimizer, _check_options, _scalar_step, _to_scalar

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """ASGD as ``torch.optim.ASGD``.

    State per parameter: ``step``, ``eta``, ``mu`` (float32 0-dim tensors) and ``ax`` (the average).
    """

    _scalar_state = ("step", "eta", "mu")

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        _check_options(lr=lr, weight_decay=weight_decay)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _group_options(self, group):
        return (_to_scalar(group["lr"]), group["lambd"], group["alpha"], group["t0"],
                get_default_dtype().np.type)

    def _init_state(self, p, st, group):
        st["eta"] = _scalar_step(_to_scalar(group["lr"]))
        st["mu"] = _scalar_step(1.0)
        st["ax"] = self._zeros_state(p)

    def _update(self, p, d, g, st, step, opts):
        lr, lambd, alpha, t0, default_np = opts
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
        # torch builds the new values as default-dtype tensors before copying them into the state
        eta_arr[...] = default_np(lr / ((1 + lambd * lr * step) ** alpha))
        mu_arr[...] = default_np(1 / max(1, step - t0))
