"""Recurrent layers: RNN (tanh/relu), LSTM (with optional projection), GRU, and their single-step cells.

Each layer and direction runs as ONE registered op (``rnn_layer``, ``lstm_layer``, ``gru_layer``): the
kernel projects the whole input sequence with one matrix product, then loops over time in NumPy doing
one ``h @ W_hh.T`` and a few fused elementwise steps per time step. Its derivative is a hand-written
backpropagation through time:

* first-order backward (the training hot path) runs as one non-differentiable op
  (``*_layer_backward``) whose kernel is the same BPTT code on NumPy arrays;
* under ``create_graph=True`` the same BPTT code runs on ember tensors after recomputing the forward
  pass with ember ops, so second derivatives are exact.

The BPTT code is written once against a tiny "array namespace" (``_NP`` for NumPy, ``_EM`` for ember
ops): both expose ``sig``/``tanh``/``relu``/``cat``/``stack`` and support ``@``, ``*``, ``+``, ``.T``,
slicing and ``reshape`` with the same meaning.

Parameter names, shapes, gate order (LSTM: i, f, g, o; GRU: r, z, n with
``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``) and default initialisation
(uniform(-1/sqrt(hidden), 1/sqrt(hidden))) follow torch, so state dicts move between the two.
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

import ember as _ember
from ...autograd.grad_mode import GRAD
from ...ops.registry import register, apply
from ...tensor import Tensor
from ..parameter import Parameter
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


# ---- array namespaces the recurrences are written against ------------------------------------------

class _NP:
    """NumPy implementations (the kernels)."""

    @staticmethod
    def sig(x):
        # exp overflows to inf for very negative inputs; 1 / (1 + inf) = 0 is the right limit
        with np.errstate(over="ignore"):
            r = np.exp(-x)
        r += 1
        return np.reciprocal(r, out=r)

    tanh = staticmethod(np.tanh)

    @staticmethod
    def relu(x):
        return np.maximum(x, 0)

    @staticmethod
    def cat(xs):
        return np.concatenate(xs, axis=-1)

    @staticmethod
    def stack(xs):
        return np.stack(xs)


class _EM:
    """ember ops (differentiable: used to build graphs for second derivatives)."""

    @staticmethod
    def sig(x):
        return _ember.sigmoid(x)

    @staticmethod
    def tanh(x):
        return _ember.tanh(x)

    @staticmethod
    def relu(x):
        return _ember.relu(x)

    @staticmethod
    def cat(xs):
        return _ember.cat(xs, -1)

    @staticmethod
    def stack(xs):
        return _ember.stack(xs)


_NATIVE = (np.dtype(np.float32), np.dtype(np.float64))


def _opmath(kernel):
    """Run a kernel in float32 for float16/bfloat16 arrays and cast its results back (torch's opmath)."""
    def run(*arrays, **attrs):
        dt = next(a.dtype for a in arrays if isinstance(a, np.ndarray))
        if dt in _NATIVE:
            return kernel(*arrays, **attrs)
        up = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == dt else a for a in arrays]
        res = kernel(*up, **attrs)
        if isinstance(res, tuple):
            return tuple(r.astype(dt) for r in res)
        return res.astype(dt)
    run.__name__ = kernel.__name__
    run.__doc__ = kernel.__doc__
    return run


def _steps(T, reverse):
    """Time indices in processing order."""
    return range(T - 1, -1, -1) if reverse else range(T)


def _prev(t, T, reverse):
    """The time index processed just before ``t`` (None for the first step: the initial state)."""
    p = t + 1 if reverse else t - 1
    return p if 0 <= p < T else None


def _project(x, w_ih, b_ih, b_hh=None):
    """``x @ w_ih.T + b_ih (+ b_hh)`` for a whole (T, B, I) sequence in one matrix product."""
    T, B, I = x.shape
    xw = (x.reshape(T * B, I) @ w_ih.T).reshape(T, B, w_ih.shape[0])
    if b_ih is not None:
        xw = xw + b_ih
    if b_hh is not None:
        xw = xw + b_hh
    return xw


def _hprev_stack(K, outs, h0, reverse):
    """The state each step started from, stacked in time order: (T, B, H)."""
    T = len(outs)
    return K.stack([h0 if _prev(t, T, reverse) is None else outs[_prev(t, T, reverse)] for t in range(T)])


