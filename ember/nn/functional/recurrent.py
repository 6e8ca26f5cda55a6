"""The recurrent layer ops behind ``nn.RNN``, ``nn.LSTM``, ``nn.GRU`` and their cells.

Each layer and direction runs as ONE registered op (``rnn_layer``, ``lstm_layer``, ``gru_layer``): the
kernel projects the whole input sequence with one matrix product, then loops over time in NumPy doing
one ``h @ W_hh.T`` and a few in-place elementwise steps per time step, writing into preallocated
outputs. Its derivative:

* first-order backward (the training hot path) is one non-differentiable op (``*_layer_backward``):
  hand-written backpropagation through time in NumPy, reading the gate activations the forward saved;
* under ``create_graph=True`` the recurrence is rebuilt with ember ops and differentiated by ember's
  autograd, so the returned gradients are themselves differentiable (exact second derivatives).

Gate order follows torch (LSTM: i, f, g, o; GRU: r, z, n with
``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``). ``run_layer`` is the entry point the modules use;
the packed-sequence helpers turn packed rows into a padded time-major batch and back.
"""
from __future__ import annotations

import numpy as np

import ember as _ember
from ...autograd.grad_mode import GRAD
from ...ops.registry import register, apply

__all__: list = []      # nothing here is torch.nn.functional API: the modules import what they use


# ---- shared helpers ------------------------------------------------------------------------------------

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


def _sig_(a):
    """Sigmoid in place: (1 + tanh(a / 2)) / 2 (no overflow for large |a|, and tanh is faster than exp)."""
    half = a.dtype.type(0.5)
    a *= half
    np.tanh(a, out=a)
    a *= half
    a += half
    return a


def _steps(T, reverse):
    """Time indices in processing order."""
    return range(T - 1, -1, -1) if reverse else range(T)


def _prev(t, T, reverse):
    """The time index processed just before ``t`` (None for the first step: the initial state)."""
    p = t + 1 if reverse else t - 1
    return p if 0 <= p < T else None


def _project_np(x, w_ih, b_ih, b_hh=None):
    """``x @ w_ih.T + b_ih (+ b_hh)`` for a whole (T, B, I) sequence: one GEMM, biases added in place."""
    T, B, I = x.shape
    xw = (x.reshape(T * B, I) @ w_ih.T).reshape(T, B, w_ih.shape[0])
    if b_ih is not None:
        xw += b_ih
    if b_hh is not None:
        xw += b_hh
    return xw


def _hprev_np(out, h0, reverse):
    """The state each step started from, in time order: (T, B, H)."""
    return np.concatenate([h0[None], out[:-1]]) if not reverse else np.concatenate([out[1:], h0[None]])


def _weight_grads_np(dG, x, w_ih, w_hh, hprev, need_x):
    """Gradients of the input projection and the recurrent product given dG (T, B, G) for both."""
    T, B, I = x.shape
    flat = dG.reshape(T * B, dG.shape[-1])
    dx = (flat @ w_ih).reshape(T, B, I) if need_x else None
    dw_ih = flat.T @ x.reshape(T * B, I)
    dw_hh = flat.T @ hprev.reshape(T * B, w_hh.shape[1]) if w_hh is not None else None
    return flat, dx, dw_ih, dw_hh


def _results(res, dtype):
    return tuple(r if r is not None else np.empty(0, dtype) for r in res)


def _select_grads(res, need):
    return tuple(r if n else None for r, n in zip(res, need))


# The ``fake`` rules give each op's output shapes from its inputs' (symbolic under ember.compile's dynamic
# shapes: the sequence length and batch of a layer's outputs follow its input's, whatever their values)

def _seq(x, n):
    """(T, B, n) for the time-major input ``x``."""
    return (x.shape[0], x.shape[1], n)


def _if(needed, t):
    """The shape of a gradient the backward kernel computes only when ``needed`` (else an empty array)."""
    return tuple(t.shape) if needed else (0,)


# The NumPy kernels below are the hot path: preallocated outputs, in-place elementwise work, one GEMM per
# step. The *_graph functions compute the same recurrences with ember ops; they run only under
# create_graph=True, so that the gradients they return are themselves differentiable.

