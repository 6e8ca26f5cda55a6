"""Pooling: max / average / adaptive / power-average pooling in 1-d, 2-d and 3-d, and max unpooling.

The NumPy kernels (any number of spatial dims) are in ``_pool_kernels``. Ops and their derivatives, each
registered for 2-d and 3-d (``max_pool3d``, ``avg_pool3d``, ...; same kernels):

* ``max_pool2d`` -> (values, flat indices into each input plane), no derivative of its own: when the
  input needs a gradient the values are re-read with ``max_pool_gather(x, indices)``, whose derivative
  scatters to the arg-max positions (``max_pool_scatter``) and vice versa (both for any rank);
* ``avg_pool2d`` and ``avg_pool2d_backward`` are each other's adjoint (same geometry, same divisors);
* ``adaptive_max_pool2d`` -> (values, indices), differentiated through the same gather/scatter pair;
* adaptive average pooling is separable: a mean, an average pooling when the sizes divide, else one
  matmul per pooled dim with a fixed averaging matrix.

1-d pooling runs the 2-d ops on a height-1 view; unbatched (C, *spatial) input gets a batch dim of 1.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap, _wrap_dim
from ...autograd.grad_mode import GRAD
from ...ops.registry import register, apply, dtype_name, node_class, rename, FACTORY
from ...ops.linalg_products import matmul_raw
from . import _pool_kernels as _pk
from ._args import int_tuple, shape_str as _shape_str
from ._channels_last import keep as _keep_cl
from ._autocast_fp32 import autocast_fp32

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
           "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "adaptive_max_pool3d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices", "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d",
           "max_unpool2d", "max_unpool3d"]


def _tuple(v, n: int, name: str, op: str) -> tuple:
    return int_tuple(v, n, name, op, "{op}: {name} must either be a single int, or a tuple of {n} ints")


def _check_input(input, op: str, nsp: int) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    shp = input._data.shape
    if len(shp) not in (nsp + 1, nsp + 2) or any(v == 0 for v in shp[-nsp - 1:]):
        raise RuntimeError(f"non-empty {nsp + 1}D or {nsp + 2}D (batch mode) tensor expected for input")


def _batched(input, nsp: int):
    """(N, C, *spatial) view of a batched or unbatched pooling input (1-d gets a unit height, to run the
    2-d ops), and how to undo it."""
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


_POOL_NODES = {(n, r): node_class(f"{n}{r}DBackward0" if n != "MaxPool" else f"MaxPool{r}DWithIndicesBackward0")
               for n in ("MaxPool", "AvgPool", "AdaptiveMaxPool", "AdaptiveAvgPool") for r in (2, 3)}
_MEAN_DIM = node_class("MeanBackward1")


def _named(t, nsp: int, kind):
    """torch pools (C, *spatial) and (N, C, *spatial) input with one op: the 2-d/3-d result gets that op's
    name (``kind`` is a pooling kind or a node class; a 1-d pooling ends in a squeeze, in torch as here)."""
    if nsp == 1:
        return t
    return rename(t, _POOL_NODES[kind, nsp] if isinstance(kind, str) else kind)


def _pool_geom(input, kernel_size, stride, padding, dilation, ceil_mode, nsp, op):
    """Validated (k, s, p, d) as per-dim tuples for the kernels (1-d gets a unit height) after checking
    the output size."""
    k = _tuple(kernel_size, nsp, "kernel_size", op)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _tuple(stride, nsp, "stride", op)
    p = _tuple(padding, nsp, "padding", op)
    d = _tuple(dilation, nsp, "dilation", op)
    for what, v in (("kernel_size", k), ("stride", s), ("dilation", d)):
        if any(x <= 0 for x in v):
            raise RuntimeError(f"{op}() {what} must be greater than zero, but got {v[0]}" if nsp == 1 else
                               f"{op}: {what} must be greater than zero, but got {list(v)}")
    for kk, pp, dd in zip(k, p, d):
        if pp < 0 or pp > (dd * (kk - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pp}, "
                               f"kernel_size={kk} and dilation={dd}")
    sizes = input._data.shape[-nsp:]
    out = _pk.pool_outs(sizes, k, s, p, d, bool(ceil_mode))
    if any(o < 1 for o in out):
        C = input._data.shape[-nsp - 1]
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, (C,) + tuple(sizes)))}). Calculated output "
                           f"size: ({'x'.join(map(str, (C,) + out))}). Output size is too small")
    if nsp == 1:
        k, s, p, d = (1,) + k, (1,) + s, (0,) + p, (1,) + d
    return k, s, p, d


# ---- max pooling ---------------------------------------------------------------------------------------


def _gather_bw(ctx, g):
    x, idx = ctx.inputs
    return _keep_cl(apply(MAX_SCATTER, (g, idx), {"in_hw": x._data.shape[2:], "unique": ctx.attrs["unique"]}), x), None


def _scatter_bw(ctx, gg):
    g, idx = ctx.inputs
    return apply(MAX_GATHER, (gg, idx), {"unique": ctx.attrs["unique"]}), None


# The pooling kernel finds values and arg-max indices; the gradient path is a gather of the input at the
# indices, so backward keeps only the indices (like torch), and an in-place change of the pooled values
# (e.g. a following ReLU(inplace=True)) does not invalidate it. Gather and scatter are each other's
# derivative.
MAX_POOL = {r: register(f"max_pool{r}d", _pk.max_pool_kernel, nout=2, differentiable=False) for r in (2, 3)}
MAX_POOL2D = MAX_POOL[2]
MAX_GATHER = register("max_pool_gather", _pk.gather_kernel, _gather_bw, save="1")
MAX_SCATTER = register("max_pool_scatter", _pk.scatter_kernel, _scatter_bw, save="1")


def _rank(nsp: int) -> int:
    """The rank of the registered op a pooling of ``nsp`` spatial dims runs (1-d runs the 2-d op)."""
    return 3 if nsp == 3 else 2


def _cl(out, x, nsp):
    """A pooling result laid out channels-last when its (batched) input is, as torch's are (1-d pooling
    runs on a height-1 view and stays contiguous, as in torch)."""
    return out if nsp == 1 else _keep_cl(out, x)


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
    x, back = _batched(input, nsp)
    out, idx = apply(MAX_POOL[_rank(nsp)], (x,), {"k": k, "s": s, "p": p, "d": d, "ceil": bool(ceil_mode)})
    # windows that cannot overlap send every gradient to a distinct position
    unique = all(ss >= dd * (kk - 1) + 1 for kk, ss, dd in zip(k, s, d))
    return _named(back(_cl(_with_grad(x, out, idx, unique), x, nsp)), nsp, "MaxPool"), back(_cl(idx, x, nsp))


@autocast_fp32
def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    """3-d max pooling returning (values, indices); indices are flat positions ``(z * H + y) * W + x``."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 3, "max_pool3d")