def _input_grads(K, dG, x, w_ih, need_x):
    """Gradients of ``x @ w_ih.T`` given the gradient ``dG`` (T, B, G) of the projection."""
    T, B, I = x.shape
    flat = dG.reshape(T * B, dG.shape[-1])
    dx = (flat @ w_ih).reshape(T, B, I) if need_x else None
    dw_ih = flat.T @ x.reshape(T * B, I)
    return flat, dx, dw_ih


# ---- Elman RNN (tanh / relu) ------------------------------------------------------------------------

def _rnn_forward(K, x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity, reverse):
    act = K.tanh if nonlinearity == "tanh" else K.relu
    xw = _project(x, w_ih, b_ih, b_hh)
    whh_t = w_hh.T
    T = x.shape[0]
    outs = [None] * T
    h = h0
    for t in _steps(T, reverse):
        h = act(xw[t] + h @ whh_t)
        outs[t] = h
    return outs


def _rnn_backward(K, x, h0, w_ih, w_hh, outs, g_out, nonlinearity, reverse, need):
    T = len(outs)
    dGs = [None] * T
    dh = None
    for t in _steps(T, not reverse):
        dh = g_out[t] if dh is None else dh + g_out[t]
        h = outs[t]
        da = dh * (1 - h * h) if nonlinearity == "tanh" else dh * (h > 0)
        dGs[t] = da
        dh = da @ w_hh
    flat, dx, dw_ih = _input_grads(K, K.stack(dGs), x, w_ih, need[0])
    dw_hh = flat.T @ _hprev_stack(K, outs, h0, reverse).reshape(flat.shape[0], w_hh.shape[1])
    db = flat.sum(0)
    return dx, dh, dw_ih, dw_hh, db, db


@_opmath
def _rnn_kernel(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity="tanh", reverse=False):
    return np.stack(_rnn_forward(_NP, x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity, reverse))


@_opmath
def _rnn_bw_kernel(g_out, x, h0, w_ih, w_hh, out, nonlinearity="tanh", reverse=False, need=()):
    outs = list(out)
    res = _rnn_backward(_NP, x, h0, w_ih, w_hh, outs, g_out, nonlinearity, reverse, need)
    return tuple(r if r is not None else np.empty(0, x.dtype) for r in res)


def _rnn_bw(ctx, g_out):
    x, h0, w_ih, w_hh, b_ih, b_hh = ctx.inputs
    nl, rev = ctx.attrs["nonlinearity"], ctx.attrs["reverse"]
    need = ctx.needs_input_grad
    if GRAD[0]:
        # create_graph: recompute the forward with ember ops so the gradient is differentiable
        outs = _rnn_forward(_EM, x, h0, w_ih, w_hh, b_ih, b_hh, nl, rev)
        res = _rnn_backward(_EM, x, h0, w_ih, w_hh, outs, g_out, nl, rev, need)
    else:
        res = apply(RNN_LAYER_BW, (g_out, x, h0, w_ih, w_hh, ctx.output),
                    {"nonlinearity": nl, "reverse": rev, "need": need})
    return _select_grads(res, need)


def _select_grads(res, need):
    return tuple(r if n else None for r, n in zip(res, need))


RNN_LAYER = register("rnn_layer", _rnn_kernel, _rnn_bw, save="io")
RNN_LAYER_BW = register("rnn_layer_backward", _rnn_bw_kernel, nout=6, differentiable=False)


# ---- LSTM ---------------------------------------------------------------------------------------------

def _lstm_forward(K, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse):
    H = w_hh.shape[0] // 4
    xw = _project(x, w_ih, b_ih, b_hh)
    whh_t = w_hh.T
    whr_t = None if w_hr is None else w_hr.T
    T = x.shape[0]
    outs, acts, cs, hps = [None] * T, [None] * T, [None] * T, [None] * T
    h, c = h0, c0
    for t in _steps(T, reverse):
        gates = xw[t] + h @ whh_t
        s = K.sig(gates)                       # one call for i, f, o (the g slice is unused)
        i, f, o = s[:, :H], s[:, H:2 * H], s[:, 3 * H:]
        g = K.tanh(gates[:, 2 * H:3 * H])
        c = f * c + i * g
        hp = o * K.tanh(c)
        h = hp if whr_t is None else hp @ whr_t
        outs[t], cs[t], hps[t], acts[t] = h, c, hp, (i, f, g, o)
    return outs, acts, cs, hps