# Variable lengths (PackedSequence): ``batch_sizes[t]`` rows (a prefix: the batch is sorted by length) are
# running at step t. A row that is not running keeps its state, and the kernels store that carried state
# in the step's output slot, so "the state before step t" is always the previous step's slot (or the
# initial state) and the final state is always the last processed slot.

def _active(batch_sizes, t, B):
    return B if batch_sizes is None else batch_sizes[t]


# ---- Elman RNN (tanh / relu) ------------------------------------------------------------------------

@_opmath
def _rnn_kernel(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity="tanh", reverse=False, batch_sizes=None):
    B = x.shape[1]
    out = _project_np(x, w_ih, b_ih, b_hh)         # becomes the output, step by step, in place
    whh_t = w_hh.T
    h = h0
    for t in _steps(x.shape[0], reverse):
        b = _active(batch_sizes, t, B)
        a = out[t, :b]
        a += h[:b] @ whh_t
        if nonlinearity == "tanh":
            np.tanh(a, out=a)
        else:
            np.maximum(a, 0, out=a)
        if b < B:
            out[t, b:] = h[b:]
        h = out[t]
    return out


@_opmath
def _rnn_bw_kernel(g_out, x, h0, w_ih, w_hh, out, nonlinearity="tanh", reverse=False, batch_sizes=None,
                   need=()):
    T, B = x.shape[:2]
    dG = np.zeros(out.shape, out.dtype)
    dh = np.zeros(h0.shape, out.dtype)
    for t in _steps(T, not reverse):
        b = _active(batch_sizes, t, B)
        dh += g_out[t]
        h = out[t, :b]
        da = dG[t, :b]
        if nonlinearity == "tanh":
            np.multiply(h, h, out=da)
            np.subtract(1, da, out=da)
            da *= dh[:b]
        else:
            np.multiply(dh[:b], h > 0, out=da)
        dh[:b] = da @ w_hh                          # rows not running carry their gradient unchanged
    flat, dx, dw_ih, dw_hh = _weight_grads_np(dG, x, w_ih, w_hh, _hprev_np(out, h0, reverse), need[0])
    db = flat.sum(0)
    return _results((dx, dh, dw_ih, dw_hh, db, db), x.dtype)


def _keep_rows(new, old, b):
    """The state after a step where only the first ``b`` rows ran (ember ops, for the graph path)."""
    return new if b == old.shape[0] else _ember.cat([new, old[b:]])


def _recurrence(x, states, w_ih, biases, reverse, batch_sizes, step):
    """The graph path's time loop (ember ops, so autograd can differentiate it twice): the input
    projection ``x @ w_ih.T + biases`` once, then ``step(projected x_t, states)`` per time step on the
    rows still active; returns the stacked first state (the output) and the last states."""
    E = _ember
    xw = E.matmul(x, w_ih.T)
    for bias in biases:
        if bias is not None:
            xw = xw + bias
    B = x.shape[1]
    outs = [None] * x.shape[0]
    for t in _steps(x.shape[0], reverse):
        b = _active(batch_sizes, t, B)
        new = step(xw[t, :b], tuple(st[:b] for st in states))
        states = tuple(_keep_rows(n, st, b) for n, st in zip(new, states))
        outs[t] = states[0]
    return E.stack(outs), states


def _rnn_graph(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity, reverse, batch_sizes):
    E = _ember
    act = E.tanh if nonlinearity == "tanh" else E.relu
    return _recurrence(x, (h0,), w_ih, (b_ih, b_hh), reverse, batch_sizes,
                       lambda xt, st: (act(xt + E.matmul(st[0], w_hh.T)),))[0]


def _rnn_bw(ctx, g_out):
    x, h0, w_ih, w_hh, _, _ = ctx.inputs
    a = ctx.attrs
    nl, rev, bs = a["nonlinearity"], a["reverse"], a.get("batch_sizes")
    need = ctx.needs_input_grad
    if GRAD[0]:
        # create_graph: differentiate the same recurrence written with ember ops
        return _graph_grads(lambda *args: _rnn_graph(*args, nl, rev, bs), ctx.inputs, (g_out,), need)
    res = apply(RNN_LAYER_BW, (g_out, x, h0, w_ih, w_hh, ctx.output),
                {"nonlinearity": nl, "reverse": rev, "batch_sizes": bs, "need": need})
    return _select_grads(res, need)


