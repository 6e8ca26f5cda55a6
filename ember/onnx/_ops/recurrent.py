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


@conv("lstm_layer")
def _lstm(b, node, node2):
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = node.inputs[:7]
    w_hr = node.inputs[7] if len(node.inputs) > 7 else None
    if w_hr is not None:
        raise _unsupported(b, node, "LSTM with proj_size")
    direction = _rnn_common(b, node)
    H = w_hh.shape[1]
    order = (0, 3, 1, 2)                       # torch i, f, g, o -> ONNX i, o, f, c
    W, R = _gates(b, w_ih, order, 4), _gates(b, w_hh, order, 4)
    B = _rnn_bias(b, b_ih, b_hh, order, 4, H, x.dtype.np)
    y, _, yc = b.op("LSTM", [b.name(x), W, R, B, "", b.unsqueeze(b.name(h0), [0]), b.unsqueeze(b.name(c0), [0])],
                    n_out=3, hidden_size=H, direction=direction)
    _out(b, node, b.squeeze(y, [1]), 0)
    _out(b, node, b.squeeze(yc, [0]), 1)


@conv("gru_layer")
def _gru(b, node, node2):
    x, h0, w_ih, w_hh, b_ih, b_hh = node.inputs[:6]
    direction = _rnn_common(b, node)
    H = w_hh.shape[1]
    order = (1, 0, 2)                          # torch r, z, n -> ONNX z, r, h
    W, R = _gates(b, w_ih, order, 3), _gates(b, w_hh, order, 3)
    B = _rnn_bias(b, b_ih, b_hh, order, 3, H, x.dtype.np)
    y, _ = b.op("GRU", [b.name(x), W, R, B, "", b.unsqueeze(b.name(h0), [0])], n_out=2, hidden_size=H,
                direction=direction, linear_before_reset=1)
    _out(b, node, b.squeeze(y, [1]), 0)


@conv("rnn_layer")
def _rnn(b, node, node2):
    x, h0, w_ih, w_hh, b_ih, b_hh = node.inputs[:6]
    direction = _rnn_common(b, node)
    H = w_hh.shape[1]
    act = "Relu" if node.attrs.get("nonlinearity") == "relu" else "Tanh"
    W, R = _gates(b, w_ih, (0,), 1), _gates(b, w_hh, (0,), 1)
    B = _rnn_bias(b, b_ih, b_hh, (0,), 1, H, x.dtype.np)
    y, _ = b.op("RNN", [b.name(x), W, R, B, "", b.unsqueeze(b.name(h0), [0])], n_out=2, hidden_size=H,
                direction=direction, activations=[act])
    _out(b, node, b.squeeze(y, [1]), 0)