def _lstm_backward(K, x, h0, c0, w_ih, w_hh, w_hr, outs, acts, cs, hps, g_out, g_cn, reverse, need):
    T = len(outs)
    dGs, dHs = [None] * T, [None] * T
    dh, dc = None, g_cn
    for t in _steps(T, not reverse):
        dh = g_out[t] if dh is None else dh + g_out[t]
        dHs[t] = dh
        dhp = dh if w_hr is None else dh @ w_hr
        i, f, g, o = acts[t]
        p = _prev(t, T, reverse)
        c_prev = c0 if p is None else cs[p]
        tc = K.tanh(cs[t])
        dc = dc + dhp * o * (1 - tc * tc)
        dG = K.cat([dc * g * i * (1 - i), dc * c_prev * f * (1 - f), dc * i * (1 - g * g),
                    dhp * tc * o * (1 - o)])
        dGs[t] = dG
        dc = dc * f
        dh = dG @ w_hh
    flat, dx, dw_ih = _input_grads(K, K.stack(dGs), x, w_ih, need[0])
    n = flat.shape[0]
    dw_hh = flat.T @ _hprev_stack(K, outs, h0, reverse).reshape(n, w_hh.shape[1])
    db = flat.sum(0)
    dw_hr = None
    if w_hr is not None and need[7]:
        dw_hr = K.stack(dHs).reshape(n, w_hr.shape[0]).T @ K.stack(hps).reshape(n, w_hr.shape[1])
    return dx, dh, dc, dw_ih, dw_hh, db, db, dw_hr


@_opmath
def _lstm_kernel(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse=False):
    outs, acts, cs, hps = _lstm_forward(_NP, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse)
    out = np.stack(outs)
    c_all = np.stack(cs)
    a_all = np.stack([np.concatenate(a, axis=1) for a in acts])
    hp_all = out if w_hr is None else np.stack(hps)
    c_n = c_all[0 if reverse else -1].copy()
    # outputs 2..4 are saved activations for the backward pass (not differentiable)
    return out, c_n, a_all, c_all, hp_all


@_opmath
def _lstm_bw_kernel(g_out, g_cn, x, h0, c0, w_ih, w_hh, w_hr, out, a_all, c_all, hp_all,
                    reverse=False, need=()):
    H = c_all.shape[-1]
    acts = [(a[:, :H], a[:, H:2 * H], a[:, 2 * H:3 * H], a[:, 3 * H:]) for a in a_all]
    res = _lstm_backward(_NP, x, h0, c0, w_ih, w_hh, w_hr, list(out), acts, list(c_all), list(hp_all),
                         g_out, g_cn, reverse, need)
    return tuple(r if r is not None else np.empty(0, x.dtype) for r in res)


def _lstm_bw(ctx, g_out, g_cn, *_):
    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = ctx.inputs
    rev = ctx.attrs["reverse"]
    need = ctx.needs_input_grad
    if GRAD[0]:
        outs, acts, cs, hps = _lstm_forward(_EM, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, rev)
        res = _lstm_backward(_EM, x, h0, c0, w_ih, w_hh, w_hr, outs, acts, cs, hps, g_out, g_cn, rev, need)
    else:
        out, _, a_all, c_all, hp_all = ctx.outputs
        res = apply(LSTM_LAYER_BW, (g_out, g_cn, x, h0, c0, w_ih, w_hh, w_hr, out, a_all, c_all, hp_all),
                    {"reverse": rev, "need": need})
    return _select_grads(res, need)


LSTM_LAYER = register("lstm_layer", _lstm_kernel, _lstm_bw, save="io", nout=5, nondiff_outputs=(2, 3, 4))
LSTM_LAYER_BW = register("lstm_layer_backward", _lstm_bw_kernel, nout=8, differentiable=False)


# ---- GRU ----------------------------------------------------------------------------------------------

