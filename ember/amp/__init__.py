"""ember.amp: automatic mixed precision (``autocast``, ``GradScaler``), as ``torch.amp``.

CPU autocast really runs matmul-like ops in bfloat16 (or float16); see ``autocast_mode``. Ops read the
active dtype through ``_autocast_dtype()`` (or ``state.AUTOCAST[0]`` directly on hot paths).
"""
from . import state  # noqa: F401  (first: ember.ops.linalg_products imports it while ember is loading)
from .autocast_mode import (autocast, is_autocast_available, custom_fwd, custom_bwd,  # noqa: F401
                            is_autocast_enabled, get_autocast_dtype, set_autocast_enabled, set_autocast_dtype,
                            is_autocast_cache_enabled, set_autocast_cache_enabled, clear_autocast_cache,
                            _autocast_dtype)
from .grad_scaler import GradScaler, OptState  # noqa: F401

__all__ = ["autocast", "GradScaler", "is_autocast_available", "custom_fwd", "custom_bwd"]
