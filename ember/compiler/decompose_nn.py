"""Decompositions of ember.nn.functional's fused ops (activations, losses, normalization, embedding,
attention softmax, linear) into primitives, mirroring their NumPy kernels' order of operations."""
from __future__ import annotations

import math

import numpy as np

from .decompose import decomp, decomp_device, Unsupported, _finish
from .decompose_reduce import softmax_parts
from .prims import PNode

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_K = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


def _float(x):
    if not isinstance(x, PNode) or x.dtype not in (_F32, _F64):
        raise Unsupported("only float32/float64 are computed natively (half floats run in NumPy)")
    return x


def _clip(b, x, lo=None, hi=None):
    if lo is not None:
        x = b.ew("max", x, lo)
    if hi is not None:
        x = b.ew("min", x, hi)
    return x


# ---- piecewise-linear activations --------------------------------------------------------------------------

@decomp("softshrink")
def _softshrink(b, n, args, at):
    x = _float(args[0])
    lam = at["lambd"]
    return [_finish(b, n, b.ew("sub", x, _clip(b, x, -lam, lam)))]


@decomp("hardshrink")
def _hardshrink(b, n, args, at):
    x = _float(args[0])
    lam = at["lambd"]
    inside = b.ew("and", b.ew("ge", x, -lam), b.ew("le", x, lam))
    return [_finish(b, n, b.where(inside, 0.0, x))]


@decomp("threshold")
def _threshold(b, n, args, at):
    x = args[0]
    return [_finish(b, n, b.where(b.ew("le", x, at["threshold"]), at["value"], x, dtype=x.dtype))]


@decomp("hardtanh")
def _hardtanh(b, n, args, at):
    x = args[0]
    if x.dtype.kind == "b":
        raise Unsupported("bool")
    return [_finish(b, n, _clip(b, x, at["min_val"], at["max_val"]))]


@decomp("leaky_relu")
def _leaky(b, n, args, at):
    x = _float(args[0])
    return [_finish(b, n, b.where(b.ew("gt", x, 0), x, b.ew("mul", x, at["negative_slope"])))]


def _mask_of(b, x, mode, a, c):
    if mode == "gt":
        return b.ew("gt", x, a)
    if mode == "open":
        return b.ew("and", b.ew("gt", x, a), b.ew("lt", x, c))
    if mode == "notle":         # NaN passes, as in torch's threshold backward
        return b.ew("not", b.ew("le", x, a))
    if mode == "outside":
        return b.ew("not", b.ew("and", b.ew("ge", x, a), b.ew("le", x, c)))
    if mode == "nonzero":
        return b.ew("ne", x, 0)
    raise Unsupported(f"mask mode {mode}")


@decomp("activation_mask_backward", "hardsigmoid_backward")
def _mask_bw(b, n, args, at):
    g, x = _float(args[0]), args[1]
    m = _mask_of(b, x, at["mode"], at.get("a", 0.0), at.get("b", 0.0))
    s_in, s_out = at.get("s_in", 1.0), at.get("s_out", 0.0)
    gi = g if s_in == 1 else b.ew("mul", g, s_in)
    other = 0.0 if s_out == 0 else b.ew("mul", g, s_out)
    return [_finish(b, n, b.where(m, gi, other, dtype=g.dtype))]


@decomp("hardsigmoid")
def _hardsigmoid(b, n, args, at):
    x = _float(args[0])
    return [_finish(b, n, b.ew("div", _clip(b, b.ew("add", x, 3), 0, 6), 6))]


@decomp("hardswish")
def _hardswish(b, n, args, at):
    x = _float(args[0])
    return [_finish(b, n, b.ew("div", b.ew("mul", x, _clip(b, b.ew("add", x, 3), 0, 6)), 6))]


@decomp("hardswish_backward")
def _hardswish_bw(b, n, args, at):
    g, x = _float(args[0]), args[1]
    mid = b.ew("add", b.ew("div", x, 3), 0.5)
    d = b.where(b.ew("le", x, -3), 0.0, b.where(b.ew("lt", x, 3), mid, 1.0))
    return [_finish(b, n, b.ew("mul", g, d))]


# ---- smooth activations --------------------------------------------------------------------------------------

