"""The recurrent layer ops (``rnn_layer``, ``lstm_layer``, ``gru_layer`` and their ``*_backward``) on the
device: per time step ONE compiled program (its GEMMs and one fused gate kernel), enqueued with no
Python between its kernels.

Forward: the input projection of the whole sequence is one matrix product (ember ops); then each time
step runs a *step program*: ``h @ W_hh.T`` (a generated GEMM) and the gate nonlinearities with the
cell/state update in one elementwise kernel that writes straight into the layer's outputs at step
``t`` (the output sequence, the saved gate activations, cell states, unprojected states: views of
preallocated (T, B, ...) device buffers passed to the program). The results are the CPU kernel's
outputs, saved ones included, with the same values in the rows a packed sequence's shorter batch
leaves idle (so either side's backward can read them).

Backward: backpropagation through time with one step program per step (the gate derivatives in one
kernel writing the step's rows of the stacked gate gradients, then ``dG @ W_hh``), the running state
gradients in two ping-pong buffers; the weight gradients are one matrix product each over the whole
sequence. (Under ``create_graph`` the layer's derivative rule does not call these ops: it
differentiates the ember-op recurrence, on the device too.)

A step program is the step's body written in ember ops with in-place writes into its arguments,
traced on zero CPU tensors (``compiler.capture.Tracer``) and compiled by ``compiler.cl_runner.CLRunner``
(the path ``compiler/cl_optim.py`` takes for optimizer steps); it is cached per layer kind, shapes,
active rows, dtype, device and options. When a program cannot be built for the device the op returns
None and the dispatcher falls back to the CPU, counted.

The interface relied on (``ember/nn/functional/recurrent.py``): the ops' positional arguments and
outputs (the CPU kernels'), the attributes ``reverse``, ``batch_sizes``, ``nonlinearity`` and ``need``,
and the helpers ``_steps``, ``_prev`` and ``_active``. Registered in ``dispatch.KERNELS`` by
:func:`install` (called when the device dispatcher activates).
"""
from __future__ import annotations

import numpy as np

import ember as E
from ..tensor import Tensor, wrap
from ..autograd.grad_mode import no_grad
from ..nn.functional import recurrent as _rec
from .opencl import DeviceArray

_PROGRAMS: dict = {}         # (body name, shapes, static options, dtype, device) -> CLRunner or None
STATS = {"programs": 0, "steps": 0}


def _t(a):
    return None if a is None else wrap(a) if not isinstance(a, Tensor) else a


def _c(t):
    """``t`` contiguous (a step program reads views of it every step: copy a strided one once)."""
    return None if t is None else t if t.is_contiguous() else t.contiguous()


# ---- step programs ------------------------------------------------------------------------------------

def _program(body, arrays, static):
    """The compiled step program of ``body(*tensors, **static)`` for these argument arrays (None entries
    are passed as None), or None when it cannot run on the device."""
    from ..compiler.decompose import Declined
    live = [a for a in arrays if a is not None]
    dt, dev = live[0].dtype, live[0].device
    key = (body.__name__, tuple(None if a is None else a.shape for a in arrays), tuple(sorted(static.items())),
           np.dtype(dt).str, dev)
    hit = _PROGRAMS.get(key, False)
    if hit is not False:
        return hit
    from ..compiler.capture import Tracer
    from ..compiler.cl_runner import CLRunner
    from ..compiler.cl_device import runtime
    from .. import dtypes as _dt
    edt = _dt.from_numpy_dtype(np.dtype(dt))
    zs = [None if a is None else wrap(np.zeros(a.shape, dt), edt) for a in arrays]
    tr = Tracer()
    with no_grad(), np.errstate(all="ignore"), tr:
        for i, z in enumerate(z for z in zs if z is not None):
            tr.add_arg(z, (i,))
        body(*zs, **static)
    runner = None
    if tr.unsupported is None:
        try:
            runner = CLRunner(tr.program(None), name=f"{body.__name__}", rt=runtime(dev), require_native=True)
            STATS["programs"] += 1
        except Declined:
            runner = None
    _PROGRAMS[key] = runner
    return runner


