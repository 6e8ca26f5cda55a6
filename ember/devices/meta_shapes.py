"""Shape rules the meta device uses for the layers of real models, so that no kernel runs.

Without a rule the meta device sizes an op's outputs by running its NumPy kernel on zero-stride
stand-ins: correct, but a (64, 256, 224, 224) convolution then really computes and allocates gigabytes.
A rule here is ``rule(*args, **attrs)`` on the op's raw arguments (``MetaArray`` for meta tensors, NumPy
arrays for CPU ones, None, Python values) and returns one ``(shape, numpy dtype[, strides])`` per
output; strides (in elements) are given where torch's meta kernels give a layout other than
contiguous (channels-last convolutions and poolings). A rule that raises lets the kernel run instead
(it raises the real error for bad arguments).

``tests/test_meta_shapes.py`` checks every rule against the kernel path (same shapes and dtypes) and the
results against torch's meta tensors.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..nn.functional import _conv_kernels as _ck, _pool_kernels as _pk
from ..nn.functional._channels_last import strides_suggest as _suggest, cl_strides as _cl_strides

__all__ = ["RULES"]


def _el_strides(a):
    """Strides in elements of a MetaArray or a NumPy array."""
    if isinstance(a, np.ndarray):
        return tuple(s // a.itemsize for s in a.strides)
    return tuple(a.strides)


def _suggests_cl(*arrays) -> bool:
    return any(a is not None and a.ndim in (4, 5) and _suggest(a.shape, _el_strides(a)) for a in arrays)


def _laid(shape, dtype, cl):
    return (tuple(shape), dtype, _cl_strides(tuple(shape))) if cl else (tuple(shape), dtype)


def _up(dt):
    dt = np.dtype(dt)
    return np.dtype(np.float32) if dt.itemsize == 2 and (dt.kind == "f" or dt.name == "bfloat16") else dt


# ---- reductions ----------------------------------------------------------------------------------------

def _axes(ndim, axis):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    return tuple(sorted(a % ndim if ndim else 0 for a in axis))


def _reduced(x, axis, keepdims):
    ax = _axes(x.ndim, axis)
    if keepdims:
        return tuple(1 if i in ax else n for i, n in enumerate(x.shape))
    return tuple(n for i, n in enumerate(x.shape) if i not in ax)


def _reduce_dtype(kernel):
    """The kernel's result dtype for ``x``'s dtype, from a run on a one-element array (cheap, exact)."""
    def rule(x, axis=None, *args, **kw):
        keep = kw.get("keepdims", args[-1] if args and isinstance(args[-1], bool) else False)
        tiny = np.zeros((1,) * x.ndim, x.dtype)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            dt = np.asarray(kernel(tiny, axis, *args, **kw)).dtype
        return [(_reduced(x, axis, keep), dt)]
    return rule


# ---- convolutions ---------------------------------------------------------------------------------------

# torch's meta convolutions are contiguous whatever the layout (its CPU kernels keep channels-last)

def _conv(x, w, b, stride, pad, dil, groups):
    out = _ck.out_sizes(x.shape[2:], w.shape[2:], stride, pad, dil)
    if any(o <= 0 for o in out):
        raise ValueError("empty convolution output")
    return [((x.shape[0], w.shape[0]) + out, x.dtype)]


def _conv_t(y, w, b, stride, pad, dil, groups, out_hw):
    return [((y.shape[0], w.shape[1] * groups) + tuple(out_hw), y.dtype)]


def _conv_w(x, g, stride, pad, dil, groups, kernel):
    return [((g.shape[1], x.shape[1] // groups) + tuple(kernel), x.dtype)]


# ---- pooling ----------------------------------------------------------------------------------------------

def _pool_cl(x, rank3_keeps: bool):
    return _suggests_cl(x) and (x.ndim == 4 or rank3_keeps)


def _max_pool(x, k, s, p, d, ceil):
    shape = x.shape[:2] + _pk.pool_outs(x.shape[2:], k, s, p, d, ceil)
    cl = _pool_cl(x, True)
    return [_laid(shape, x.dtype, cl), _laid(shape, np.dtype(np.int64), cl)]


def _avg_pool(x, k, s, p, ceil, cip, div):
    shape = x.shape[:2] + _pk.pool_outs(x.shape[2:], k, s, p, (1,) * len(k), ceil)
    return [_laid(shape, x.dtype, _pool_cl(x, False))]


def _avg_pool_bw(g, in_hw, k, s, p, ceil, cip, div):
    return [_laid(g.shape[:2] + tuple(in_hw), g.dtype, _pool_cl(g, False))]


def _adaptive_max(x, out_hw):
    shape = x.shape[:2] + tuple(out_hw)
    cl = _pool_cl(x, False)
    return [_laid(shape, x.dtype, cl), _laid(shape, np.dtype(np.int64), cl)]


def _gather(x, idx, unique):
    return [_laid(idx.shape, x.dtype, _suggests_cl(idx))]


def _scatter(g, idx, in_hw, unique):
    return [(g.shape[:2] + tuple(in_hw), g.dtype)]


# ---- normalization, attention, losses, embeddings -------------------------------------------------------

def _norm_stats(x, shape, axes, center=True):
    sshape = tuple(1 if i in axes else n for i, n in enumerate(shape))
    dt = _up(x.dtype)
    return [(sshape, dt), (sshape, dt)]


def _batch_norm(x, *args, **kw):
    return [_laid(x.shape, x.dtype, _suggests_cl(x))]       # (torch's meta layer/group norms are contiguous)


def _same_first(x, *args, **kw):
    return [(x.shape, x.dtype)]


def _elementwise(*args, **kw):
    """The broadcast shape and the first input's dtype; channels-last when an input of that shape is."""
    arrs = [a for a in args if hasattr(a, "shape") and hasattr(a, "dtype")]
    shape = np.broadcast_shapes(*[a.shape for a in arrs])
    return [_laid(shape, arrs[0].dtype, _suggests_cl(*[a for a in arrs if a.shape == shape]))]


