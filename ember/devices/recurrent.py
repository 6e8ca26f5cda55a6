"""The recurrent layer ops (``rnn_layer``, ``lstm_layer``, ``gru_layer`` and their ``*_backward``) on the
device, written with ember ops on device tensors so every step runs as device kernels.

Forward: the input projection of the whole sequence as one matrix product, then per time step one
``h @ W_hh.T`` and the gate arithmetic; the results are the CPU kernel's outputs, the saved ones
included (gate activations, cell states, unprojected states), with the same values in the rows that a
packed sequence's shorter batch leaves idle, so either side's backward can read them.

Backward: the CPU kernel's backpropagation through time, step by step with ember ops, reading the
saved activations (rows a packed batch leaves idle carry their gradients unchanged); the weight
gradients are one matrix product each over the whole sequence. (Under ``create_graph`` the layer's
derivative rule does not call these ops: it differentiates the ember-op recurrence, on the device too.)

Registered in ``dispatch.KERNELS`` by :func:`install` (called when the device dispatcher activates).
"""
from __future__ import annotations

import ember as E
from ..tensor import Tensor, wrap
from ..autograd.grad_mode import no_grad
from ..nn.functional import recurrent as _rec


def _t(a):
    return None if a is None else wrap(a) if not isinstance(a, Tensor) else a


def _data(*ts):
    return tuple(t._data for t in ts)


def _rows(new, old, b):
    """``new`` for the ``b`` running rows, ``old`` for the rest (a packed batch's finished rows)."""
    return new if b == old.shape[0] else E.cat([new, old[b:]])


def _stack(items):
    """``E.stack(items)`` for any number of steps: one buffer, a copy per step (the device's cat/stack
    kernels take at most 8 inputs)."""
    first = items[0]
    out = E.empty((len(items),) + tuple(first.shape), dtype=first.dtype, device=first.device)
    for k, it in enumerate(items):
        out[k].copy_(it)
    return out


def _project(x, w_ih, *biases):
    xw = E.matmul(x, w_ih.T)
    for b in biases:
        if b is not None:
            xw = xw + b
    return xw


# ---- forward ------------------------------------------------------------------------------------------

def _rnn_fwd(op, args, attrs):
    x, h0, w_ih, w_hh, b_ih, b_hh = (_t(a) for a in args)
    act = E.tanh if attrs.get("nonlinearity", "tanh") == "tanh" else E.relu
    bs, rev = attrs.get("batch_sizes"), attrs.get("reverse", False)
    with no_grad():
        xw = _project(x, w_ih, b_ih, b_hh)
        T, B = x.shape[:2]
        outs, h = [None] * T, h0
        for t in _rec._steps(T, rev):
            b = _rec._active(bs, t, B)
            h = _rows(act(xw[t, :b] + E.matmul(h[:b], w_hh.T)), h, b)
            outs[t] = h
        return _stack(outs)._data


def _lstm_fwd(op, args, attrs):
    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = (_t(a) for a in args)
    bs, rev = attrs.get("batch_sizes"), attrs.get("reverse", False)
    with no_grad():
        xw = _project(x, w_ih, b_ih, b_hh)
        T, B = x.shape[:2]
        H = w_hh.shape[0] // 4
        outs, accs, cs, hps = ([None] * T for _ in range(4))
        h, c = h0, c0
        for t in _rec._steps(T, rev):
            b = _rec._active(bs, t, B)
            a = xw[t, :b] + E.matmul(h[:b], w_hh.T)
            i, f, o = E.sigmoid(a[:, :H]), E.sigmoid(a[:, H:2 * H]), E.sigmoid(a[:, 3 * H:])
            g = E.tanh(a[:, 2 * H:3 * H])
            c_new = f * c[:b] + i * g
            hp = o * E.tanh(c_new)
            accs[t] = _rows(E.cat([i, f, g, o], 1), xw[t], b)
            h_new = hp if w_hr is None else E.matmul(hp, w_hr.T)
            if w_hr is not None:
                hps[t] = _rows(hp, E.zeros((B, H), dtype=hp.dtype, device=hp.device), b)
            h, c = _rows(h_new, h, b), _rows(c_new, c, b)
            outs[t], cs[t] = h, c
        out = _stack(outs)
        hp_all = out if w_hr is None else _stack(hps)
        return _data(out, c.clone(), _stack(accs), _stack(cs), hp_all)


