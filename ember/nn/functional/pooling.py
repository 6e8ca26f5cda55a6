"""Pooling: max / average / adaptive / power-average pooling in 1-d and 2-d, and max unpooling.

The kernels walk the kernel offsets (a handful of vectorised strided slices of the padded input) rather
than copying every window, which is both faster and gives torch's scan order for ties and NaN (a NaN
wins, the last one seen). Ops and their derivatives:

* ``max_pool2d`` -> (values, flat indices into each input plane), no derivative of its own: when the
  input needs a gradient the values are re-read with ``max_pool_gather(x, indices)``, whose derivative
  scatters to the arg-max positions (``max_pool_scatter``) and vice versa;
* ``avg_pool2d`` and ``avg_pool2d_backward`` are each other's adjoint (same geometry, same divisors);
* ``adaptive_max_pool2d`` -> (values, indices), differentiated through the same gather/scatter pair;
* adaptive average pooling is separable: a mean, an ``avg_pool2d`` when the sizes divide, else two
  matmuls with fixed averaging matrices.

1-d pooling runs the 2-d ops on a height-1 view; unbatched (C, H, W) input gets a batch dim of 1.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap, _wrap_dim
from ...autograd.grad_mode import GRAD
from ...ops.registry import register, apply, dtype_name, node_class, rename
from ...ops.linalg_products import matmul_raw

__all__ = ["max_pool1d", "max_pool2d", "max_pool1d_with_indices", "max_pool2d_with_indices",
           "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool1d_with_indices",
           "adaptive_max_pool2d_with_indices", "lp_pool1d", "lp_pool2d", "max_unpool1d", "max_unpool2d"]

_LOW = (np.dtype(_dt.float16.np), np.dtype(_dt.bfloat16.np))


def _shape_str(s) -> str:
    return "[" + ", ".join(str(v) for v in s) + "]"


def _tuple(v, n: int, name: str, op: str) -> tuple:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v),) * n
    if isinstance(v, (tuple, list)):
        vals = tuple(int(x) for x in v)
        if len(vals) == 1:
            return vals * n
        if len(vals) == n:
            return vals
        raise RuntimeError(f"{op}: {name} must either be a single int, or a tuple of {n} ints")
    raise TypeError(f"{op}(): argument '{name}' must be tuple of ints, not {type(v).__name__}")


def _check_input(input, op: str, nsp: int) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    shp = input._data.shape
    if len(shp) not in (nsp + 1, nsp + 2) or any(v == 0 for v in shp[-nsp - 1:]):
        dims = "2D or 3D" if nsp == 1 else "3D or 4D"
        raise RuntimeError(f"non-empty {dims} (batch mode) tensor expected for input")


def _to4d(input, nsp: int):
    """(N, C, H, W) view of a 1-d/2-d, batched or unbatched pooling input, and how to undo it."""
    x = input
    unbatched = input._data.ndim == nsp + 1
    if unbatched:
        x = x.unsqueeze(0)
    if nsp == 1:
        x = x.unsqueeze(2)

    def back(t):
        if nsp == 1:
            t = t.squeeze(2)
        return t.squeeze(0) if unbatched else t
    return x, back


_POOL_NODES = {n: node_class(n + "Backward0") for n in (
    "MaxPool2DWithIndices", "AvgPool2D", "AdaptiveMaxPool2D", "AdaptiveAvgPool2D")}
_MEAN_DIM = node_class("MeanBackward1")


def _named(t, nsp: int, cls):
    """torch pools (C, H, W) and (N, C, H, W) input with one op: the 2-d result gets that op's name (a
    1-d pooling ends in a squeeze, in torch as here)."""
    return rename(t, cls) if nsp == 2 else t


def _pool_out(n: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    num = n + 2 * p - d * (k - 1) - 1
    o = (num + (s - 1 if ceil else 0)) // s + 1
    if ceil and (o - 1) * s >= n + p:
        # the last window must start inside the input or the left padding
        o -= 1
    return o


def _pool_geom(input, kernel_size, stride, padding, dilation, ceil_mode, nsp, op):
    """Validated (k, s, p, d) as 2-tuples for the 2-d kernels (1-d gets a unit height) and output size."""
    k = _tuple(kernel_size, nsp, "kernel_size", op)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _tuple(stride, nsp, "stride", op)
    p = _tuple(padding, nsp, "padding", op)
    d = _tuple(dilation, nsp, "dilation", op)
    if any(v <= 0 for v in k):
        raise RuntimeError(f"{op}: kernel_size must be greater than zero, but got {list(k)}" if nsp == 2 else
                           f"{op}() kernel_size must be greater than zero, but got {k[0]}")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"{op}: stride must be greater than zero, but got {list(s)}" if nsp == 2 else
                           f"{op}() stride must be greater than zero, but got {s[0]}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"{op}: dilation must be greater than zero, but got {list(d)}" if nsp == 2 else
                           f"{op}() dilation must be greater than zero, but got {d[0]}")
    for kk, pp, dd in zip(k, p, d):
        if pp < 0 or pp > (dd * (kk - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pp}, "
                               f"kernel_size={kk} and dilation={dd}")
    sizes = input._data.shape[-nsp:]
    out = tuple(_pool_out(n, kk, ss, pp, dd, bool(ceil_mode)) for n, kk, ss, pp, dd in zip(sizes, k, s, p, d))
    if any(o < 1 for o in out):
        C = input._data.shape[-nsp - 1]
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, (C,) + tuple(sizes)))}). Calculated output "
                           f"size: ({'x'.join(map(str, (C,) + out))}). Output size is too small")
    if nsp == 1:
        k, s, p, d = (1,) + k, (1,) + s, (0,) + p, (1,) + d
    return k, s, p, d


def _padded(x, H, W, Ho, Wo, k, s, p, d, fill):
    """x placed at (p, p) in a ``fill`` canvas large enough for every (ceil-mode) window."""
    Hp = max(H + 2 * p[0], (Ho - 1) * s[0] + d[0] * (k[0] - 1) + 1)
    Wp = max(W + 2 * p[1], (Wo - 1) * s[1] + d[1] * (k[1] - 1) + 1)
    if Hp == H and Wp == W:
        return x
    xp = np.full(x.shape[:2] + (Hp, Wp), fill, dtype=x.dtype)
    xp[:, :, p[0]:p[0] + H, p[1]:p[1] + W] = x
    return xp


def _offsets(k, s, d, Ho, Wo):
    """(i, j, row slice, column slice) for every kernel offset, in torch's scan order."""
    for i in range(k[0]):
        rs = slice(i * d[0], i * d[0] + s[0] * (Ho - 1) + 1, s[0])
        for j in range(k[1]):
            yield i, j, rs, slice(j * d[1], j * d[1] + s[1] * (Wo - 1) + 1, s[1])