def _gru_forward(K, x, h0, w_ih, w_hh, b_ih, b_hh, reverse):
    H = w_hh.shape[0] // 3
    xw = _project(x, w_ih, b_ih)
    whh_t = w_hh.T
    T = x.shape[0]
    outs, acts, ghns = [None] * T, [None] * T, [None] * T
    h = h0
    for t in _steps(T, reverse):
        gh = h @ whh_t
        if b_hh is not None:
            gh = gh + b_hh
        xt = xw[t]
        rz = K.sig(xt[:, :2 * H] + gh[:, :2 * H])
        r, z = rz[:, :H], rz[:, H:]
        ghn = gh[:, 2 * H:]
        n = K.tanh(xt[:, 2 * H:] + r * ghn)
        h = n + z * (h - n)                    # (1 - z) * n + z * h
        outs[t], acts[t], ghns[t] = h, (r, z, n), ghn
    return outs, acts, ghns


def _gru_backward(K, x, h0, w_ih, w_hh, outs, acts, ghns, g_out, reverse, need):
    T = len(outs)
    dGx, dGh = [None] * T, [None] * T
    dh = None
    for t in _steps(T, not reverse):
        dh = g_out[t] if dh is None else dh + g_out[t]
        r, z, n = acts[t]
        p = _prev(t, T, reverse)
        h_prev = h0 if p is None else outs[p]
        dan = dh * (1 - z) * (1 - n * n)
        dar = dan * ghns[t] * r * (1 - r)
        daz = dh * (h_prev - n) * z * (1 - z)
        dGx[t] = K.cat([dar, daz, dan])
        dGh[t] = K.cat([dar, daz, dan * r])
        dh = dh * z + dGh[t] @ w_hh
    flat_x, dx, dw_ih = _input_grads(K, K.stack(dGx), x, w_ih, need[0])
    n_rows = flat_x.shape[0]
    flat_h = K.stack(dGh).reshape(n_rows, w_hh.shape[0])
    dw_hh = flat_h.T @ _hprev_stack(K, outs, h0, reverse).reshape(n_rows, w_hh.shape[1])
    return dx, dh, dw_ih, dw_hh, flat_x.sum(0), flat_h.sum(0)


@_opmath
def _gru_kernel(x, h0, w_ih, w_hh, b_ih, b_hh, reverse=False):
    outs, acts, ghns = _gru_forward(_NP, x, h0, w_ih, w_hh, b_ih, b_hh, reverse)
    a_all = np.stack([np.concatenate(a, axis=1) for a in acts])
    return np.stack(outs), a_all, np.stack(ghns)


@_opmath
def _gru_bw_kernel(g_out, x, h0, w_ih, w_hh, out, a_all, ghn_all, reverse=False, need=()):
    H = ghn_all.shape[-1]
    acts = [(a[:, :H], a[:, H:2 * H], a[:, 2 * H:]) for a in a_all]
    res = _gru_backward(_NP, x, h0, w_ih, w_hh, list(out), acts, list(ghn_all), g_out, reverse, need)
    return tuple(r if r is not None else np.empty(0, x.dtype) for r in res)


def _gru_bw(ctx, g_out, *_):
    x, h0, w_ih, w_hh, b_ih, b_hh = ctx.inputs
    rev = ctx.attrs["reverse"]
    need = ctx.needs_input_grad
    if GRAD[0]:
        outs, acts, ghns = _gru_forward(_EM, x, h0, w_ih, w_hh, b_ih, b_hh, rev)
        res = _gru_backward(_EM, x, h0, w_ih, w_hh, outs, acts, ghns, g_out, rev, need)
    else:
        out, a_all, ghn_all = ctx.outputs
        res = apply(GRU_LAYER_BW, (g_out, x, h0, w_ih, w_hh, out, a_all, ghn_all), {"reverse": rev, "need": need})
    return _select_grads(res, need)


GRU_LAYER = register("gru_layer", _gru_kernel, _gru_bw, save="io", nout=3, nondiff_outputs=(1, 2))
GRU_LAYER_BW = register("gru_layer_backward", _gru_bw_kernel, nout=6, differentiable=False)


# ---- one layer, one direction -----------------------------------------------------------------------

