"""``DataParallel`` as ember can run it: on the CPU, with no accelerator devices, torch's DataParallel
calls the wrapped module directly; ember does the same (``.module`` holds it and state_dict keys gain the
``module.`` prefix). ``DistributedDataParallel`` lives in ``ember/nn/parallel/distributed.py``."""
from __future__ import annotations

from ..modules.module import Module

__all__ = ["DataParallel"]


class DataParallel(Module):
    """Wraps ``module``; with no accelerator devices (ember's case) ``forward`` is ``module(*inputs)``."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0) -> None:
        super().__init__()
        if device_ids:
            raise RuntimeError(f"DataParallel: device_ids={list(device_ids)} requested, but ember has no accelerator "
                               "devices; omit device_ids to run on the CPU")
        self.module = module
        self.device_ids = []
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim: int = 0, module_kwargs=None):
    """``DataParallel(module)(*inputs)`` without the wrapper."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))
