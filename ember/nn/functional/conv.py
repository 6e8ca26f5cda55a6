"""Linear maps and convolutions: ``linear``, ``bilinear``, ``conv1d/2d/3d``, ``conv_transpose1d/2d/3d``,
``unfold`` (im2col) and ``fold`` (col2im).

Convolution of each rank (2-d, 3-d) is three registered ops that are each other's derivatives, so
gradients of any order stay inside the family (the NumPy kernels, shared by the ranks, are in
``_conv_kernels``):

* ``conv2d(x, w, b)``: im2col of the padded input (a strided NumPy view, copied once) times the
  weight, one batched BLAS matmul;
* ``conv_transpose2d(y, w, b)``: the adjoint of ``x -> conv2d(x, w)``: weight-transposed matmul, then
  col2im (one strided slice-add per kernel offset);
* ``conv2d_weight(x, g)``: the gradient of ``<g, conv2d(x, w)>`` with respect to ``w``.

With ``<g, conv2d(x, w)> = <conv_transpose2d(g, w), x> = <conv2d_weight(x, g), w>``, the derivative of
each op is a call of the other two with the same geometry (stride, padding, dilation, groups).
1-d convolutions run the 2-d ops on a height-1 view; ``conv3d``, ``conv_transpose3d`` and
``conv3d_weight`` are the 3-d family. Padding inside the ops is zero padding; other
padding modes pad first with ``F.pad`` (as torch's modules do).
"""
from __future__ import annotations

import importlib
import math

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor
from ...ops.registry import register, apply, dtype_name, node_class, rename
from ...ops.linalg_products import matmul_raw, _mm
from ...ops.shape import reshape_to
from . import _conv_kernels as _ck
from ._args import int_tuple, shape_str as _shape_str
from ._channels_last import keep as _keep_cl