def _run_layer(mode, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse):
    """Run one recurrent layer in one direction over a time-major (T, B, I) input.

    Returns (output (T, B, H_out), h_n (B, H_out), c_n (B, H) or None)."""
    last = 0 if reverse else x.shape[0] - 1
    if mode == "LSTM":
        out, c_n, *_ = apply(LSTM_LAYER, (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr), {"reverse": reverse})
        return out, out[last], c_n
    if mode == "GRU":
        out = apply(GRU_LAYER, (x, h0, w_ih, w_hh, b_ih, b_hh), {"reverse": reverse})[0]
        return out, out[last], None
    nl = "tanh" if mode == "RNN_TANH" else "relu"
    out = apply(RNN_LAYER, (x, h0, w_ih, w_hh, b_ih, b_hh), {"nonlinearity": nl, "reverse": reverse})
    return out, out[last], None


def _new_param(shape, dtype, device):
    return Parameter(_ember.empty(shape, dtype=dtype, device=device))


def _uniform_init(module, bound):
    with _ember.no_grad():
        for p in module.parameters():
            p.uniform_(-bound, bound)


# ---- modules ----------------------------------------------------------------------------------------

class RNNBase(Module):
    """Base class of RNN, LSTM and GRU: parameters per layer and direction, argument checks, the loop
    over layers (with dropout between them) and directions."""

    __constants__ = ["mode", "input_size", "hidden_size", "num_layers", "bias", "batch_first",
                     "dropout", "bidirectional", "proj_size"]

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None) -> None:
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout) if isinstance(dropout, numbers.Number) else dropout
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
        if not isinstance(input_size, int):
            raise TypeError(f"input_size should be of type int, got: {type(input_size).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        gate_size = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}.get(mode)
        if gate_size is None:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size *= hidden_size

        self._flat_weights_names = []
        self._all_weights = []
        real_hidden = proj_size if proj_size > 0 else hidden_size
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden * num_directions
                suffix = "_reverse" if direction == 1 else ""
                params = [(f"weight_ih_l{layer}{suffix}", (gate_size, layer_input)),
                          (f"weight_hh_l{layer}{suffix}", (gate_size, real_hidden))]
                if bias:
                    params += [(f"bias_ih_l{layer}{suffix}", (gate_size,)),
                               (f"bias_hh_l{layer}{suffix}", (gate_size,))]
                if proj_size > 0:
                    params.append((f"weight_hr_l{layer}{suffix}", (proj_size, hidden_size)))
                for name, shape in params:
                    setattr(self, name, _new_param(shape, dtype, device))
                names = [n for n, _ in params]
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """Parameters per layer and direction: ``[[w_ih, w_hh, b_ih, b_hh(, w_hr)], ...]``."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """No-op: ember keeps each weight as its own array (torch packs them for cuDNN)."""

    def reset_parameters(self) -> None:
        """Every weight and bias ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        _uniform_init(self, 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0)

    # ---- checks (torch's messages) -----------------------------------------------------------
    def check_input(self, input: Tensor, batch_sizes=None) -> None:
        w = self._flat_weights[0]
        if input.dtype is not w.dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({w.dtype}). "
                             f"Convert input: input.to({w.dtype}), or convert model: model.to({input.dtype})")
        expected = 2 if batch_sizes is not None else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.size(-1)}")

    def get_expected_hidden_size(self, input: Tensor, batch_sizes=None) -> tuple:
        mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        h = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * num_directions, mini_batch, h)

    def check_hidden_size(self, hx: Tensor, expected_hidden_size: tuple,
                          msg: str = "Expected hidden size {}, got {}") -> None:
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(tuple(expected_hidden_size), list(hx.size())))

    def check_forward_args(self, input: Tensor, hidden: Tensor, batch_sizes=None) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return hx.index_select(1, permutation)

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # ---- the computation -----------------------------------------------------------------------
    def _layer_weights(self, idx):
        ws = [getattr(self, n) for n in self._all_weights[idx]]
        w_ih, w_hh = ws[0], ws[1]
        b_ih, b_hh = (ws[2], ws[3]) if self.bias else (None, None)
        w_hr = ws[-1] if self.proj_size > 0 else None
        return w_ih, w_hh, b_ih, b_hh, w_hr

    def _run(self, x, hx, cx):
        """x: time-major (T, B, I); hx/cx: (layers * directions, B, *). Returns output, h_n, c_n."""
        if x.size(0) == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        num_directions = 2 if self.bidirectional else 1
        layer_input = x
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(num_directions):
                idx = layer * num_directions + direction
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_weights(idx)
                out, h, c = _run_layer(self.mode, layer_input, hx[idx], None if cx is None else cx[idx],
                                       w_ih, w_hh, b_ih, b_hh, w_hr, direction == 1)
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            layer_input = outs[0] if num_directions == 1 else _ember.cat(outs, 2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                from ..functional import dropout as _dropout
                layer_input = _dropout(layer_input, p=self.dropout, training=True)
        return layer_input, _ember.stack(h_n), (None if cx is None else _ember.stack(c_n))

    def _forward_common(self, input, hx, name):
        if _is_packed(input):
            raise NotImplementedError(f"{name}: PackedSequence input is not supported by ember yet; "
                                      "pass a padded tensor instead")
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: expected input to be a Tensor, got {type(input).__name__}")
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                             + ("tensor instead" if name == "RNN" else "instead"))
        is_batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if not is_batched:
            input = input.unsqueeze(batch_dim)
        return input, is_batched, batch_dim

    def _zeros_hidden(self, input, size):
        mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        return _ember.zeros(self.num_layers * num_directions, mini_batch, size, dtype=input.dtype)

    def _time_major(self, input):
        return input.transpose(0, 1) if self.batch_first else input

    def __setstate__(self, state):
        super().__setstate__(state)
        if "proj_size" not in state:
            self.proj_size = 0


