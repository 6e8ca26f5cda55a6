"""``ember.nn.utils.fusion``: fold an eval-mode BatchNorm into the conv / linear layer before it
(torch.nn.utils.fusion), for inference.

With ``s = bn.weight / sqrt(running_var + eps)`` per output channel, the fused layer has weight
``w * s`` (scaled along the output-channel dim: dim 0, or dim 1 for a transposed conv) and bias
``(b - running_mean) * s + bn.bias``; a missing conv/linear bias counts as zero, a missing BatchNorm
affine weight/bias as one/zero.
"""
from __future__ import annotations

import copy

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def _bn_scale(bn_rm, bn_rv, bn_eps, bn_w):
    from ...ops.creation import ones_like
    if bn_w is None:
        bn_w = ones_like(bn_rm)
    return bn_w * (bn_rv + bn_eps).rsqrt()


def _fused(weight, bias, scale, bn_rm, bn_b, w_scale_shape):
    """(Parameter(weight * scale reshaped), Parameter((bias - mean) * scale + bn_b)) in the layer's dtypes."""
    from ...ops.creation import zeros_like
    from ..parameter import Parameter
    w_dtype = weight.dtype
    b_dtype = bias.dtype if bias is not None else w_dtype
    b_requires_grad = bias.requires_grad if bias is not None else False
    if bias is None:
        bias = zeros_like(bn_rm)
    if bn_b is None:
        bn_b = zeros_like(bn_rm)
    new_w = (weight * scale.reshape(w_scale_shape)).to(dtype=w_dtype)
    new_b = ((bias - bn_rm) * scale + bn_b).to(dtype=b_dtype)
    return Parameter(new_w.detach(), weight.requires_grad), Parameter(new_b.detach(), b_requires_grad)


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose: bool = False):
    """The fused (weight, bias) Parameters of a conv followed by an eval-mode BatchNorm."""
    tail = [1] * (conv_w.dim() - 2)
    shape = [1, -1] + tail if transpose else [-1, 1] + tail
    return _fused(conv_w, conv_b, _bn_scale(bn_rm, bn_rv, bn_eps, bn_w), bn_rm, bn_b, shape)


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The fused (weight, bias) Parameters of a linear layer followed by an eval-mode BatchNorm1d."""
    return _fused(linear_w, linear_b, _bn_scale(bn_rm, bn_rv, bn_eps, bn_w), bn_rm, bn_b, [-1, 1])


def _check_eval(layer, bn, what):
    if layer.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError(f"{what}: the BatchNorm has no running statistics (track_running_stats=False)")


def fuse_conv_bn_eval(conv, bn, transpose: bool = False):
    """A copy of ``conv`` (eval mode) with ``bn`` (eval mode) folded in."""
    _check_eval(conv, bn, "fuse_conv_bn_eval")
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` (eval mode) with ``bn`` (eval mode, BatchNorm1d) folded in."""
    _check_eval(linear, bn, "fuse_linear_bn_eval")
    if not (linear.out_features == bn.num_features or bn.num_features == 1):
        raise AssertionError("To fuse, linear.out_features == bn.num_features or bn.num_features == 1")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused
