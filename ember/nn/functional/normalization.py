"""torch.nn.functional's normalization layers: layer_norm, group_norm, rms_norm, batch_norm,
instance_norm, normalize and local_response_norm.

Every statistics-based normalization is the same computation seen through a different reshape: the
input is viewed in a *canonical shape* (layer norm ``(M, D)``, batch norm ``(N, C, S)``, instance norm
``(N, C, S)``, group norm ``(N, G, C/G, S)``), statistics are taken over some axes of that view, and a
per-feature affine map follows. So there are two registered ops per call:

- ``norm_stats`` (not differentiable): the mean and biased variance over the statistic axes;
- one fused normalize+affine op (``native_layer_norm``, ``native_batch_norm``, ``native_group_norm``,
  ``rms_norm``) taking ``(x, weight, bias, mean, var)``. Its derivative is the closed form
  ``dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))`` written in ember ops.

The statistics are separate inputs (not extra outputs) so that an in-place op on the normalized output
(``BatchNorm -> ReLU(inplace=True)``) does not invalidate what backward reads. When a graph of the
backward is being built (double backward), the statistics are recomputed from ``x`` with ember ops, so
the second derivative includes their dependence on ``x``. Batch norm's running statistics are updated
with ember's in-place ops from the ``norm_stats`` outputs, so ``ember.compile`` records the update.

float16/bfloat16 inputs are computed in float32 and rounded back, as torch's CPU kernels do.
"""
from __future__ import annotations
from ...ops._layout_rule import contiguous_results

import sys

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap
from ...autograd.grad_mode import GRAD, no_grad
from ...ops.registry import register, apply, record_grad, dtype_name, node_class, rename, HOOKS
from ..._native import eager_kernels as _native
from ._channels_last import contiguous_result

__all__ = ["layer_norm", "group_norm", "rms_norm", "batch_norm", "instance_norm", "normalize",
           "local_response_norm"]

_LOW = (_dt.float16, _dt.bfloat16)


# ---- kernels ----------------------------------------------------------------------------------------

def _up(a: np.ndarray) -> np.ndarray:
    """float16/bfloat16 arrays are computed in float32."""
    dt = a.dtype
    return a.astype(np.float32) if dt.itemsize == 2 and (dt == np.float16 or dt.name == "bfloat16") else a


def _rows(shape, axes, center) -> bool:
    """Whether this is layer norm's layout, (M, D) normalized over D: the native kernels' case."""
    return center and len(shape) == 2 and axes == (1,)


def _stats_kernel(x, shape, axes, center=True):
    xc = _up(x.reshape(shape))
    if xc.dtype == np.float32 and _rows(shape, axes, center):
        r = _native.norm_stats(xc)           # one native pass per row (ember/_native); None: NumPy's
        if r is not None:
            return r
    sshape = tuple(1 if i in axes else s for i, s in enumerate(shape))
    n = 1
    for a in axes:
        n *= shape[a]
    if n == 0:
        # nothing to average: torch's output is empty, the values never reach anything
        return np.zeros(sshape, xc.dtype), np.ones(sshape, xc.dtype)
    if not center:
        return np.zeros(sshape, xc.dtype), np.mean(np.square(xc), axis=axes, keepdims=True)
    mean = np.mean(xc, axis=axes, keepdims=True)
    d = xc - mean
    # two-pass variance: exact to rounding, like torch's Welford
    var = np.mean(np.square(d, out=d), axis=axes, keepdims=True)
    return mean, var


NORM_STATS = register("norm_stats", _stats_kernel, nout=2, differentiable=False)


def _norm_kernel(x, w, b, mean, var, shape, sshape, wshape, axes, waxes, eps, center=True, const=False):
    xc = _up(x.reshape(shape))
    if xc.dtype == np.float32 and _rows(shape, axes, center):
        y = _native.layer_norm(xc, _flat(w), _flat(b), mean, var, eps)
        if y is not None:
            return y.reshape(x.shape).astype(x.dtype, copy=False)
    rstd = 1.0 / np.sqrt(var.reshape(sshape) + eps)
    if center:
        y = xc - mean.reshape(sshape)
        y *= rstd
    else:
        y = xc * rstd
    if w is not None:
        y *= w.reshape(wshape)
    if b is not None:
        y += b.reshape(wshape)
    return y.reshape(x.shape).astype(x.dtype, copy=False)


def _norm_backward(ctx, g):
    """Gradients of ``(x - mean) * rstd * w + b`` for x, w and b (see the module docstring)."""
    x, w, b, mean, var = ctx.inputs
    a = ctx.attrs
    shape, sshape, wshape = a["shape"], a["sshape"], a["wshape"]
    axes, waxes, eps, center, const = a["axes"], a["waxes"], a["eps"], a["center"], a["const"]
    need_x, need_w, need_b = (ctx.edges[i] is not None for i in range(3))
    if not GRAD[0] and not HOOKS and type(g._data) is np.ndarray and type(x._data) is np.ndarray:
        # plain eager backward (no graph of it, nothing capturing or watching ops): the same formula on
        # the arrays, in place, without an op dispatch per step
        return _norm_backward_arrays(g._data, x._data, None if w is None else w._data, mean._data, var._data,
                                     None if b is None else b._data.shape, a, need_x, need_w, need_b)
    g3 = g.reshape(shape)
    x3 = x.reshape(shape)
    if x._dtype in _LOW:
        g3, x3 = g3.float(), x3.float()
    if GRAD[0] and x._rg and not const:
        # building a graph of the backward: statistics as functions of x, so that the second
        # derivative sees how they move with x
        if center:
            mean = x3.mean(axes, keepdim=True)
            d = x3 - mean
            var = (d * d).mean(axes, keepdim=True)
        else:
            var = (x3 * x3).mean(axes, keepdim=True)
    else:
        mean = mean.reshape(sshape)
        var = var.reshape(sshape)
    rstd = (var + eps).rsqrt()
    xhat = (x3 - mean) * rstd if center else x3 * rstd
    gx = gw = gb = None
    if need_b:
        gb = g3.sum(waxes).reshape(b.shape)
    if need_w:
        gw = (g3 * xhat).sum(waxes).reshape(w.shape)
    if need_x:
        gxhat = g3 * w.reshape(wshape) if w is not None else g3
        if const:
            # statistics are constants (running stats in eval mode)
            gx = gxhat * rstd
        else:
            proj = (gxhat * xhat).mean(axes, keepdim=True)
            inner = gxhat - xhat * proj
            if center:
                inner = inner - gxhat.mean(axes, keepdim=True)
            gx = inner * rstd
        gx = gx.reshape(x.shape)
    return gx, gw, gb, None, None


def _norm_backward_arrays(g, x, w, mean, var, b_shape, a, need_x, need_w, need_b):
    """``_norm_backward``'s formula on NumPy arrays (the same NumPy reductions as ember's sum/mean), for
    a backward pass that records nothing; float16/bfloat16 compute in float32 (the engine casts back)."""
    shape, sshape, wshape = a["shape"], a["sshape"], a["wshape"]
    axes, waxes, center = a["axes"], a["waxes"], a["center"]
    g3 = _up(g.reshape(shape))
    x3 = _up(x.reshape(shape))
    if x3.dtype == np.float32 and _rows(shape, axes, center) and not a["const"]:
        r = _native.layer_norm_backward(g3, x3, _flat(w), mean, var, a["eps"], need_x, need_w or need_b)
        if r is not None:
            gx, gw, gb = r
            return (None if gx is None else wrap(gx.reshape(x.shape)), wrap(gw.reshape(w.shape)) if need_w else None,
                    wrap(gb.reshape(b_shape)) if need_b else None, None, None)
    rstd = np.sqrt(var.reshape(sshape) + a["eps"])
    np.reciprocal(rstd, out=rstd)
    xhat = np.subtract(x3, mean.reshape(sshape)) if center else x3 * rstd
    if center:
        xhat *= rstd
    gx = gw = gb = None
    if need_b:
        gb = wrap(np.asarray(np.sum(g3, axis=waxes)).reshape(b_shape))
    if need_w:
        gw = wrap(np.asarray(np.sum(g3 * xhat, axis=waxes)).reshape(w.shape))
    if need_x:
        gxhat = g3 * w.reshape(wshape) if w is not None else g3
        if a["const"]:
            r = gxhat * rstd
        else:
            r = gxhat * xhat
            proj = np.mean(r, axis=axes, keepdims=True)
            np.multiply(xhat, proj, out=r)
            np.subtract(gxhat, r, out=r)            # gxhat - xhat * mean(gxhat * xhat)
            if center:
                r -= np.mean(gxhat, axis=axes, keepdims=True)
            r *= rstd
        gx = wrap(r.reshape(x.shape))
    return gx, gw, gb, None, None


