"""Device-only decompositions of convolution and pooling into primitives (``decomp_device``).

On the CPU these ops stay extern: their NumPy kernels (im2col + BLAS) are what generated C would do,
only faster. On an OpenCL device they need kernels, so here they are written in the compiler's
primitives, the same way:

- **windows**: ``_cols`` gathers the sliding windows of an (N, C, H, W) input into (N, C, kh, kw, Ho, Wo)
  with two ``gather`` s (rows, then columns) whose indices come from ``iota`` arithmetic; positions
  outside the input (padding) read a fill value. A *forward* window map sends output position ``o`` and
  kernel offset ``i`` to input ``o * s + i * d - p``; the *transposed* map (the gradient of a
  convolution with respect to its input, and of pooling) reads, for input position ``h``, the output
  ``(h + p - i * d) / s`` where that is a whole number in range -- so col2im's overlapping sums become
  reductions, with no scatter;
- **conv2d** is one GEMM per group over the columns (``(O, C*kh*kw) @ (C*kh*kw, N*Ho*Wo)``), its
  weight gradient ``conv2d_weight`` the GEMM of the output gradient with the columns, and its input
  gradient ``conv_transpose2d`` the GEMM of the transposed weight with the transposed windows;
- **max_pool2d** is a max and an argmax over the windows (the flat index ``h * W + w`` rebuilt from the
  argmax), ``max_pool_gather`` a gather, ``max_pool_scatter`` the ``scatter_add`` primitive;
  **avg_pool2d** a sum over the windows divided by torch's per-window divisor, its backward the
  transposed windows of the divided gradient.
"""
from __future__ import annotations

import math

import numpy as np

from .decompose import decomp_device, Unsupported, _finish, _out

_F32, _F64, _I64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)


def _float(*xs):
    for x in xs:
        if x is not None and x.dtype not in (_F32, _F64):
            raise Unsupported("only float32/float64 are computed natively")
    dts = {x.dtype for x in xs if x is not None}
    if len(dts) > 1:
        raise Unsupported("mixed dtypes")


def _idiv(b, t, s: int):
    """floor(t / s) for an int64 node and a positive int (a float estimate, corrected to be exact)."""
    if s == 1:
        return t
    q = b.cast(b.ew("floor", b.ew("div", b.cast(t, _F32), float(s))), _I64)
    r = b.ew("sub", t, b.ew("mul", q, s))
    q = b.ew("sub", q, b.cast(b.ew("lt", r, 0), _I64))
    return b.ew("add", q, b.cast(b.ew("ge", r, s), _I64))


def _forward_map(s, p, d, n):
    """Window map of a convolution/pooling: input ``o * s + i * d - p``, valid inside [0, n)."""
    def f(b, i, o):
        src = b.ew("sub", b.ew("add", b.ew("mul", o, s), b.ew("mul", i, d)), p)
        return src, b.ew("and", b.ew("ge", src, 0), b.ew("lt", src, n))
    return f


def _transposed_map(s, p, d, n):
    """The transposed map: output ``(o + p - i * d) / s`` when whole and inside [0, n)."""
    def f(b, i, o):
        t = b.ew("sub", b.ew("add", o, p), b.ew("mul", i, d))
        q = _idiv(b, t, s)
        ok = b.ew("and", b.ew("ge", t, 0), b.ew("lt", q, n))
        if s != 1:
            ok = b.ew("and", ok, b.ew("eq", b.ew("sub", t, b.ew("mul", q, s)), 0))
        return q, ok
    return f


def _win(b, x, axis, k, lout, index_map, fill):
    """``x`` with dim ``axis`` (length n) replaced by k * lout window positions (kernel offset major)."""
    n = x.shape[axis]
    shp = x.shape[:axis] + (k, lout) + x.shape[axis + 1:]
    src, ok = index_map(b, b.iota(shp, axis), b.iota(shp, axis + 1))
    flat = x.shape[:axis] + (k * lout,) + x.shape[axis + 1:]
    src = b.reshape(b.ew("min", b.ew("max", src, 0), max(n - 1, 0)), flat)
    val = b.gather(x, src, axis)
    return b.where(b.reshape(ok, flat), val, fill, dtype=x.dtype)