def _stepper(body, example, static):
    """``run(*arrays)``: the step program for ``example``'s argument shapes; None when there is none."""
    runner = _program(body, example, static)
    if runner is None:
        return None

    lean = runner.eager_launcher()        # binds the arrays straight into the kernels' arguments
    from . import opencl as _ocl

    def run(*ds):
        args = [d for d in ds if d is not None]
        if lean is not None and not _ocl.KERNEL_HOOKS:      # (the general path reports to a profiler)
            lean(args)
        else:
            runner(args, grad_enabled=False)
        STATS["steps"] += 1
    return run


def _d(t):
    return None if t is None else t._data


def _at(t, i):
    """The DeviceArray of ``t[i]`` for a contiguous device tensor ``t`` (no view op: a step's arguments)."""
    d = t._data
    inner = d.shape[1:]
    n = 1
    for s in inner:
        n *= s
    return DeviceArray(d.block, d.offset + i * n * d.dtype.itemsize, inner, d.strides[1:], d.dtype, d.device)


def _idle(dst, src, b):
    """Rows ``b:`` of a step's output: ``src``'s (a packed batch's finished rows), or zeros."""
    if b < dst.shape[0]:
        if src is None:
            dst[b:].zero_()
        else:
            dst[b:].copy_(src[b:])


def _write_cols(dst, parts, b):
    """``dst[:b]`` = the column blocks ``parts`` side by side: one write (one kernel; writes of column
    blocks of one buffer would not share a kernel)."""
    dst[:b].copy_(E.cat(parts, 1))


# ---- step bodies (ember ops, traced) -------------------------------------------------------------------

def rnn_step(xw_t, h_prev, w_hh, out_t, *, b, relu):
    a = xw_t[:b] + E.matmul(h_prev[:b], w_hh.T)
    out_t[:b].copy_(E.relu(a) if relu else E.tanh(a))
    _idle(out_t, h_prev, b)


def rnn_step_backward(g_t, dh_in, h_t, w_hh, dg_t, dh_out, *, b, relu):
    dh = dh_in + g_t
    h = h_t[:b]
    dg_t[:b].copy_(dh[:b] * (h > 0).to(h.dtype) if relu else dh[:b] * (1 - h * h))
    _idle(dg_t, None, b)
    dh_out[:b].copy_(E.matmul(dg_t[:b], w_hh))
    _idle(dh_out, dh, b)


def lstm_step(xw_t, h_prev, c_prev, w_hh, w_hr, acts_t, c_t, out_t, hp_t, *, b, H):
    a = xw_t[:b] + E.matmul(h_prev[:b], w_hh.T)
    i, f, o = E.sigmoid(a[:, :H]), E.sigmoid(a[:, H:2 * H]), E.sigmoid(a[:, 3 * H:])
    g = E.tanh(a[:, 2 * H:3 * H])
    _write_cols(acts_t, (i, f, g, o), b)
    c_t[:b].copy_(f * c_prev[:b] + i * g)
    hp = acts_t[:b, 3 * H:] * E.tanh(c_t[:b])        # (read back: the kernel writing c_t computes it once)
    if w_hr is None:
        out_t[:b].copy_(hp)
    else:
        hp_t[:b].copy_(hp)
        out_t[:b].copy_(E.matmul(hp_t[:b], w_hr.T))
        _idle(hp_t, None, b)
    _idle(acts_t, xw_t, b)
    _idle(c_t, c_prev, b)
    _idle(out_t, h_prev, b)


def lstm_step_backward(g_t, dh_in, dc_in, acts_t, c_t, c_prev, w_hh, w_hr, dg_t, dh_out, dc_out, dhs_t, *, b, H):
    dh = dh_in + g_t
    if w_hr is not None:
        dhs_t[:b].copy_(dh[:b])
        _idle(dhs_t, None, b)
        dhp = E.matmul(dhs_t[:b], w_hr)
    else:
        dhp = dh[:b]
    a = acts_t[:b]
    i, f, g, o = a[:, :H], a[:, H:2 * H], a[:, 2 * H:3 * H], a[:, 3 * H:]
    tc = E.tanh(c_t[:b])
    dcb = dc_in[:b] + dhp * o * (1 - tc * tc)
    _write_cols(dg_t, (dcb * g * i * (1 - i), dcb * c_prev[:b] * f * (1 - f), dcb * i * (1 - g * g),
                       dhp * tc * o * (1 - o)), b)
    _idle(dg_t, None, b)
    dc_out[:b].copy_(dcb * f)
    _idle(dc_out, dc_in, b)
    dh_out[:b].copy_(E.matmul(dg_t[:b], w_hh))
    _idle(dh_out, dh, b)