@autocast_fp32
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """3-d max pooling over (N, C, D, H, W) or (C, D, H, W) input (``stride`` defaults to ``kernel_size``)."""
    out, idx = _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, 3, "max_pool3d")
    return (out, idx) if return_indices else out


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


def _avg_attrs(a):
    return {"k": a["k"], "s": a["s"], "p": a["p"], "ceil": a["ceil"], "cip": a["cip"], "div": a["div"]}


def _avg_pool_bw(ctx, g):
    r = apply(AVG_POOL_BW[len(ctx.attrs["k"])], (g,), dict(_avg_attrs(ctx.attrs), in_hw=ctx.in_shape(0)[2:]))
    return _keep_cl(r, g) if r._data.ndim == 4 else r


def _avg_pool_bw_bw(ctx, gg):
    return apply(AVG_POOL[len(ctx.attrs["k"])], (gg,), _avg_attrs(ctx.attrs))


AVG_POOL = {r: register(f"avg_pool{r}d", _pk.avg_pool_kernel, _avg_pool_bw) for r in (2, 3)}
AVG_POOL_BW = {r: register(f"avg_pool{r}d_backward", _pk.avg_pool_bw_kernel, _avg_pool_bw_bw) for r in (2, 3)}
AVG_POOL2D = AVG_POOL[2]