# ---- max pooling ---------------------------------------------------------------------------------------


def _max_pool_kernel(x, k, s, p, d, ceil):
    dt = x.dtype
    if dt in _LOW:
        x = x.astype(np.float32)         # exact: comparisons only
    N, C, H, W = x.shape
    Ho, Wo = _pool_out(H, k[0], s[0], p[0], d[0], ceil), _pool_out(W, k[1], s[1], p[1], d[1], ceil)
    is_float = x.dtype.kind == "f"
    fill = -np.inf if is_float else np.iinfo(x.dtype).min
    xp = _padded(x, H, W, Ho, Wo, k, s, p, d, fill)
    nan = is_float and bool(np.isnan(x).any())
    K = k[0] * k[1]
    best = arg = None
    for i, j, rs, cs in _offsets(k, s, d, Ho, Wo):
        v = xp[:, :, rs, cs]
        if best is None:
            best = v.copy()
            arg = np.zeros(best.shape, dtype=np.int8 if K < 128 else np.int32)
            continue
        pos = arg.dtype.type(i * k[1] + j)
        if nan:
            upd = (v > best) | np.isnan(v)      # torch: a NaN always takes over
            best = np.where(upd, v, best)
        else:
            upd = v > best
            np.maximum(best, v, out=best)
        arg -= upd * (arg - pos)                # arg = where(upd, pos, arg) without a masked copy
    # flat index h * W + w = (window origin) + (offset of the arg-max within the window)
    off = np.arange(K)
    table = (off // k[1]) * d[0] * W + (off % k[1]) * d[1]
    hs = (np.arange(Ho) * s[0] - p[0]).reshape(Ho, 1)
    ws = (np.arange(Wo) * s[1] - p[1]).reshape(1, Wo)
    idx = (hs * W + ws) + table[arg]
    if (p[0] or p[1] or ceil) and bool((best == fill).any()):
        # a padded position may have won a window whose every value equals the fill: torch reports the
        # window's first in-bounds element there
        h = hs + (off // k[1] * d[0])[arg]
        w = ws + (off % k[1] * d[1])[arg]
        oob = (h < 0) | (h >= H) | (w < 0) | (w >= W)
        h0 = np.where(hs < 0, hs + ((-hs + d[0] - 1) // d[0]) * d[0], hs)
        w0 = np.where(ws < 0, ws + ((-ws + d[1] - 1) // d[1]) * d[1], ws)
        idx = np.where(oob, h0 * W + w0, idx)
    return (best.astype(dt) if best.dtype != dt else best), idx


def _scatter_kernel(g, idx, in_hw, unique):
    N, C = g.shape[:2]
    HW = in_hw[0] * in_hw[1]
    g2 = g.reshape(N * C, -1)
    i2 = idx.reshape(N * C, -1)
    flat = (i2 + (np.arange(N * C, dtype=np.int64) * HW)[:, None]).ravel()
    if unique:
        out = np.zeros(N * C * HW, dtype=g.dtype)
        out[flat] = g2.ravel()
    else:
        # overlapping windows: sum the contributions (bincount accumulates in float64)
        out = np.bincount(flat, weights=g2.ravel().astype(np.float64), minlength=N * C * HW).astype(g.dtype)
    return out.reshape((N, C) + tuple(in_hw))


def _gather_kernel(x, idx, unique):
    N, C = x.shape[:2]
    picked = np.take_along_axis(x.reshape(N * C, -1), idx.reshape(N * C, -1), axis=1)
    return picked.reshape(idx.shape)


def _gather_bw(ctx, g):
    x, idx = ctx.inputs
    return apply(MAX_SCATTER, (g, idx), {"in_hw": x._data.shape[2:], "unique": ctx.attrs["unique"]}), None


def _scatter_bw(ctx, gg):
    g, idx = ctx.inputs
    return apply(MAX_GATHER, (gg, idx), {"unique": ctx.attrs["unique"]}), None


# The pooling kernel finds values and arg-max indices; the gradient path is a gather of the input at the
# indices, so backward keeps only the indices (like torch), and an in-place change of the pooled values
# (e.g. a following ReLU(inplace=True)) does not invalidate it. Gather and scatter are each other's
# derivative.
MAX_POOL2D = register("max_pool2d", _max_pool_kernel, nout=2, differentiable=False)
MAX_GATHER = register("max_pool_gather", _gather_kernel, _gather_bw, save="1")
MAX_SCATTER = register("max_pool_scatter", _scatter_kernel, _scatter_bw, save="1")


def _with_grad(x, vals, idx, unique: bool):
    """Values that carry autograd history: a gather of ``x`` at ``idx`` when ``x`` needs a gradient."""
    if x._rg and GRAD[0]:
        return apply(MAX_GATHER, (x, idx), {"unique": unique})
    return vals


def _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, nsp, op):
    _check_input(input, op, nsp)
    if input._dtype is _dt.bool:
        raise NotImplementedError(f"\"{op}\" not implemented for 'Bool'")
    k, s, p, d = _pool_geom(input, kernel_size, stride, padding, dilation, ceil_mode, nsp, op)
    x, back = _to4d(input, nsp)
    out, idx = apply(MAX_POOL2D, (x,), {"k": k, "s": s, "p": p, "d": d, "ceil": bool(ceil_mode)})
    # windows that cannot overlap send every gradient to a distinct position
    unique = s[0] >= d[0] * (k[0] - 1) + 1 and s[1] >= d[1] * (k[1] - 1) + 1
    return _named(back(_with_grad(x, out, idx, unique)), nsp, _POOL_NODES["MaxPool2DWithIndices"]), back(idx)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    """2-d max pooling returning (values, indices); indices are flat positions ``h * W + w`` in each plane."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 2, "max_pool2d")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """2-d max pooling over (N, C, H, W) or (C, H, W) input (``stride`` defaults to ``kernel_size``).

        >>> F.max_pool2d(ember.arange(16.).reshape(1, 1, 4, 4), 2)
        tensor([[[[ 5.,  7.],
                  [13., 15.]]]])
    """
    out, idx = _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 2, "max_pool2d")
    return (out, idx) if return_indices else out


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    """1-d max pooling returning (values, indices)."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 1, "max_pool1d")


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """1-d max pooling over (N, C, L) or (C, L) input."""
    out, idx = _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 1, "max_pool1d")
    return (out, idx) if return_indices else out


# ---- average pooling -------------------------------------------------------------------------------------


def _avg_divisor(H, W, Ho, Wo, k, s, p, cip, div):
    """Per-output divisors (Ho, Wo) with torch's rules for padding and ceil-mode windows."""
    if div:
        return np.full((Ho, Wo), div, dtype=np.int64)

    def dim(n, no, kk, ss, pp):
        start = np.arange(no) * ss - pp
        end = np.minimum(start + kk, n + pp)
        full = end - start
        return full, np.minimum(end, n) - np.maximum(start, 0)
    fh, ch = dim(H, Ho, k[0], s[0], p[0])
    fw, cw = dim(W, Wo, k[1], s[1], p[1])
    return np.outer(fh, fw) if cip else np.outer(ch, cw)


def _avg_pool_kernel(x, k, s, p, ceil, cip, div):
    dt = x.dtype
    N, C, H, W = x.shape
    Ho, Wo = _pool_out(H, k[0], s[0], p[0], 1, ceil), _pool_out(W, k[1], s[1], p[1], 1, ceil)
    acc_dt = np.float32 if dt in _LOW else dt
    xp = _padded(x.astype(acc_dt, copy=False), H, W, Ho, Wo, k, s, p, (1, 1), 0)
    acc = None
    for _, _, rs, cs in _offsets(k, s, (1, 1), Ho, Wo):
        v = xp[:, :, rs, cs]
        if acc is None:
            acc = v.copy()
        else:
            acc += v
    divisor = _avg_divisor(H, W, Ho, Wo, k, s, p, cip, div)
    if dt.kind in "iu":
        # integer average pooling truncates toward zero, as torch does
        return (np.sign(acc) * (np.abs(acc) // divisor)).astype(dt)
    out = acc / divisor.astype(acc.dtype)
    return out.astype(dt) if out.dtype != dt else out


def _avg_pool_bw_kernel(g, in_hw, k, s, p, ceil, cip, div):
    dt = g.dtype
    N, C, Ho, Wo = g.shape
    H, W = in_hw
    acc_dt = np.float32 if dt in _LOW else dt
    gd = g.astype(acc_dt) / _avg_divisor(H, W, Ho, Wo, k, s, p, cip, div).astype(acc_dt)
    Hp = max(H + 2 * p[0], (Ho - 1) * s[0] + k[0])
    Wp = max(W + 2 * p[1], (Wo - 1) * s[1] + k[1])
    xp = np.zeros((N, C, Hp, Wp), dtype=acc_dt)
    for _, _, rs, cs in _offsets(k, s, (1, 1), Ho, Wo):
        xp[:, :, rs, cs] += gd
    out = np.ascontiguousarray(xp[:, :, p[0]:p[0] + H, p[1]:p[1] + W])
    return out.astype(dt) if out.dtype != dt else out


def _avg_attrs(a):
    return {"k": a["k"], "s": a["s"], "p": a["p"], "ceil": a["ceil"], "cip": a["cip"], "div": a["div"]}


def _avg_pool_bw(ctx, g):
    return apply(AVG_POOL_BW, (g,), dict(_avg_attrs(ctx.attrs), in_hw=ctx.in_shape(0)[2:]))


def _avg_pool_bw_bw(ctx, gg):
    return apply(AVG_POOL2D, (gg,), _avg_attrs(ctx.attrs))


AVG_POOL2D = register("avg_pool2d", _avg_pool_kernel, _avg_pool_bw)
AVG_POOL_BW = register("avg_pool2d_backward", _avg_pool_bw_kernel, _avg_pool_bw_bw)


def _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, nsp, op):
    if nsp == 2 and isinstance(input, Tensor) and input._data.ndim < 3:
        _wrap_dim(-3, input._data.ndim)      # torch's avg_pool2d reads input.size(-3) first: an IndexError
    _check_input(input, op, nsp)
    if input._dtype.category < 2 and input._dtype is not _dt.int64:
        raise NotImplementedError(f"\"{op}\" not implemented for '{dtype_name(input._dtype)}'")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    k, s, p, _ = _pool_geom(input, kernel_size, stride, padding, 1, ceil_mode, nsp, op)
    x, back = _to4d(input, nsp)
    attrs = {"k": k, "s": s, "p": p, "ceil": bool(ceil_mode), "cip": bool(count_include_pad),
             "div": int(divisor_override) if divisor_override else 0}
    return _named(back(apply(AVG_POOL2D, (x,), attrs)), nsp, _POOL_NODES["AvgPool2D"])


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """2-d average pooling; ``count_include_pad`` and ``divisor_override`` choose the divisor as in torch."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2,
                     "avg_pool2d")


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """1-d average pooling over (N, C, L) or (C, L) input."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1, "avg_pool1d")


# ---- adaptive pooling -------------------------------------------------------------------------------------


def _adaptive_sizes(input, output_size, nsp, op):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    nd = input._data.ndim
    if nd not in (nsp + 1, nsp + 2):
        raise RuntimeError(f"{op}(): Expected {nsp + 1}D or {nsp + 2}D tensor, but got {nd}D")
    for i in range(1, nd):
        if input._data.shape[i] == 0:
            raise RuntimeError(f"{op}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {_shape_str(input._data.shape)} with dimension {i} being empty")
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != nsp:
            raise RuntimeError(f"{op}: output_size must be {nsp}")
        out = tuple(input._data.shape[-nsp + i] if o is None else int(o) for i, o in enumerate(output_size))
    else:
        out = (int(output_size),) * nsp
    if any(o < 0 for o in out):
        raise RuntimeError(f"{op}: elements of output_size must be greater than or equal to 0 but received "
                           f"{{{', '.join(map(str, out))}}}")
    return out if nsp == 2 else (1,) + out


def _bounds(n: int, no: int):
    """torch's adaptive windows: [floor(i*n/no), ceil((i+1)*n/no)) for each output i."""
    i = np.arange(no)
    return (i * n) // no, ((i + 1) * n + no - 1) // no


def _avg_matrix(n: int, no: int, dt) -> Tensor:
    st, en = _bounds(n, no)
    m = np.zeros((no, n), dtype=dt.np)
    for o in range(no):
        m[o, st[o]:en[o]] = 1.0 / (en[o] - st[o])
    return wrap(m, dt)


def _adaptive_avg(input, output_size, nsp, op):
    out = _adaptive_sizes(input, output_size, nsp, op)
    if input._dtype.category < 2:
        raise NotImplementedError(f"\"{op}\" not implemented for '{dtype_name(input._dtype)}'")
    x, back = _to4d(input, nsp)
    H, W = x._data.shape[2:]
    Ho, Wo = out
    if (Ho, Wo) == (1, 1):
        return _named(back(x.mean((-2, -1), keepdim=True)), nsp, _MEAN_DIM)     # torch takes a mean too
    node = _POOL_NODES["AdaptiveAvgPool2D"]
    if H % Ho == 0 and W % Wo == 0:
        k = (H // Ho, W // Wo)
        return _named(back(apply(AVG_POOL2D, (x,), {"k": k, "s": k, "p": (0, 0), "ceil": False, "cip": True,
                                                    "div": 0})), nsp, node)
    # separable averaging: rows then columns, each a matmul with a fixed (out, in) matrix
    y = x
    if Wo != W:
        y = matmul_raw(y, _avg_matrix(W, Wo, x._dtype).t())
    if Ho != H:
        y = matmul_raw(_avg_matrix(H, Ho, x._dtype), y)
    if y is x:
        y = x.clone()         # output size == input size: torch still returns a new tensor
    return _named(back(y), nsp, node)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed output size (``None`` keeps that input size)."""
    return _adaptive_avg(input, output_size, 2, "adaptive_avg_pool2d")


def adaptive_avg_pool1d(input, output_size):
    """1-d average pooling to a fixed output length."""
    return _adaptive_avg(input, output_size, 1, "adaptive_avg_pool1d")


def _adaptive_max_kernel(x, out_hw):
    dt = x.dtype
    if dt in _LOW:
        x = x.astype(np.float32)
    N, C, H, W = x.shape
    Ho, Wo = out_hw
    hs, he = _bounds(H, Ho)
    ws, we = _bounds(W, Wo)
    vals = np.empty((N, C, Ho, Wo), dtype=x.dtype)
    idx = np.empty((N, C, Ho, Wo), dtype=np.int64)
    for i in range(Ho):
        for j in range(Wo):
            win = x[:, :, hs[i]:he[i], ws[j]:we[j]].reshape(N, C, -1)
            a = win.argmax(-1)
            if x.dtype.kind == "f":
                isn = np.isnan(win)
                if isn.any():
                    # torch lets the last NaN of the window win
                    last = isn.shape[-1] - 1 - isn[..., ::-1].argmax(-1)
                    a = np.where(isn.any(-1), last, a)
            ww = we[j] - ws[j]
            r, c = np.divmod(a, ww)
            idx[:, :, i, j] = (hs[i] + r) * W + ws[j] + c
            vals[:, :, i, j] = np.take_along_axis(win, a[..., None], -1)[..., 0]
    return (vals.astype(dt) if vals.dtype != dt else vals), idx


ADAPTIVE_MAX = register("adaptive_max_pool2d", _adaptive_max_kernel, nout=2, differentiable=False)


def _adaptive_max(input, output_size, nsp, op):
    out = _adaptive_sizes(input, output_size, nsp, op)
    if input._dtype.category < 2:
        raise NotImplementedError(f"\"{op}\" not implemented for '{dtype_name(input._dtype)}'")
    x, back = _to4d(input, nsp)
    H, W = x._data.shape[2:]
    Ho, Wo = out
    if Ho > 0 and Wo > 0 and H % Ho == 0 and W % Wo == 0:
        # equal windows: plain max pooling gives the same values and indices
        k = (H // Ho, W // Wo)
        v, i = apply(MAX_POOL2D, (x,), {"k": k, "s": k, "p": (0, 0), "d": (1, 1), "ceil": False})
        unique = True
    else:
        v, i = apply(ADAPTIVE_MAX, (x,), {"out_hw": out})
        unique = False
    return _named(back(_with_grad(x, v, i, unique)), nsp, _POOL_NODES["AdaptiveMaxPool2D"]), back(i)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    """Adaptive 2-d max pooling returning (values, indices)."""
    return _adaptive_max(input, output_size, 2, "adaptive_max_pool2d")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling to a fixed output size (``None`` keeps that input size)."""
    v, i = _adaptive_max(input, output_size, 2, "adaptive_max_pool2d")
    return (v, i) if return_indices else v


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    """Adaptive 1-d max pooling returning (values, indices)."""
    return _adaptive_max(input, output_size, 1, "adaptive_max_pool1d")


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """1-d max pooling to a fixed output length."""
    v, i = _adaptive_max(input, output_size, 1, "adaptive_max_pool1d")
    return (v, i) if return_indices else v


# ---- power-average pooling and max unpooling ----------------------------------------------------------------


def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, nsp, op):
    k = _tuple(kernel_size, nsp, "kernel_size", op)
    n = 1
    for v in k:
        n *= v
    pool = avg_pool2d if nsp == 2 else avg_pool1d
    out = pool(input.pow(norm_type), k, stride, 0, ceil_mode)
    # sign(out) * relu(|out|) keeps the gradient finite where the average is 0
    return (out.sign() * out.abs().relu()).mul(n).pow(1.0 / norm_type)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling: ``(sum over the window of x**p) ** (1/p)``."""
    return _lp_pool(input, float(norm_type), kernel_size, stride, ceil_mode, 2, "lp_pool2d")


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """1-d power-average pooling."""
    return _lp_pool(input, float(norm_type), kernel_size, stride, ceil_mode, 1, "lp_pool1d")


def _max_unpool(input, indices, kernel_size, stride, padding, output_size, nsp, op):
    k = _tuple(kernel_size, nsp, "kernel_size", op)
    s = k if stride is None else _tuple(stride, nsp, "stride", op)
    p = _tuple(padding, nsp, "padding", op)
    sizes = input._data.shape[-nsp:]
    default = tuple((n - 1) * ss - 2 * pp + kk for n, ss, pp, kk in zip(sizes, s, p, k))
    if output_size is None:
        out = default
    else:
        out = tuple(int(v) for v in output_size)
        if len(out) == nsp + 2:
            out = out[2:]
        elif len(out) == nsp + 1:
            out = out[1:]
        if len(out) != nsp:
            raise ValueError(f"output_size should be a sequence containing {nsp} or {nsp + 2} elements, but it "
                             f"has a length of '{len(out)}'")
        for o, dflt, ss in zip(out, default, s):
            if o < dflt - ss or o > dflt + ss:
                raise ValueError(f"invalid output_size '{list(out)}' (dim 0 must be between {dflt - ss} and "
                                 f"{dflt + ss})")
    if indices._dtype is not _dt.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {dtype_name(indices._dtype)}")
    if tuple(indices._data.shape) != tuple(input._data.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({_shape_str(input._data.shape)}) but got indices tensor with shape: "
                           f"{_shape_str(indices._data.shape)}")
    x, back = _to4d(input, nsp)
    i4, _ = _to4d(indices, nsp)
    hw = out if nsp == 2 else (1,) + out
    n = hw[0] * hw[1]
    if i4._data.size and (i4._data.min() < 0 or i4._data.max() >= n):
        raise RuntimeError(f"Found an invalid max index: {int(i4._data.max())} (output volumes are of size "
                           f"{'x'.join(map(str, out))}")
    return back(apply(MAX_SCATTER, (x, i4), {"in_hw": hw, "unique": False}))


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Partial inverse of max_pool2d: put each value at its index, zeros elsewhere."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Partial inverse of max_pool1d."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")


def _adaptive_max_pool1d_top(input, output_size):
    # torch.adaptive_max_pool1d returns (values, indices)
    return adaptive_max_pool1d(input, output_size, return_indices=True)


def _max_pool1d_top(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def _max_pool2d_top(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return max_pool2d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def _max_pool1d_with_indices_top(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return max_pool1d_with_indices(input, kernel_size, stride or None, padding, dilation, ceil_mode)


_adaptive_max_pool1d_top.__name__ = "adaptive_max_pool1d"
_max_pool1d_top.__name__ = "max_pool1d"
_max_pool2d_top.__name__ = "max_pool2d"
_max_pool1d_with_indices_top.__name__ = "max_pool1d_with_indices"

from .conv import _export_toplevel  # noqa: E402

_export_toplevel([("max_pool1d", _max_pool1d_top), ("max_pool2d", _max_pool2d_top),
                  ("max_pool1d_with_indices", _max_pool1d_with_indices_top), ("avg_pool1d", avg_pool1d),
                  ("adaptive_avg_pool1d", adaptive_avg_pool1d), ("adaptive_max_pool1d", _adaptive_max_pool1d_top)])
