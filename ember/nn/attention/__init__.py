"""ember.nn.attention: torch.nn.attention's backend selection for ``scaled_dot_product_attention``.

``sdpa_kernel(backends)`` is accepted and validated as torch's is and the choice is readable with
``_cur_sdpa_kernel_backends()``; ember has one SDPA implementation (the math one, which every choice that
torch can run on a CPU gives the same values as), so the selection never changes results.
"""
from __future__ import annotations

import contextlib
import enum

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.IntEnum):
    """The scaled-dot-product-attention backends torch names (values as torch's)."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_ALL = [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
        SDPBackend.OVERRIDEABLE]
_CURRENT = [list(_ALL)]


def _cur_sdpa_kernel_backends(with_priority: bool = False):
    return list(_CURRENT[0])


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Restrict ``scaled_dot_product_attention`` to ``backends`` inside the block (recorded; see the module
    docstring)."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    if not isinstance(backends, (list, tuple, set)) or not all(isinstance(b, SDPBackend) for b in backends):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of SDPBackend instances, got "
                             f"{type(backends).__name__}")
    saved = _CURRENT[0]
    _CURRENT[0] = list(backends)
    try:
        yield {}
    finally:
        _CURRENT[0] = saved