def _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, nsp, op):
    if nsp == 2 and isinstance(input, Tensor) and input._data.ndim < 3:
        _wrap_dim(-3, input._data.ndim)      # torch's avg_pool2d reads input.size(-3) first: an IndexError
    _check_input(input, op, nsp)
    if input._dtype.category < 2 and input._dtype is not _dt.int64:
        raise NotImplementedError(f"\"{op}\" not implemented for '{dtype_name(input._dtype)}'")
    if nsp == 3 and input._dtype in (_dt.float16, _dt.bfloat16):
        raise NotImplementedError(f"\"avg_pool3d_out_frame\" not implemented for '{dtype_name(input._dtype)}'")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    k, s, p, _ = _pool_geom(input, kernel_size, stride, padding, 1, ceil_mode, nsp, op)
    x, back = _batched(input, nsp)
    attrs = {"k": k, "s": s, "p": p, "ceil": bool(ceil_mode), "cip": bool(count_include_pad),
             "div": int(divisor_override) if divisor_override else 0}
    out = apply(AVG_POOL[_rank(nsp)], (x,), attrs)
    # torch's 3-d average pooling writes contiguous results whatever the input's layout
    return _named(back(_cl(out, x, nsp) if nsp == 2 else out), nsp, "AvgPool")


@autocast_fp32
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """3-d average pooling over (N, C, D, H, W) or (C, D, H, W) input."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3,
                     "avg_pool3d")


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
    return out if nsp > 1 else (1,) + out


def _avg_matrix(n: int, no: int, dt, device=None) -> Tensor:
    """The (no, n) matrix of adaptive averaging windows: a constant of the sizes (ember.compile's capture
    is told so, as for a factory), on ``device`` when that is not the CPU (meta, OpenCL)."""
    st, en = _pk.bounds(n, no)
    m = np.zeros((no, n), dtype=dt.np)
    for o in range(no):
        m[o, st[o]:en[o]] = 1.0 / (en[o] - st[o])
    if FACTORY[0] is not None:
        FACTORY[0](m)
    t = wrap(m, dt)
    return t if device is None or device.type == "cpu" else t.to(device)


def _adaptive_avg(input, output_size, nsp, op):
    out = _adaptive_sizes(input, output_size, nsp, op)
    if input._dtype.category < 2:
        raise NotImplementedError(f"\"{op}\" not implemented for '{dtype_name(input._dtype)}'")
    x, back = _batched(input, nsp)
    sizes = x._data.shape[2:]
    r = len(sizes)
    cl = (lambda t: _cl(t, x, nsp)) if nsp == 2 else (lambda t: t)   # torch's 3-d results are contiguous
    if all(o == 1 for o in out):
        return _named(back(cl(x.mean(tuple(range(-r, 0)), keepdim=True))), nsp, _MEAN_DIM)   # torch takes a mean too
    if all(o and n % o == 0 for n, o in zip(sizes, out)):
        k = tuple(n // o for n, o in zip(sizes, out))
        return _named(back(cl(apply(AVG_POOL[r], (x,), {"k": k, "s": k, "p": (0,) * r, "ceil": False, "cip": True,
                                                        "div": 0}))), nsp, "AdaptiveAvgPool")
    # separable averaging: one pooled dim at a time, each a matmul with a fixed (out, in) matrix
    y = x
    for i in range(r - 1, -1, -1):
        n, o = sizes[i], out[i]
        if o == n:
            continue
        if i == r - 1:
            y = matmul_raw(y, _avg_matrix(n, o, x._dtype, x.device).t())
        else:
            shp = y._data.shape
            rest = shp[2 + i + 1:]
            flat = y.reshape(shp[:2 + i] + (n, int(np.prod(rest))))
            y = matmul_raw(_avg_matrix(n, o, x._dtype, x.device), flat).reshape(shp[:2 + i] + (o,) + rest)
    if y is x:
        y = x.clone()         # output size == input size: torch still returns a new tensor
    return _named(back(cl(y)), nsp, "AdaptiveAvgPool")


@autocast_fp32
def adaptive_avg_pool3d(input, output_size):
    """3-d average pooling to a fixed output size (``None`` keeps that input size)."""
    return _adaptive_avg(input, output_size, 3, "adaptive_avg_pool3d")


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed output size (``None`` keeps that input size)."""
    return _adaptive_avg(input, output_size, 2, "adaptive_avg_pool2d")


def adaptive_avg_pool1d(input, output_size):
    """1-d average pooling to a fixed output length."""
    return _adaptive_avg(input, output_size, 1, "adaptive_avg_pool1d")