def _is_packed(x):
    return type(x).__name__ == "PackedSequence"


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu).

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True, batch_first=False,
    dropout=0.0, bidirectional=False)``; ``forward(input, hx=None) -> (output, h_n)``.
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.__dict__["nonlinearity"] = args[3]
            args = args[:3] + args[4:]
        else:
            self.__dict__["nonlinearity"] = kwargs.pop("nonlinearity", "tanh")
        nl = self.__dict__["nonlinearity"]
        if nl == "tanh":
            mode = "RNN_TANH"
        elif nl == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nl}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        input, is_batched, batch_dim = self._forward_common(input, hx, "RNN")
        if hx is not None:
            if not is_batched:
                if hx.dim() != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {hx.dim()}-D tensor")
                hx = hx.unsqueeze(1)
            elif hx.dim() != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor")
        else:
            hx = self._zeros_hidden(input, self.hidden_size)
        self.check_forward_args(input, hx, None)
        _check_hidden_dtype(input, hx)
        output, h_n, _ = self._run(self._time_major(input), hx, None)
        if self.batch_first:
            output = output.transpose(0, 1)
        if not is_batched:
            output = output.squeeze(batch_dim)
            h_n = h_n.squeeze(1)
        return output, h_n


class LSTM(RNNBase):
    """Long short-term memory, gates i, f, g, o; optional projection of h (``proj_size``).

    ``forward(input, (h_0, c_0)=None) -> (output, (h_n, c_n))``.
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input: Tensor, batch_sizes=None) -> tuple:
        mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        return (self.num_layers * num_directions, mini_batch, self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes=None) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return hx[0].index_select(1, permutation), hx[1].index_select(1, permutation)

    def forward(self, input, hx=None):
        input, is_batched, batch_dim = self._forward_common(input, hx, "LSTM")
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        if hx is None:
            hx = (self._zeros_hidden(input, real_hidden), self._zeros_hidden(input, self.hidden_size))
        else:
            if is_batched:
                if hx[0].dim() != 3 or hx[1].dim() != 3:
                    raise RuntimeError("For batched 3-D input, hx and cx should also be 3-D but got "
                                       f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
            else:
                if hx[0].dim() != 2 or hx[1].dim() != 2:
                    raise RuntimeError("For unbatched 2-D input, hx and cx should also be 2-D but got "
                                       f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
                hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        self.check_forward_args(input, hx, None)
        _check_hidden_dtype(input, hx[0])
        _check_hidden_dtype(input, hx[1])
        output, h_n, c_n = self._run(self._time_major(input), hx[0], hx[1])
        if self.batch_first:
            output = output.transpose(0, 1)
        if not is_batched:
            output = output.squeeze(batch_dim)
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return output, (h_n, c_n)


class GRU(RNNBase):
    """Gated recurrent unit, gates r, z, n with ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``.

    ``forward(input, hx=None) -> (output, h_n)``.
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        input, is_batched, batch_dim = self._forward_common(input, hx, "GRU")
        if hx is not None:
            if not is_batched:
                if hx.dim() != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {hx.dim()}-D tensor")
                hx = hx.unsqueeze(1)
            elif hx.dim() != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor")
        else:
            hx = self._zeros_hidden(input, self.hidden_size)
        self.check_forward_args(input, hx, None)
        _check_hidden_dtype(input, hx)
        output, h_n, _ = self._run(self._time_major(input), hx, None)
        if self.batch_first:
            output = output.transpose(0, 1)
        if not is_batched:
            output = output.squeeze(batch_dim)
            h_n = h_n.squeeze(1)
        return output, h_n