def _cols(b, x, k, outs, maps, fill):
    """(N, C, *k, *outs): the windows of (N, C, *spatial) ``x`` under the per-dim index maps."""
    N, C = x.shape[:2]
    nsp = len(k)
    if 0 in x.shape[2:]:
        raise Unsupported("empty spatial dims")
    a = x
    for i in range(nsp):
        a = _win(b, a, 2 + i, k[i], outs[i], maps[i], fill)
    a = b.reshape(a, (N, C) + tuple(v for kk, o in zip(k, outs) for v in (kk, o)))
    return b.permute(a, (0, 1) + tuple(2 + 2 * i for i in range(nsp)) + tuple(3 + 2 * i for i in range(nsp)))


def _geo(at):
    return at["stride"], at["pad"], at["dil"], at["groups"]


def _conv_cols(b, x, k, outs, s, pads, d, transposed=False, fill=0.0):
    """The (N, C, *k, *outs) windows of ``x`` for strides ``s``, paddings before each dim ``pads`` and
    dilations ``d``: forward windows, or the transposed ones (an input gradient)."""
    if 0 in x.shape[:2] + tuple(outs):
        raise Unsupported("empty convolution or pooling")
    mk = _transposed_map if transposed else _forward_map
    maps = tuple(mk(s[i], pads[i], d[i], x.shape[2 + i]) for i in range(len(k)))
    return _cols(b, x, k, outs, maps, fill)


def _add_bias(b, r, bias):
    if bias is None:
        return r
    return b.ew("add", r, b.reshape(bias, (1, bias.shape[0]) + (1,) * (len(r.shape) - 2)))


def _prod(xs) -> int:
    return int(np.prod(xs, dtype=np.int64))


def _befores(p, nsp):
    """The padding before each spatial dim (``pad`` is (before0, after0, before1, ...))."""
    return tuple(p[2 * i] for i in range(nsp))