__all__ = ["linear", "bilinear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "unfold", "fold"]

_LOW = (np.dtype(_dt.float16.np), np.dtype(_dt.bfloat16.np))


# ---- autocast hook ------------------------------------------------------------------------------------

_AMP: list = []     # [ember.amp._autocast_dtype or None], resolved on first use


def _autocast_dtype():
    """The dtype ``ember.amp.autocast`` asks float inputs to be cast to, or None (also when no amp module)."""
    if not _AMP:
        try:
            mod = importlib.import_module("ember.amp")
            _AMP.append(getattr(mod, "_autocast_dtype", None))
        except ModuleNotFoundError as e:
            if e.name not in ("ember.amp", "ember"):
                raise
            _AMP.append(None)
    f = _AMP[0]
    return None if f is None else f()


def _cast_all(dt, *ts):
    """Cast the floating tensors among ``ts`` to ``dt`` (autocast); as torch's autocast, float64 tensors,
    integer tensors and None pass through."""
    return tuple(t.to(dt) if (t is not None and t._dtype.is_floating_point and t._dtype is not dt
                              and t._dtype is not _dt.float64) else t
                 for t in ts)


# ---- small helpers ------------------------------------------------------------------------------------


def _tuple(v, n: int, name: str, op: str) -> tuple:
    """Normalise an int or a sequence of ints to an n-tuple (torch's _single/_pair with checks)."""
    return int_tuple(v, n, name, op, "expected {name} to be a single integer value or a list of {n} values to "
                     "match the convolution dimensions, but got {name}={vals}", tensor_ok=True)


def _check_tensor(x, op: str, arg: str, pos: int) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' (position {pos}) must be Tensor, not {type(x).__name__}")
    return x


# ---- linear ---------------------------------------------------------------------------------------------


def _linear_kernel(x, w, b):
    dt = x.dtype
    low = dt in _LOW
    if low:
        x, w = x.astype(np.float32), w.astype(np.float32)
    if x.ndim == 2:
        r = _mm(x, w.T)
    elif x.ndim == 1:
        r = np.matmul(w, x)
    else:
        # fold the batch dims into rows: one GEMM
        lead = x.shape[:-1]
        r = _mm(x.reshape(-1, x.shape[-1]), w.T).reshape(lead + (w.shape[0],))
    if b is not None:
        if (b.ndim == 1 and b.shape[0] == r.shape[-1]) or (
                b.ndim <= r.ndim and all(n in (1, m) for n, m in zip(b.shape[::-1], r.shape[::-1]))):
            np.add(r, b, out=r, casting="unsafe")       # r is a fresh array: add the bias in place
        else:
            r = r + b
    if low:
        r = r.astype(dt)
    return r


def _linear_bw(ctx, g):
    x, w, b = ctx.inputs
    need = ctx.edges
    gx = gw = gb = None
    if need[0] is not None:
        gx = matmul_raw(g, w)                               # (..., out) @ (out, in)
    if need[1] is not None or (b is not None and need[2] is not None):
        out_f, in_f = w._data.shape
        rows = math.prod(g._data.shape[:-1])                # the batch dims folded into rows
        g2 = g if g._data.ndim == 2 else reshape_to(g, (rows, out_f))
        if need[1] is not None:
            x2 = x if x._data.ndim == 2 else reshape_to(x, (rows, in_f))
            gw = matmul_raw(g2.t(), x2)                     # (out, rows) @ (rows, in)
        if b is not None and need[2] is not None:
            bs = b._data.shape
            # the usual (out,) bias sums the rows; other broadcastable shapes sum down to their own shape
            gb = g2.sum(0) if len(bs) == 1 and bs[0] == w._data.shape[0] else g.sum_to_size(bs)
    return gx, gw, gb


LINEAR = register("linear", _linear_kernel, _linear_bw, save="i")


_LINEAR_NODES = {n: node_class(n + "Backward0") for n in ("Mm", "Addmm", "Squeeze", "UnsafeView", "View", "Add")}
_LINEAR_NODES["Squeeze"] = node_class("SqueezeBackward4")


def _c_contiguous(a) -> bool:
    # a NumPy array, or a device array (ember.devices.opencl.DeviceArray)
    flags = getattr(a, "flags", None)
    return flags.c_contiguous if flags is not None else a.is_contiguous()


def _linear_node(op, args, attrs, nout):
    """The node for linear, named as torch's: mm / addmm on a matrix input; other ranks run a matmul
    (ending in a squeeze or a view), or with a contiguous input and a row-broadcast contiguous bias,
    an addmm on the flattened rows viewed back, else the matmul plus the bias; the node is the last
    of those steps. (``LINEAR.node_cls``: a hot op, so the class is chosen here in one call.)"""
    x, b = args[0]._data, args[2]
    nd = x.ndim
    if nd == 2:
        name = "Mm" if b is None else "Addmm"
    elif b is None:
        name = "Squeeze" if nd == 1 else "UnsafeView"
    else:
        bd = b._data
        fused = _c_contiguous(x) and _c_contiguous(bd) and (bd.ndim < 2 or bd.shape[0] == 1) and bd.ndim <= 2
        name = "View" if fused else "Add"
    return _LINEAR_NODES[name](op, args, attrs, nout)


LINEAR.node_cls = _linear_node


def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` (torch.nn.functional.linear), as one op with a BLAS matmul.

        >>> F.linear(ember.ones(2, 3), ember.ones(4, 3)).shape
        ember.Size([2, 4])
    """
    _check_tensor(input, "linear", "input", 1)
    _check_tensor(weight, "linear", "weight", 2)
    if not _AMP or _AMP[0] is not None:
        dt = _autocast_dtype()
        if dt is not None:
            input, weight, bias = _cast_all(dt, input, weight, bias)
    xd, wd = input._data, weight._data
    if xd.ndim == 0 or wd.ndim == 0:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are {xd.ndim}D and {wd.ndim}D")
    if input._dtype is not weight._dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_cname(input._dtype)} != "
                           f"{_cname(weight._dtype)}")
    if wd.ndim == 1:
        # a vector weight: torch computes input @ weight (+ bias)
        r = matmul_raw(input, weight)
        return r if bias is None else r + bias
    if wd.ndim != 2:
        raise RuntimeError(f"linear: weight must be 1-D or 2-D, but got a {wd.ndim}-D weight of shape "
                           f"{_shape_str(wd.shape)}")
    if xd.shape[-1] != wd.shape[1]:
        rows = xd.shape[0] if xd.ndim == 2 else (1 if xd.ndim == 1 else int(np.prod(xd.shape[:-1])))
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{xd.shape[-1]} and "
                           f"{wd.shape[1]}x{wd.shape[0]})")
    if input._dtype is _dt.bool:
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
    if bias is not None:
        _check_tensor(bias, "linear", "bias", 3)
        if bias._dtype is not input._dtype:
            raise RuntimeError(f"self and mat2 must have the same dtype, but got {dtype_name(bias._dtype)} and "
                               f"{dtype_name(input._dtype)}")
        bs = bias._data.shape
        target = xd.shape[:-1] + (wd.shape[0],)
        if len(bs) > len(target) or any(b not in (1, t) for b, t in zip(bs[::-1], target[::-1])):
            for i, (b, t) in enumerate(zip(bs[::-1], target[::-1])):
                if b not in (1, t):
                    raise RuntimeError(f"The expanded size of the tensor ({t}) must match the existing size ({b}) "
                                       f"at non-singleton dimension {len(target) - 1 - i}.  Target sizes: "
                                       f"{_shape_str(target)}.  Tensor sizes: {_shape_str(bs)}")
            raise RuntimeError(f"linear: bias of shape {_shape_str(bs)} cannot be broadcast to the output shape "
                               f"{_shape_str(target)}")
    return apply(LINEAR, (input, weight, bias))


def _cname(d) -> str:
    return {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
            "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
            "uint8": "unsigned char", "bool": "bool"}[d.name]


def bilinear(input1, input2, weight, bias=None):
    """``y[..., o] = x1[..., i] * weight[o, i, j] * x2[..., j] + bias[o]`` (torch.nn.functional.bilinear)."""
    for i, (t, n) in enumerate(((input1, "input1"), (input2, "input2"), (weight, "weight"))):
        _check_tensor(t, "bilinear", n, i + 1)
    a, b, w = input1._data, input2._data, weight._data
    if a.ndim != b.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {a.ndim} and {b.ndim}")
    if a.shape[:-1] != b.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {_shape_str(a.shape[:-1])} "
                           f"and {_shape_str(b.shape[:-1])}")
    if w.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be three-dimensional, but got {w.ndim}")
    if a.shape[-1] != w.shape[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {a.shape[-1]} but "
                           f"expected {w.shape[1]}")
    if b.shape[-1] != w.shape[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {b.shape[-1]} but "
                           f"expected {w.shape[2]}")
    if bias is not None and (bias._data.ndim != 1 or bias._data.shape[0] != w.shape[0]):
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got "
                           f"{bias._data.shape[-1] if bias._data.ndim else 0} but expected {w.shape[0]}")
    O, I, J = w.shape
    lead = a.shape[:-1]
    x1 = input1.reshape(-1, I)
    x2 = input2.reshape(-1, J)
    # (rows, I) @ (I, O*J) -> (rows, O, J), then contract J with x2
    t = matmul_raw(x1, weight.permute(1, 0, 2).reshape(I, O * J)).reshape(-1, O, J)
    y = matmul_raw(t, x2.unsqueeze(-1)).squeeze(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(lead + (O,))


# ---- the convolution ops --------------------------------------------------------------------------------
# (the NumPy kernels, any number of spatial dims, are in _conv_kernels)


def _geom(attrs) -> dict:
    return {"stride": attrs["stride"], "pad": attrs["pad"], "dil": attrs["dil"], "groups": attrs["groups"]}


def _bias_grad(g):
    return g.sum((0,) + tuple(range(2, g._data.ndim)))


# per rank: (convolution, transposed convolution, weight gradient); every op's derivative calls the others
_FAMILY: dict = {}


def _conv_bw(ctx, g):
    x, w, b = ctx.inputs
    conv, conv_t, conv_w = _FAMILY[ctx.op.name]
    geo = _geom(ctx.attrs)
    need = ctx.edges
    gx = gw = gb = None
    if need[0] is not None:
        gx = _layout(apply(conv_t, (g, w, None), dict(geo, out_hw=x._data.shape[2:])), x, w, geo["groups"])
    if need[1] is not None:
        gw = apply(conv_w, (x, g), dict(geo, kernel=w._data.shape[2:]))
    if b is not None and need[2] is not None:
        gb = _bias_grad(g)
    return gx, gw, gb


def _conv_t_bw(ctx, g):
    y, w, b = ctx.inputs
    conv, conv_t, conv_w = _FAMILY[ctx.op.name]
    geo = _geom(ctx.attrs)
    need = ctx.edges
    gy = gw = gb = None
    if need[0] is not None:
        gy = _layout(apply(conv, (g, w, None), geo), y, w, geo["groups"])
    if need[1] is not None:
        gw = apply(conv_w, (g, y), dict(geo, kernel=w._data.shape[2:]))
    if b is not None and need[2] is not None:
        gb = _bias_grad(g)
    return gy, gw, gb


def _conv_w_bw(ctx, gg):
    x, g = ctx.inputs
    conv, conv_t, conv_w = _FAMILY[ctx.op.name]
    geo = _geom(ctx.attrs)
    need = ctx.edges
    gx = gg_ = None
    if need[0] is not None:
        gx = apply(conv_t, (g, gg, None), dict(geo, out_hw=x._data.shape[2:]))
    if need[1] is not None:
        gg_ = apply(conv, (x, gg, None), geo)
    return gx, gg_


def _layout(out, x, w, groups):
    """torch's CPU convolutions write a channels-last result when the input ``x`` (of the forward call)
    or the weight is laid out channels-last. In 3-d only its oneDNN path does, which torch takes for
    float32 unless the call is small (its ``use_mkldnn`` rule); its slow 3-d path writes contiguous."""
    a = x._data
    if type(out._data) is not np.ndarray:       # (torch's meta convolutions are contiguous)
        return out
    if a.ndim == 5:
        k = w._data.shape[2:]
        N, C, D, H = a.shape[:4]
        if a.dtype != np.float32 or not (groups > 1 or (k[-1] > 3 and k[-2] > 3) or N > 1 or N * C * D * H > 20480):
            return out
    return _keep_cl(out, x, w)


def _register_family(nsp: int):
    ops = (register(f"conv{nsp}d", _ck.conv_kernel, _conv_bw, save="i"),
           register(f"conv_transpose{nsp}d", _ck.conv_t_kernel, _conv_t_bw, save="i"),
           register(f"conv{nsp}d_weight", _ck.conv_w_kernel, _conv_w_bw, save="i"))
    ops[0].node_name = ops[1].node_name = "ConvolutionBackward0"    # torch's one convolution op, any rank
    for op in ops:
        _FAMILY[op.name] = ops
    return ops


# 1-d convolutions run the 2-d ops on a height-1 view; 3-d ones have their own ops (same kernels)
CONV2D, CONV_T, CONV_W = _register_family(2)
CONV3D, CONV_T3D, CONV_W3D = _register_family(3)
_CONVOLUTION = node_class("ConvolutionBackward0")


# ---- argument checking shared by the public functions --------------------------------------------------


def _check_conv_dtypes(input, weight, bias, op):
    if input._dtype is not weight._dtype:
        raise RuntimeError(f"expected scalar type {dtype_name(input._dtype)} but found {dtype_name(weight._dtype)}")
    if bias is not None:
        _check_tensor(bias, op, "bias", 3)
        if bias._dtype is not input._dtype:
            raise RuntimeError(f"Input type ({_cname(input._dtype)}) and bias type ({_cname(bias._dtype)}) "
                               "should be the same")
    if input._dtype is _dt.bool:
        raise NotImplementedError(f"\"{op}\" not implemented for 'Bool'")


def _batched(input, nsp: int, op: str):
    """Return (4-d-or-3-d batched input, was_unbatched); torch accepts one missing batch dim."""
    nd = input._data.ndim
    if nd == nsp + 2:
        return input, False
    if nd == nsp + 1:
        return input.unsqueeze(0), True
    raise RuntimeError(f"Expected {nsp + 1}D (unbatched) or {nsp + 2}D (batched) input to {op}, but got input "
                       f"of size: {_shape_str(input._data.shape)}")


def _conv_args(input, weight, stride, padding, dilation, groups, nsp, op):
    """Validate a convolution call; returns (stride, pads (top, bottom, left, right) per 2-d, dilation)."""
    _check_tensor(input, op, "input", 1)
    _check_tensor(weight, op, "weight", 2)
    wnd = weight._data.ndim
    if wnd < 3:
        raise RuntimeError("weight should have at least three dimensions")
    if wnd != nsp + 2:
        # torch words a weight of the wrong rank as a stride that does not match it
        shown = list(_tuple(stride, nsp, "stride", op))
        raise RuntimeError(f"expected stride to be a single integer value or a list of {wnd - 2} values to match "
                           f"the convolution dimensions, but got stride={shown}")
    stride = _tuple(stride, nsp, "stride", op)
    dilation = _tuple(dilation, nsp, "dilation", op)
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if not isinstance(groups, (int, np.integer)) or groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    k = weight._data.shape[2:]
    if isinstance(padding, str):
        if padding == "valid":
            pads = [(0, 0)] * nsp
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            pads = []
            for d, kk in zip(dilation, k):
                total = d * (kk - 1)
                pads.append((total // 2, total - total // 2))   # the odd extra goes on the right, as torch
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        p = _tuple(padding, nsp, "padding", op)
        if any(v < 0 for v in p):
            raise RuntimeError("negative padding is not supported")
        pads = [(v, v) for v in p]
    return stride, pads, dilation


def _check_channels(x4, weight, groups, transposed, unbatched):
    C = x4._data.shape[1]
    ws = weight._data.shape
    expect = ws[0] if transposed else ws[1] * groups
    if C != expect:
        shp = x4._data.shape[1:] if unbatched else x4._data.shape
        what = "transposed=1, weight" if transposed else f"groups={groups}, weight"
        raise RuntimeError(f"Given {what} of size {_shape_str(ws)}, expected input{_shape_str(shp)} to have "
                           f"{expect} channels, but got {C} channels instead")
    if ws[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                           f"but got weight of size {_shape_str(ws)} instead")


def _check_bias(bias, n_out, weight):
    if bias is not None and (bias._data.ndim != 1 or bias._data.shape[0] != n_out):
        raise RuntimeError(f"Given weight of size {_shape_str(weight._data.shape)}, expected bias to be "
                           f"1-dimensional with {n_out} elements, but got bias of size "
                           f"{_shape_str(bias._data.shape)} instead")


def _lift_1d(x, w, stride, pads, dilation, nsp):
    """1-d convolutions run the 2-d ops on a height-1 view: the view and the geometry with a unit height."""
    if nsp != 1:
        return x, w, stride, pads, dilation
    return x.unsqueeze(2), w.unsqueeze(2), (1,) + stride, [(0, 0)] + pads, (1,) + dilation


def _flat_pads(pads) -> tuple:
    return tuple(v for p in pads for v in p)


def _conv_nd(input, weight, bias, stride, padding, dilation, groups, nsp, op):
    dt = _autocast_dtype() if not _AMP or _AMP[0] is not None else None
    if dt is not None:
        input, weight, bias = _cast_all(dt, input, weight, bias)
    stride, pads, dilation = _conv_args(input, weight, stride, padding, dilation, groups, nsp, op)
    _check_conv_dtypes(input, weight, bias, op)
    x, unbatched = _batched(input, nsp, op)
    _check_channels(x, weight, groups, False, unbatched)
    _check_bias(bias, weight._data.shape[0], weight)
    x, w, stride, pads, dilation = _lift_1d(x, weight, stride, pads, dilation, nsp)
    sp = x._data.shape[2:]
    k = w._data.shape[2:]
    ins = tuple(n + p[0] + p[1] for n, p in zip(sp, pads))
    eff = tuple(d * (kk - 1) + 1 for d, kk in zip(dilation, k))
    if any(i < e for i, e in zip(ins, eff)):
        p_in = ins[1:] if nsp == 1 else ins
        e_k = eff[1:] if nsp == 1 else eff
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, p_in))}). Kernel "
                           f"size: ({' x '.join(map(str, e_k))}). Kernel size can't be greater than actual input size")
    attrs = {"stride": stride, "pad": _flat_pads(pads), "dil": dilation, "groups": int(groups)}
    out = apply(CONV3D if nsp == 3 else CONV2D, (x, w, bias), attrs)
    if nsp != 1:
        _layout(out, x, w, groups)
    if nsp == 1:
        out = rename(out.squeeze(2), _CONVOLUTION)     # torch convolves 1-d directly: one node
    return out.squeeze(0) if unbatched else out


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-d convolution of (N, C, D, H, W) input with (O, C/groups, kd, kh, kw) weight."""
    return _conv_nd(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d convolution (cross-correlation) of (N, C, H, W) input with (O, C/groups, kh, kw) weight.

    ``padding`` may be an int, a pair, ``'valid'`` or ``'same'`` (stride 1 only).

        >>> F.conv2d(ember.ones(1, 1, 4, 4), ember.ones(1, 1, 3, 3)).shape
        ember.Size([1, 1, 2, 2])
    """
    return _conv_nd(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d convolution of (N, C, L) input with (O, C/groups, k) weight (runs the 2-d op on height 1)."""
    return _conv_nd(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


_DIM_NAMES = ("depth", "height", "width")


def _conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation, nsp, op):
    dt = _autocast_dtype() if not _AMP or _AMP[0] is not None else None
    if dt is not None:
        input, weight, bias = _cast_all(dt, input, weight, bias)
    if isinstance(padding, str):
        raise RuntimeError(f"{op}(): argument 'padding' must be tuple of ints, not str")
    stride, pads, dilation = _conv_args(input, weight, stride, padding, dilation, groups, nsp, op)
    opad = _tuple(output_padding, nsp, "output_padding", op)
    _check_conv_dtypes(input, weight, bias, op)
    x, unbatched = _batched(input, nsp, op)
    _check_channels(x, weight, groups, True, unbatched)
    n_out = weight._data.shape[1] * groups
    _check_bias(bias, n_out, weight)
    if any(o < 0 or (o >= s and o >= d) for o, s, d in zip(opad, stride, dilation)):
        # torch reports in 2-d terms for a 1-d call (a height-1 2-d call)
        o2, s2, d2 = ((0,) + opad, (1,) + stride, (1,) + dilation) if nsp == 1 else (opad, stride, dilation)
        names = _DIM_NAMES[-len(o2):]
        parts = [f"output_padding_{n}: {v}" for n, v in zip(names, o2)] + \
            [f"stride_{n}: {v}" for n, v in zip(names, s2)] + [f"dilation_{n}: {v}" for n, v in zip(names, d2)]
        raise RuntimeError("output padding must be smaller than either stride or dilation, but got " + " ".join(parts))
    x, w, stride, pads, dilation = _lift_1d(x, weight, stride, pads, dilation, nsp)
    if nsp == 1:
        opad = (0,) + opad
    sp = x._data.shape[2:]
    k = w._data.shape[2:]
    out_hw = tuple((n - 1) * s - p[0] - p[1] + d * (kk - 1) + o + 1
                   for n, s, p, d, kk, o in zip(sp, stride, pads, dilation, k, opad))
    if any(v <= 0 for v in out_hw):
        shown = out_hw[1:] if nsp == 1 else out_hw
        given = " x ".join(map(str, x._data.shape[2 + (nsp == 1):]))
        raise RuntimeError(f"Given input size per channel: ({given}). Calculated output size per channel: "
                           f"({' x '.join(map(str, shown))}). Output size is too small")
    attrs = {"stride": stride, "pad": _flat_pads(pads), "dil": dilation, "groups": int(groups), "out_hw": out_hw}
    out = apply(CONV_T3D if nsp == 3 else CONV_T, (x, w, bias), attrs)
    if nsp != 1:
        _layout(out, x, w, groups)
    if nsp == 1:
        out = rename(out.squeeze(2), _CONVOLUTION)
    return out.squeeze(0) if unbatched else out


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """3-d transposed convolution of (N, Cin, D, H, W) input with (Cin, Cout/groups, kd, kh, kw) weight."""
    return _conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                              "conv_transpose3d")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-d transposed convolution of (N, Cin, H, W) input with (Cin, Cout/groups, kh, kw) weight: the
    gradient of conv2d with respect to its input, plus ``output_padding`` extra rows/columns."""
    return _conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                              "conv_transpose2d")


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """1-d transposed convolution of (N, Cin, L) input with (Cin, Cout/groups, k) weight."""
    return _conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation, 1,
                              "conv_transpose1d")


# ---- unfold / fold ----------------------------------------------------------------------------------------


def _im2col_kernel(x, k, stride, pad, dil):
    cols, _ = _ck.im2col(x, k, stride, pad, dil)
    return np.ascontiguousarray(cols)


def _col2im_kernel(c, out_hw, k, stride, pad, dil):
    N, CK, L = c.shape
    C = CK // (k[0] * k[1])
    o = _ck.out_sizes(out_hw, k, stride, pad, dil)
    return _ck.col2im(c.reshape((N, C) + tuple(k) + o), out_hw, stride, pad, dil)


def _im2col_bw(ctx, g):
    a = ctx.attrs
    return apply(COL2IM, (g,), {"out_hw": ctx.in_shape(0)[2:], "k": a["k"], "stride": a["stride"],
                                "pad": a["pad"], "dil": a["dil"]})


def _col2im_bw(ctx, g):
    a = ctx.attrs
    return apply(IM2COL, (g,), {"k": a["k"], "stride": a["stride"], "pad": a["pad"], "dil": a["dil"]})


IM2COL = register("im2col", _im2col_kernel, _im2col_bw)
COL2IM = register("col2im", _col2im_kernel, _col2im_bw)


def _fold_geom(kernel_size, dilation, padding, stride, op):
    k = _tuple(kernel_size, 2, "kernel_size", op)
    d = _tuple(dilation, 2, "dilation", op)
    p = _tuple(padding, 2, "padding", op)
    s = _tuple(stride, 2, "stride", op)
    if any(v <= 0 for v in k):
        raise RuntimeError(f"{op}: kernel size should be greater than zero, but got kernel_height: {k[0]} "
                           f"kernel_width: {k[1]}")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"{op}: stride should be greater than zero, but got stride_height: {s[0]} "
                           f"stride_width: {s[1]}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"{op}: dilation should be greater than zero, but got dilation_height: {d[0]} "
                           f"dilation_width: {d[1]}")
    if any(v < 0 for v in p):
        raise RuntimeError(f"{op}: padding should be non-negative, but got pad_height: {p[0]} pad_width: {p[1]}")
    return k, d, (p[0], p[0], p[1], p[1]), s


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding local blocks (im2col): (N, C, H, W) -> (N, C*kh*kw, L)."""
    _check_tensor(input, "unfold", "input", 1)
    k, d, p, s = _fold_geom(kernel_size, dilation, padding, stride, "im2col")
    nd = input._data.ndim
    if nd not in (3, 4):
        raise NotImplementedError(f"Input Error: Only 3D or 4D input Tensors are supported (got {nd}D)")
    x = input.unsqueeze(0) if nd == 3 else input
    H, W = x._data.shape[2:]
    Ho = _ck.out_size(H, k[0], s[0], p[0], p[1], d[0])
    Wo = _ck.out_size(W, k[1], s[1], p[2], p[3], d[1])
    if Ho < 1 or Wo < 1:
        raise RuntimeError(f"Given input with spatial size ({H}, {W}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[2]}), calculated shape of the array "
                           f"of sliding blocks as ({Ho}, {Wo}), but its components must be at least one.")
    r = apply(IM2COL, (x,), {"k": k, "stride": s, "pad": p, "dil": d})
    return r.squeeze(0) if nd == 3 else r


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Combine sliding local blocks into an image (col2im): (N, C*kh*kw, L) -> (N, C, H, W), summing overlaps."""
    _check_tensor(input, "fold", "input", 1)
    out_hw = _tuple(output_size, 2, "output_size", "col2im")
    k, d, p, s = _fold_geom(kernel_size, dilation, padding, stride, "col2im")
    nd = input._data.ndim
    if nd not in (2, 3):
        raise NotImplementedError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                                  f"(got {nd}D)")
    c = input.unsqueeze(0) if nd == 2 else input
    N, CK, L = c._data.shape
    if CK % (k[0] * k[1]):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
                           f"but got input.size(1)={CK} and kernel_size=({k[0]}, {k[1]})")
    Ho = _ck.out_size(out_hw[0], k[0], s[0], p[0], p[1], d[0])
    Wo = _ck.out_size(out_hw[1], k[1], s[1], p[2], p[3], d[1])
    if Ho * Wo != L:
        raise RuntimeError(f"Given output_size=({out_hw[0]}, {out_hw[1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[2]}), stride=({s[0]}, {s[1]}), "
                           f"expected size of input's dimension 2 to match the calculated number of sliding "
                           f"blocks {Ho} * {Wo} = {Ho * Wo}, but got input.size(2)={L}.")
    r = apply(COL2IM, (c,), {"out_hw": out_hw, "k": k, "stride": s, "pad": p, "dil": d})
    return r.squeeze(0) if nd == 2 else r


def _export_toplevel(pairs) -> None:
    """Also expose these as ``ember.<name>`` (torch has them at the top level too)."""
    import sys
    from ...ops.registry import attach
    root = sys.modules.get("ember")
    for name, fn in pairs:
        attach(name, fn, method=False)
        if root is not None and not hasattr(root, name):
            setattr(root, name, fn)


_export_toplevel([("conv1d", conv1d), ("conv2d", conv2d), ("conv3d", conv3d), ("conv_transpose1d", conv_transpose1d),
                  ("conv_transpose2d", conv_transpose2d), ("conv_transpose3d", conv_transpose3d),
                  ("bilinear", bilinear)])
