"""Padding, resampling and pixel shuffling: ``pad``, ``interpolate`` (``upsample*``), ``pixel_shuffle``,
``pixel_unshuffle``.

* Constant padding is one op (``constant_pad_nd``, negative pads crop); its derivative is the same op
  with the pads negated, so it is its own adjoint family.
* Reflect / replicate / circular padding is separable: along each padded dim the output is an
  ``index_select`` of the input with a fixed index map, so gradients (and their gradients) come from
  ``index_select``'s own derivative.
* Interpolation is separable too: nearest modes gather with ``index_select`` along each spatial dim;
  linear modes blend two gathered taps per dim (bicubic four), innermost dim first, with torch's source
  index and weight formulas computed in the input's precision.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap
from ...ops.registry import register, apply, dtype_name, node_class, rename, FACTORY
from ...ops._util import shape_arg
from . import _interp_uint8
from ._args import shape_str as _shape_str
from ._channels_last import keep as _keep_cl
from ._autocast_fp32 import autocast_fp32, to_fp32
from ...amp.state import AUTOCAST

__all__ = ["pad", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "pixel_shuffle",
           "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle", "affine_grid", "grid_sample"]


# ---- pad -----------------------------------------------------------------------------------------------


def _cpad_kernel(x, pads, value):
    out_shape = tuple(n + a + b for n, (a, b) in zip(x.shape, pads))
    out = np.full(out_shape, value, dtype=x.dtype)
    src, dst = [], []
    for n, (a, b) in zip(x.shape, pads):
        s0, s1 = max(-a, 0), n - max(-b, 0)
        if s1 <= s0:
            return out                      # everything cropped away: only the fill remains
        d0 = max(a, 0)
        src.append(slice(s0, s1))
        dst.append(slice(d0, d0 + s1 - s0))
    out[tuple(dst)] = x[tuple(src)]
    return out


def _cpad_bw(ctx, g):
    return apply(CONSTANT_PAD, (g,), {"pads": tuple((-a, -b) for a, b in ctx.attrs["pads"]), "value": 0})


CONSTANT_PAD = register("constant_pad_nd", _cpad_kernel, _cpad_bw)


def _pads_per_dim(pad, nd):
    """torch's flat pad list (last dim first) as one (before, after) pair per dim of the input."""
    pairs = [(0, 0)] * nd
    for i in range(len(pad) // 2):
        pairs[nd - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    return tuple(pairs)


def _index_map(n: int, a: int, b: int, mode: str) -> np.ndarray:
    """Source index of every output position along one dim padded by (a, b) with ``mode``."""
    np_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    idx = np.arange(n, dtype=np.int64)
    if mode == "circular":
        # crop first (negative pads), then pad what is left: torch's circular mode wraps the cropped input
        return np.pad(idx[max(-a, 0):n - max(-b, 0)], (max(a, 0), max(b, 0)), mode=np_mode)
    # reflect / replicate pad from the whole input, then crop: a reflection may reach past the cropped part
    idx = np.pad(idx, (max(a, 0), max(b, 0)), mode=np_mode)
    return idx[max(-a, 0):len(idx) - max(-b, 0)]


def pad(input, pad, mode: str = "constant", value=None):
    """Pad the last ``len(pad) // 2`` dims (pairs given last dim first); ``mode`` is ``'constant'``,
    ``'reflect'``, ``'replicate'`` or ``'circular'``. Negative pads crop.

        >>> F.pad(ember.ones(1, 2), (1, 2)).tolist()
        [[0.0, 1.0, 1.0, 0.0, 0.0]]
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"pad(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    pad = shape_arg((pad,), "pad", "pad")
    nd = input._data.ndim
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > nd:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {nd}")
    pairs = _pads_per_dim(pad, nd)
    if mode == "constant":
        shp = input._data.shape
        for d, (n, (a, b)) in enumerate(zip(shp, pairs)):
            if n + a + b < 0:
                raise RuntimeError("narrow(): length must be non-negative.")
        if value is None:
            value = 0
        if all(a == 0 and b == 0 for a, b in pairs):
            return input.clone()
        return _keep_cl(apply(CONSTANT_PAD, (input,), {"pads": pairs, "value": value}), input)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    if AUTOCAST[0] is not None and mode != "circular":     # CPU autocast pads these in float32, as torch
        input = to_fp32(input)
    k = len(pad) // 2
    if not (1 <= k <= 3 and nd in (k + 1, k + 2)):
        raise NotImplementedError(f"Padding size {len(pad)} is not supported for {nd}D input tensor.")
    if input._dtype is _dt.bool and mode != "circular":
        kind = "reflection" if mode == "reflect" else "replication"
        raise NotImplementedError(f"\"{kind}_pad{k}d\" not implemented for 'Bool'")
    shp = input._data.shape
    if mode != "circular" and any(s == 0 for s in (shp[1:] if nd == k + 2 else shp)):
        dims = {1: "2D or 3D", 2: "3D or 4D", 3: "4D or 5D"}[k]
        raise RuntimeError(f"Expected {dims} (batch mode) tensor with possibly 0 batch size and other non-zero "
                           f"dimensions for input, but got: {_shape_str(shp)}")
    x = input
    for d in range(nd - 1, nd - 1 - k, -1):
        a, b = pairs[d]
        n = shp[d]
        if mode == "reflect" and (a >= n or b >= n):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({a}, {b}) at dimension {d} of input {_shape_str(shp)}")
        if mode == "circular" and (a > n or b > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if n + a + b < 0:
            raise RuntimeError(f"The input size {n}, plus negative padding {a} and {b} resulted in a negative "
                               f"output size, which is invalid. Check dimension {d} of your input.")
        if a == 0 and b == 0:
            continue
        x = x.index_select(d, _const(_index_map(n, a, b, mode)))
    x = x if x is not input else input.clone()
    if mode != "circular":          # torch's reflection/replication pads keep a channels-last layout
        _keep_cl(x, input)
    # torch has a pad op per mode and rank (circular pads by writing slices of a new tensor)
    kind = {"reflect": "ReflectionPad", "replicate": "ReplicationPad"}.get(mode)
    return rename(x, node_class(f"{kind}{k}DBackward0" if kind else "torch::autograd::CopySlices"))


# ---- interpolate ---------------------------------------------------------------------------------------------

_MODES_MSG = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
_NEEDS = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}


def _opmath(dt):
    # the precision torch's kernels compute source indices and weights in
    return np.float64 if dt is _dt.float64 else np.float32


def _scale_value(n: int, no: int, scale, ft):
    """torch's compute_scales_value: 1/scale_factor when one was given, else in/out."""
    if scale is not None and scale > 0:
        return ft(1.0 / scale)
    return ft(n) / ft(no)


def _nearest_index(n: int, no: int, scale, exact: bool) -> np.ndarray:
    dst = np.arange(no)
    if not exact:
        if no == n:
            return dst
        if no == 2 * n:
            return dst >> 1
    s = _scale_value(n, no, scale, np.float32)
    src = (dst.astype(np.float32) + np.float32(0.5)) * s if exact else dst.astype(np.float32) * s
    return np.minimum(np.floor(src).astype(np.int64), n - 1)


def _source_index(n: int, no: int, scale, align_corners: bool, cubic: bool, ft) -> np.ndarray:
    dst = np.arange(no).astype(ft)
    if align_corners:
        r = ft(n - 1) / ft(no - 1) if no > 1 else ft(0)
        return r * dst
    r = _scale_value(n, no, scale, ft)
    src = r * (dst + ft(0.5)) - ft(0.5)
    return src if cubic else np.maximum(src, ft(0))


def _cubic_weights(t, ft):
    A = ft(-0.75)

    def c1(x):
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def c2(x):
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
    one = ft(1)
    return [c2(t + one), c1(t), c1(one - t), c2(ft(2) - t)]


def _const(arr: np.ndarray, dtype=None) -> Tensor:
    """Wrap an array computed from sizes only (resampling indices, weights, base grids): a constant a
    compiled replay may reuse, reported as such to the tracer."""
    if FACTORY[0] is not None:
        FACTORY[0](arr)
    t = wrap(arr, dtype)
    t._host_const = True        # the device dispatcher copies it next to device operands
    return t


def _along(w: np.ndarray, d: int, nd: int, dt) -> Tensor:
    """Per-position weights shaped to broadcast along dim ``d`` of an ``nd``-dim tensor."""
    return _const(np.ascontiguousarray(w.astype(dt.np).reshape((-1,) + (1,) * (nd - 1 - d))), dt)


def _resample(x: Tensor, out_sizes, scales, mode: str, align_corners: bool) -> Tensor:
    nd = x._data.ndim
    nsp = len(out_sizes)
    ft = _opmath(x._dtype)
    for i in reversed(range(nsp)):           # innermost dim first, as torch's kernels nest
        d = nd - nsp + i
        n, no = x._data.shape[d], out_sizes[i]
        sc = scales[i] if scales is not None else None
        if mode in ("nearest", "nearest-exact"):
            idx = _nearest_index(n, no, sc, mode == "nearest-exact")
            if no == n and np.array_equal(idx, np.arange(n)):
                continue
            x = x.index_select(d, _const(idx))
        elif mode == "bicubic":
            src = _source_index(n, no, sc, align_corners, True, ft)
            fl = np.floor(src)
            t = (src - fl).astype(ft)
            base = fl.astype(np.int64)
            ws = _cubic_weights(t, ft)
            acc = None
            for k in range(4):
                idx = np.clip(base - 1 + k, 0, n - 1)
                term = x.index_select(d, _const(idx)) * _along(ws[k], d, nd, x._dtype)
                acc = term if acc is None else acc + term
            x = acc
        else:
            if no == n and (align_corners or sc is None or sc == 1.0):
                continue                      # the identity map
            src = _source_index(n, no, sc, align_corners, False, ft)
            i0 = np.minimum(src.astype(np.int64), n - 1)
            l1 = np.clip(src - i0.astype(ft), ft(0), ft(1)).astype(ft)
            l0 = (ft(1) - l1).astype(ft)
            i1 = i0 + (i0 < n - 1)
            x = (x.index_select(d, _const(i0)) * _along(l0, d, nd, x._dtype)
                 + x.index_select(d, _const(i1)) * _along(l1, d, nd, x._dtype))
    return x


UPSAMPLE_UINT8 = register("upsample_uint8", _interp_uint8.resample_uint8, differentiable=False)


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                recompute_scale_factor=None, antialias: bool = False):
    """Resize (N, C, *spatial) input to ``size`` or by ``scale_factor`` (torch.nn.functional.interpolate).

    Modes: ``nearest``, ``nearest-exact``, ``linear`` (3-D input), ``bilinear`` / ``bicubic`` (4-D),
    ``trilinear`` (5-D), ``area`` (adaptive average pooling, 3-D/4-D).

        >>> F.interpolate(ember.ones(1, 1, 2, 2), scale_factor=2).shape
        ember.Size([1, 1, 4, 4])
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate(): argument 'input' must be Tensor, not {type(input).__name__}")
    nd = input._data.ndim
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    nsp = nd - 2
    spatial = list(input._data.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != nsp:
                raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {spatial} and output size of {size}. Please provide "
                                 "input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) "
                                 "format.")
            out_sizes = [int(s) for s in size]
        else:
            out_sizes = [int(size)] * max(nsp, 0)
        scales = None
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != nsp:
                raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got "
                                 f"input with spatial dimensions of {spatial} and scale_factor of shape "
                                 f"{scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                                 "scale_factor in (s1, s2, ...,sK) format.")
            scales = [float(s) for s in scale_factor]
        else:
            scales = [float(scale_factor)] * max(nsp, 0)
        out_sizes = None
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor is not None and recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and out_sizes is None:
        recompute_scale_factor = True
    if out_sizes is None:
        out_sizes = [math.floor(float(n) * s) for n, s in zip(spatial, scales)]
        if recompute_scale_factor:
            scales = None
    if mode == "lanczos" and not antialias:
        raise ValueError("Lanczos mode requires antialias=True")
    if antialias:
        if mode not in ("bilinear", "bicubic", "lanczos") or nd != 4:
            raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a "
                             "4-D tensor as input")
        if not input._dtype.is_floating_point:
            raise NotImplementedError(f"interpolate: antialias=True supports floating-point input in ember, got "
                                      f"{dtype_name(input._dtype)}")
        from ._interpolate_aa import interpolate_antialias
        return interpolate_antialias(input, out_sizes, scales, mode, bool(align_corners))
    if nd not in (3, 4, 5) or mode not in ("nearest", "nearest-exact", "linear", "bilinear", "bicubic",
                                           "trilinear", "area") or (mode == "bicubic" and nd != 4):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {nd}D) for the "
                                  f"modes: {_MODES_MSG} (got {mode})")
    need = _NEEDS.get(mode)
    if need is not None and nd != need:
        raise NotImplementedError(f"Got {nd}D input, but {mode} mode needs {need}D input")
    if any(n <= 0 for n in spatial) or any(o <= 0 for o in out_sizes):
        names = ("D", "H", "W")[3 - nsp:]
        ins = ", ".join(f"{a}: {b}" for a, b in zip(names, spatial))
        outs = ", ".join(f"{a}: {b}" for a, b in zip(names, out_sizes))
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({ins}) output ({outs})")
    dt = input._dtype
    if mode == "area":
        from .pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
        return {3: adaptive_avg_pool1d, 4: adaptive_avg_pool2d, 5: adaptive_avg_pool3d}[nd](input, out_sizes)
    if dt is _dt.uint8 and mode in ("bilinear", "bicubic"):
        # torch's fixed-point uint8 path: rounded and clamped, bit for bit
        return apply(UPSAMPLE_UINT8, (input,), {"out_sizes": tuple(out_sizes), "scales": None if scales is None else
                                                tuple(scales), "mode": mode, "align_corners": bool(align_corners)})
    if dt.category < 2 and not (dt is _dt.uint8 and mode.startswith("nearest")):
        kind = "nearest" if mode.startswith("nearest") else mode
        what = "compute_indices_weights_linear" if mode in ("linear", "trilinear") and dt is _dt.uint8 else \
            f"upsample_{kind}{nsp}d"
        raise NotImplementedError(f"\"{what}\" not implemented for '{dtype_name(dt)}'")
    r = _resample(input, out_sizes, scales, mode, bool(align_corners))
    if r is input:
        r = input.clone()          # same size: torch still returns a new tensor
    _keep_cl(r, input)
    # torch's one upsample op per mode and rank: UpsampleNearest2D, UpsampleBilinear2D, ...
    name = "".join(p.capitalize() for p in mode.split("-")) if mode.startswith("nearest") else mode.capitalize()
    return rename(r, node_class(f"Upsample{name}{nsp}DBackward0"))


def upsample(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None):
    """Deprecated alias of :func:`interpolate` (warns, as torch does)."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(..., mode='nearest')``."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(..., mode='bilinear', align_corners=True)``."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---- pixel shuffle -----------------------------------------------------------------------------------------


def _shuffle_args(op: str, arg: str, input, factor):
    """pixel_(un)shuffle's checks: at least 3 dims, a positive factor; ``(factor, leading dims, (C, H, W))``."""
    r = int(factor)
    shp = input._data.shape
    if len(shp) < 3:
        raise RuntimeError(f"{op} expects input to have at least 3 dimensions, but got input with "
                           f"{len(shp)} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"{op} expects a positive {arg}, but got {r}")
    return r, shp[:-3], shp[-3:]


def pixel_shuffle(input, upscale_factor: int):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r): move channel blocks into space."""
    r, lead, (C, H, W) = _shuffle_args("pixel_shuffle", "upscale_factor", input, upscale_factor)
    if C % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={C} is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(lead + (C // (r * r), r, r, H, W))
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    out = x.reshape(lead + (C // (r * r), H * r, W * r))
    return rename(_keep_cl(out, input) if r > 1 else out, node_class("PixelShuffleBackward0"))


def pixel_unshuffle(input, downscale_factor: int):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W): the inverse of :func:`pixel_shuffle`."""
    r, lead, (C, H, W) = _shuffle_args("pixel_unshuffle", "downscale_factor", input, downscale_factor)
    if H % r:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                           f"input.size(-2)={H} is not divisible by {r}")
    if W % r:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
                           f"input.size(-1)={W} is not divisible by {r}")
    n = len(lead)
    x = input.reshape(lead + (C, H // r, r, W // r, r))
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    out = x.reshape(lead + (C * r * r, H // r, W // r))
    return rename(_keep_cl(out, input) if r > 1 else out, node_class("PixelUnshuffleBackward0"))


def channel_shuffle(input, groups: int):
    """(N, g*k, *) -> (N, k*g, *): split the channels into ``groups`` and interleave them (ShuffleNet)."""
    shp = input._data.shape
    if len(shp) <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {_shape_str(shp)}")
    g = int(groups)
    if g <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{g}")
    C = shp[1]
    if C % g:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {C} channels and {g} groups.")
    x = input.reshape((shp[0], g, C // g) + shp[2:])
    return x.transpose(1, 2).reshape(shp)


native_channel_shuffle = channel_shuffle


# ---- affine_grid / grid_sample (spatial transformers) -------------------------------------------------------
#
# Both are compositions of differentiable ember ops, so gradients with respect to the input and to the
# grid (and theta) come from those ops' derivatives, double backward included.

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                  "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                  "grid_sample for details.")


def _linspace_from_neg_one(n: int, align_corners: bool, dt) -> np.ndarray:
    if n <= 1:
        return np.zeros(1, dtype=dt)
    r = np.linspace(-1, 1, n, dtype=np.float64).astype(dt)
    if not align_corners:
        r = r * dt.type((n - 1) / n)
    return r


def affine_grid(theta, size, align_corners=None):
    """Sampling grids (N, H, W, 2) — or (N, D, H, W, 3) for 5-D sizes — from batches of affine matrices
    ``theta`` (N, 2, 3) / (N, 3, 4), in the normalised [-1, 1] coordinates ``grid_sample`` reads."""
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not isinstance(theta, Tensor):
        raise TypeError(f"affine_grid(): argument 'theta' must be Tensor, not {type(theta).__name__}")
    if not theta._dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta._dtype}")
    size = tuple(int(v) for v in size)
    tshape = theta._data.shape
    if len(size) == 4:
        if len(tshape) != 3 or tshape[-2:] != (2, 3):
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got "
                             f"ember.Size({list(tshape)}).")
    elif len(size) == 5:
        if len(tshape) != 3 or tshape[-2:] != (3, 4):
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got "
                             f"ember.Size({list(tshape)}).")
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    N = size[0]
    if tshape[0] != N:
        raise RuntimeError(f"affine_grid: theta has batch size {tshape[0]} but the size asks for {N}")
    dt = theta._data.dtype
    spatial = size[2:]
    axes = [_linspace_from_neg_one(n, align_corners, dt) for n in spatial]
    # base grid (*spatial, k+1) holding (x, y[, z], 1): x runs along the last spatial dim
    mesh = np.meshgrid(*axes, indexing="ij")
    coords = [mesh[i] for i in reversed(range(len(spatial)))] + [np.ones(spatial, dtype=dt)]
    base_t = _const(np.ascontiguousarray(np.stack(coords, axis=-1).reshape(-1, len(coords))), theta._dtype)
    grid = base_t.matmul(theta.transpose(1, 2))            # (N, prod(spatial), k)
    return grid.reshape((N,) + spatial + (len(spatial),))


def _unnormalize(coord, size: int, align_corners: bool):
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(coord, twice_low: int, twice_high: int):
    from ... import where
    if twice_low == twice_high:
        return coord * 0
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = (coord - lo).abs()
    extra = c.fmod(span)
    flips = (c.detach() / span).floor()
    even = (flips.fmod(2) == 0)
    return where(even, extra + lo, span - extra + lo)


def _grid_source_index(coord, size: int, padding_mode: str, align_corners: bool):
    c = _unnormalize(coord, size, align_corners)
    if padding_mode == "border":
        c = c.clamp(0, size - 1)
    elif padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        c = c.clamp(0, size - 1)
    return c


@autocast_fp32
def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros", align_corners=None):
    """Sample ``input`` (N, C, H, W) at the normalised (x, y) locations in ``grid`` (N, Ho, Wo, 2), with
    bilinear, nearest or bicubic interpolation and zeros / border / reflection padding (torch's coordinate
    rules); a 5-D ``input`` (N, C, D, H, W) with a grid (N, Do, Ho, Wo, 3) samples volumes
    (``grid_sample_nd.py``)."""
    from ... import where
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    for name, t in (("input", input), ("grid", grid)):
        if not isinstance(t, Tensor):
            raise TypeError(f"grid_sample(): argument '{name}' must be Tensor, not {type(t).__name__}")
    ish, gsh = input._data.shape, grid._data.shape
    if grid._dtype is not input._dtype:
        raise RuntimeError(f"expected scalar type {dtype_name(input._dtype)} but found {dtype_name(grid._dtype)}")
    if len(ish) == 5 and len(gsh) == 5 and gsh[0] == ish[0] and gsh[-1] == 3:
        from .grid_sample_nd import grid_sample_3d
        return grid_sample_3d(input, grid, mode, padding_mode, align_corners)
    if len(ish) != 4 or len(gsh) != 4:
        raise RuntimeError(f"grid_sampler(): expected 4D input and grid with same number of dimensions, but got "
                           f"input with sizes {_shape_str(ish)} and grid with sizes {_shape_str(gsh)}")
    if gsh[0] != ish[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {_shape_str(ish)} and grid with sizes {_shape_str(gsh)}")
    if gsh[-1] != 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size 2 in last dimension, but got grid with "
                           f"sizes {_shape_str(gsh)}")
    if mode == "bicubic":
        from .grid_sample_nd import grid_sample_bicubic
        return grid_sample_bicubic(input, grid, padding_mode, align_corners)
    N, C, H, W = ish
    Ho, Wo = gsh[1], gsh[2]
    ix = _grid_source_index(grid[..., 0], W, padding_mode, align_corners)       # (N, Ho, Wo)
    iy = _grid_source_index(grid[..., 1], H, padding_mode, align_corners)
    flat = input.reshape(N, C, H * W)
    idt = input._dtype
    # Pixel indices and the in-image masks are computed with ember ops (int64, no gradient), so a compiled
    # replay derives them from the grid it is given.

    def axis_taps(xc, n: int, stride: int = 1):
        """For integer coordinates ``xc`` along an axis of size ``n``: (the offset in the flattened image of
        ``xc`` clamped to [0, n-1], whether ``xc`` lies inside)."""
        off = xc.clamp(0, n - 1)
        return (off * stride if stride != 1 else off), (xc >= 0) & (xc <= n - 1)

    def tap(x, y):
        """input values at integer pixel (x, y) (N, C, Ho, Wo) and whether it is inside the image (N, Ho, Wo)."""
        (xo, xin), (yo, yin) = x, y
        lin = (yo + xo).reshape(N, 1, Ho * Wo).expand(N, C, Ho * Wo)
        vals = apply(GATHER, (flat, lin), {"dim": 2}).reshape(N, C, Ho, Wo)    # (in range: clamped above)
        return vals, (xin & yin).to(idt)

    from ...ops.index_scatter import GATHER
    i64 = _dt.int64
    if mode == "nearest":
        xn = ix.detach().round().to(i64)                # nearbyint: half to even, as torch
        yn = iy.detach().round().to(i64)
        v, m = tap(axis_taps(xn, W), axis_taps(yn, H, W))
        # torch's nearest mode gives the grid a zero gradient (not None): join the grid with a zero term
        from ... import zeros
        none = zeros(tuple(ix.shape), dtype=_dt.bool)
        return v * m.unsqueeze(1) + where(none, ix + iy, 0.0).unsqueeze(1)
    x0 = ix.detach().floor().to(i64)
    y0 = iy.detach().floor().to(i64)
    x0t, y0t = x0.to(idt), y0.to(idt)
    # weights, written as torch writes them (differentiable in the grid)
    wx1 = ix - x0t            # distance from the west column
    wy1 = iy - y0t
    wx0 = (x0t + 1) - ix
    wy0 = (y0t + 1) - iy
    xa, xb = axis_taps(x0, W), axis_taps(x0 + 1, W)
    ya, yb = axis_taps(y0, H, W), axis_taps(y0 + 1, H, W)
    out = None
    for xt, yt, w in ((xa, ya, wx0 * wy0), (xb, ya, wx1 * wy0), (xa, yb, wx0 * wy1), (xb, yb, wx1 * wy1)):
        v, m = tap(xt, yt)
        term = v * (w * m).unsqueeze(1)
        out = term if out is None else out + term
    return out


_pad = pad     # the public name is shadowed by the argument below


def constant_pad_nd(input, pad, value=0):
    """``torch.constant_pad_nd``: :func:`pad` with ``mode='constant'``."""
    return _pad(input, pad, "constant", value)


from .conv import _export_toplevel  # noqa: E402

_export_toplevel([("pixel_shuffle", pixel_shuffle), ("pixel_unshuffle", pixel_unshuffle),
                  ("constant_pad_nd", constant_pad_nd), ("channel_shuffle", channel_shuffle),
                  ("native_channel_shuffle", native_channel_shuffle)])
