"""The ``ctc_loss`` op and its derivative ``ctc_loss_backward`` on the device: the alpha recursion
written with ember ops on device tensors (``ctc._nll_graph``), every step device kernels; the derivative
differentiates that recursion with ember's autograd on the device. (The CPU kernels are NumPy,
``nn/functional/loss/ctc_kernel.py``.) Registered in ``dispatch.KERNELS`` by :func:`install`."""
from __future__ import annotations

import math

import ember as E
from ..tensor import Tensor, wrap
from ..autograd.grad_mode import no_grad, enable_grad
from ..nn.functional.loss.ctc import _nll_graph


def _t(a):
    return a if isinstance(a, Tensor) else wrap(a)


def _ctc_fwd(op, args, attrs):
    lp, tg, il, tl = (_t(a) for a in args)
    with no_grad():
        fill = 0.0 if attrs.get("zero_infinity", False) else math.inf
        return _nll_graph(lp, tg, il, tl, attrs.get("blank", 0), fill)._data


def _ctc_bw(op, args, attrs):
    g, lp, tg, il, tl = (_t(a) for a in args)
    with enable_grad():
        x = lp.detach().requires_grad_(True)
        nll = _nll_graph(x, tg, il, tl, attrs.get("blank", 0))
        (grad,) = E.autograd.grad((nll,), (x,), (g.detach(),))
    return grad._data


def install(kernels: dict) -> None:
    kernels.update({"ctc_loss": _ctc_fwd, "ctc_loss_backward": _ctc_bw})