def _rnn_fake(x, h0, w_ih, w_hh, b_ih, b_hh, **_):
    return [_seq(x, w_ih.shape[0])]


def _rnn_bw_fake(g_out, x, h0, w_ih, w_hh, out, need=(), **_):
    return [_if(need[0], x), h0.shape, w_ih.shape, w_hh.shape, w_ih.shape[:1], w_ih.shape[:1]]


RNN_LAYER = register("rnn_layer", _rnn_kernel, _rnn_bw, save="io", fake=_rnn_fake)
RNN_LAYER_BW = register("rnn_layer_backward", _rnn_bw_kernel, nout=6, differentiable=False, fake=_rnn_bw_fake)


# ---- LSTM ---------------------------------------------------------------------------------------------

@_opmath
def _lstm_kernel(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse=False, batch_sizes=None):
    T, B, _ = x.shape
    H = w_hh.shape[0] // 4
    acts = _project_np(x, w_ih, b_ih, b_hh)        # pre-activations, turned into activations in place
    out = np.empty((T, B, h0.shape[1]), x.dtype)
    c_all = np.empty((T, B, H), x.dtype)
    hp_all = out if w_hr is None else np.zeros((T, B, H), x.dtype)
    whh_t = w_hh.T
    whr_t = None if w_hr is None else w_hr.T
    h, c = h0, c0
    for t in _steps(T, reverse):
        b = _active(batch_sizes, t, B)
        a = acts[t, :b]
        a += h[:b] @ whh_t
        g = np.tanh(a[:, 2 * H:3 * H])
        _sig_(a)                                    # i, f, o (the g slice is overwritten next)
        a[:, 2 * H:3 * H] = g
        i, f, o = a[:, :H], a[:, H:2 * H], a[:, 3 * H:]
        c_new = c_all[t, :b]
        np.multiply(f, c[:b], out=c_new)
        c_new += i * g
        hp = hp_all[t, :b]
        np.tanh(c_new, out=hp)
        hp *= o
        if whr_t is not None:
            np.matmul(hp, whr_t, out=out[t, :b])
        if b < B:
            c_all[t, b:] = c[b:]
            out[t, b:] = h[b:]
        h, c = out[t], c_all[t]
    c_n = c.copy()
    # outputs 2..4 (gate activations i, f, g, o; cell states; unprojected h) are saved for the backward
    return out, c_n, acts, c_all, hp_all


@_opmath
def _lstm_bw_kernel(g_out, g_cn, x, h0, c0, w_ih, w_hh, w_hr, out, acts, c_all, hp_all, reverse=False,
                    batch_sizes=None, need=()):
    T, B, _ = x.shape
    H = c_all.shape[-1]
    dG = np.zeros(acts.shape, acts.dtype)
    dH = None if w_hr is None else np.zeros(out.shape, out.dtype)
    dh = np.zeros(h0.shape, out.dtype)
    dc = g_cn.copy()
    for t in _steps(T, not reverse):
        b = _active(batch_sizes, t, B)
        dh += g_out[t]
        if w_hr is not None:
            dH[t, :b] = dh[:b]
            dhp = dh[:b] @ w_hr
        else:
            dhp = dh[:b]
        a = acts[t, :b]
        i, f, g, o = a[:, :H], a[:, H:2 * H], a[:, 2 * H:3 * H], a[:, 3 * H:]
        p = _prev(t, T, reverse)
        c_prev = (c0 if p is None else c_all[p])[:b]
        tc = np.tanh(c_all[t, :b])
        d = dG[t, :b]
        dcb = dc[:b]
        do = d[:, 3 * H:]
        np.multiply(dhp, tc, out=do)              # dL/do
        tc *= tc
        np.subtract(1, tc, out=tc)
        tc *= o
        tc *= dhp
        dcb += tc                                 # dc += dhp * o * (1 - tanh(c)^2)
        do *= o * (1 - o)
        np.multiply(dcb, g, out=d[:, :H])
        d[:, :H] *= i * (1 - i)
        np.multiply(dcb, c_prev, out=d[:, H:2 * H])
        d[:, H:2 * H] *= f * (1 - f)
        np.multiply(dcb, i, out=d[:, 2 * H:3 * H])
        d[:, 2 * H:3 * H] *= 1 - g * g
        dcb *= f
        dh[:b] = d @ w_hh                         # rows not running carry their gradients unchanged
    flat, dx, dw_ih, dw_hh = _weight_grads_np(dG, x, w_ih, w_hh, _hprev_np(out, h0, reverse), need[0])
    db = flat.sum(0)
    dw_hr = None
    if w_hr is not None and need[7]:
        n = T * B
        dw_hr = dH.reshape(n, w_hr.shape[0]).T @ hp_all.reshape(n, H)
    return _results((dx, dh, dc, dw_ih, dw_hh, db, db, dw_hr), x.dtype)