def _sig(b, x):
    return b.ew("div", 1.0, b.ew("add", 1.0, b.ew("exp", b.ew("neg", x)), dtype=x.dtype), dtype=x.dtype)


def _softplus1(b, x):
    return b.ew("add", _clip(b, x, lo=0), b.ew("log1p", b.ew("exp", b.ew("neg", b.ew("abs", x)))))


@decomp("log_sigmoid")
def _log_sigmoid(b, n, args, at):
    x = _float(args[0])
    return [_finish(b, n, b.ew("sub", _clip(b, x, hi=0), b.ew("log1p", b.ew("exp", b.ew("neg", b.ew("abs", x))))))]


def _elu_parts(b, x, at):
    alpha, scale, iscale = at["alpha"], at["scale"], at["input_scale"]
    return alpha, scale, iscale


@decomp("elu")
def _elu(b, n, args, at):
    x = _float(args[0])
    alpha, scale, iscale = _elu_parts(b, x, at)
    neg = b.ew("mul", b.ew("expm1", b.ew("mul", _clip(b, x, hi=0), iscale)), alpha * scale)
    pos = b.ew("mul", x, scale) if scale != 1 else x
    return [_finish(b, n, b.where(b.ew("gt", x, 0), pos, neg))]


@decomp("elu_backward")
def _elu_bw(b, n, args, at):
    g, x = _float(args[0]), args[1]
    alpha, scale, iscale = _elu_parts(b, x, at)
    neg = b.ew("mul", b.ew("exp", b.ew("mul", _clip(b, x, hi=0), iscale)), alpha * scale * iscale)
    d = b.where(b.ew("gt", x, 0), scale, neg, dtype=x.dtype)
    return [_finish(b, n, b.ew("mul", g, d))]


def _normal_cdf(b, x):
    """Phi(x) = erfc(-x / sqrt(2)) / 2. float64: libm's erfc, in double. float32: eager's fit
    (``activation._ERFC_P``: erfc(|z|) = t exp(P(t) - z^2), t = 1 / (1 + |z|/2), relative error 1.2e-7)
    evaluated in float32 from elementwise primitives, so it fuses and vectorizes (eager evaluates the same
    fit in double; the two differ by a few float32 ulps, up to ~1e-6 relative far in the tail)."""
    dt = np.dtype(x.dtype)
    if dt == np.float64:
        z = b.ew("mul", x, -_SQRT_HALF)
        return b.ew("mul", b.ew("erfc", z), 0.5)
    from ..nn.functional.activation import _ERFC_P
    z = b.ew("mul", x, -_SQRT_HALF)
    a = b.ew("abs", z)
    t = b.ew("div", 1.0, b.ew("add", b.ew("mul", a, 0.5), 1.0), dtype=dt)
    p = b.ew("add", b.ew("mul", t, _ERFC_P[0]), _ERFC_P[1])
    for c in _ERFC_P[2:]:
        p = b.ew("add", b.ew("mul", p, t), c)
    half = b.ew("mul", b.ew("mul", b.ew("exp", b.ew("sub", p, b.ew("mul", a, a))), t), 0.5)
    return b.where(b.ew("ge", z, 0), half, b.ew("sub", 1.0, half, dtype=dt))


def _gelu_tanh_t(b, x):
    inner = b.ew("mul", b.ew("add", x, b.ew("mul", b.ew("mul", b.ew("mul", x, x), x), _GELU_C)), _GELU_K)
    return b.ew("tanh", inner)


@decomp("gelu")
def _gelu(b, n, args, at):
    x = _float(args[0])
    if at.get("approximate", "none") == "tanh":
        t = _gelu_tanh_t(b, x)
        return [_finish(b, n, b.ew("mul", b.ew("mul", x, 0.5), b.ew("add", t, 1)))]
    return [_finish(b, n, b.ew("mul", x, _normal_cdf(b, x)))]