def gru_step(xw_t, h_prev, w_hh, b_hh, acts_t, ghn_t, out_t, *, b, H):
    hb, xt = h_prev[:b], xw_t[:b]
    gh = E.matmul(hb, w_hh.T)
    if b_hh is not None:
        gh = gh + b_hh
    rz = E.sigmoid(xt[:, :2 * H] + gh[:, :2 * H])
    r, z = rz[:, :H], rz[:, H:]
    n = E.tanh(xt[:, 2 * H:] + r * gh[:, 2 * H:])
    _write_cols(acts_t, (rz, n), b)
    ghn_t[:b].copy_(gh[:, 2 * H:])
    n, z = acts_t[:b, 2 * H:], acts_t[:b, H:2 * H]    # (read back: computed once, by the kernel writing acts_t)
    out_t[:b].copy_(n + z * (hb - n))
    _idle(acts_t, None, b)
    _idle(ghn_t, None, b)
    _idle(out_t, h_prev, b)


def gru_step_backward(g_t, dh_in, acts_t, ghn_t, h_prev, w_hh, dgx_t, dgh_t, dh_out, *, b, H):
    dh = dh_in + g_t
    dhb = dh[:b]
    a = acts_t[:b]
    r, z, n = a[:, :H], a[:, H:2 * H], a[:, 2 * H:]
    dan = dhb * (1 - z) * (1 - n * n)
    dar = dan * ghn_t[:b] * r * (1 - r)
    daz = (h_prev[:b] - n) * dhb * z * (1 - z)
    _write_cols(dgx_t, (dar, daz, dan), b)
    _write_cols(dgh_t, (dar, daz, dan * r), b)
    _idle(dgx_t, None, b)
    _idle(dgh_t, None, b)
    dh_out[:b].copy_(dhb * z + E.matmul(dgh_t[:b], w_hh))
    _idle(dh_out, dh, b)


# ---- the layers ---------------------------------------------------------------------------------------

def _sizes(bs):
    """A packed batch's per-step sizes as Python ints (they may come as an array, on the device too)."""
    if bs is None:
        return None
    if type(bs) is DeviceArray:
        from . import opencl as _ocl
        bs = _ocl.to_numpy(bs)
    return [int(v) for v in bs]


def _empty(shape, like):
    return E.empty(shape, dtype=like.dtype, device=like.device)


def _zeros(shape, like):
    return E.zeros(shape, dtype=like.dtype, device=like.device)


def _project(x, w_ih, *biases):
    xw = E.matmul(x, w_ih.T)
    for b in biases:
        if b is not None:
            xw = xw + b
    return xw


def _loop(body, T, rev, bs, B, step_args, static):
    """Run ``body``'s step program for every time step in processing order; ``step_args(t, p, k)``
    gives the step's tensors (``p``: the previous step's time index or None, ``k``: the step count).
    False when a step has no device program (the caller falls back)."""
    runners: dict = {}
    for k, t in enumerate(_rec._steps(T, rev)):
        b = _rec._active(bs, t, B)
        args = step_args(t, _rec._prev(t, T, rev), k)
        run = runners.get(b, False)
        if run is False:
            run = runners[b] = _stepper(body, args, dict(static, b=b))
        if run is None:
            return False
        run(*args)
    return True


def _rnn_fwd(op, args, attrs):
    x, h0, w_ih, w_hh, b_ih, b_hh = (_t(a) for a in args)
    relu = attrs.get("nonlinearity", "tanh") != "tanh"
    bs, rev = _sizes(attrs.get("batch_sizes")), attrs.get("reverse", False)
    with no_grad():
        xw = _project(x, w_ih, b_ih, b_hh)
        T, B = x.shape[:2]
        h0, w_hh = _c(h0), _c(w_hh)
        out = _empty((T, B, w_hh.shape[0]), xw)
        dh0, dw_hh = _d(h0), _d(w_hh)

        def step(t, p, k):
            return _at(xw, t), (dh0 if p is None else _at(out, p)), dw_hh, _at(out, t)
        if not _loop(rnn_step, T, rev, bs, B, step, {"relu": relu}):
            return None
        return out._data