def _sdpa_softmax(x, bias, scale=1.0):
    shape = x.shape if bias is None else np.broadcast_shapes(x.shape, bias.shape)
    return [(shape, x.dtype)]


def _sdpa_softmax_bw(g, p, scale=1.0, need_x=True, need_b=False):
    dt = p.dtype
    return [(p.shape if need_x else (0,), dt), (p.shape if need_b else (0,), dt)]


def _class_loss_shape(x, t, reduction):
    if reduction != "none":
        return ()
    return tuple(t.shape)


def _cross_entropy(x, t, w, reduction, ignore_index, label_smoothing):
    return [(_class_loss_shape(x, t, reduction), x.dtype), (x.shape, _up(x.dtype))]


def _nll(x, t, w, reduction, ignore_index):
    return [(_class_loss_shape(x, t, reduction), x.dtype)]


def _ce_bw(g, x, t, w, reduction, ignore_index, label_smoothing, logp=None):
    return [(x.shape, x.dtype)]


def _nll_bw(g, t, w, reduction, ignore_index, shape, dtype):
    return [(tuple(shape), np.dtype(getattr(dtype, "np", dtype)))]


def _embedding_bw(g, idx, num_weights, padding_idx=-1, scale_grad_by_freq=False):
    return [((int(num_weights), g.shape[-1]), g.dtype)]


def _slice_bw(g, in_shape, key, dtype):
    return [(tuple(in_shape), g.dtype)]


def _reshape_copy(x, shape):
    shape = list(shape)
    if -1 in shape:
        i = shape.index(-1)
        known = 1
        for j, n in enumerate(shape):
            if j != i:
                known *= n
        shape[i] = x.size // known if known else 0
    return [(tuple(shape), x.dtype)]


def _cat(*xs, axis, dt, keep, sizes):
    if not keep:
        raise ValueError("cat of empties: the kernel decides")
    ref = list(xs[keep[0]].shape)
    ref[axis] = sum(sizes[i] for i in keep)
    return [(tuple(ref), dt)]


def _from_fake(op):
    """A rule from the op's own symbolic shape rule (``OpDef.fake``: shapes only); floating outputs take
    the first input's dtype."""
    def rule(*args, **attrs):
        first = next(a for a in args if hasattr(a, "dtype"))
        return [(tuple(s), first.dtype) for s in op.fake(*args, **attrs)]
    return rule


def _activation_names():
    """The elementwise activations (and their derivatives) registered by nn.functional.activation."""
    from ..ops.registry import REGISTRY
    from ..nn.functional import activation as act
    names = []
    for name, op in REGISTRY.items():
        if getattr(op.kernel, "__module__", "") == act.__name__ and op.nout == 1 and not name.startswith("_"):
            names.append(name)
    return names


_BY_NAME = {
    "conv2d": _conv, "conv3d": _conv, "conv_transpose2d": _conv_t, "conv_transpose3d": _conv_t,
    "conv2d_weight": _conv_w, "conv3d_weight": _conv_w,
    "max_pool2d": _max_pool, "max_pool3d": _max_pool, "avg_pool2d": _avg_pool, "avg_pool3d": _avg_pool,
    "avg_pool2d_backward": _avg_pool_bw, "avg_pool3d_backward": _avg_pool_bw,
    "adaptive_max_pool2d": _adaptive_max, "adaptive_max_pool3d": _adaptive_max,
    "max_pool_gather": _gather, "max_pool_scatter": _scatter,
    "norm_stats": _norm_stats, "native_layer_norm": _same_first, "native_batch_norm": _batch_norm,
    "native_group_norm": _same_first,
    "sdpa_softmax": _sdpa_softmax, "sdpa_softmax_backward": _sdpa_softmax_bw,
    "cross_entropy": _cross_entropy, "cross_entropy_backward": _ce_bw, "nll_loss": _nll,
    "nll_loss_backward": _nll_bw, "embedding_dense_backward": _embedding_bw, "slice_backward": _slice_bw,
    "reshape_copy": _reshape_copy, "cat": _cat,
}
_REDUCTIONS = ("sum", "mean", "prod", "amax", "amin", "logsumexp", "var", "std")

RULES: dict = {}


def build() -> dict:
    """Fill :data:`RULES` (op name -> rule) from the registry; called when the meta device first activates."""
    if RULES:
        return RULES
    from ..ops.registry import REGISTRY
    for name in _REDUCTIONS:
        op = REGISTRY.get(name)
        if op is not None:
            RULES[name] = _reduce_dtype(op.kernel)
    for name in _activation_names():        # all elementwise: the broadcast shape, the first input's dtype
        RULES[name] = _elementwise
    RULES.update(_BY_NAME)
    for name, op in REGISTRY.items():
        if op.fake is not None and name not in RULES:
            RULES[name] = _from_fake(op)
    return RULES
