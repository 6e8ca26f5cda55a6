"""The parameters and buffers every normalization layer starts from (shared by ``normalization``,
``batchnorm`` and ``instancenorm``): a filled tensor on a device and dtype, the affine weight/bias pair."""
from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap, _check_device, _on_device
from ...autograd.grad_mode import no_grad
from .module import Module
from ..parameter import Parameter


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
