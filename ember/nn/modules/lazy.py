"""Lazy modules (torch.nn.modules.lazy): layers whose input size is read from the first batch.

``LazyModuleMixin`` registers a forward pre-hook that calls ``initialize_parameters(*inputs)`` once; the
layer's ``UninitializedParameter``/``UninitializedBuffer`` objects are materialized in place (so an
optimizer built before the first forward keeps working) and the module then becomes its concrete class
(``type(m) is nn.Linear``), as torch does. A state_dict loaded into a lazy module materializes the
parameters with the loaded shapes; an uninitialized module saves its uninitialized parameters.

The concrete lazy layers (``LazyLinear``, ``LazyConv1d/2d/3d``, ``LazyConvTranspose1d/2d/3d``,
``LazyBatchNorm1d/2d/3d``, ``LazyInstanceNorm1d/2d/3d``) are defined here and published in the files
torch has them in (``nn.modules.linear.LazyLinear``, ``nn.modules.conv.LazyConv2d``, ...), which is also
their ``__module__``, so whole-model pickles name torch's paths.
"""
from __future__ import annotations

import sys

from ...autograd.grad_mode import no_grad
from ..parameter import UninitializedBuffer, UninitializedParameter, is_lazy
from . import batchnorm as _bn, conv as _conv, instancenorm as _inorm, linear as _linear

__all__ = ["LazyModuleMixin", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
           "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class LazyModuleMixin:
    """Mixin for modules that infer their parameter shapes from the first input (see the module docstring).
    A subclass sets ``cls_to_become`` and implements ``initialize_parameters(*inputs)``."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._register_lazy_hooks()

    def _register_lazy_hooks(self):
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # uninitialized entries are saved as they are (detach would need data they do not have)
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars or is_lazy(p) else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars or is_lazy(b) else b.detach()

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                        error_msgs):
        for name, p in list(self._parameters.items()) + list(self._buffers.items()):
            key = prefix + name
            if p is not None and key in state_dict and is_lazy(p) and not is_lazy(state_dict[key]):
                with no_grad():
                    p.materialize(state_dict[key].shape)

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    def has_uninitialized_params(self) -> bool:
        return any(is_lazy(t) for t in list(self._parameters.values()) + list(self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self):
        raise RuntimeError("Modules with uninitialized parameters can't be used with `DataParallel`. Run a dummy "
                           "forward pass to correctly initialize the modules")


def _factory_dtype(dtype):
    return {} if dtype is None else {"dtype": dtype}


# ---- Linear ----------------------------------------------------------------------------------------------------

class LazyLinear(LazyModuleMixin, _linear.Linear):
    """torch.nn.LazyLinear: ``in_features`` from the last dim of the first input."""

    cls_to_become = _linear.Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(0, 0, False, device, dtype)
        self.weight = UninitializedParameter(**_factory_dtype(dtype))
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(**_factory_dtype(dtype))

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input) -> None:
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()


# ---- convolutions ----------------------------------------------------------------------------------------------

class _LazyConvXdMixin(LazyModuleMixin):
    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _lazy_init(self, out_channels, bias, dtype):
        self.weight = UninitializedParameter(**_factory_dtype(dtype))
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(**_factory_dtype(dtype))

    def _get_in_channels(self, input) -> int:
        no_batch = len(self.kernel_size) + 1
        if input.dim() not in (no_batch, no_batch + 1):
            raise RuntimeError(f"Expected {no_batch}D (unbatched) or {no_batch + 1}D (batched) input to "
                               f"{type(self).__name__}, but got input of size: {input.shape}")
        return input.shape[1] if input.dim() == no_batch + 1 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            k = tuple(self.kernel_size)
            shape = ((self.in_channels, self.out_channels // self.groups) if self.transposed else
                     (self.out_channels, self.in_channels // self.groups)) + k
            with no_grad():
                self.weight.materialize(shape)
                if self.bias is not None:
                    self.bias.materialize((self.out_channels,))
                self.reset_parameters()


def _lazy_conv(name, base):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None) -> None:
        base.__init__(self, 0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device, dtype)
        self._lazy_init(out_channels, bias, dtype)
        self._register_lazy_hooks()
    return _make(name, _LazyConvXdMixin, base, __init__, "in_channels from the channel dim of the first input")


def _lazy_conv_transpose(name, base):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None) -> None:
        base.__init__(self, 0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation,
                      padding_mode, device, dtype)
        self._lazy_init(out_channels, bias, dtype)
        self._register_lazy_hooks()
    return _make(name, _LazyConvXdMixin, base, __init__, "in_channels from the channel dim of the first input")


def _make(name, mixin, base, init, what):
    cls = type(name, (mixin, base), {"__init__": init, "cls_to_become": base,
                                      "__doc__": f"torch.nn.{name}: {what}.",
                                      "__module__": base.__module__, "__qualname__": name})
    return cls


# ---- batch and instance norm -----------------------------------------------------------------------------------

class _LazyNormBase(LazyModuleMixin):
    def _lazy_norm_init(self, affine, track_running_stats, bias, dtype):
        self.affine = affine
        self.track_running_stats = track_running_stats
        kw = _factory_dtype(dtype)
        if affine:
            self.weight = UninitializedParameter(**kw)
            self.bias = UninitializedParameter(**kw) if bias else None
        if track_running_stats:
            self.running_mean = UninitializedBuffer(**kw)
            self.running_var = UninitializedBuffer(**kw)
            from ...ops.creation import tensor
            from ... import dtypes as _dt
            self.num_batches_tracked = tensor(0, dtype=_dt.int64)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input) -> None:
        if self.has_uninitialized_params():
            self.num_features = input.shape[1]
            n = (self.num_features,)
            with no_grad():
                if self.affine:
                    self.weight.materialize(n)
                    if self.bias is not None:
                        self.bias.materialize(n)
                if self.track_running_stats:
                    self.running_mean.materialize(n)
                    self.running_var.materialize(n)
                self.reset_parameters()


def _lazy_norm(name, base):
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *,
                 bias=True) -> None:
        base.__init__(self, 0, eps, momentum, False, False, device, dtype)
        self._lazy_norm_init(affine, track_running_stats, bias, dtype)
        self._register_lazy_hooks()
    return _make(name, _LazyNormBase, base, __init__, "num_features from dim 1 of the first input")


_DIMS = (1, 2, 3)
LazyConv1d, LazyConv2d, LazyConv3d = (_lazy_conv(f"LazyConv{n}d", getattr(_conv, f"Conv{n}d")) for n in _DIMS)
LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d = (
    _lazy_conv_transpose(f"LazyConvTranspose{n}d", getattr(_conv, f"ConvTranspose{n}d")) for n in _DIMS)
LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d = (
    _lazy_norm(f"LazyBatchNorm{n}d", getattr(_bn, f"BatchNorm{n}d")) for n in _DIMS)
LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d = (
    _lazy_norm(f"LazyInstanceNorm{n}d", getattr(_inorm, f"InstanceNorm{n}d")) for n in _DIMS)

LazyLinear.__module__ = _linear.__name__
_LazyConvXdMixin.__module__ = _conv.__name__
_LazyNormBase.__module__ = _bn.__name__
# published where torch has them (their __module__ names these files)
for _cls in [_LazyConvXdMixin, _LazyNormBase, LazyLinear, LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d,
             LazyConvTranspose3d, LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyInstanceNorm1d,
             LazyInstanceNorm2d, LazyInstanceNorm3d]:
    setattr(sys.modules[_cls.__module__], _cls.__name__, _cls)
