"""ember.backends.cudnn: cuDNN switches (stored; ember has no cuDNN, so ``is_available()`` is False)."""
from __future__ import annotations

from . import _checked_module, _flags

enabled = True
benchmark = False
benchmark_limit = None  # torch reports None when cuDNN is absent
deterministic = False
allow_tf32 = True
fp32_precision = "none"


def is_available() -> bool:
    """False: ember does not use cuDNN."""
    return False


def version():
    """None: cuDNN is not present."""
    return None


def is_acceptable(tensor) -> bool:
    """False: no tensor can run on cuDNN in ember."""
    return False


def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True,
          fp32_precision="none", depthwise_kernel="auto"):
    """Context manager setting the cuDNN flags inside a ``with`` block (restored on exit)."""
    import sys
    return _flags(sys.modules[__name__], enabled=enabled, benchmark=benchmark, benchmark_limit=benchmark_limit,
                  deterministic=deterministic, allow_tf32=allow_tf32, fp32_precision=fp32_precision)


_checked_module(__name__, ("enabled", "benchmark", "deterministic", "allow_tf32"))
