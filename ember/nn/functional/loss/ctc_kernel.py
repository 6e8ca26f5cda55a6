"""The CTC recursions in NumPy: the kernels of the ``ctc_loss`` op (per-sample negative log-likelihood)
and of its derivative ``ctc_loss_backward``.

``ctc_loss`` is ONE op (a node of its own under ``ember.compile``, an extern step between native
segments): its output's shape (N,) does not depend on the sequence length T nor on the target lengths,
whose values only the kernel reads, so one compiled program serves every length.

Both recursions run over the extended label sequence ``blank, l1, blank, l2, ..., blank`` (S = 2L + 1)
in log space, in float64 whatever the input dtype, vectorised over the batch and the S states. Impossible
states carry ``NEG``, a finite "log 0", so sums of them stay finite. The gradient is taken with respect
to the log-probabilities as free inputs (``-exp(alpha + beta - lp + nll)`` summed over the states
labelled with each class), what differentiating the recursion itself gives: it matches torch's once
the input went through ``log_softmax``.
"""
from __future__ import annotations

import numpy as np

NEG = -1e30          # "impossible" log-probability: finite, so logsumexp's gradient stays finite


def _padded_targets(targets, tgt_len, N):
    """(N, max(L, 1)) int64 rows from padded (N, S) or concatenated 1-D targets; RuntimeError (torch's
    message) when a target length passes a padded row's width."""
    L = int(tgt_len.max(initial=0))
    if targets.ndim == 1:
        out = np.zeros((N, max(L, 1)), np.int64)
        offs = np.concatenate([[0], np.cumsum(tgt_len)])
        if offs[-1] > targets.shape[0]:
            raise RuntimeError(f"ctc_loss: the target lengths add up to {int(offs[-1])}, but the concatenated "
                               f"targets have {targets.shape[0]} elements")
        for b in range(N):
            out[b, :tgt_len[b]] = targets[offs[b]:offs[b + 1]]
        return out
    if L > targets.shape[1]:
        raise RuntimeError(f"Expected tensor to have size at least {L} at dimension 1, but got size "
                           f"{targets.shape[1]} for argument #2 'targets' (while checking arguments for "
                           "ctc_loss_allocate_outputs)")
    return targets[:, :max(L, 1)].astype(np.int64) if L else np.zeros((N, 1), np.int64)


def _setup(lp, targets, in_len, tgt_len, blank):
    """The extended labels (N, S), which states are valid / may be entered from two states back, and
    the log-probabilities of each state's label (T, N, S), in float64."""
    T, N, _ = lp.shape
    in_len = np.asarray(in_len, np.int64).reshape(-1)
    tgt_len = np.asarray(tgt_len, np.int64).reshape(-1)
    if N and int(in_len.max()) > T:
        raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {int(in_len.max())} "
                           "(while checking arguments for ctc_loss_allocate_outputs)")
    tg = _padded_targets(np.asarray(targets), tgt_len, N)
    L = int(tgt_len.max(initial=0))
    S = 2 * L + 1
    ext = np.full((N, S), blank, np.int64)
    ext[:, 1::2] = tg[:, :L]
    pos = np.arange(S)
    valid = pos[None, :] < (2 * tgt_len + 1)[:, None]
    skip = np.zeros((N, S), bool)
    if S > 2:
        skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    skip &= valid
    emit = np.take_along_axis(lp.astype(np.float64, copy=False), np.broadcast_to(ext[None], (T, N, S)), 2)
    return ext, valid, skip, emit, in_len, tgt_len


def _lse3(a, b, c):
    m = np.maximum(np.maximum(a, b), c)
    return m + np.log(np.exp(a - m) + np.exp(b - m) + np.exp(c - m))


def _shift(a, k):
    out = np.full_like(a, NEG)
    out[:, k:] = a[:, :a.shape[1] - k]
    return out


def _alphas(emit, valid, skip, in_len):
    """alpha[t, n, s]: log-probability of the prefixes ending in state s at step t (frozen after a
    sample's input length)."""
    T = emit.shape[0]
    alpha = np.empty(emit.shape)
    a = np.where((np.arange(emit.shape[2]) < 2)[None, :] & valid, emit[0], NEG)
    alpha[0] = a
    for t in range(1, T):
        new = _lse3(a, _shift(a, 1), np.where(skip, _shift(a, 2), NEG)) + emit[t]
        new = np.where(valid, new, NEG)
        a = np.where((t < in_len)[:, None], new, a)
        alpha[t] = a
    return alpha