def _flat(p):
    return None if p is None else p.reshape(-1)


# x, weight and the statistics are read by backward; bias is not (an in-place update of it is fine)
NATIVE_LAYER_NORM = register("native_layer_norm", _norm_kernel, _norm_backward, save="0134")
NATIVE_GROUP_NORM = register("native_group_norm", _norm_kernel, _norm_backward, save="0134")
NATIVE_BATCH_NORM = register("native_batch_norm", _norm_kernel, _norm_backward, save="0134")
RMS_NORM = register("rms_norm", _norm_kernel, _norm_backward, save="0134")
RMS_NORM.node_name = "MulBackward0"     # torch's rms_norm is composite: its last step is a product
contiguous_results(NATIVE_LAYER_NORM)       # C-contiguous as torch's, whatever x's layout
contiguous_results(NATIVE_GROUP_NORM, channels_last=True)   # (channels-last kept, as torch's)


def _normalize_op(op, x, w, b, mean, var, shape, sshape, wshape, axes, waxes, eps, center=True, const=False):
    attrs = {"shape": shape, "sshape": sshape, "wshape": wshape, "axes": axes, "waxes": waxes,
             "eps": float(eps), "center": center, "const": const}
    return apply(op, (x, w, b, mean, var), attrs)


# ---- argument checks ----------------------------------------------------------------------------------

