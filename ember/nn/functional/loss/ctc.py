"""Connectionist temporal classification loss (``ctc_loss``).

The per-sample negative log-likelihood is ONE registered op, ``ctc_loss`` (NumPy kernels in
``ctc_kernel.py``: the alpha recursion forward, alpha-beta for the derivative ``ctc_loss_backward``).
Under ``ember.compile`` it is a single node whose output shape (N,) depends on neither the sequence
length nor the target lengths, so lengths changing between calls replay one program (no Python loop over
time steps is traced, no length is read in Python). Under ``create_graph=True`` the derivative is the
recursion rebuilt with ember ops and differentiated by autograd, so it is itself differentiable.
"""
from __future__ import annotations


import numpy as np

from .... import dtypes as _dt
from ....tensor import Tensor
from ....autograd.grad_mode import GRAD
from ....ops.registry import register, apply
from ._common import _ember
from .ctc_kernel import NEG as _CTC_NEG, ctc_nll_kernel, ctc_grad_kernel, _padded_targets

__all__ = ["ctc_loss"]


def _lengths(v, name: str, n):
    """The lengths as an int64 tensor (n,)."""
    if isinstance(v, Tensor):
        t = v.reshape(-1)
        if t._dtype is not _dt.int64:
            t = t.long()
    else:
        t = _ember().tensor(np.asarray(v, dtype=np.int64).reshape(-1))
    if t.numel() != n:
        raise RuntimeError(f"ctc_loss: expected {name} to have {n} elements, but got {t.numel()}")
    return t


def _ctc_bw(ctx, g):
    lp, tg, in_len, tgt_len = ctx.inputs
    blank = ctx.attrs["blank"]
    if GRAD[0]:     # create_graph: differentiate the recursion written with ember ops
        alias = lp.view_as(lp)
        nll = _nll_graph(alias, tg, in_len, tgt_len, blank)
        return _ember().autograd.grad((nll,), (alias,), (g,), create_graph=True)[0], None, None, None
    return apply(CTC_LOSS_BW, (g, lp, tg, in_len, tgt_len),
                 {"blank": blank, "zero_infinity": ctx.attrs.get("zero_infinity", False)}), None, None, None


# shape rules (symbolic under ember.compile): (N,) and the log-probabilities' (T, N, C)
CTC_LOSS = register("ctc_loss", ctc_nll_kernel, _ctc_bw, save="i", fake=lambda lp, *_, **__: [lp.shape[1:2]])
CTC_LOSS_BW = register("ctc_loss_backward", ctc_grad_kernel, differentiable=False,
                       fake=lambda g, lp, *_, **__: [lp.shape])


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0, reduction: str = "mean",
             zero_infinity: bool = False) -> Tensor:
    """Connectionist Temporal Classification loss of ``log_probs`` (T, N, C) (or unbatched (T, C)) against
    label sequences ``targets`` (padded (N, S) or concatenated 1-D), summing over all alignments with the
    forward (alpha) recursion. The result equals torch's, and gradients agree once they pass through the
    usual ``log_softmax``."""
    if not isinstance(log_probs, Tensor):
        raise TypeError(f"ctc_loss(): argument 'log_probs' must be Tensor, not {type(log_probs).__name__}")
    if reduction not in ("none", "sum", "mean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    E = _ember()
    unbatched = log_probs._data.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    N = lp.shape[1]
    if isinstance(targets, Tensor):
        tg = targets if targets._dtype is _dt.int64 else targets.long()
    else:
        tg = E.tensor(np.asarray(targets, dtype=np.int64))
    if unbatched:
        tg = tg.reshape(1, -1)
    in_len = _lengths(input_lengths, "input_lengths", N)
    tgt_len = _lengths(target_lengths, "target_lengths", N)
    if lp.device.type != "cpu":     # (targets and lengths may come on the CPU, as torch allows)
        tg, in_len, tgt_len = (t.to(lp.device) for t in (tg, in_len, tgt_len))
    nll = apply(CTC_LOSS, (lp, tg, in_len, tgt_len), {"blank": int(blank), "zero_infinity": bool(zero_infinity)})
    if reduction == "none":
        return nll.squeeze(0) if unbatched else nll
    if reduction == "sum":
        return nll.sum()
    return (nll / tgt_len.clamp_min(1).to(lp._dtype)).mean()


def _nll_graph(lp, tg, in_len, tgt_len, blank, fill=0.0):
    """The per-sample negative log-likelihood with ember ops (the alpha recursion unrolled over time):
    what ``create_graph`` differentiates, and the ``ctc_loss`` kernels of a device (ember/devices/ctc.py).
    The labels and lengths are read here (their index tensors are made on the host and moved next to
    ``lp``); samples with no alignment give ``fill``, a constant (no gradient)."""
    E = _ember()
    T, N, _ = lp.shape
    dev = lp.device
    il, tl = (np.asarray(t.detach().cpu().numpy(), np.int64).reshape(-1) for t in (in_len, tgt_len))
    L = int(tl.max(initial=0))
    S = 2 * L + 1
    ext_np = np.full((N, S), blank, np.int64)
    ext_np[:, 1::2] = _padded_targets(np.asarray(tg.detach().cpu().numpy()), tl, N)[:, :L]
    valid_np = np.arange(S)[None, :] < (2 * tl + 1)[:, None]
    hop = np.zeros((N, S), bool)
    if S > 2:
        hop[:, 2:] = (ext_np[:, 2:] != blank) & (ext_np[:, 2:] != ext_np[:, :-2])

    def host(a):
        return E.tensor(a).to(dev)
    ext, valid, skip_t = host(ext_np), host(valid_np), host(hop & valid_np)
    running = host((il[None, :] > np.arange(T)[:, None])[:, :, None])                # (T, N, 1)
    neg = E.full((N, S), _CTC_NEG, dtype=lp._dtype, device=dev)
    alpha = E.where(host((np.arange(S) < 2)[None, :] & valid_np), lp[0].gather(1, ext), neg)
    for t in range(1, T):
        prev1 = E.cat([neg[:, :1], alpha[:, :-1]], 1)
        prev2 = E.where(skip_t, E.cat([neg[:, :2], alpha[:, :-2]], 1), neg) if S > 2 else neg
        new = E.where(valid, E.logsumexp(E.stack([alpha, prev1, prev2]), 0) + lp[t].gather(1, ext), neg)
        alpha = E.where(running[t], new, alpha)
    a_last = alpha.gather(1, host(2 * tl[:, None]))[:, 0]
    a_before = E.where(host(tl > 0), alpha.gather(1, host(np.maximum(2 * tl - 1, 0)[:, None]))[:, 0], neg[:, 0])
    nll = -E.logsumexp(E.stack([a_last, a_before]), 0)
    return E.where(nll > -_CTC_NEG / 2, E.full_like(nll, fill), nll)