def _nll(alpha_last, tgt_len):
    n = np.arange(alpha_last.shape[0])
    a_last = alpha_last[n, 2 * tgt_len]
    a_before = np.where(tgt_len > 0, alpha_last[n, np.maximum(2 * tgt_len - 1, 0)], NEG)
    return -np.logaddexp(a_last, a_before)


def ctc_nll_kernel(lp, targets, in_len, tgt_len, blank=0, zero_infinity=False):
    """Per-sample negative log-likelihood (N,) of ``lp`` (T, N, C); infinite (0 with ``zero_infinity``)
    where no alignment exists."""
    T, N, _ = lp.shape
    if N == 0:
        return np.zeros(0, lp.dtype)
    _, valid, skip, emit, in_len, tgt_len = _setup(lp, targets, in_len, tgt_len, blank)
    nll = _nll(_alphas(emit, valid, skip, in_len)[-1], tgt_len)
    nll = np.where(nll > -NEG / 2, 0.0 if zero_infinity else np.inf, nll)
    return nll.astype(lp.dtype)


def ctc_grad_kernel(grad, lp, targets, in_len, tgt_len, blank=0, zero_infinity=False):
    """d(sum_n grad[n] * nll[n]) / d lp (T, N, C); zero for the steps past a sample's input length. A
    sample with no alignment has an infinite loss and, as in torch, NaN gradients for its input steps
    (whatever its incoming gradient); with ``zero_infinity`` its loss is 0 and its gradient 0."""
    T, N, C = lp.shape
    if N == 0:
        return np.zeros(lp.shape, lp.dtype)
    ext, valid, skip, emit, in_len, tgt_len = _setup(lp, targets, in_len, tgt_len, blank)
    alpha = _alphas(emit, valid, skip, in_len)
    nll = _nll(alpha[-1], tgt_len)
    S = ext.shape[1]
    # beta[t, n, s]: log-probability of the suffixes from state s at step t (emission at t included)
    beta = np.full(emit.shape, NEG)
    n = np.arange(N)
    steps = np.maximum(in_len, 1)               # (step 0 starts the recursion even for an empty input)
    last = steps - 1
    b = np.full((N, S), NEG)
    ends = np.zeros((N, S), bool)
    ends[n, 2 * tgt_len] = True
    ends[n, np.maximum(2 * tgt_len - 1, 0)] |= tgt_len > 0
    skip_next = np.zeros((N, S), bool)
    skip_next[:, :S - 2] = skip[:, 2:]          # s may go on to s + 2
    for t in range(T - 1, -1, -1):
        start = (t == last)[:, None]            # a sample's last input step: the beta recursion starts
        stepped = emit[t] + _lse3(b, _shift_left(b, 1), np.where(skip_next, _shift_left(b, 2), NEG))
        b = np.where(start, np.where(ends & valid, emit[t], NEG),
                     np.where(valid, stepped, NEG))
        b = np.where((t < steps)[:, None], b, NEG)
        beta[t] = b
    live = (np.arange(T)[:, None] < steps[None, :])[:, :, None] & valid[None]
    ok = nll < -NEG / 2
    live &= ok[None, :, None]
    g = np.exp(np.where(live, alpha + beta - emit + np.where(ok, nll, 0.0)[None, :, None], NEG))
    g *= -np.asarray(grad, np.float64).reshape(1, N, 1)
    flat = ((np.arange(T)[:, None, None] * N + n[None, :, None]) * C + ext[None]).ravel()
    out = np.bincount(flat, weights=g.ravel(), minlength=T * N * C).reshape(T, N, C)
    if not zero_infinity and not ok.all():
        out[(np.arange(T)[:, None] < in_len[None, :]) & ~ok[None, :]] = np.nan
    return out.astype(lp.dtype)


def _shift_left(a, k):
    out = np.full_like(a, NEG)
    out[:, :a.shape[1] - k] = a[:, k:]
    return out