def _lstm_graph(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse, batch_sizes):
    E = _ember

    def step(xt, st):
        h, c = st
        i, f, g, o = (xt + E.matmul(h, w_hh.T)).chunk(4, 1)
        c_new = E.sigmoid(f) * c + E.sigmoid(i) * E.tanh(g)
        h_new = E.sigmoid(o) * E.tanh(c_new)
        return (h_new if w_hr is None else E.matmul(h_new, w_hr.T)), c_new
    out, (_, c) = _recurrence(x, (h0, c0), w_ih, (b_ih, b_hh), reverse, batch_sizes, step)
    return out, c


def _lstm_bw(ctx, g_out, g_cn, *_):
    x, h0, c0, w_ih, w_hh, _, _, w_hr = ctx.inputs
    rev, bs = ctx.attrs["reverse"], ctx.attrs.get("batch_sizes")
    need = ctx.needs_input_grad
    if GRAD[0]:
        return _graph_grads(lambda *a: _lstm_graph(*a, rev, bs), ctx.inputs, (g_out, g_cn), need)
    out, _, acts, c_all, hp_all = ctx.outputs
    res = apply(LSTM_LAYER_BW, (g_out, g_cn, x, h0, c0, w_ih, w_hh, w_hr, out, acts, c_all, hp_all),
                {"reverse": rev, "batch_sizes": bs, "need": need})
    return _select_grads(res, need)


def _lstm_fake(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, **_):
    H = c0.shape[1]
    return [_seq(x, h0.shape[1]), c0.shape, _seq(x, w_ih.shape[0]), _seq(x, H), _seq(x, H if w_hr is not None
                                                                                     else h0.shape[1])]


def _lstm_bw_fake(g_out, g_cn, x, h0, c0, w_ih, w_hh, w_hr, *_, need=(), **__):
    g = w_ih.shape[:1]
    return [_if(need[0], x), h0.shape, c0.shape, w_ih.shape, w_hh.shape, g, g,
            _if(w_hr is not None and need[7], w_hr)]


LSTM_LAYER = register("lstm_layer", _lstm_kernel, _lstm_bw, save="io", nout=5, nondiff_outputs=(2, 3, 4),
                      fake=_lstm_fake)
LSTM_LAYER_BW = register("lstm_layer_backward", _lstm_bw_kernel, nout=8, differentiable=False, fake=_lstm_bw_fake)


# ---- GRU ----------------------------------------------------------------------------------------------

@_opmath
def _gru_kernel(x, h0, w_ih, w_hh, b_ih, b_hh, reverse=False, batch_sizes=None):
    T, B, _ = x.shape
    H = w_hh.shape[0] // 3
    xw = _project_np(x, w_ih, b_ih)
    out = np.empty((T, B, H), x.dtype)
    acts = np.zeros((T, B, 3 * H), x.dtype)        # r, z, n
    ghn_all = np.zeros((T, B, H), x.dtype)         # W_hn h + b_hn (r multiplies it)
    whh_t = w_hh.T
    h = h0
    for t in _steps(T, reverse):
        b = _active(batch_sizes, t, B)
        hb = h[:b]
        gh = hb @ whh_t
        if b_hh is not None:
            gh += b_hh
        xt, a = xw[t, :b], acts[t, :b]
        rz = a[:, :2 * H]
        np.add(xt[:, :2 * H], gh[:, :2 * H], out=rz)
        _sig_(rz)
        r, z = rz[:, :H], rz[:, H:]
        ghn_all[t, :b] = gh[:, 2 * H:]
        n = a[:, 2 * H:]
        np.multiply(r, gh[:, 2 * H:], out=n)
        n += xt[:, 2 * H:]
        np.tanh(n, out=n)
        h_new = out[t, :b]                         # (1 - z) * n + z * h = n + z * (h - n)
        np.subtract(hb, n, out=h_new)
        h_new *= z
        h_new += n
        if b < B:
            out[t, b:] = h[b:]
        h = out[t]
    return out, acts, ghn_all


