"""Batch normalization (torch.nn.modules.batchnorm): ``_NormBase`` (the affine parameters and running
statistics that batch and instance norm share), ``_BatchNorm`` and BatchNorm1d/2d/3d.

Parameter and buffer names (``weight``, ``bias``, ``running_mean``, ``running_var``,
``num_batches_tracked``), constructor arguments and ``extra_repr`` text follow torch, so checkpoints,
whole-model pickles and ``repr(model)`` move between the two libraries unchanged. The computation is in
``ember.nn.functional.normalization``.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap, _check_device, _on_device
from .module import Module
from .. import functional as F
from ._norm_params import _affine, _factory, _reset_affine

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"]


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
            self.register_buffer("num_batches_tracked", _on_device(wrap(np.array(0, np.int64), _dt.int64),
                                                                   _check_device(device)))
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


class SyncBatchNorm(_BatchNorm):
    """Batch normalization whose training statistics cover the whole batch of every process in
    ``process_group`` (ember.distributed on MPI). Without an initialized process group, with a group of
    one, or in eval mode it is BatchNorm (any input of 2 or more dims). The synchronized computation is
    ``ember.nn.modules._functions.SyncBatchNorm``."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group=None, device=None, dtype=None, *,
                 bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input) -> None:
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        from ... import distributed as dist
        need_sync = self.training and dist.is_available() and dist.is_initialized()
        world_size = 1
        if need_sync:
            world_size = dist.get_world_size(self.process_group)
            need_sync = world_size > 1
        if not need_sync:
            return super().forward(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        from ._functions import SyncBatchNorm as _Sync
        rm, rv = (self.running_mean, self.running_var) if self.track_running_stats else (None, None)
        return _Sync.apply(input, self.weight, self.bias, rm, rv, self.eps, factor, self.process_group, world_size)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with every BatchNorm*D layer (recursively) replaced by a SyncBatchNorm sharing its
        parameters and running statistics (the module itself when it is such a layer)."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = SyncBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                                module.track_running_stats, process_group,
                                bias=getattr(module, "bias", None) is not None or not module.affine)
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            for name in ("running_mean", "running_var", "num_batches_tracked", "training", "qconfig"):
                if hasattr(module, name):
                    setattr(out, name, getattr(module, name))
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
