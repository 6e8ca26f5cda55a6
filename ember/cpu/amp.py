"""ember.cpu.amp: torch's deprecated CPU spellings, ``autocast(...)`` = ``ember.autocast("cpu", ...)``
and ``GradScaler(...)`` = ``ember.amp.GradScaler("cpu", ...)``."""
from __future__ import annotations

import warnings

from .. import dtypes as _dt
from ..amp import autocast_mode as _am
from ..amp import grad_scaler as _gs

__all__ = ["autocast", "GradScaler"]


class autocast(_am.autocast):
    """``ember.cpu.amp.autocast(args...)`` is ``ember.autocast("cpu", args...)`` (deprecated in torch, which
    warns with a FutureWarning); it really autocasts (bfloat16 by default)."""

    def __init__(self, enabled: bool = True, dtype=_dt.bfloat16, cache_enabled: bool = True):
        warnings.warn("`ember.cpu.amp.autocast(args...)` is deprecated. Please use "
                      "`ember.amp.autocast('cpu', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(_gs._DeprecatedDeviceGradScaler):
    """``ember.cpu.amp.GradScaler(args...)`` is ``ember.amp.GradScaler("cpu", args...)`` (deprecated in torch)."""

    _DEVICE = "cpu"
