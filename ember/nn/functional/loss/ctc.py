"""Connectionist temporal classification loss (``ctc_loss``): the forward-backward recursion in log space.
"""
from __future__ import annotations

import math

import numpy as np

from .... import dtypes as _dt
from ....tensor import Tensor
from ._common import _ember

__all__ = ["ctc_loss"]


# ---- CTC -------------------------------------------------------------------------------------------------

_CTC_NEG = -1e30      # "impossible" log-probability: finite, so logsumexp's gradient stays finite


def _lengths(v, name: str, n: int):
    """The lengths as an int64 tensor (n,), and their values when they came as Python / NumPy data (None for
    a tensor: its values are read through ``tolist``, a guarded read under ``ember.compile``)."""
    if isinstance(v, Tensor):
        t, arr = v.reshape(-1), None
        if t._dtype is not _dt.int64:
            t = t.long()
    else:
        arr = np.asarray(v, dtype=np.int64).reshape(-1)
        t = _ember().tensor(arr)
    if t.numel() != n:
        raise RuntimeError(f"ctc_loss: expected {name} to have {n} elements, but got {t.numel()}")
    return t, arr


def _ctc_padded(tg: Tensor, tgt_len: np.ndarray, N: int) -> Tensor:
    """Concatenated 1-D targets split by ``target_lengths`` into (N, max(L, 1)) rows padded with 0: an
    index op whose positions depend on the lengths only (values Python already holds)."""
    offs = np.concatenate([[0], np.cumsum(tgt_len)])
    L = int(tgt_len.max(initial=0))
    src = np.full((N, max(L, 1)), -1, dtype=np.int64)        # position in ``tg``, -1 for padding
    pos = np.arange(tg.numel(), dtype=np.int64)
    for b in range(N):
        src[b, :tgt_len[b]] = pos[offs[b]:offs[b + 1]]
    E = _ember()
    if not tg.numel():
        return E.zeros(src.shape, dtype=_dt.int64)
    return E.where(E.tensor(src < 0), 0, tg[E.tensor(np.maximum(src, 0))])


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0, reduction: str = "mean",
             zero_infinity: bool = False) -> Tensor:
    """Connectionist Temporal Classification loss of ``log_probs`` (T, N, C) (or unbatched (T, C)) against
    label sequences ``targets`` (padded (N, S) or concatenated 1-D), summing over all alignments with the
    forward (alpha) recursion. Written with ember ops, so autograd gives the gradient; the result equals
    torch's, and gradients agree once they pass through the usual ``log_softmax``.

    The targets and lengths enter as tensors (a compiled replay recomputes everything from the ones it is
    given); only what sets shapes or raises errors is read in Python: the largest lengths (and, for
    concatenated targets, every target length), a guarded read under ``ember.compile``."""
    E = _ember()
    if not isinstance(log_probs, Tensor):
        raise TypeError(f"ctc_loss(): argument 'log_probs' must be Tensor, not {type(log_probs).__name__}")
    unbatched = log_probs._data.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    T, N, C = lp._data.shape
    if isinstance(targets, Tensor):
        tg = targets if targets._dtype is _dt.int64 else targets.long()
    else:
        tg = E.tensor(np.asarray(targets, dtype=np.int64))
    if unbatched:
        tg = tg.reshape(1, -1)
    in_len, in_arr = _lengths(input_lengths, "input_lengths", N)
    tgt_len, tgt_arr = _lengths(target_lengths, "target_lengths", N)
    concatenated = tg.ndim == 1
    # the values Python needs, in one read (one graph break): the max input length (checked against T) and
    # the target lengths (all of them to split concatenated targets, else their max: it sets the width of
    # the extended label sequence)
    reads = []
    if in_arr is None and N:
        reads.append(in_len.max().reshape(1))
    if tgt_arr is None and N:
        reads.append(tgt_len if concatenated else tgt_len.max().reshape(1))
    vals = (reads[0] if len(reads) == 1 else E.cat(reads)).tolist() if reads else []
    if in_arr is None and N:
        in_max, vals = vals[0], vals[1:]
    else:
        in_max = int(in_arr.max()) if N else 0
    if tgt_arr is None and concatenated:
        tgt_arr = np.asarray(vals, dtype=np.int64)
    tgt_max = int(tgt_arr.max(initial=0)) if tgt_arr is not None else (vals[0] if N else 0)
    if in_max > T:
        raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {in_max} "
                           "(while checking arguments for ctc_loss_allocate_outputs)")
    if concatenated:                      # concatenated targets: split them by target_lengths
        tg = _ctc_padded(tg, tgt_arr, N)
    elif tgt_max > tg.shape[1]:
        raise RuntimeError(f"Expected tensor to have size at least {tgt_max} at dimension 1, but got size "
                           f"{tg.shape[1]} for argument #2 'targets' (while checking arguments for "
                           "ctc_loss_allocate_outputs)")
    L = tgt_max
    S = 2 * L + 1
    # blank, l1, blank, l2, ..., blank
    blanks = E.full((N, L + 1), blank, dtype=_dt.int64)
    if L:
        ext = E.cat([E.stack([blanks[:, :L], tg[:, :L]], 2).reshape(N, 2 * L), blanks[:, L:]], 1)
    else:
        ext = blanks
    pos = E.arange(S)
    valid = pos < (tgt_len * 2 + 1).unsqueeze(1)                # (N, S)
    if S > 2:                                                   # may jump from s-2 to s
        hop = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
        skip_t = E.cat([E.zeros((N, 2), dtype=_dt.bool), hop], 1) & valid
    else:
        skip_t = E.zeros((N, S), dtype=_dt.bool)
    dt = lp._dtype
    neg = E.full((N, S), _CTC_NEG, dtype=dt)
    emit0 = lp[0].gather(1, ext)                                # (N, S)
    alpha = E.where((pos < 2) & valid, emit0, neg)
    running = (in_len > E.arange(T).unsqueeze(1)).unsqueeze(2)  # (T, N, 1): step t still inside input b
    for t in range(1, T):
        prev1 = E.cat([neg[:, :1], alpha[:, :-1]], 1)
        prev2 = E.cat([neg[:, :2], alpha[:, :-2]], 1) if S > 2 else neg
        prev2 = E.where(skip_t, prev2, neg)
        new = E.logsumexp(E.stack([alpha, prev1, prev2]), 0) + lp[t].gather(1, ext)
        new = E.where(valid, new, neg)
        alpha = E.where(running[t], new, alpha)
    last = (tgt_len * 2).unsqueeze(1)
    before = (tgt_len * 2 - 1).clamp_min(0).unsqueeze(1)
    a_last = alpha.gather(1, last).squeeze(1)
    a_before = alpha.gather(1, before).squeeze(1)
    a_before = E.where(tgt_len > 0, a_before, neg[:, 0])
    nll = -E.logsumexp(E.stack([a_last, a_before]), 0)
    impossible = nll > -_CTC_NEG / 2
    fill = 0.0 if zero_infinity else math.inf
    nll = E.where(impossible, E.full_like(nll, fill), nll)
    if reduction == "none":
        return nll.squeeze(0) if unbatched else nll
    if reduction == "sum":
        return nll.sum()
    if reduction == "mean":
        denom = tgt_len.clamp_min(1).to(dt)
        return (nll / denom).mean()
    raise ValueError(f"{reduction} is not a valid value for reduction")
