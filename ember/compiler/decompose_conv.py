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


def _cols(b, x, k, out_hw, maps, fill):
    """(N, C, kh, kw, Ho, Wo): the windows of (N, C, H, W) ``x`` under the row and column maps."""
    N, C = x.shape[:2]
    (kh, kw), (Ho, Wo) = k, out_hw
    if 0 in x.shape[2:]:
        raise Unsupported("empty spatial dims")
    a = _win(b, x, 2, kh, Ho, maps[0], fill)
    a = _win(b, a, 3, kw, Wo, maps[1], fill)
    return b.permute(b.reshape(a, (N, C, kh, Ho, kw, Wo)), (0, 1, 2, 4, 3, 5))


def _geo(at):
    return at["stride"], at["pad"], at["dil"], at["groups"]


def _conv_cols(b, x, k, out_hw, s, pads, d, transposed=False, fill=0.0):
    """The (N, C, kh, kw, Ho, Wo) windows of ``x`` for stride ``s``, padding ``pads`` = (top, left) and
    dilation ``d``: forward windows, or the transposed ones (an input gradient)."""
    if 0 in x.shape[:2] + tuple(out_hw):
        raise Unsupported("empty convolution or pooling")
    mk = _transposed_map if transposed else _forward_map
    n_h, n_w = (x.shape[2], x.shape[3])
    return _cols(b, x, k, out_hw, (mk(s[0], pads[0], d[0], n_h), mk(s[1], pads[1], d[1], n_w)), fill)


def _add_bias(b, r, bias):
    if bias is None:
        return r
    return b.ew("add", r, b.reshape(bias, (1, bias.shape[0], 1, 1)))