def _gru_fwd(op, args, attrs):
    x, h0, w_ih, w_hh, b_ih, b_hh = (_t(a) for a in args)
    bs, rev = attrs.get("batch_sizes"), attrs.get("reverse", False)
    with no_grad():
        xw = _project(x, w_ih, b_ih)
        T, B = x.shape[:2]
        H = w_hh.shape[0] // 3
        zeros = E.zeros((B, 3 * H), dtype=xw.dtype, device=xw.device)
        outs, accs, ghns = ([None] * T for _ in range(3))
        h = h0
        for t in _rec._steps(T, rev):
            b = _rec._active(bs, t, B)
            hb, xt = h[:b], xw[t, :b]
            gh = _project(hb, w_hh, b_hh)
            rz = E.sigmoid(xt[:, :2 * H] + gh[:, :2 * H])
            r, z = rz[:, :H], rz[:, H:]
            n = E.tanh(xt[:, 2 * H:] + r * gh[:, 2 * H:])
            accs[t] = _rows(E.cat([rz, n], 1), zeros, b)
            ghns[t] = _rows(gh[:, 2 * H:], zeros[:, :H], b)
            h = _rows(n + z * (hb - n), h, b)
            outs[t] = h
        return _data(_stack(outs), _stack(accs), _stack(ghns))


# ---- backward: backpropagation through time with ember ops, reading the saved activations ---------------

def _zeros(shape, like):
    return E.zeros(shape, dtype=like.dtype, device=like.device)


def _hprev(out, h0, rev):
    """The state each step started from, in time order (T, B, H)."""
    return E.cat([h0[None], out[:-1]]) if not rev else E.cat([out[1:], h0[None]])


def _weight_grads(dG, x, w_ih, hprev, need_x):
    T, B, I = x.shape
    flat = dG.reshape(T * B, dG.shape[-1])
    dx = E.matmul(flat, w_ih).reshape(T, B, I) if need_x else None
    dw_ih = E.matmul(flat.T, x.reshape(T * B, I))
    dw_hh = None if hprev is None else E.matmul(flat.T, hprev.reshape(T * B, hprev.shape[-1]))
    return flat, dx, dw_ih, dw_hh


def _out(res, like):
    empty = E.empty((0,), dtype=like.dtype, device=like.device)
    return tuple((r if r is not None else empty)._data for r in res)


def _rnn_bw(op, args, attrs):
    g_out, x, h0, w_ih, w_hh, out = (_t(a) for a in args)
    relu = attrs.get("nonlinearity", "tanh") != "tanh"
    rev, bs, need = attrs.get("reverse", False), attrs.get("batch_sizes"), attrs["need"]
    with no_grad():
        T, B = x.shape[:2]
        dh, dGs = _zeros(h0.shape, out), [None] * T
        for t in _rec._steps(T, not rev):
            b = _rec._active(bs, t, B)
            dh = dh + g_out[t]
            h = out[t, :b]
            da = dh[:b] * (h > 0).to(h.dtype) if relu else dh[:b] * (1 - h * h)
            dGs[t] = _rows(da, _zeros(h0.shape, out), b)
            dh = _rows(E.matmul(da, w_hh), dh, b)
        flat, dx, dw_ih, dw_hh = _weight_grads(_stack(dGs), x, w_ih, _hprev(out, h0, rev), need[0])
        db = flat.sum(0)
        return _out((dx, dh, dw_ih, dw_hh, db, db), x)