@decomp("gelu_backward")
def _gelu_bw(b, n, args, at):
    g, x = _float(args[0]), args[1]
    if at.get("approximate", "none") == "tanh":
        x2 = b.ew("mul", x, x)
        t = b.ew("tanh", b.ew("mul", b.ew("add", x, b.ew("mul", b.ew("mul", x2, x), _GELU_C)), _GELU_K))
        a = b.ew("mul", b.ew("add", t, 1), 0.5)
        one_m = b.ew("sub", 1, b.ew("mul", t, t), dtype=x.dtype)
        poly = b.ew("mul", b.ew("add", b.ew("mul", x2, 3 * _GELU_C), 1), _GELU_K)
        d = b.ew("add", a, b.ew("mul", b.ew("mul", b.ew("mul", x, 0.5), one_m), poly))
    else:
        e = b.ew("mul", b.ew("mul", x, b.ew("exp", b.ew("mul", b.ew("mul", x, x), -0.5))), _INV_SQRT_2PI)
        d = b.ew("add", _normal_cdf(b, x), e)
    return [_finish(b, n, b.ew("mul", g, d))]


@decomp("silu")
def _silu(b, n, args, at):
    x = _float(args[0])
    return [_finish(b, n, b.ew("mul", x, _sig(b, x)))]


@decomp("silu_backward")
def _silu_bw(b, n, args, at):
    g, x = _float(args[0]), args[1]
    s = _sig(b, x)
    d = b.ew("mul", s, b.ew("add", 1, b.ew("mul", x, b.ew("sub", 1, s, dtype=x.dtype)), dtype=x.dtype))
    return [_finish(b, n, b.ew("mul", g, d))]


@decomp("mish")
def _mish(b, n, args, at):
    x = _float(args[0])
    return [_finish(b, n, b.ew("mul", x, b.ew("tanh", _softplus1(b, x))))]


@decomp("mish_backward")
def _mish_bw(b, n, args, at):
    g, x = _float(args[0]), args[1]
    t = b.ew("tanh", _softplus1(b, x))
    one_m = b.ew("sub", 1, b.ew("mul", t, t), dtype=x.dtype)
    d = b.ew("add", t, b.ew("mul", b.ew("mul", x, _sig(b, x)), one_m))
    return [_finish(b, n, b.ew("mul", g, d))]


@decomp("softplus")
def _softplus(b, n, args, at):
    x = _float(args[0])
    beta, th = at["beta"], at["threshold"]
    z = b.ew("mul", x, beta)
    soft = b.ew("div", b.ew("log1p", b.ew("exp", z)), beta)
    return [_finish(b, n, b.where(b.ew("gt", z, th), x, soft))]


@decomp("softplus_backward")
def _softplus_bw(b, n, args, at):
    g, x = _float(args[0]), args[1]
    beta, th = at["beta"], at["threshold"]
    z = b.ew("mul", x, beta)
    d = b.where(b.ew("gt", z, th), 1.0, _sig(b, z), dtype=x.dtype)
    return [_finish(b, n, b.ew("mul", g, d))]


# ---- linear ------------------------------------------------------------------------------------------------

@decomp("linear")
def _linear(b, n, args, at):
    x, w, bias = args
    if len(w.shape) != 2:
        raise Unsupported("linear with a vector weight")
    _float(x)
    if len(x.shape) == 1:
        r = b.matmul(w, x)
    else:
        lead = x.shape[:-1]
        x2 = b.reshape(x, (math.prod(lead), x.shape[-1]))
        r = b.reshape(b.matmul(x2, b.permute(w, (1, 0))), lead + (w.shape[0],))
    if bias is not None:
        r = b.ew("add", r, bias)
    return [_finish(b, n, r)]


# ---- softmax-based losses ---------------------------------------------------------------------------------------

def _targets(b, t, n_classes, w, ignore_index, x_dtype):
    """(safe targets, valid mask, per-position weight) as the loss kernels' ``_targets`` helper computes them."""
    t = b.cast(t, np.int64)
    valid = b.ew("ne", t, ignore_index)
    ts = b.where(valid, t, 0, dtype=np.int64)
    if w is None:
        wt = b.cast(valid, _F64)
    else:
        ts_checked = ts
        wt = b.where(valid, b.gather(w, ts_checked, 0), 0, dtype=w.dtype)
    return ts, valid, wt


