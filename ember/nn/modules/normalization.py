"""Normalization layers (torch.nn's): LayerNorm, GroupNorm, RMSNorm, LocalResponseNorm,
BatchNorm1d/2d/3d and InstanceNorm1d/2d/3d.

Parameter and buffer names (``weight``, ``bias``, ``running_mean``, ``running_var``,
``num_batches_tracked``), constructor arguments and ``extra_repr`` text follow torch, so checkpoints and
``repr(model)`` move between the two libraries unchanged. The computation is in
``ember.nn.functional.normalization``.
"""
from __future__ import annotations

import numbers
import warnings

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap, _check_device, _on_device
from ...autograd.grad_mode import no_grad
from .module import Module
from ..parameter import Parameter
from .. import functional as F

__all__ = ["LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
           "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


def _factory(shape, fill: float, device, dtype) -> Tensor:
    """A new tensor of ``shape`` filled with ``fill`` (torch's ``empty`` + ``init.ones_/zeros_``)."""
    dev = _check_device(device)
    dt = dtype or _dt.get_default_dtype()
    if not isinstance(dt, _dt.dtype):
        raise TypeError(f"dtype must be an ember.dtype, got {type(dt).__name__}")
    return _on_device(wrap(np.full(shape, fill, dt.np), dt), dev)


def _affine(module: Module, shape, enabled: bool, bias: bool, device, dtype) -> None:
    """Register ``weight`` (ones) and ``bias`` (zeros) of ``shape`` when ``enabled`` (``bias=False`` drops
    the bias), else both as ``None``: the affine map every normalization layer ends with."""
    module.register_parameter("weight", Parameter(_factory(shape, 1.0, device, dtype)) if enabled else None)
    module.register_parameter("bias", Parameter(_factory(shape, 0.0, device, dtype))
                              if enabled and bias else None)


def _reset_affine(module: Module) -> None:
    """Weight back to ones and bias to zeros (those that exist)."""
    with no_grad():
        if module.weight is not None:
            module.weight.fill_(1.0)
        if getattr(module, "bias", None) is not None:
            module.bias.zero_()


def _shape_tuple(normalized_shape) -> tuple:
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


class LayerNorm(Module):
    """Normalizes the last ``len(normalized_shape)`` dims of the input to zero mean and unit variance,
    then applies an elementwise ``weight`` and ``bias`` (``elementwise_affine``, ``bias``)."""

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine(self, self.normalized_shape, elementwise_affine, bias, device, dtype)

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    """Splits the channels into ``num_groups`` groups and normalizes each group of each sample (over its
    channels and all spatial positions); then a per-channel affine map (``affine``, ``bias``)."""

    __constants__ = ["num_groups", "num_channels", "eps", "affine"]

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine(self, (num_channels,), affine, bias, device, dtype)

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """Divides by the root mean square over the last dims (``eps=None`` uses ``finfo(input.dtype).eps``),
    then multiplies by an elementwise ``weight`` (``elementwise_affine``)."""

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.register_parameter("weight", Parameter(_factory(self.normalized_shape, 1.0, device, dtype))
                                if elementwise_affine else None)

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    """Normalizes each value by the mean square of ``size`` neighbouring channels:
    ``x / (k + alpha * mean(x^2)) ** beta``."""

    __constants__ = ["size", "alpha", "beta", "k"]

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


# ---- batch norm / instance norm ----------------------------------------------------------------------------

class _NormBase(Module):
    """Shared state of batch and instance norm: affine parameters and the running statistics buffers."""

    _version = 2
    __constants__ = ["track_running_stats", "momentum", "eps", "num_features", "affine"]

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine(self, (num_features,), affine, bias, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", _factory((num_features,), 0.0, device, dtype))
            self.register_buffer("running_var", _factory((num_features,), 1.0, device, dtype))
            self.register_buffer("num_batches_tracked", wrap(np.array(0, np.int64), _dt.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input):
        raise NotImplementedError(f"{type(self).__name__} must implement _check_input_dim(input)")

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, *args, **kwargs):
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            # checkpoints older than version 2 have no num_batches_tracked: keep the current count
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                                   else wrap(np.array(0, np.int64), _dt.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs, *args, **kwargs)


class _BatchNorm(_NormBase):
    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            # momentum=None: cumulative moving average over all batches seen; the factor 1 / count stays a
            # tensor (no Python read of the count), so a compiled step replays it
            factor = self.num_batches_tracked.double().reciprocal() if self.momentum is None else self.momentum
        if self.training:
            bn_training = True
        else:
            bn_training = self.running_mean is None and self.running_var is None
        use_buffers = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_buffers else None,
                            self.running_var if use_buffers else None, self.weight, self.bias, bn_training, factor,
                            self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization over a 2-D ``(N, C)`` or 3-D ``(N, C, L)`` input."""

    def _check_input_dim(self, input) -> None:
        if input.ndim != 2 and input.ndim != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalization over a 4-D ``(N, C, H, W)`` input."""

    def _check_input_dim(self, input) -> None:
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch normalization over a 5-D ``(N, C, D, H, W)`` input."""

    def _check_input_dim(self, input) -> None:
        if input.ndim != 5:
            raise ValueError(f"expected 5D input (got {input.ndim}D input)")


class _InstanceNorm(_NormBase):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    _no_batch_dim = 0

    def _check_input_dim(self, input):
        raise NotImplementedError(f"{type(self).__name__} must implement _check_input_dim(input)")

    def _apply_instance_norm(self, input):
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                               self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, *args, **kwargs):
        version = local_metadata.get("version", None)
        if version is None and not self.track_running_stats:
            keys = [prefix + n for n in ("running_mean", "running_var") if prefix + n in state_dict]
            if keys:
                klass = self.__class__.__name__
                error_msgs.append(
                    "Unexpected running stats buffer(s) {names} for {klass} with track_running_stats=False. If "
                    "state_dict is a checkpoint saved before 0.4.0, this may be expected because {klass} does not "
                    "track running stats by default since 0.4.0. Please remove these keys from state_dict. If the "
                    "running stats are actually needed, instead set track_running_stats=True in {klass} to enable "
                    "them. See the documentation of {klass} for details.".format(
                        names=" and ".join(f'"{k}"' for k in keys), klass=klass))
                for k in keys:
                    state_dict.pop(k)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs, *args, **kwargs)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        feature_dim = input.ndim - self._no_batch_dim
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match num_features "
                                 f"({self.num_features}), but got: {input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                          "warning by not passing in num_features, which is not used because affine=False",
                          stacklevel=2)
        if input.ndim == self._no_batch_dim:
            return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._apply_instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of ``(N, C, L)`` or unbatched ``(C, L)`` inputs."""

    _no_batch_dim = 2

    def _check_input_dim(self, input) -> None:
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of ``(N, C, H, W)`` or unbatched ``(C, H, W)`` inputs."""

    _no_batch_dim = 3

    def _check_input_dim(self, input) -> None:
        if input.ndim not in (3, 4):
            raise ValueError(f"expected 3D or 4D input (got {input.ndim}D input)")


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of ``(N, C, D, H, W)`` or unbatched ``(C, D, H, W)`` inputs."""

    _no_batch_dim = 4

    def _check_input_dim(self, input) -> None:
        if input.ndim not in (4, 5):
            raise ValueError(f"expected 4D or 5D input (got {input.ndim}D input)")
