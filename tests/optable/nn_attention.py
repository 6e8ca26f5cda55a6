"""Oracle cases for the recurrent-layer ops (ember/nn/modules/rnn.py: rnn_layer, lstm_layer, gru_layer and
their backward ops) and attention (ember/nn/functional/attention.py).

One layer in one direction is compared with torch's fused kernels (``torch.rnn_tanh``, ``torch.lstm``,
``torch.gru``); the reverse direction with torch run on the time-flipped sequence. The float64
``double_backward`` runs go through the ember-op recomputation used under ``create_graph=True``.
"""
import torch

from oracle import Case

torch.set_num_threads(1)   # tiny tensors: torch's thread pool only adds contention

T, B, I, H, P = 4, 3, 5, 6, 2


def _torch_layer(m, kind, x, h0, c0, weights, reverse):
    if reverse:
        x = m.flip(x, [0])
    if kind == "lstm":
        out, h_n, c_n = m.lstm(x, (h0[None], c0[None]), weights, len(weights) > 3, 1, 0.0, False, False, False)
    else:
        fn = {"tanh": m.rnn_tanh, "relu": m.rnn_relu, "gru": m.gru}[kind]
        out, h_n = fn(x, h0[None], weights, len(weights) > 2, 1, 0.0, False, False, False)
        c_n = None
    if reverse:
        out = m.flip(out, [0])
    return out, h_n[0], (None if c_n is None else c_n[0])


def _layer(kind, reverse=False, bias=True, proj=False):
    def fn(m, x, h0, *rest):
        if kind == "lstm":
            c0, rest = rest[0], rest[1:]
        else:
            c0 = None
        w_ih, w_hh = rest[0], rest[1]
        b_ih, b_hh = (rest[2], rest[3]) if bias else (None, None)
        w_hr = rest[-1] if proj else None
        if m.__name__ == "torch":
            weights = [w for w in (w_ih, w_hh, b_ih, b_hh, w_hr) if w is not None]
            out, h_n, c_n = _torch_layer(m, kind, x, h0, c0, weights, reverse)
        else:
            from ember.nn.functional.recurrent import run_layer as _run_layer
            mode = {"tanh": "RNN_TANH", "relu": "RNN_RELU", "gru": "GRU", "lstm": "LSTM"}[kind]
            out, h_n, c_n = _run_layer(mode, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse)
        return (out, h_n) if c_n is None else (out, h_n, c_n)
    return fn


def _shapes(kind, bias=True, proj=False):
    g = {"tanh": 1, "relu": 1, "gru": 3, "lstm": 4}[kind] * H
    ho = P if proj else H
    shapes = [(T, B, I), (B, ho)] + ([(B, H)] if kind == "lstm" else []) + [(g, I), (g, ho)]
    if bias:
        shapes += [(g,), (g,)]
    if proj:
        shapes.append((P, H))
    return tuple(shapes)


CASES = []
for _kind in ("tanh", "relu", "gru", "lstm"):
    for _rev in (False, True):
        CASES.append(Case(f"{_kind}_layer{'_reverse' if _rev else ''}", _layer(_kind, _rev), shapes=_shapes(_kind),
                          low=-1.0, high=1.0, double_backward=True))
    CASES.append(Case(f"{_kind}_layer_nobias", _layer(_kind, bias=False), shapes=_shapes(_kind, bias=False),
                      low=-1.0, high=1.0))
CASES.append(Case("lstm_layer_proj", _layer("lstm", proj=True), shapes=_shapes("lstm", proj=True),
                  low=-1.0, high=1.0, double_backward=True))
CASES.append(Case("lstm_layer_proj_reverse_nobias", _layer("lstm", True, bias=False, proj=True),
                  shapes=_shapes("lstm", bias=False, proj=True), low=-1.0, high=1.0))


# ---- scaled dot-product attention (the fused sdpa_softmax op) ---------------------------------------