def _lstm_fwd(op, args, attrs):
    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = (_t(a) for a in args)
    bs, rev = _sizes(attrs.get("batch_sizes")), attrs.get("reverse", False)
    with no_grad():
        xw = _project(x, w_ih, b_ih, b_hh)
        T, B = x.shape[:2]
        H = w_hh.shape[0] // 4
        h0, c0, w_hh, w_hr = _c(h0), _c(c0), _c(w_hh), _c(w_hr)
        out = _empty((T, B, h0.shape[1]), xw)
        acts, c_all = _empty((T, B, 4 * H), xw), _empty((T, B, H), xw)
        hp_all = out if w_hr is None else _empty((T, B, H), xw)
        dh0, dc0, dw_hh, dw_hr = _d(h0), _d(c0), _d(w_hh), _d(w_hr)

        def step(t, p, k):
            return (_at(xw, t), dh0 if p is None else _at(out, p), dc0 if p is None else _at(c_all, p), dw_hh,
                    dw_hr, _at(acts, t), _at(c_all, t), _at(out, t), None if w_hr is None else _at(hp_all, t))
        if not _loop(lstm_step, T, rev, bs, B, step, {"H": H}):
            return None
        last = _rec._steps(T, rev)[-1]
        return out._data, c_all[last].clone()._data, acts._data, c_all._data, hp_all._data


def _gru_fwd(op, args, attrs):
    x, h0, w_ih, w_hh, b_ih, b_hh = (_t(a) for a in args)
    bs, rev = _sizes(attrs.get("batch_sizes")), attrs.get("reverse", False)
    with no_grad():
        xw = _project(x, w_ih, b_ih)
        T, B = x.shape[:2]
        H = w_hh.shape[0] // 3
        h0, w_hh, b_hh = _c(h0), _c(w_hh), _c(b_hh)
        out, acts, ghn = _empty((T, B, H), xw), _empty((T, B, 3 * H), xw), _empty((T, B, H), xw)
        dh0, dw_hh, dbhh = _d(h0), _d(w_hh), _d(b_hh)

        def step(t, p, k):
            return (_at(xw, t), (dh0 if p is None else _at(out, p)), dw_hh, dbhh, _at(acts, t), _at(ghn, t),
                    _at(out, t))
        if not _loop(gru_step, T, rev, bs, B, step, {"H": H}):
            return None
        return out._data, acts._data, ghn._data


# ---- backward: backpropagation through time, reading the saved activations -----------------------------

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


def _pingpong(first, like):
    """The running state gradient of step k: read from ``bufs[k % 2]`` (``first`` at step 0), written to
    ``bufs[(k + 1) % 2]``."""
    bufs = [_empty(like.shape, like)._data, _empty(like.shape, like)._data]
    return (lambda k: first._data if k == 0 else bufs[k % 2]), (lambda k: bufs[(k + 1) % 2])


def _rnn_bw(op, args, attrs):
    g_out, x, h0, w_ih, w_hh, out = (_t(a) for a in args)
    relu = attrs.get("nonlinearity", "tanh") != "tanh"
    rev, bs, need = attrs.get("reverse", False), _sizes(attrs.get("batch_sizes")), attrs["need"]
    with no_grad():
        T, B = x.shape[:2]
        g_out, out, w_hh = _c(g_out), _c(out), _c(w_hh)
        dG = _empty((T, B, h0.shape[1]), out)
        dh_in, dh_out = _pingpong(_zeros(h0.shape, out), h0)
        dw_hh = _d(w_hh)

        def step(t, p, k):
            return _at(g_out, t), dh_in(k), _at(out, t), dw_hh, _at(dG, t), dh_out(k)
        if not _loop(rnn_step_backward, T, not rev, bs, B, step, {"relu": relu}):
            return None
        flat, dx, dw_ih, dw_hh = _weight_grads(dG, x, w_ih, _hprev(out, h0, rev), need[0])
        db = flat.sum(0)
        return _out((dx, wrap(dh_out(T - 1)), dw_ih, dw_hh, db, db), x)