@decomp_device("conv2d", "conv3d")
def _conv(b, n, args, at):
    x, w, bias = args
    _float(x, w, bias)
    N, O, Cg, k = x.shape[0], w.shape[0], w.shape[1], w.shape[2:]
    s, p, d, G = _geo(at)
    outs = _out(n)[0][2:]
    cols = _conv_cols(b, x, k, outs, s, _befores(p, len(k)), d)
    L, CK = _prod(outs), Cg * _prod(k)
    cols = b.reshape(b.permute(b.reshape(cols, (N, G, CK, L)), (1, 2, 0, 3)), (G, CK, N * L))
    r = b.matmul(b.reshape(w, (G, O // G, CK)), cols)                  # (G, O/G, N*L)
    r = b.permute(b.reshape(r, (G, O // G, N, L)), (2, 0, 1, 3))
    return [_finish(b, n, _add_bias(b, b.reshape(r, (N, O) + tuple(outs)), bias))]


@decomp_device("conv_transpose2d", "conv_transpose3d")
def _conv_transpose(b, n, args, at):
    y, w, bias = args
    _float(y, w, bias)
    (N, O), Cg, k = y.shape[:2], w.shape[1], w.shape[2:]
    s, p, d, G = _geo(at)
    outs = _out(n)[0][2:]
    t = _conv_cols(b, y, k, outs, s, _befores(p, len(k)), d, transposed=True)
    OK, L = O // G * _prod(k), _prod(outs)
    t = b.reshape(b.permute(b.reshape(t, (N, G, OK, L)), (1, 2, 0, 3)), (G, OK, N * L))
    wt = b.reshape(b.permute(b.reshape(w, (G, O // G, Cg, _prod(k))), (0, 2, 1, 3)), (G, Cg, OK))
    r = b.matmul(wt, t)                                                # (G, Cg, N*L)
    r = b.permute(b.reshape(r, (G, Cg, N, L)), (2, 0, 1, 3))
    return [_finish(b, n, _add_bias(b, b.reshape(r, (N, G * Cg) + tuple(outs)), bias))]


@decomp_device("conv2d_weight", "conv3d_weight")
def _conv_weight(b, n, args, at):
    x, g = args
    _float(x, g)
    (N, C), O, outs = x.shape[:2], g.shape[1], g.shape[2:]
    s, p, d, G = _geo(at)
    k = tuple(at["kernel"])
    if 0 in (O,) + tuple(outs):
        raise Unsupported("empty convolution")
    cols = _conv_cols(b, x, k, outs, s, _befores(p, len(k)), d)
    L, CK = _prod(outs), C // G * _prod(k)
    cols = b.reshape(b.permute(b.reshape(cols, (N, G, CK, L)), (1, 0, 3, 2)), (G, N * L, CK))
    gg = b.reshape(b.permute(b.reshape(g, (N, G, O // G, L)), (1, 2, 0, 3)), (G, O // G, N * L))
    r = b.matmul(gg, cols)                                             # (G, O/G, CK)
    return [_finish(b, n, b.reshape(r, (O, C // G) + k))]


# ---- pooling --------------------------------------------------------------------------------------------

def _lowest(dt):
    if dt.kind == "f":
        return -np.inf
    if dt.kind in "iu":
        return int(np.iinfo(dt).min)
    raise Unsupported(f"max pooling of {dt}")


def _plane_index(b, shp, starts, js, d, sizes):
    """The flat in-plane index ``sum_i (starts_i + js_i * d_i) * stride_i`` of an (N, C, *outs) grid."""
    idx, st = None, 1
    for i in reversed(range(len(sizes))):
        pos = b.ew("add", starts[i], b.ew("mul", js[i], d[i]))
        term = b.ew("mul", pos, st)
        idx = term if idx is None else b.ew("add", idx, term)
        st *= sizes[i]
    return b.broadcast_to(idx, shp)


def _unravel(b, flat, k):
    """Per-dim offsets (row-major) of a flat position in a window of shape ``k``."""
    js = []
    for kk in reversed(k):
        q = _idiv(b, flat, kk)
        js.append(b.ew("sub", flat, b.ew("mul", q, kk)))
        flat = q
    return js[::-1]


def _window_max(b, n, x, cols, k, starts, d):
    """(values, flat in-plane arg-max indices) over the windows ``cols`` (N, C, *k, *outs)."""
    N, C = x.shape[:2]
    nsp = len(k)
    outs = cols.shape[2 + nsp:]
    win = b.reshape(b.permute(cols, (0, 1) + tuple(range(2 + nsp, 2 + 2 * nsp)) + tuple(range(2, 2 + nsp))),
                    (N, C) + tuple(outs) + (_prod(k),))
    vals = b.reduce("max", win, (2 + nsp,))
    arg = b.reduce("argmax", win, (2 + nsp,))
    idx = _plane_index(b, (N, C) + tuple(outs), starts, _unravel(b, arg, k), d, x.shape[2:])
    return [_finish(b, n, vals, 0), _finish(b, n, idx, 1)]


@decomp_device("max_pool2d", "max_pool3d")
def _max_pool(b, n, args, at):
    x = args[0]
    k, s, p, d = at["k"], at["s"], at["p"], at["d"]
    shp = _out(n)[0]
    cols = _conv_cols(b, x, k, shp[2:], s, p, d, fill=_lowest(x.dtype))
    starts = [b.ew("sub", b.ew("mul", b.iota(shp, 2 + i), s[i]), p[i]) for i in range(len(k))]
    return _window_max(b, n, x, cols, k, starts, d)


def _adaptive_map(n, no):
    """torch's adaptive windows: output ``o`` reads [floor(o*n/no), ceil((o+1)*n/no))."""
    def f(b, j, o):
        start = _idiv(b, b.ew("mul", o, n), no)
        src = b.ew("add", start, j)
        return src, b.ew("lt", src, _idiv(b, b.ew("add", b.ew("mul", o, n), n + no - 1), no))
    return f


@decomp_device("adaptive_max_pool2d", "adaptive_max_pool3d")
def _adaptive_max_pool(b, n, args, at):
    x = args[0]
    shp = _out(n)[0]
    outs, sizes = shp[2:], x.shape[2:]
    if 0 in shp or 0 in sizes:
        raise Unsupported("empty pooling")
    k = tuple(max(-(-(o + 1) * m // no) - (o * m) // no for o in range(no)) for m, no in zip(sizes, outs))
    cols = _cols(b, x, k, outs, tuple(_adaptive_map(m, no) for m, no in zip(sizes, outs)), _lowest(x.dtype))
    starts = [_idiv(b, b.ew("mul", b.iota(shp, 2 + i), sizes[i]), outs[i]) for i in range(len(k))]
    return _window_max(b, n, x, cols, k, starts, (1,) * len(k))


@decomp_device("max_pool_gather")
def _max_pool_gather(b, n, args, at):
    x, idx = args
    N, C = x.shape[:2]
    L = math.prod(idx.shape[2:])
    if 0 in (N, C, L) or 0 in x.shape:
        raise Unsupported("empty pooling")
    r = b.gather(b.reshape(x, (N * C, x.numel // (N * C))), b.reshape(idx, (N * C, L)), 1)
    return [_finish(b, n, b.reshape(r, idx.shape))]


@decomp_device("max_pool_scatter")
def _max_pool_scatter(b, n, args, at):
    g, idx = args
    _float(g)
    N, C = g.shape[:2]
    HW = _prod(tuple(int(v) for v in at["in_hw"]))
    L = g.numel // max(N * C, 1)
    if 0 in (N, C, L, HW):
        raise Unsupported("empty pooling")
    flat = b.ew("add", b.reshape(b.cast(idx, _I64), (N * C, L)), b.ew("mul", b.iota((N * C, L), 0), HW))
    r = b.node("scatter_add", (b.reshape(g, (N * C * L, 1)), b.reshape(flat, (N * C * L,))),
               {"rows": N * C * HW, "skip": -1}, (N * C * HW, 1), g.dtype)
    return [_finish(b, n, b.reshape(r, (N, C) + tuple(at["in_hw"])))]


def _avg_divisor(b, shp, sizes, at):
    """torch's per-window divisor over (N, C, *outs) (``divisor_override``, ``count_include_pad``)."""
    if at["div"]:
        return float(at["div"])
    k, s, p = at["k"], at["s"], at["p"]
    r = None
    for i, m in enumerate(sizes):
        start = b.ew("sub", b.ew("mul", b.iota(shp, 2 + i), s[i]), p[i])
        end = b.ew("min", b.ew("add", start, k[i]), m + p[i])
        v = b.ew("sub", end, start) if at["cip"] else b.ew("sub", b.ew("min", end, m), b.ew("max", start, 0))
        r = v if r is None else b.ew("mul", r, v)
    return r


def _divided(b, a, out_shape, in_sizes, at):
    """``a`` (N, C, *outs) divided by the windows' divisors (``in_sizes``: the pooled input's sizes)."""
    _float(a)
    div = _avg_divisor(b, out_shape, in_sizes, at)
    return b.ew("div", a, div if isinstance(div, float) else b.cast(div, a.dtype))


def _k_axes(k):
    return tuple(range(2, 2 + len(k)))


@decomp_device("avg_pool2d", "avg_pool3d")
def _avg_pool(b, n, args, at):
    x = args[0]
    _float(x)
    out_shape = _out(n)[0]
    k = at["k"]
    cols = _conv_cols(b, x, k, out_shape[2:], at["s"], at["p"], (1,) * len(k))
    return [_finish(b, n, _divided(b, b.reduce("sum", cols, _k_axes(k)), out_shape, x.shape[2:], at))]


@decomp_device("avg_pool2d_backward", "avg_pool3d_backward")
def _avg_pool_backward(b, n, args, at):
    g = args[0]
    in_sizes = tuple(at["in_hw"])
    if 0 in g.shape + in_sizes:
        raise Unsupported("empty pooling")
    k = at["k"]
    gd = _divided(b, g, g.shape, in_sizes, at)
    t = _conv_cols(b, gd, k, in_sizes, at["s"], at["p"], (1,) * len(k), transposed=True)
    return [_finish(b, n, b.reduce("sum", t, _k_axes(k)))]
