"""ember.compile captures the nn functions that used to compute tensors in NumPy from other tensors' values.

- attention: a boolean mask becomes its 0/-inf bias through a ``where`` op (``_canonical_mask`` for
  ``nn.MultiheadAttention`` / transformer layers, ``_mask_to_bias`` for ``scaled_dot_product_attention``);
- vision: ``affine_grid``'s base grid and ``interpolate`` / ``pad``'s resampling indices depend on sizes
  only (constants); ``grid_sample`` computes its pixel indices and in-image masks with ember ops;
- losses: cross entropy's double backward computes its target weights with ember ops; ``ctc_loss`` is
  one op whose kernel reads the lengths itself: no graph break, every call with other lengths replays;
- ``pack_padded_sequence`` / ``pad_packed_sequence`` read the lengths with ``tolist`` (a guarded graph
  break): a call with other lengths retraces instead of reusing the traced packing.

Each test compiles on the backends "eager", "aot_eager" and "inductor", checks that nothing falls back to
eager, that the graph breaks are only the expected guarded reads, and that values and gradients equal
eager ember's on a first input, on a second input with different values (a replay: it must not reuse
traced masks, indices or weights), and, where a guard is involved, on an input that fails the guard.
"""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler import counters
from ember.nn.utils import rnn as rnn_utils

from compile_support import BACKENDS, _reset, _t, _close, _compare_call  # noqa: F401  (_reset: autouse fixture)


def _compare(fn, calls, backend, *, params=(), breaks=0, replays=None, rtol=1e-5, atol=1e-6):
    """Run ``fn`` eagerly and compiled on each call's arrays (float arrays become leaves requiring grad),
    back-propagate a fixed random weighting of the differentiable outputs, and compare outputs and the
    gradients of the inputs and of ``params``. ``breaks``: the graph breaks each capture may have (guarded
    reads); ``replays``: how many calls must replay a captured graph (default: all but the first).
    Returns the eager outputs of each call."""
    params = list(params)
    rep = ember.compiler.explain(fn)(*[_t(a, a.dtype.kind == "f") for a in calls[0]])
    assert rep.compiled, rep.break_reasons
    assert rep.graph_break_count == breaks, rep.break_reasons
    cf = ember.compile(fn, backend=backend)
    results = [_compare_call(fn, cf, call, arrays, rtol, atol, params) for call, arrays in enumerate(calls)]
    assert counters["fallbacks"] == 0, counters["fallback_reasons"]
    captures = counters["captures"]
    assert counters["graph_breaks"] == breaks * captures
    want = len(calls) - 1 if replays is None else replays
    assert counters["replays"] - counters["guard_failures"] == want, counters["recompile_reasons"]
    return results


def _rng(seed):
    return np.random.default_rng(seed)


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- attention: boolean masks ----------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_multihead_attention_bool_masks(backend):
    """key_padding_mask and attn_mask as booleans (``_canonical_mask``): a replay with other masks masks
    other positions."""
    ember.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)

    def fn(x, kpm, am):
        return mha(x, x, x, key_padding_mask=kpm, attn_mask=am, need_weights=False)[0]

    calls = []
    for seed in (0, 1):
        r = _rng(seed)
        kpm = r.random((2, 5)) < 0.4
        kpm[:, 0] = False                      # every query keeps at least one key
        am = r.random((5, 5)) < 0.3
        np.fill_diagonal(am, False)
        calls.append([_f32(r, 2, 5, 8), kpm, am])
    assert (calls[0][1] != calls[1][1]).any() and (calls[0][2] != calls[1][2]).any()
    _compare(fn, calls, backend, params=mha.parameters())


@pytest.mark.parametrize("backend", BACKENDS)
def test_transformer_encoder_layer_padding_mask(backend):
    """A transformer layer with a boolean src_key_padding_mask (what seq2seq models pass)."""
    ember.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)

    def fn(x, pad):
        return layer(x, src_key_padding_mask=pad)

    calls = []
    for seed, lens in ((0, (6, 3, 4)), (1, (2, 6, 5))):
        pad = np.arange(6)[None, :] >= np.array(lens)[:, None]
        calls.append([_f32(_rng(seed), 3, 6, 8), pad])
    _compare(fn, calls, backend, params=layer.parameters())