def _reduce_class_loss(b, loss, wt, red, single):
    """Per-sample losses reduced as torch's nll/cross-entropy do: ``mean`` divides by the total weight."""
    if red == "none":
        return b.reshape(loss, ()) if single else loss
    if red == "sum":
        return b.reduce("sum", loss, (0,))
    return b.ew("div", b.reduce("sum", loss, (0,)), b.reduce("sum", wt, (0,)))


def _class_gather(b, a, ts):
    """a[n, ts[n]] for a (N, C) and ts (N,), checking 0 <= ts < C (torch's IndexError message)."""
    idx = b.reshape(ts, (ts.shape[0], 1))
    return b.reshape(b.gather(a, idx, 1, error=(IndexError, "Target {} is out of bounds.")), (ts.shape[0],))


def _batched(b, x, t):
    if len(x.shape) == 1:
        return b.reshape(x, (1,) + x.shape), b.reshape(t, (1,)), True
    if len(x.shape) != 2:
        if not b.device:        # (on the CPU the NumPy kernel does it as fast)
            raise Unsupported("cross entropy over spatial dims (N, C, d1, ...)")
        # on a device: positions (N, d1, ...) flattened into rows of classes (M, C)
        return _rows(b, x), b.reshape(t, (t.numel,)), False
    return x, t, False