@_opmath
def _gru_bw_kernel(g_out, x, h0, w_ih, w_hh, out, acts, ghn_all, reverse=False, batch_sizes=None, need=()):
    T, B, _ = x.shape
    H = ghn_all.shape[-1]
    dGx = np.zeros(acts.shape, acts.dtype)
    dGh = np.zeros(acts.shape, acts.dtype)
    dh = np.zeros(h0.shape, out.dtype)
    for t in _steps(T, not reverse):
        b = _active(batch_sizes, t, B)
        dh += g_out[t]
        dhb = dh[:b]
        a = acts[t, :b]
        r, z, n = a[:, :H], a[:, H:2 * H], a[:, 2 * H:]
        p = _prev(t, T, reverse)
        h_prev = (h0 if p is None else out[p])[:b]
        dx_t, dh_t = dGx[t, :b], dGh[t, :b]
        dan = dx_t[:, 2 * H:]
        np.multiply(dhb, 1 - z, out=dan)
        dan *= 1 - n * n
        dar = dx_t[:, :H]
        np.multiply(dan, ghn_all[t, :b], out=dar)
        dar *= r * (1 - r)
        daz = dx_t[:, H:2 * H]
        np.subtract(h_prev, n, out=daz)
        daz *= dhb
        daz *= z * (1 - z)
        dh_t[:, :2 * H] = dx_t[:, :2 * H]
        np.multiply(dan, r, out=dh_t[:, 2 * H:])
        dhb *= z
        dhb += dh_t @ w_hh                         # rows not running carry their gradient unchanged
    flat_x, dx, dw_ih, _ = _weight_grads_np(dGx, x, w_ih, None, None, need[0])
    flat_h = dGh.reshape(T * B, 3 * H)
    dw_hh = flat_h.T @ _hprev_np(out, h0, reverse).reshape(T * B, H)
    return _results((dx, dh, dw_ih, dw_hh, flat_x.sum(0), flat_h.sum(0)), x.dtype)


def _gru_graph(x, h0, w_ih, w_hh, b_ih, b_hh, reverse, batch_sizes):
    E = _ember

    def step(xt, st):
        hb = st[0]
        gh = E.matmul(hb, w_hh.T)
        if b_hh is not None:
            gh = gh + b_hh
        xr, xz, xn = xt.chunk(3, 1)
        hr, hz, hn = gh.chunk(3, 1)
        r, z = E.sigmoid(xr + hr), E.sigmoid(xz + hz)
        n = E.tanh(xn + r * hn)
        return (n + z * (hb - n),)
    return _recurrence(x, (h0,), w_ih, (b_ih,), reverse, batch_sizes, step)[0]


def _gru_bw(ctx, g_out, *_):
    x, h0, w_ih, w_hh, _, _ = ctx.inputs
    rev, bs = ctx.attrs["reverse"], ctx.attrs.get("batch_sizes")
    need = ctx.needs_input_grad
    if GRAD[0]:
        return _graph_grads(lambda *a: _gru_graph(*a, rev, bs), ctx.inputs, (g_out,), need)
    out, acts, ghn_all = ctx.outputs
    res = apply(GRU_LAYER_BW, (g_out, x, h0, w_ih, w_hh, out, acts, ghn_all),
                {"reverse": rev, "batch_sizes": bs, "need": need})
    return _select_grads(res, need)


def _gru_fake(x, h0, w_ih, w_hh, b_ih, b_hh, **_):
    H = h0.shape[1]
    return [_seq(x, H), _seq(x, w_ih.shape[0]), _seq(x, H)]