import numpy as _np  # noqa: E402

_MASK_RNG = _np.random.default_rng(1)
_BOOL_LS = _MASK_RNG.random((4, 6)) < 0.6      # True = may attend
_BOOL_LS[:, 0] = True
_DEAD_ROW = _BOOL_LS.copy()
_DEAD_ROW[2] = False                            # a query that may attend to nothing: zeros in torch


def _sdpa(**kw):
    def fn(m, q, k, v, *mask):
        extra = dict(kw)
        if mask:
            extra["attn_mask"] = mask[0]
        elif "bool_mask" in extra:
            extra["attn_mask"] = m.tensor(extra.pop("bool_mask"))
        return m.nn.functional.scaled_dot_product_attention(q, k, v, **extra)
    return fn


CASES += [
    Case("sdpa", _sdpa(), shapes=((2, 4, 8), (2, 6, 8), (2, 6, 5)), double_backward=True),
    Case("sdpa_4d_scale", _sdpa(scale=0.3), shapes=((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8))),
    Case("sdpa_2d", _sdpa(), shapes=((4, 8), (6, 8), (6, 3))),
    Case("sdpa_bool_mask", _sdpa(bool_mask=_BOOL_LS), shapes=((2, 4, 8), (2, 6, 8), (2, 6, 5)),
         double_backward=True),
    Case("sdpa_bool_mask_dead_row", _sdpa(bool_mask=_DEAD_ROW), shapes=((3, 4, 8), (3, 6, 8), (3, 6, 5))),
    Case("sdpa_float_mask", _sdpa(), shapes=((2, 4, 8), (2, 6, 8), (2, 6, 5), (4, 6)), double_backward=True),
    Case("sdpa_float_mask_broadcast", _sdpa(), shapes=((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), (2, 1, 4, 6))),
    Case("sdpa_causal", _sdpa(is_causal=True), shapes=((2, 5, 8), (2, 5, 8), (2, 5, 4)), double_backward=True),
    Case("sdpa_causal_rect", _sdpa(is_causal=True), shapes=((2, 3, 8), (2, 6, 8), (2, 6, 4))),
    Case("sdpa_causal_rect_tall", _sdpa(is_causal=True), shapes=((2, 6, 8), (2, 3, 8), (2, 3, 4))),
    Case("sdpa_gqa", _sdpa(enable_gqa=True), shapes=((2, 6, 4, 8), (2, 2, 5, 8), (2, 2, 5, 8))),
    Case("sdpa_broadcast_batch", _sdpa(), shapes=((2, 3, 4, 8), (1, 3, 6, 8), (3, 6, 8))),
]


def _mha_fn(need_weights, average=True, masks=False):
    def fn(m, q, k, v, w_in, b_in, w_out, b_out):
        kw = {}
        if masks:
            kw["attn_mask"] = m.tensor(~_BOOL_LS)
            kw["key_padding_mask"] = m.tensor(_np.array([[False] * 5 + [True]] * 3))
        return m.nn.functional.multi_head_attention_forward(
            q, k, v, 8, 2, w_in, b_in, None, None, False, 0.0, w_out, b_out, training=True,
            need_weights=need_weights, average_attn_weights=average, **kw)
    return fn


_MHA_SHAPES = ((4, 3, 8), (6, 3, 8), (6, 3, 8), (24, 8), (24,), (8, 8), (8,))
CASES += [
    Case("mha_forward_weights", _mha_fn(True), shapes=_MHA_SHAPES, low=-1.0, high=1.0),
    Case("mha_forward_weights_per_head_masked", _mha_fn(True, False, True), shapes=_MHA_SHAPES, low=-1.0, high=1.0),
    # (no double backward: torch's CPU flash-attention kernel has no second derivative)
    Case("mha_forward_sdpa_masked", _mha_fn(False, masks=True), shapes=_MHA_SHAPES, low=-1.0, high=1.0),
]