def _lstm_bw(op, args, attrs):
    g_out, g_cn, x, h0, c0, w_ih, w_hh, w_hr, out, acts, c_all, hp_all = (_t(a) for a in args)
    rev, bs, need = attrs.get("reverse", False), _sizes(attrs.get("batch_sizes")), attrs["need"]
    with no_grad():
        T, B = x.shape[:2]
        H = c_all.shape[-1]
        g_out, acts, c_all, c0, w_hh, w_hr = _c(g_out), _c(acts), _c(c_all), _c(c0), _c(w_hh), _c(w_hr)
        dG = _empty((T, B, 4 * H), out)
        dHs = None if w_hr is None else _empty((T, B, h0.shape[1]), out)
        dh_in, dh_out = _pingpong(_zeros(h0.shape, out), h0)
        dc_in, dc_out = _pingpong(_c(g_cn), c0)
        dc0, dw_hh, dw_hr = _d(c0), _d(w_hh), _d(w_hr)

        def step(t, p, k):
            q = _rec._prev(t, T, rev)
            return (_at(g_out, t), dh_in(k), dc_in(k), _at(acts, t), _at(c_all, t), dc0 if q is None else
                    _at(c_all, q), dw_hh, dw_hr, _at(dG, t), dh_out(k), dc_out(k), None if dHs is None else _at(dHs, t))
        if not _loop(lstm_step_backward, T, not rev, bs, B, step, {"H": H}):
            return None
        flat, dx, dw_ih, dw_hh = _weight_grads(dG, x, w_ih, _hprev(out, h0, rev), need[0])
        db = flat.sum(0)
        dw_hr = None
        if w_hr is not None and need[7]:
            n = T * B
            dw_hr = E.matmul(dHs.reshape(n, w_hr.shape[0]).T, hp_all.reshape(n, H))
        return _out((dx, wrap(dh_out(T - 1)), wrap(dc_out(T - 1)), dw_ih, dw_hh, db, db, dw_hr), x)


def _gru_bw(op, args, attrs):
    g_out, x, h0, w_ih, w_hh, out, acts, ghn_all = (_t(a) for a in args)
    rev, bs, need = attrs.get("reverse", False), _sizes(attrs.get("batch_sizes")), attrs["need"]
    with no_grad():
        T, B = x.shape[:2]
        H = ghn_all.shape[-1]
        g_out, out, acts, ghn_all, h0, w_hh = _c(g_out), _c(out), _c(acts), _c(ghn_all), _c(h0), _c(w_hh)
        dGx, dGh = _empty((T, B, 3 * H), out), _empty((T, B, 3 * H), out)
        dh_in, dh_out = _pingpong(_zeros(h0.shape, out), h0)
        dh0, dw_hh = _d(h0), _d(w_hh)

        def step(t, p, k):
            q = _rec._prev(t, T, rev)
            return (_at(g_out, t), dh_in(k), _at(acts, t), _at(ghn_all, t), dh0 if q is None else _at(out, q),
                    dw_hh, _at(dGx, t), _at(dGh, t), dh_out(k))
        if not _loop(gru_step_backward, T, not rev, bs, B, step, {"H": H}):
            return None
        flat_x, dx, dw_ih, _ = _weight_grads(dGx, x, w_ih, None, need[0])
        flat_h = dGh.reshape(T * B, 3 * H)
        dw_hh = E.matmul(flat_h.T, _hprev(out, h0, rev).reshape(T * B, H))
        return _out((dx, wrap(dh_out(T - 1)), dw_ih, dw_hh, flat_x.sum(0), flat_h.sum(0)), x)


def install(kernels: dict) -> None:
    kernels.update({"rnn_layer": _rnn_fwd, "lstm_layer": _lstm_fwd, "gru_layer": _gru_fwd,
                    "rnn_layer_backward": _rnn_bw, "lstm_layer_backward": _lstm_bw,
                    "gru_layer_backward": _gru_bw})