@decomp_device("conv2d")
def _conv2d(b, n, args, at):
    x, w, bias = args
    _float(x, w, bias)
    N, (O, Cg, kh, kw) = x.shape[0], w.shape
    s, p, d, G = _geo(at)
    Ho, Wo = _out(n)[0][2:]
    cols = _conv_cols(b, x, (kh, kw), (Ho, Wo), s, (p[0], p[2]), d)
    L, CK = Ho * Wo, Cg * kh * kw
    cols = b.reshape(b.permute(b.reshape(cols, (N, G, CK, L)), (1, 2, 0, 3)), (G, CK, N * L))
    r = b.matmul(b.reshape(w, (G, O // G, CK)), cols)                  # (G, O/G, N*L)
    r = b.permute(b.reshape(r, (G, O // G, N, L)), (2, 0, 1, 3))
    return [_finish(b, n, _add_bias(b, b.reshape(r, (N, O, Ho, Wo)), bias))]


@decomp_device("conv_transpose2d")
def _conv_transpose2d(b, n, args, at):
    y, w, bias = args
    _float(y, w, bias)
    (N, O), (_, Cg, kh, kw) = y.shape[:2], w.shape
    s, p, d, G = _geo(at)
    H, W = _out(n)[0][2:]
    t = _conv_cols(b, y, (kh, kw), (H, W), s, (p[0], p[2]), d, transposed=True)
    OK = O // G * kh * kw
    t = b.reshape(b.permute(b.reshape(t, (N, G, OK, H * W)), (1, 2, 0, 3)), (G, OK, N * H * W))
    wt = b.reshape(b.permute(b.reshape(w, (G, O // G, Cg, kh, kw)), (0, 2, 1, 3, 4)), (G, Cg, OK))
    r = b.matmul(wt, t)                                                # (G, Cg, N*H*W)
    r = b.permute(b.reshape(r, (G, Cg, N, H, W)), (2, 0, 1, 3, 4))
    return [_finish(b, n, _add_bias(b, b.reshape(r, (N, G * Cg, H, W)), bias))]


@decomp_device("conv2d_weight")
def _conv2d_weight(b, n, args, at):
    x, g = args
    _float(x, g)
    (N, C), (_, O, Ho, Wo) = x.shape[:2], g.shape
    s, p, d, G = _geo(at)
    kh, kw = at["kernel"]
    if 0 in (O, Ho, Wo):
        raise Unsupported("empty convolution")
    cols = _conv_cols(b, x, (kh, kw), (Ho, Wo), s, (p[0], p[2]), d)
    L, CK = Ho * Wo, C // G * kh * kw
    cols = b.reshape(b.permute(b.reshape(cols, (N, G, CK, L)), (1, 0, 3, 2)), (G, N * L, CK))
    gg = b.reshape(b.permute(b.reshape(g, (N, G, O // G, L)), (1, 2, 0, 3)), (G, O // G, N * L))
    r = b.matmul(gg, cols)                                             # (G, O/G, CK)
    return [_finish(b, n, b.reshape(r, (O, C // G, kh, kw)))]


# ---- pooling --------------------------------------------------------------------------------------------

def _lowest(dt):
    if dt.kind == "f":
        return -np.inf
    if dt.kind in "iu":
        return int(np.iinfo(dt).min)
    raise Unsupported(f"max pooling of {dt}")


@decomp_device("max_pool2d")
def _max_pool2d(b, n, args, at):
    x = args[0]
    k, s, p, d = at["k"], at["s"], at["p"], at["d"]
    N, C, H, W = x.shape
    Ho, Wo = _out(n)[0][2:]
    cols = _conv_cols(b, x, k, (Ho, Wo), s, p, d, fill=_lowest(x.dtype))
    K = k[0] * k[1]
    win = b.reshape(b.permute(cols, (0, 1, 4, 5, 2, 3)), (N, C, Ho, Wo, K))
    vals = b.reduce("max", win, (4,))
    arg = b.reduce("argmax", win, (4,))
    i = _idiv(b, arg, k[1])
    j = b.ew("sub", arg, b.ew("mul", i, k[1]))
    shp = (N, C, Ho, Wo)
    h = b.ew("add", b.ew("sub", b.ew("mul", b.iota(shp, 2), s[0]), p[0]), b.ew("mul", i, d[0]))
    w = b.ew("add", b.ew("sub", b.ew("mul", b.iota(shp, 3), s[1]), p[1]), b.ew("mul", j, d[1]))
    idx = b.ew("add", b.ew("mul", h, W), w)
    return [_finish(b, n, vals, 0), _finish(b, n, idx, 1)]


@decomp_device("max_pool_gather")
def _max_pool_gather(b, n, args, at):
    x, idx = args
    N, C = x.shape[:2]
    L = int(np.prod(idx.shape[2:], dtype=np.int64))
    if 0 in (N, C, L) or 0 in x.shape:
        raise Unsupported("empty pooling")
    r = b.gather(b.reshape(x, (N * C, x.numel // (N * C))), b.reshape(idx, (N * C, L)), 1)
    return [_finish(b, n, b.reshape(r, idx.shape))]


@decomp_device("max_pool_scatter")
def _max_pool_scatter(b, n, args, at):
    g, idx = args
    _float(g)
    N, C = g.shape[:2]
    HW = int(at["in_hw"][0]) * int(at["in_hw"][1])
    L = g.numel // max(N * C, 1)
    if 0 in (N, C, L, HW):
        raise Unsupported("empty pooling")
    flat = b.ew("add", b.reshape(b.cast(idx, _I64), (N * C, L)), b.ew("mul", b.iota((N * C, L), 0), HW))
    r = b.node("scatter_add", (b.reshape(g, (N * C * L, 1)), b.reshape(flat, (N * C * L,))),
               {"rows": N * C * HW, "skip": -1}, (N * C * HW, 1), g.dtype)
    return [_finish(b, n, b.reshape(r, (N, C) + tuple(at["in_hw"])))]


def _avg_divisor(b, shp, H, W, at):
    """torch's per-window divisor over (N, C, Ho, Wo) (``divisor_override``, ``count_include_pad``)."""
    if at["div"]:
        return float(at["div"])
    k, s, p = at["k"], at["s"], at["p"]

    def dim(axis, n, kk, ss, pp):
        start = b.ew("sub", b.ew("mul", b.iota(shp, axis), ss), pp)
        end = b.ew("min", b.ew("add", start, kk), n + pp)
        if at["cip"]:
            return b.ew("sub", end, start)
        return b.ew("sub", b.ew("min", end, n), b.ew("max", start, 0))
    return b.ew("mul", dim(2, H, k[0], s[0], p[0]), dim(3, W, k[1], s[1], p[1]))


def _divided(b, a, out_shape, in_hw, at):
    """``a`` (N, C, Ho, Wo) divided by the windows' divisors (``in_hw``: the pooled input's H, W)."""
    _float(a)
    div = _avg_divisor(b, out_shape, in_hw[0], in_hw[1], at)
    return b.ew("div", a, div if isinstance(div, float) else b.cast(div, a.dtype))


@decomp_device("avg_pool2d")
def _avg_pool2d(b, n, args, at):
    x = args[0]
    _float(x)
    out_shape = _out(n)[0]
    cols = _conv_cols(b, x, at["k"], out_shape[2:], at["s"], at["p"], (1, 1))
    return [_finish(b, n, _divided(b, b.reduce("sum", cols, (2, 3)), out_shape, x.shape[2:], at))]


@decomp_device("avg_pool2d_backward")
def _avg_pool2d_backward(b, n, args, at):
    g = args[0]
    in_hw = tuple(at["in_hw"])
    if 0 in g.shape + in_hw:
        raise Unsupported("empty pooling")
    gd = _divided(b, g, g.shape, in_hw, at)
    t = _conv_cols(b, gd, at["k"], in_hw, at["s"], at["p"], (1, 1), transposed=True)
    return [_finish(b, n, b.reduce("sum", t, (2, 3)))]
