"""Recurrent layers: ONNX's LSTM / GRU / RNN with one direction; torch's gate blocks reordered to
ONNX's.
"""
from __future__ import annotations

import numpy as np

from ._registry import conv, _out, _unsupported


def _gates(b, v, order, nblocks):
    """Weights ``v`` (blocks of rows in torch's gate order) reordered to ONNX's, with a leading direction axis."""
    arr = b.const_value(v)
    if arr is not None:
        blocks = np.split(arr, nblocks, axis=0)
        return b.initializer(np.concatenate([blocks[i] for i in order], 0)[None], b.name(v) + "_onnx")
    H = v.shape[0] // nblocks
    idx = np.concatenate([np.arange(i * H, (i + 1) * H) for i in order])
    return b.unsqueeze(b.op("Gather", [b.name(v), b.ints(idx)], axis=0), [0])


def _rnn_bias(b, b_ih, b_hh, order, nblocks, hidden, dt):
    """ONNX's bias ``[1, 2 * nblocks * hidden]``: input biases then hidden biases, gates reordered."""
    present = [v for v in (b_ih, b_hh) if v is not None]
    if all(b.const_value(v) is not None for v in present):
        arrs = []
        for v in (b_ih, b_hh):
            if v is None:
                arrs.append(np.zeros(nblocks * hidden, dt))
            else:
                blocks = np.split(b.const_value(v), nblocks)
                arrs.append(np.concatenate([blocks[i] for i in order]))
        return b.initializer(np.concatenate(arrs)[None], "rnn_bias")
    parts = [b.const(np.zeros((1, nblocks * hidden), dt)) if v is None else _gates(b, v, order, nblocks)
             for v in (b_ih, b_hh)]
    return b.op("Concat", parts, axis=1)


def _rnn_common(b, node):
    a = node.attrs
    if a.get("batch_sizes") is not None:
        raise _unsupported(b, node, "a packed sequence")
    return "reverse" if a.get("reverse") else "forward"


def _layer(b, node, onnx_op, x, states, w_ih, w_hh, b_ih, b_hh, order, n_out, **attrs):
    """One ember recurrent layer as ONNX's ``onnx_op`` (gates reordered by ``order``, initial
    ``states`` given one direction axis); its output sequence is ember output 0; returns ONNX's outputs."""
    direction = _rnn_common(b, node)
    H = w_hh.shape[1]
    W, R = _gates(b, w_ih, order, len(order)), _gates(b, w_hh, order, len(order))
    B = _rnn_bias(b, b_ih, b_hh, order, len(order), H, x.dtype.np)
    outs = b.op(onnx_op, [b.name(x), W, R, B, ""] + [b.unsqueeze(b.name(s), [0]) for s in states], n_out=n_out,
                hidden_size=H, direction=direction, **attrs)
    _out(b, node, b.squeeze(outs[0], [1]), 0)
    return outs


@conv("lstm_layer")
def _lstm(b, node, node2):
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = node.inputs[:7]
    w_hr = node.inputs[7] if len(node.inputs) > 7 else None
    if w_hr is not None:
        raise _unsupported(b, node, "LSTM with proj_size")
    # torch's gates i, f, g, o -> ONNX's i, o, f, c
    _, _, yc = _layer(b, node, "LSTM", x, (h0, c0), w_ih, w_hh, b_ih, b_hh, (0, 3, 1, 2), 3)
    _out(b, node, b.squeeze(yc, [0]), 1)


@conv("gru_layer")
def _gru(b, node, node2):
    x, h0, w_ih, w_hh, b_ih, b_hh = node.inputs[:6]
    # torch's r, z, n -> ONNX's z, r, h
    _layer(b, node, "GRU", x, (h0,), w_ih, w_hh, b_ih, b_hh, (1, 0, 2), 2, linear_before_reset=1)


@conv("rnn_layer")
def _rnn(b, node, node2):
    x, h0, w_ih, w_hh, b_ih, b_hh = node.inputs[:6]
    act = "Relu" if node.attrs.get("nonlinearity") == "relu" else "Tanh"
    _layer(b, node, "RNN", x, (h0,), w_ih, w_hh, b_ih, b_hh, (0,), 2, activations=[act])
