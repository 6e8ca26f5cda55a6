"""ember.backends.mkldnn: oneDNN switches (stored; ember computes with NumPy, not oneDNN)."""
from __future__ import annotations

from . import _checked_module, _flags

enabled = True
deterministic = False
allow_tf32 = True
fp32_precision = "none"


def is_available() -> bool:
    """False: ember does not use oneDNN."""
    return False


def flags(enabled=False, deterministic=False, allow_tf32=True, fp32_precision="none"):
    """Context manager setting the oneDNN flags inside a ``with`` block (restored on exit)."""
    import sys
    return _flags(sys.modules[__name__], enabled=enabled, deterministic=deterministic, allow_tf32=allow_tf32,
                  fp32_precision=fp32_precision)


_checked_module(__name__, ("enabled", "deterministic", "allow_tf32"))
