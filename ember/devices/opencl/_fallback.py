"""CPU fallback counters: ``record_fallback`` (counted, warned once per op, refused when fallbacks
are forbidden) and ``FALLBACK_HOOKS``.
"""
from __future__ import annotations

import collections
import os
import time
import warnings

from ._devices import _index, _label

_FALLBACK_COUNTS: collections.Counter = collections.Counter()
_FALLBACK_WARNED: set = set()
_FALLBACK_ALLOWED: list = [None]   # None: EMBER_OPENCL_FALLBACK decides
FallbackRecord = collections.namedtuple("FallbackRecord", "op reason device host_ns")
FallbackRecord.__doc__ = ("An op sent to the CPU: op name, reason, device index and host perf_counter_ns "
                          "when it fell back.")
FALLBACK_HOOKS: list = []


def set_fallback_allowed(allowed) -> None:
    """Allow (True) or forbid (False) running ops without an OpenCL kernel on the CPU; None goes back
    to the ``EMBER_OPENCL_FALLBACK`` environment variable (default: allowed; "0" forbids)."""
    _FALLBACK_ALLOWED[0] = None if allowed is None else bool(allowed)


def fallback_allowed() -> bool:
    if _FALLBACK_ALLOWED[0] is not None:
        return _FALLBACK_ALLOWED[0]
    return os.environ.get("EMBER_OPENCL_FALLBACK", "1").strip().lower() not in ("0", "false", "no", "off")


def record_fallback(op_name: str, reason: str = "", device=None) -> None:
    """Note that ``op_name`` runs on the CPU instead of the OpenCL device: counted, warned once per op;
    raises NotImplementedError when fallbacks are forbidden."""
    where = _label(_index(device))
    why = f" ({reason})" if reason else ""
    if not fallback_allowed():
        raise NotImplementedError(
            f"The operator '{op_name}' is not currently implemented for the OpenCL device {where}{why}, "
            f"and the CPU fallback is disabled (EMBER_OPENCL_FALLBACK=0 or "
            f"ember.devices.opencl.set_fallback_allowed(False)). Allow it to run this op on the CPU.")
    _FALLBACK_COUNTS[op_name] += 1
    if FALLBACK_HOOKS:
        rec = FallbackRecord(op_name, reason, _index(device), time.perf_counter_ns())
        for fn in list(FALLBACK_HOOKS):
            fn(rec)
    if op_name not in _FALLBACK_WARNED:
        _FALLBACK_WARNED.add(op_name)
        warnings.warn(f"The operator '{op_name}' is not currently supported on the OpenCL device {where}{why} "
                      f"and will fall back to run on the CPU. This may have performance implications.",
                      UserWarning, stacklevel=2)


def fallback_counts() -> dict:
    """``{op name: number of CPU fallbacks}`` since the last reset."""
    return dict(_FALLBACK_COUNTS)


def reset_fallback_counts() -> None:
    """Zero the counters (the once-per-op warnings are not repeated)."""
    _FALLBACK_COUNTS.clear()