def _check_hidden_dtype(input, hx):
    if hx.dtype is not input.dtype:
        raise RuntimeError(f"Input and hidden tensors are not the same dtype, found input tensor with "
                           f"{_dtype_name(input.dtype)} and hidden tensor with {_dtype_name(hx.dtype)}")


def _dtype_name(d):
    from ...ops.registry import dtype_name
    return dtype_name(d)


# ---- cells --------------------------------------------------------------------------------------------

class RNNCellBase(Module):
    """Base of the single-step cells: ``weight_ih``, ``weight_hh`` (and biases) for ``num_chunks`` gates."""

    __constants__ = ["input_size", "hidden_size", "bias"]

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = _new_param((num_chunks * hidden_size, input_size), dtype, device)
        self.weight_hh = _new_param((num_chunks * hidden_size, hidden_size), dtype, device)
        if bias:
            self.bias_ih = _new_param((num_chunks * hidden_size,), dtype, device)
            self.bias_hh = _new_param((num_chunks * hidden_size,), dtype, device)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self) -> None:
        """Every weight and bias ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        _uniform_init(self, 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0)

    def _prepare(self, name, input, hx, n_states):
        """Validate, add the batch dimension to unbatched input, and default the states to zeros."""
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        states = [] if hx is None else list(hx) if n_states == 2 else [hx]
        for i, h in enumerate(states):
            if h.dim() not in (1, 2):
                what = f"hx[{i}]" if n_states == 2 else "hidden"
                raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {h.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            z = _ember.zeros(input.size(0), self.hidden_size, dtype=input.dtype)
            states = [z] * n_states
        elif not is_batched:
            states = [h.unsqueeze(0) for h in states]
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected {self.input_size}")
        for i, h in enumerate(states):
            if input.size(0) != h.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{i} batch size {h.size(0)}")
            if h.size(1) != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {h.size(1)}, expected "
                                   f"{self.hidden_size}")
        # the cell's products are x @ W_ih.T and h @ W_hh.T: torch reports mismatched dtypes from them
        for t in [input] + states:
            if t.dtype is not self.weight_ih.dtype:
                raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {_dtype_name(t.dtype)} "
                                   f"and {_dtype_name(self.weight_ih.dtype)}")
        return input.unsqueeze(0), states, is_batched


class RNNCell(RNNCellBase):
    """One Elman step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu)."""

    __constants__ = ["input_size", "hidden_size", "bias", "nonlinearity"]

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), is_batched = self._prepare("RNNCell", input, hx, 1)
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        mode = "RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU"
        _, ret, _ = _run_layer(mode, x, h, None, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh,
                               None, False)
        return ret if is_batched else ret.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step: ``(h', c') = cell(x, (h, c))``, gates i, f, g, o."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx=None):
        x, (h, c), is_batched = self._prepare("LSTMCell", input, hx, 2)
        _, h1, c1 = _run_layer("LSTM", x, h, c, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh,
                               None, False)
        return (h1, c1) if is_batched else (h1.squeeze(0), c1.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step: ``h' = (1 - z) * n + z * h``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), is_batched = self._prepare("GRUCell", input, hx, 1)
        _, ret, _ = _run_layer("GRU", x, h, None, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh,
                               None, False)
        return ret if is_batched else ret.squeeze(0)
