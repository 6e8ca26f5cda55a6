"""ember.cuda.amp: torch's deprecated CUDA spellings of autocast and GradScaler.

Both target CUDA, which ember lacks: ``autocast()`` warns and disables itself, and ``GradScaler()``
warns and disables itself, exactly as torch does on a machine without CUDA. Use
``ember.autocast("cpu")`` and ``ember.amp.GradScaler("cpu")`` for working mixed precision.
"""
from __future__ import annotations

import warnings

from .. import dtypes as _dt
from ..amp import autocast_mode as _am
from ..amp import grad_scaler as _gs
from ..amp.autocast_mode import custom_fwd as _custom_fwd, custom_bwd as _custom_bwd

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(_am.autocast):
    """``ember.cuda.amp.autocast(args...)`` is ``ember.autocast("cuda", args...)`` (deprecated in torch);
    without CUDA it disables itself with a warning."""

    def __init__(self, enabled: bool = True, dtype=_dt.float16, cache_enabled: bool = True):
        warnings.warn("`ember.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`ember.amp.autocast('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(_gs._DeprecatedDeviceGradScaler):
    """``ember.cuda.amp.GradScaler(args...)`` is ``ember.amp.GradScaler("cuda", args...)`` (deprecated in
    torch); without CUDA it disables itself with a warning."""

    _DEVICE = "cuda"


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``custom_fwd`` for device "cuda" (deprecated spelling)."""
    return _custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """``custom_bwd`` for device "cuda" (deprecated spelling)."""
    return _custom_bwd(bwd, device_type="cuda")