ADAPTIVE_MAX = {r: register(f"adaptive_max_pool{r}d", _pk.adaptive_max_kernel, nout=2, differentiable=False)
                for r in (2, 3)}


def _adaptive_max(input, output_size, nsp, op):
    out = _adaptive_sizes(input, output_size, nsp, op)
    if input._dtype.category < 2:
        raise NotImplementedError(f"\"{op}\" not implemented for '{dtype_name(input._dtype)}'")
    x, back = _batched(input, nsp)
    sizes = x._data.shape[2:]
    r = len(sizes)
    if all(o > 0 and n % o == 0 for n, o in zip(sizes, out)):
        # equal windows: plain max pooling gives the same values and indices
        k = tuple(n // o for n, o in zip(sizes, out))
        v, i = apply(MAX_POOL[r], (x,), {"k": k, "s": k, "p": (0,) * r, "d": (1,) * r, "ceil": False})
        unique = True
    else:
        v, i = apply(ADAPTIVE_MAX[r], (x,), {"out_hw": out})
        unique = False
    cl = (lambda t: _cl(t, x, nsp)) if nsp == 2 else (lambda t: t)   # torch's 3-d results are contiguous
    return _named(back(cl(_with_grad(x, v, i, unique))), nsp, "AdaptiveMaxPool"), back(cl(i))


@autocast_fp32
def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):
    """Adaptive 3-d max pooling returning (values, indices)."""
    return _adaptive_max(input, output_size, 3, "adaptive_max_pool3d")


@autocast_fp32
def adaptive_max_pool3d(input, output_size, return_indices=False):
    """3-d max pooling to a fixed output size (``None`` keeps that input size)."""
    v, i = _adaptive_max(input, output_size, 3, "adaptive_max_pool3d")
    return (v, i) if return_indices else v


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
    if norm_type == float("inf"):         # the limit: max pooling of |x|, as torch
        return {1: max_pool1d, 2: max_pool2d, 3: max_pool3d}[nsp](input.abs(), k, stride, ceil_mode=ceil_mode)
    n = 1
    for v in k:
        n *= v
    pool = {1: avg_pool1d, 2: avg_pool2d, 3: avg_pool3d}[nsp]
    out = pool(input.pow(norm_type), k, stride, 0, ceil_mode)
    # sign(out) * relu(|out|) keeps the gradient finite where the average is 0
    return (out.sign() * out.abs().relu()).mul(n).pow(1.0 / norm_type)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """3-d power-average pooling."""
    return _lp_pool(input, float(norm_type), kernel_size, stride, ceil_mode, 3, "lp_pool3d")


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
    x, back = _batched(input, nsp)
    i4, _ = _batched(indices, nsp)
    hw = (1,) + out if nsp == 1 else out
    n = int(np.prod(hw))
    if i4._data.size:
        lo, hi = int(i4.min().item()), int(i4.max().item())       # (tensor ops: device indices too)
        if lo < 0 or hi >= n:
            raise RuntimeError(f"Found an invalid max index: {hi} (output volumes are of size "
                               f"{'x'.join(map(str, out))}")
    return back(apply(MAX_SCATTER, (x, i4), {"in_hw": hw, "unique": False}))


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Partial inverse of max_pool3d: put each value at its index, zeros elsewhere."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")


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


def _max_pool3d_top(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return max_pool3d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def _max_pool1d_with_indices_top(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return max_pool1d_with_indices(input, kernel_size, stride or None, padding, dilation, ceil_mode)


_adaptive_max_pool1d_top.__name__ = "adaptive_max_pool1d"
_max_pool1d_top.__name__ = "max_pool1d"
_max_pool2d_top.__name__ = "max_pool2d"
_max_pool3d_top.__name__ = "max_pool3d"
_max_pool1d_with_indices_top.__name__ = "max_pool1d_with_indices"

from .conv import _export_toplevel  # noqa: E402

_export_toplevel([("max_pool1d", _max_pool1d_top), ("max_pool2d", _max_pool2d_top), ("max_pool3d", _max_pool3d_top),
                  ("max_pool1d_with_indices", _max_pool1d_with_indices_top), ("avg_pool1d", avg_pool1d),
                  ("adaptive_avg_pool1d", adaptive_avg_pool1d), ("adaptive_max_pool1d", _adaptive_max_pool1d_top)])