def _gru_bw_fake(g_out, x, h0, w_ih, w_hh, *_, need=(), **__):
    return [_if(need[0], x), h0.shape, w_ih.shape, w_hh.shape, w_ih.shape[:1], w_hh.shape[:1]]


GRU_LAYER = register("gru_layer", _gru_kernel, _gru_bw, save="io", nout=3, nondiff_outputs=(1, 2), fake=_gru_fake)
GRU_LAYER_BW = register("gru_layer_backward", _gru_bw_kernel, nout=6, differentiable=False, fake=_gru_bw_fake)


def _graph_grads(fn, inputs, grads, need):
    """Gradients of ``fn(*inputs)`` (a recurrence rebuilt with ember ops) as differentiable tensors.

    The inputs that need a gradient enter through fresh identity views, so the inner ``autograd.grad``
    stops exactly there while its results stay connected to the outer graph (as create_graph asks)."""
    aliases = [a.view_as(a) if n else a for a, n in zip(inputs, need)]
    outs = fn(*aliases)
    outs = outs if isinstance(outs, tuple) else (outs,)
    wanted = [a for a, n in zip(aliases, need) if n]
    got = iter(_ember.autograd.grad(outs, wanted, grads, create_graph=True, allow_unused=True))
    return tuple(next(got) if n else None for n in need)


# ---- one layer, one direction -----------------------------------------------------------------------

def run_layer(mode, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse, batch_sizes=None):
    """Run one recurrent layer in one direction over a time-major (T, B, I) input (``batch_sizes``: rows
    running per step, for packed sequences).

    Returns (output (T, B, H_out), h_n (B, H_out), c_n (B, H) or None)."""
    attrs = {"reverse": reverse, "batch_sizes": batch_sizes}
    if mode == "LSTM":
        out, c_n, *_ = apply(LSTM_LAYER, (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr), attrs)
        return out, _last(out, reverse), c_n
    if mode == "GRU":
        out = apply(GRU_LAYER, (x, h0, w_ih, w_hh, b_ih, b_hh), attrs)[0]
        return out, _last(out, reverse), None
    attrs["nonlinearity"] = "tanh" if mode == "RNN_TANH" else "relu"
    out = apply(RNN_LAYER, (x, h0, w_ih, w_hh, b_ih, b_hh), attrs)
    return out, _last(out, reverse), None


def _last(out, reverse):
    """The state after the last processed step: ``out[0]`` (reverse) or ``out[-1]``, taken as the slice
    ``out[-1:]`` so that under ember.compile the key stays the same whatever the length (an int index is
    normalised to ``T - 1``, which would tie the program to one length)."""
    return out[0] if reverse else out[-1:][0]


def _packed_index(batch_sizes):
    """For packed data of these batch sizes: the (T, B) index of each padded slot into the packed rows
    (``n`` = one past the end for slots past a sequence's end) and the flat padded index of each packed row."""
    T, B = len(batch_sizes), batch_sizes[0]
    n = sum(batch_sizes)
    to_packed = np.full((T, B), n, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)[:-1]])
    for t, (off, b) in enumerate(zip(offsets, batch_sizes)):
        to_packed[t, :b] = np.arange(off, off + b)
    valid = np.nonzero((to_packed < n).ravel())[0]
    return to_packed.ravel(), valid


def packed_to_padded(data, batch_sizes):
    """Packed rows (sum(batch_sizes), *) -> time-major padded (T, B, *), zeros past each end. (The index
    arrays depend on the batch sizes only: constants for ember.compile, which guards the sizes.)"""
    idx, _ = _packed_index(batch_sizes)
    rows = _ember.cat([data, _ember.zeros((1,) + tuple(data.shape[1:]), dtype=data.dtype, device=data.device)])
    return rows.index_select(0, _ember.tensor(idx, device=data.device)).reshape((len(batch_sizes), batch_sizes[0]) +
                                                                tuple(data.shape[1:]))


def padded_to_packed(out, batch_sizes):
    _, valid = _packed_index(batch_sizes)
    T, B = out.shape[:2]
    return out.reshape((T * B,) + tuple(out.shape[2:])).index_select(0, _ember.tensor(valid, device=out.device))