def _check_input(x, name: str, kernel_name: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")
    if not x._dtype.is_floating_point:
        raise NotImplementedError(f'"{kernel_name}" not implemented for \'{dtype_name(x._dtype)}\'')


def _check_params(x: Tensor, *params) -> None:
    """torch's CPU rule: parameters share the input's dtype, or are float32 for a float16/bfloat16 input."""
    pd = {p._dtype for p in params if p is not None}
    if not pd or pd == {x._dtype}:
        return
    if x._dtype in _LOW and pd == {_dt.float32}:
        return
    if x._dtype is _dt.float32:
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
    raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def _shape_list(s) -> str:
    return "[" + ", ".join(str(int(v)) for v in s) + "]"


def _normalized_shape(normalized_shape, name: str) -> tuple:
    if isinstance(normalized_shape, (int, np.integer)):
        raise TypeError(f"{name}(): argument 'normalized_shape' (position 2) must be tuple of ints, "
                        f"not {type(normalized_shape).__name__}")
    try:
        return tuple(int(v) for v in normalized_shape)
    except TypeError:
        raise TypeError(f"{name}(): argument 'normalized_shape' (position 2) must be tuple of ints, "
                        f"not {type(normalized_shape).__name__}") from None


def _check_affine_shape(t, what: str, ns: tuple) -> None:
    if t is not None and tuple(t.shape) != ns:
        raise RuntimeError(f"Expected {what} to be of same shape as normalized_shape, but got {what} of shape "
                           f"{_shape_list(t.shape)} and normalized_shape = {_shape_list(ns)}")


def _prod(s) -> int:
    n = 1
    for v in s:
        n *= v if isinstance(v, int) else int(v)     # (a symbolic size stays one while ember.compile traces)
    return n


# ---- layer norm / rms norm ----------------------------------------------------------------------------

def _last_dims_view(x: Tensor, ns: tuple):
    d = _prod(ns)
    m = _prod(x.shape[:x.ndim - len(ns)])          # (x.shape: symbolic under a dynamic-shape trace)
    return (m, d), (m, 1), (1, d)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalize over the last ``len(normalized_shape)`` dims, then ``* weight + bias`` (elementwise)."""
    ns = _normalized_shape(normalized_shape, "layer_norm")
    _check_input(input, "layer_norm", "LayerNormKernelImpl")
    if len(ns) == 0:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least "
                           "one element, but got normalized_shape = []")
    _check_affine_shape(weight, "weight", ns)
    _check_affine_shape(bias, "bias", ns)
    k = len(ns)
    if input._data.ndim < k or input._data.shape[-k:] != ns:
        raise RuntimeError(f"Given normalized_shape={_shape_list(ns)}, expected input with shape "
                           f"[*, {', '.join(map(str, ns))}], but got input of size{_shape_list(input.shape)}")
    _check_params(input, weight, bias)
    shape, sshape, wshape = _last_dims_view(input, ns)
    if not HOOKS and input._dtype is _dt.float32 and type(input._data) is np.ndarray:
        out = _layer_norm_native(input, weight, bias, shape, sshape, wshape, eps)
        if out is not None:
            return out
    mean, var = apply(NORM_STATS, (input,), {"shape": shape, "axes": (1,), "center": True})
    return _normalize_op(NATIVE_LAYER_NORM, input, weight, bias, mean, var, shape, sshape, wshape, (1,), (0,), eps)


def _layer_norm_native(x, w, b, shape, sshape, wshape, eps):
    """NORM_STATS then NATIVE_LAYER_NORM as ``apply`` runs them, in one native call: the same values,
    outputs and autograd node (only without hooks: nothing watches ops). None: take the ops' path."""
    try:
        r = _native.layer_norm_forward(x._data.reshape(shape), _flat_data(w), _flat_data(b), float(eps))
    except (MemoryError, ValueError):
        return None                     # the ops' path raises torch's error for it
    if r is None:
        return None
    y, mean, var = r
    out = wrap(y.reshape(x._data.shape))
    attrs = {"shape": shape, "sshape": sshape, "wshape": wshape, "axes": (1,), "waxes": (0,),
             "eps": float(eps), "center": True, "const": False}
    record_grad(NATIVE_LAYER_NORM, (x, w, b, wrap(mean), wrap(var)), attrs, (out,))
    return out


def _flat_data(p):
    return None if p is None else p._data.reshape(-1)


def rms_norm(input, normalized_shape, weight=None, eps=None) -> Tensor:
    """Root-mean-square normalization over the last dims, times ``weight``; ``eps`` defaults to
    ``finfo(input.dtype).eps``."""
    ns = _normalized_shape(normalized_shape, "rms_norm")
    _check_input(input, "rms_norm", "rms_norm")
    _check_affine_shape(weight, "weight", ns)
    k = len(ns)
    if input.ndim < k or tuple(input.shape[input.ndim - k:]) != ns:
        raise RuntimeError(f"Given normalized_shape={_shape_list(ns)}, expected input with shape "
                           f"[*{', '.join(map(str, ns))}], but got input of size{_shape_list(input.shape)}")
    if eps is None:
        eps = _dt.finfo(input._dtype).eps
    if weight is not None and weight._dtype is not input._dtype and not (
            input._dtype in _LOW and weight._dtype is _dt.float32):
        weight = weight.to(input._dtype)     # torch's composite casts the product back to the input dtype
    shape, sshape, wshape = _last_dims_view(input, ns)
    ax = (1,) if k else ()
    mean, var = apply(NORM_STATS, (input,), {"shape": shape, "axes": ax, "center": False})
    return _normalize_op(RMS_NORM, input, weight, None, mean, var, shape, sshape, wshape, ax, (0,), eps,
                         center=False)


# ---- group norm ---------------------------------------------------------------------------------------

def _verify_batch_size(size) -> None:
    n = size[0]
    for s in size[2:]:
        n *= s
    if n == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {_size_repr(size)}")


def _size_repr(size) -> str:
    if isinstance(size, list):
        return str(size)
    return "ember.Size([" + ", ".join(str(int(v)) for v in size) + "])"


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalize each group of ``C // num_groups`` channels (with all spatial positions) per sample, then
    apply a per-channel affine map."""
    _check_input(input, "group_norm", "GroupNormKernelImpl")
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    shp = tuple(input.shape)
    n, c = shp[0], shp[1]
    if num_groups == 0:
        raise ZeroDivisionError("integer division or modulo by zero")   # (torch's Python check divides first)
    if num_groups <= 0 or c % num_groups != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input "
                           f"of shape {_shape_list(shp)} and num_groups={num_groups}")
    _verify_batch_size([n * c // num_groups, num_groups] + list(shp[2:]))
    for t, what in ((weight, "weight"), (bias, "bias")):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            raise RuntimeError(f"Expected {what} to be a vector of size equal to the number of channels in "
                               f"input, but got {what} of shape {_shape_list(t.shape)} and input of shape "
                               f"{_shape_list(shp)}")
    _check_params(input, weight, bias)
    g = num_groups
    s = _prod(shp[2:])
    shape = (n, g, c // g, s)
    mean, var = apply(NORM_STATS, (input,), {"shape": shape, "axes": (2, 3), "center": True})
    return _normalize_op(NATIVE_GROUP_NORM, input, weight, bias, mean, var, shape, (n, g, 1, 1),
                         (1, g, c // g, 1), (2, 3), (0, 3), eps)


# ---- batch norm / instance norm -----------------------------------------------------------------------

def _update_running(buf: Tensor, value: Tensor, momentum: float) -> None:
    """``buf = (1 - momentum) * buf + momentum * value`` in place, outside autograd (torch's update).

    Written with ember's in-place ops on the statistics op's outputs, so a compiled replay recomputes
    and writes the update for each new batch."""
    with no_grad():
        buf.mul_(1.0 - momentum).add_(value.to(buf._dtype) * momentum)


def _bn_core(input, weight, bias, running_mean, running_var, training, momentum, eps, instance=False):
    """Shared body of batch_norm (statistics over N and space) and instance_norm (over space only)."""
    shp = tuple(input.shape)
    c = shp[1] if len(shp) > 1 else 0
    n = shp[0] if shp else 1
    for t, what in ((running_mean, "running_mean"), (running_var, "running_var"), (weight, "weight"),
                    (bias, "bias")):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{what} should contain {c} elements not {t.numel()}")
    for t, what in ((running_mean, "running_mean"), (running_var, "running_var")):
        if t is not None and t._rg:
            raise RuntimeError(f"The function 'native_batch_norm' is not differentiable with respect to argument "
                               f"'{what}'. This input cannot have requires_grad True.")
    _check_params(input, weight, bias, running_mean, running_var)
    s = _prod(shp[2:])
    shape = (n, c, s)
    wshape = (1, c, 1)
    waxes = (0, 2)
    if not training:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean must be defined in evaluation mode")
        return _normalize_op(NATIVE_BATCH_NORM, input, weight, bias, running_mean, running_var, shape,
                             (1, c, 1), wshape, waxes, waxes, eps, const=True)
    axes = (2,) if instance else (0, 2)
    sshape = (n, c, 1) if instance else (1, c, 1)
    mean, var = apply(NORM_STATS, (input,), {"shape": shape, "axes": axes, "center": True})
    if running_mean is not None and input.numel() > 0:
        count = s if instance else n * s
        with no_grad():
            # running variance uses the unbiased estimate, as torch does
            unbiased = var * (count / (count - 1) if count > 1 else float("inf"))
            m, v = mean.reshape(-1, c), unbiased.reshape(-1, c)
            if instance:
                m, v = m.mean(0), v.mean(0)
        _update_running(running_mean, m.reshape(running_mean.shape), momentum)
        _update_running(running_var, v.reshape(running_var.shape), momentum)
    return _normalize_op(NATIVE_BATCH_NORM, input, weight, bias, mean, var, shape, sshape, wshape, axes, waxes,
                         eps)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalization over dim 1 (channels). In training, batch statistics normalize the input and
    update ``running_mean``/``running_var`` in place (unbiased variance); in eval, the running
    statistics are used."""
    _check_input(input, "batch_norm", "batch_norm")
    if training:
        _verify_batch_size(input.shape)
    if training and eps <= 0.0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be None")
    if momentum is None:
        raise TypeError("batch_norm(): argument 'momentum' (position 7) must be float, not NoneType")
    return _bn_core(input, weight, bias, running_mean, running_var, training, momentum, eps)


def _verify_spatial_size(size) -> None:
    n = 1
    for s in size[2:]:
        n *= s
    if n == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {_size_repr(size)}")


_VIEW = node_class("ViewBackward0")


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each channel of each sample over its spatial positions. With running statistics and
    ``use_input_stats``, they are updated with the batch average of the per-instance statistics."""
    _check_input(input, "instance_norm", "batch_norm")
    if use_input_stats:
        _verify_spatial_size(input.shape)
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
    out = _bn_core(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, instance=True)
    return rename(contiguous_result(out), _VIEW)     # torch batch-normalizes a (1, N*C, ...) view, then views back


# ---- normalize / local response norm ------------------------------------------------------------------

def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None) -> Tensor:
    """``input / max(||input||_p over dim, eps)``."""
    import ember
    denom = ember.linalg.vector_norm(input, p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    if out is None:
        return input / denom
    return ember.div(input, denom, out=out)


def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """Divide each value by ``(k + alpha * mean of squares over `size` neighbouring channels) ** beta``
    (zero-padded window, averaged over ``size``)."""
    import ember
    dim = input.ndim
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    sq = input * input
    shp = tuple(input.shape)
    c = shp[1]
    front, back = size // 2, (size - 1) // 2
    parts = []
    if front:
        parts.append(ember.zeros((shp[0], front) + shp[2:], dtype=input.dtype))
    parts.append(sq)
    if back:
        parts.append(ember.zeros((shp[0], back) + shp[2:], dtype=input.dtype))
    padded = ember.cat(parts, 1) if len(parts) > 1 else sq
    # padded has c + size - 1 channels: the window sum is the sum of `size` shifted slices
    total = padded.narrow(1, 0, c)
    for i in range(1, size):
        total = total + padded.narrow(1, i, c)
    div = (total / size * alpha + k) ** beta
    return input / div


# ---- top-level forms (torch.layer_norm, torch.batch_norm, ...) ------------------------------------------

def _torch_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    """``torch.layer_norm`` (same as ``nn.functional.layer_norm``)."""
    return layer_norm(input, normalized_shape, weight, bias, eps)


def _torch_group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """``torch.group_norm``."""
    return group_norm(input, num_groups, weight, bias, eps)


def _torch_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled=True):
    """``torch.batch_norm`` (the positional order of the ATen op)."""
    _check_input(input, "batch_norm", "batch_norm")
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be None")
    return _bn_core(input, weight, bias, running_mean, running_var, training, momentum, eps)


def _torch_instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                         cudnn_enabled=True):
    """``torch.instance_norm`` (the positional order of the ATen op)."""
    return instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def _torch_rms_norm(input, normalized_shape, weight=None, eps=None):
    """``torch.rms_norm``."""
    return rms_norm(input, normalized_shape, weight, eps)


_pkg = sys.modules["ember"]
for _n, _f in (("layer_norm", _torch_layer_norm), ("group_norm", _torch_group_norm),
               ("batch_norm", _torch_batch_norm), ("instance_norm", _torch_instance_norm),
               ("rms_norm", _torch_rms_norm)):
    _f.__name__ = _n
    if not hasattr(_pkg, _n):
        setattr(_pkg, _n, _f)