def _rows(b, a):
    """(N, C, d1, ...) -> (N * d1 * ..., C): one row of classes per position."""
    nd = len(a.shape)
    if nd <= 2:
        return a
    return b.reshape(b.permute(a, (0,) + tuple(range(2, nd)) + (1,)), (a.numel // a.shape[1], a.shape[1]))


def _unrows(b, r, shape):
    """The inverse of ``_rows``: (M, C) back to ``shape`` = (N, C, d1, ...)."""
    nd = len(shape)
    if nd <= 2:
        return r
    r = b.reshape(r, (shape[0],) + tuple(shape[2:]) + (shape[1],))
    return b.permute(r, (0, nd - 1) + tuple(range(1, nd - 1)))


@decomp("cross_entropy")
def _cross_entropy(b, n, args, at):
    x, t, w = args
    x = _float(x)
    x, t, single = _batched(b, x, t)
    if x.numel == 0:
        raise Unsupported("empty input")
    nc = x.shape[1]
    eps = at["label_smoothing"]
    red = at["reduction"]
    sh, _, s = softmax_parts(b, x, (1,))
    logp = b.ew("sub", sh, b.ew("log", s))
    ts, valid, wt = _targets(b, t, nc, w, at["ignore_index"], x.dtype)
    picked = _class_gather(b, logp, ts)
    loss = b.where(valid, b.ew("mul", b.ew("neg", picked), wt), 0)
    if eps > 0:
        lw = logp if w is None else b.ew("mul", logp, b.reshape(w, (1, nc)))
        smooth = b.where(valid, b.ew("neg", b.reduce("sum", lw, (1,))), 0)
        loss = b.ew("add", b.ew("mul", loss, 1 - eps), b.ew("mul", smooth, eps / nc))
    r = _reduce_class_loss(b, loss, wt, red, single)
    logp_out = b.reshape(logp, (nc,)) if single else _unrows(b, logp, args[0].shape)
    return [_finish(b, n, r, 0), _finish(b, n, logp_out, 1)]


def _inv_total(b, wt):
    total = b.reduce("sum", b.cast(wt, _F64), (0,))
    return b.where(b.ew("ne", total, 0), b.ew("div", 1.0, total, dtype=_F64), 0.0, dtype=_F64)


@decomp("cross_entropy_backward")
def _cross_entropy_bw(b, n, args, at):
    g, x, t, w = args
    x = _float(x)
    logp = at.get("logp")
    if not isinstance(logp, PNode):
        raise Unsupported("cross_entropy_backward without the saved log-probabilities")
    shape = x.shape
    x, t, single = _batched(b, x, t)
    if single:
        logp = b.reshape(logp, (1,) + logp.shape)
    else:
        logp = _rows(b, logp)
    nc = x.shape[1]
    eps = at["label_smoothing"]
    red = at["reduction"]
    ts, valid, wt = _targets(b, t, nc, w, at["ignore_index"], x.dtype)
    if eps > 0:
        wsum = float(nc) if w is None else b.reduce("sum", b.cast(w, _F64), (0,))
        a = b.ew("add", b.ew("mul", wt, 1 - eps),
                 b.ew("mul", b.cast(valid, _F64), b.ew("mul", wsum, eps / nc) if isinstance(wsum, PNode)
                      else eps / nc * wsum))
    else:
        a = wt
    grad = b.ew("mul", b.ew("exp", logp), b.reshape(a, (a.shape[0], 1)))
    onehot = b.ew("eq", b.iota(logp.shape, 1), b.reshape(ts, (ts.shape[0], 1)))
    sub = b.ew("mul", wt, eps - 1) if eps else b.ew("neg", wt)
    grad = b.ew("add", grad, b.where(onehot, b.reshape(sub, (sub.shape[0], 1)), 0, dtype=sub.dtype))
    if eps > 0:
        wb = 1.0 if w is None else b.reshape(w, (1, nc))
        grad = b.ew("sub", grad, b.ew("mul", b.ew("mul", b.cast(b.reshape(valid, (valid.shape[0], 1)), _F64),
                                                   eps / nc), wb))
    g = _float(g) if isinstance(g, PNode) else g
    if red == "none":
        scale = b.reshape(g, (g.numel, 1))
    elif red == "sum":
        scale = g
    else:
        scale = b.ew("mul", g, b.cast(_inv_total(b, wt), g.dtype))
    grad = b.ew("mul", grad, scale)
    if single:
        grad = b.reshape(grad, (nc,))
    return [_finish(b, n, _unrows(b, grad, shape))]


@decomp("nll_loss")
def _nll(b, n, args, at):
    x, t, w = args
    x = _float(x)
    x, t, single = _batched(b, x, t)
    ts, valid, wt = _targets(b, t, x.shape[1], w, at["ignore_index"], x.dtype)
    loss = b.where(valid, b.ew("mul", b.ew("neg", _class_gather(b, x, ts)), wt), 0)
    red = at["reduction"]
    r = _reduce_class_loss(b, loss, wt, red, single)
    return [_finish(b, n, r)]


@decomp("nll_loss_backward")
def _nll_bw(b, n, args, at):
    g, t, w = args
    shape, dt = tuple(at["shape"]), np.dtype(at["dtype"])
    if dt not in (_F32, _F64):
        raise Unsupported("dtype")
    single = len(shape) == 1
    if len(shape) > 2:
        raise Unsupported("spatial nll")
    full = (1,) + shape if single else shape
    t = b.reshape(t, (1,)) if single else t
    ts, valid, wt = _targets(b, t, full[1], w, at["ignore_index"], dt)
    gg = _float(g)
    red = at["reduction"]
    if red == "none":
        coef = b.ew("mul", b.ew("neg", b.reshape(gg, (1,)) if single else gg), wt)
    elif red == "sum":
        coef = b.ew("mul", b.ew("neg", gg), wt)
    else:
        coef = b.ew("mul", b.ew("neg", b.ew("mul", gg, b.cast(_inv_total(b, wt), gg.dtype))), wt)
    onehot = b.ew("eq", b.iota(full, 1), b.reshape(ts, (full[0], 1)))
    out = b.where(onehot, b.reshape(coef, (full[0], 1)), 0, dtype=np.result_type(coef.dtype, dt))
    out = b.cast(out, dt)
    if single:
        out = b.reshape(out, shape)
    return [_finish(b, n, out)]


# ---- normalization -----------------------------------------------------------------------------------------------

@decomp("norm_stats")
def _norm_stats(b, n, args, at):
    x = _float(args[0])
    shape, axes, center = tuple(at["shape"]), tuple(at["axes"]), at.get("center", True)
    xc = b.reshape(x, shape)
    cnt = 1
    for a in axes:
        cnt *= shape[a]
    if cnt == 0:
        raise Unsupported("statistics over an empty dim")
    if not center:
        sq = b.ew("mul", xc, xc)
        var = b.ew("div", b.reduce("sum", sq, axes, True), cnt)
        return [_finish(b, n, b.full(0, var.shape, var.dtype), 0), _finish(b, n, var, 1)]
    mean = b.ew("div", b.reduce("sum", xc, axes, True), cnt)
    d = b.ew("sub", xc, mean)
    var = b.ew("div", b.reduce("sum", b.ew("mul", d, d), axes, True), cnt)
    return [_finish(b, n, mean, 0), _finish(b, n, var, 1)]


@decomp("native_layer_norm", "rms_norm")
@decomp_device("native_group_norm", "native_batch_norm")      # (extern on the CPU: its kernel is as fast)
def _layer_norm(b, n, args, at):
    x, w, bias, mean, var = args
    x = _float(x)
    shape, sshape, wshape = tuple(at["shape"]), tuple(at["sshape"]), tuple(at["wshape"])
    eps, center = at["eps"], at.get("center", True)
    xc = b.reshape(x, shape)
    rstd = b.ew("div", 1.0, b.ew("sqrt", b.ew("add", b.reshape(var, sshape), eps)), dtype=var.dtype)
    if center:
        y = b.ew("mul", b.ew("sub", xc, b.reshape(mean, sshape)), rstd)
    else:
        y = b.ew("mul", xc, rstd)
    if w is not None:
        y = b.ew("mul", y, b.reshape(w, wshape))
    if bias is not None:
        y = b.ew("add", y, b.reshape(bias, wshape))
    return [_finish(b, n, b.reshape(y, x.shape))]


# ---- embedding -------------------------------------------------------------------------------------------------

@decomp("embedding")
def _embedding(b, n, args, at):
    w, idx = args
    if len(w.shape) != 2:
        raise Unsupported("embedding weight must be 2-D")
    nrows = idx.numel
    d = w.shape[1]
    i2 = b.expand(b.reshape(b.cast(idx, np.int64), (nrows, 1)), (nrows, d))
    r = b.gather(w, i2, 0, error=(IndexError, "index out of range in self"))
    return [_finish(b, n, b.reshape(r, idx.shape + (d,)))]


@decomp("embedding_dense_backward")
def _embedding_bw(b, n, args, at):
    g, idx = args
    if at.get("scale_grad_by_freq", False):
        raise Unsupported("scale_grad_by_freq")
    _float(g)
    nw = at["num_weights"]
    d = g.shape[-1]
    rows = idx.numel
    g2 = b.reshape(g, (rows, d))
    i1 = b.reshape(b.cast(idx, np.int64), (rows,))
    pad = at.get("padding_idx", -1)
    r = b.node("scatter_add", (g2, i1), {"rows": nw, "skip": pad if pad is not None and pad >= 0 else -1},
               (nw, d), g.dtype)
    return [_finish(b, n, r)]


# ---- attention softmax -------------------------------------------------------------------------------------------

@decomp("sdpa_softmax")
def _sdpa_softmax(b, n, args, at):
    x, bias = args
    x = _float(x)
    scale = at.get("scale", 1.0)
    s = b.ew("mul", x, scale) if scale != 1.0 else x
    if bias is not None:
        s = b.ew("add", s, b.cast(bias, s.dtype))
    if s.shape[-1] == 0:
        raise Unsupported("empty rows")
    ax = (len(s.shape) - 1,)
    m = b.reduce("max", s, ax, True)
    dead = b.ew("isinf", m)
    dead = b.ew("and", dead, b.ew("lt", m, 0))
    m = b.where(dead, 0, m, dtype=s.dtype)
    e = b.ew("exp", b.ew("sub", s, m))
    den = b.reduce("sum", e, ax, True)
    den = b.where(dead, 1, den, dtype=s.dtype)
    return [_finish(b, n, b.ew("div", e, den))]


@decomp("sdpa_softmax_backward")
def _sdpa_softmax_bw(b, n, args, at):
    g, p = args
    p = _float(p)
    scale = at.get("scale", 1.0)
    gp = b.ew("mul", g, p)
    ax = (len(p.shape) - 1,)
    ds = b.ew("sub", gp, b.ew("mul", p, b.reduce("sum", gp, ax, True)))
    gx = b.ew("mul", ds, scale) if at.get("need_x", True) else b.full(0, (0,), p.dtype)
    gb = ds if at.get("need_b", False) else b.full(0, (0,), p.dtype)
    return [_finish(b, n, gx, 0), _finish(b, n, gb, 1)]