@pytest.mark.parametrize("backend", BACKENDS)
def test_sdpa_bool_mask(backend):
    """scaled_dot_product_attention with a boolean "may attend" mask (``_mask_to_bias``)."""
    def fn(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    calls = []
    for seed in (0, 1):
        r = _rng(seed)
        mask = r.random((2, 4, 6)) < 0.6
        mask[..., 0] = True
        calls.append([_f32(r, 2, 4, 8), _f32(r, 2, 6, 8), _f32(r, 2, 6, 8), mask])
    _compare(fn, calls, backend)


# ---- vision: affine_grid, grid_sample, interpolate, pad --------------------------------------------------

def _thetas(n, seed):
    r = _rng(seed)
    base = np.tile(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], np.float32), (n, 1, 1))
    return (base + 0.4 * r.standard_normal((n, 2, 3))).astype(np.float32)   # some points leave the image


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode,padding", [("bilinear", "zeros"), ("bilinear", "border"),
                                          ("bilinear", "reflection"), ("nearest", "zeros")])
def test_affine_grid_grid_sample(mode, padding, backend):
    """A spatial transformer: the base grid is a constant, the sampled pixels follow the new theta."""
    def fn(x, theta):
        grid = F.affine_grid(theta, tuple(x.shape), align_corners=False)
        return F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=False)

    calls = [[_f32(_rng(s), 2, 3, 5, 6), _thetas(2, s + 10)] for s in (0, 1)]
    _compare(fn, calls, backend, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_affine_grid_3d(backend):
    def fn(theta):
        return F.affine_grid(theta, (2, 1, 3, 4, 5), align_corners=True)

    calls = [[(np.eye(3, 4, dtype=np.float32) + 0.3 * _f32(_rng(s), 2, 3, 4))] for s in (0, 1)]
    _compare(fn, calls, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_interpolate_and_pad_indices_are_constants(backend):
    """Resampling indices and weights depend on sizes only: captured as constants, no break."""
    def fn(x):
        a = F.interpolate(x, scale_factor=0.5, mode="bilinear", align_corners=False)
        b = F.interpolate(x, size=(5, 7), mode="bicubic", align_corners=True)
        c = F.interpolate(x, scale_factor=2, mode="nearest")
        d = F.pad(x, (2, 1, 1, 2), mode="reflect")
        e = F.pad(x, (1, 1, 0, 2), mode="circular")
        return a, b, c, d, e

    _compare(fn, [[_f32(_rng(s), 2, 3, 6, 8)] for s in (0, 1)], backend, rtol=1e-4, atol=1e-5)


# ---- cross entropy's double backward ---------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_double_backward(reduction, weighted, backend):
    """The gradient of a cross-entropy gradient (``_ce_bw_bw``), w.r.t. the logits and the incoming
    gradient; the second call has other targets and another number of ignored positions (so another
    weight total for 'mean')."""
    w = ember.tensor([0.5, 1.5, 1.0, 2.0]) if weighted else None
    eps = 0.1 if weighted else 0.0

    def fn(x, t, s):
        loss = F.cross_entropy(x, t, weight=w, ignore_index=3, reduction=reduction, label_smoothing=eps)
        (g,) = ember.autograd.grad(loss, x, grad_outputs=s, create_graph=True)
        return (g * g).sum()

    calls = []
    for seed, t in ((0, [0, 3, 1, 2, 1, 0]), (1, [2, 2, 3, 3, 0, 1])):
        r = _rng(seed)
        s = _f32(r, 6) if reduction == "none" else np.array(1.0 + r.random(), np.float32)
        calls.append([_f32(r, 6, 4), np.array(t, np.int64), s])
    _compare(fn, calls, backend, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cross_entropy_double_backward_spatial(backend):
    """(N, C, d) logits and (N, d) targets, 'mean' with a different number of ignored positions per call;
    both derivatives are taken inside the function, so every backend captures ``_ce_bw_bw``."""
    def fn(x, t):
        loss = F.cross_entropy(x, t, ignore_index=0)
        (g,) = ember.autograd.grad(loss, x, create_graph=True)
        (gg,) = ember.autograd.grad(g.pow(2).sum(), x, create_graph=True)
        return gg

    calls = [[_f32(_rng(s), 2, 3, 4), _rng(s + 5).integers(0, 3, (2, 4)).astype(np.int64)] for s in (0, 1)]
    _compare(fn, calls, backend, rtol=1e-4, atol=1e-5)


# ---- CTC --------------------------------------------------------------------------------------------------

def _ctc_call(seed, T, N, C, in_len, tgt_len, width):
    r = _rng(seed)
    tg = np.zeros((N, width), np.int64)
    for b, n in enumerate(tgt_len):
        tg[b, :n] = r.integers(1, C, n)
    return [_f32(r, T, N, C), tg, np.array(in_len, np.int64), np.array(tgt_len, np.int64)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_ctc_loss_padded_targets(reduction, backend):
    """Padded targets: ``ctc_loss`` is one op reading the lengths in its kernel, so no graph break and
    every call replays: call 2 has other labels and lengths with the same maxima, call 3 an impossible
    alignment (zero_infinity), call 4 a longer target."""
    def fn(logits, tg, il, tl):
        return F.ctc_loss(logits.log_softmax(2), tg, il, tl, reduction=reduction, zero_infinity=True)

    T, N, C = 10, 3, 5
    calls = [_ctc_call(0, T, N, C, [10, 7, 9], [4, 2, 3], 5),
             _ctc_call(1, T, N, C, [8, 10, 6], [1, 4, 4], 5),
             _ctc_call(2, T, N, C, [10, 3, 9], [2, 4, 3], 5),     # sample 1: 4 labels in 3 frames
             _ctc_call(3, T, N, C, [10, 9, 9], [5, 2, 3], 5)]
    res = _compare(fn, calls, backend, rtol=1e-4, atol=1e-5)
    if reduction == "none":
        nll = res[2][0].detach().tolist()
        assert nll[1] == 0.0 and nll[0] > 0 and nll[2] > 0      # only the impossible sample is zeroed


@pytest.mark.parametrize("backend", BACKENDS)
def test_ctc_loss_concatenated_targets(backend):
    """Concatenated targets: the kernel splits the labels by the target lengths; a call with other
    labels, input lengths and target lengths (same total) replays."""
    def fn(logits, flat, il, tl):
        return F.ctc_loss(logits.log_softmax(2), flat, il, tl, reduction="sum")

    r0, r1 = _rng(0), _rng(1)
    calls = [[_f32(r0, 8, 2, 4), r0.integers(1, 4, 5).astype(np.int64), np.array([8, 6]), np.array([3, 2])],
             [_f32(r1, 8, 2, 4), r1.integers(1, 4, 5).astype(np.int64), np.array([7, 8]), np.array([1, 4])]]
    _compare(fn, calls, backend, rtol=1e-4, atol=1e-5)


# ---- packed sequences ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_pack_padded_sequence_lengths_are_guarded(backend):
    """pack -> elementwise on the packed data -> pad back. The lengths are read with ``tolist`` (and
    ``pad_packed_sequence`` reads the batch sizes): guarded breaks. Same lengths, other values: a replay;
    other lengths: a retrace with the right layout (not the traced packing)."""
    def fn(x, lengths):
        p = rnn_utils.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        q = rnn_utils.PackedSequence(p.data.tanh() * 2, p.batch_sizes, p.sorted_indices, p.unsorted_indices)
        padded, lens = rnn_utils.pad_packed_sequence(q, batch_first=True, total_length=5)
        return padded, lens, p.batch_sizes

    calls = [[_f32(_rng(0), 4, 5, 3), np.array([3, 5, 1, 4])],
             [_f32(_rng(1), 4, 5, 3), np.array([3, 5, 1, 4])],
             [_f32(_rng(2), 4, 5, 3), np.array([5, 2, 2, 3])]]
    res = _compare(fn, calls, backend, breaks=2, replays=1)
    assert res[2][1].tolist() == [5, 2, 2, 3] and res[2][2].tolist() == [4, 4, 2, 1, 1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_invert_permutation(backend):
    def fn(perm, x):
        inv = rnn_utils.invert_permutation(perm)
        return inv, x.index_select(0, perm).index_select(0, inv)

    calls = [[np.array([2, 0, 3, 1]), _f32(_rng(0), 4, 2)], [np.array([1, 3, 0, 2]), _f32(_rng(1), 4, 2)]]
    res = _compare(fn, calls, backend)
    assert res[1][0].tolist() == [2, 0, 3, 1]