def _lstm_bw(op, args, attrs):
    g_out, g_cn, x, h0, c0, w_ih, w_hh, w_hr, out, acts, c_all, hp_all = (_t(a) for a in args)
    rev, bs, need = attrs.get("reverse", False), attrs.get("batch_sizes"), attrs["need"]
    with no_grad():
        T, B = x.shape[:2]
        H = c_all.shape[-1]
        dh, dc = _zeros(h0.shape, out), g_cn
        dGs, dHs = [None] * T, [None] * T
        zG = _zeros((B, 4 * H), out)
        for t in _rec._steps(T, not rev):
            b = _rec._active(bs, t, B)
            dh = dh + g_out[t]
            if w_hr is not None:
                dHs[t] = _rows(dh[:b], _zeros(h0.shape, out), b)
                dhp = E.matmul(dh[:b], w_hr)
            else:
                dhp = dh[:b]
            a = acts[t, :b]
            i, f, g, o = a[:, :H], a[:, H:2 * H], a[:, 2 * H:3 * H], a[:, 3 * H:]
            p = _rec._prev(t, T, rev)
            c_prev = (c0 if p is None else c_all[p])[:b]
            tc = E.tanh(c_all[t, :b])
            dcb = dc[:b] + dhp * o * (1 - tc * tc)
            d = E.cat([dcb * g * i * (1 - i), dcb * c_prev * f * (1 - f), dcb * i * (1 - g * g),
                       dhp * tc * o * (1 - o)], 1)
            dGs[t] = _rows(d, zG, b)
            dc = _rows(dcb * f, dc, b)
            dh = _rows(E.matmul(d, w_hh), dh, b)
        flat, dx, dw_ih, dw_hh = _weight_grads(_stack(dGs), x, w_ih, _hprev(out, h0, rev), need[0])
        db = flat.sum(0)
        dw_hr = None
        if w_hr is not None and need[7]:
            n = T * B
            dw_hr = E.matmul(_stack(dHs).reshape(n, w_hr.shape[0]).T, hp_all.reshape(n, H))
        return _out((dx, dh, dc, dw_ih, dw_hh, db, db, dw_hr), x)


def _gru_bw(op, args, attrs):
    g_out, x, h0, w_ih, w_hh, out, acts, ghn_all = (_t(a) for a in args)
    rev, bs, need = attrs.get("reverse", False), attrs.get("batch_sizes"), attrs["need"]
    with no_grad():
        T, B = x.shape[:2]
        H = ghn_all.shape[-1]
        dh = _zeros(h0.shape, out)
        zG = _zeros((B, 3 * H), out)
        dGx, dGh = [None] * T, [None] * T
        for t in _rec._steps(T, not rev):
            b = _rec._active(bs, t, B)
            dh = dh + g_out[t]
            dhb = dh[:b]
            a = acts[t, :b]
            r, z, n = a[:, :H], a[:, H:2 * H], a[:, 2 * H:]
            p = _rec._prev(t, T, rev)
            h_prev = (h0 if p is None else out[p])[:b]
            dan = dhb * (1 - z) * (1 - n * n)
            dar = dan * ghn_all[t, :b] * r * (1 - r)
            daz = (h_prev - n) * dhb * z * (1 - z)
            dx_t = E.cat([dar, daz, dan], 1)
            dh_t = E.cat([dar, daz, dan * r], 1)
            dGx[t], dGh[t] = _rows(dx_t, zG, b), _rows(dh_t, zG, b)
            dh = _rows(dhb * z + E.matmul(dh_t, w_hh), dh, b)
        flat_x, dx, dw_ih, _ = _weight_grads(_stack(dGx), x, w_ih, None, need[0])
        flat_h = _stack(dGh).reshape(T * B, 3 * H)
        dw_hh = E.matmul(flat_h.T, _hprev(out, h0, rev).reshape(T * B, H))
        return _out((dx, dh, dw_ih, dw_hh, flat_x.sum(0), flat_h.sum(0)), x)


def install(kernels: dict) -> None:
    kernels.update({"rnn_layer": _rnn_fwd, "lstm_layer": _lstm_fwd, "gru_layer": _gru_fwd,
                    "rnn_layer_backward": _rnn_bw, "lstm_layer_backward": _lstm_bw,
                    "gru_layer_backward": _gru_bw})
