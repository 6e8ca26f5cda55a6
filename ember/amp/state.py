"""The autocast state, kept import-light because the matmul family reads it on every call.

``AUTOCAST[0]`` is the dtype that CPU autocast casts eligible inputs to, or None when CPU autocast is
off: hot paths test ``AUTOCAST[0] is not None`` and do nothing else when autocast is inactive. The
per-device flags behind ``ember.is_autocast_enabled`` / ``get_autocast_dtype`` live here too, together
with the cast cache (leaf weights cast once per outermost autocast region, as torch does).

The state is global to the process (torch keeps it per thread; ember's ops run on one thread).
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..tensor import Tensor
from ..autograd.grad_mode import GRAD

AUTOCAST: list = [None]       # the active CPU autocast dtype or None: the one value hot paths read

# device types torch accepts for autocast; only "cpu" can actually be enabled in ember
# (and "opencl", ember's device: accepted, so device-agnostic programs run, but it disables itself)
AUTOCAST_DEVICES = ("cpu", "cuda", "mps", "xpu", "hpu", "xla", "mtia", "maia", "ipu", "opencl")
# every device type torch's device parser knows (others make is_autocast_available raise)
KNOWN_DEVICES = AUTOCAST_DEVICES + ("mkldnn", "opengl", "ideep", "hip", "ve", "fpga", "lazy", "vulkan",
                                    "meta", "privateuseone")

ENABLED: dict = {d: False for d in AUTOCAST_DEVICES}
DTYPE: dict = {d: _dt.float16 for d in AUTOCAST_DEVICES}
DTYPE.update(cpu=_dt.bfloat16, hpu=_dt.bfloat16, xla=_dt.bfloat16, ipu=_dt.float16)
CACHE_ENABLED = [True]
NESTING = [0]
_CACHE: dict = {}             # id(leaf) -> (leaf, version, cast copy); leaf kept alive so its id is not reused


def refresh() -> None:
    """Recompute ``AUTOCAST[0]`` after a change of the CPU flags."""
    AUTOCAST[0] = DTYPE["cpu"] if ENABLED["cpu"] else None


def clear_cache() -> None:
    _CACHE.clear()


def _eligible(t) -> bool:
    # torch casts floating tensors except float64 (double precision is left alone on purpose)
    return isinstance(t, Tensor) and t._dtype.is_floating_point and t._dtype is not _dt.float64


def cast(t, dt):
    """Cast ``t`` to ``dt`` if autocast would (float16/bfloat16/float32 tensors); others pass through.

    Leaf tensors that require grad (weights) are cast once per autocast region and cached (only with
    grad mode on, so a cached copy always carries its link back to the weight)."""
    if not _eligible(t) or t._dtype is dt:
        return t
    if CACHE_ENABLED[0] and t._rg and t.grad_fn is None and GRAD[0]:
        hit = _CACHE.get(id(t))
        ver = t._version
        if hit is not None and hit[0] is t and hit[1] == ver and hit[2]._dtype is dt:
            return hit[2]
        r = t.to(dt)
        _CACHE[id(t)] = (t, ver, r)
        return r
    return t.to(dt)


def cast_args(*ts) -> tuple:
    """``cast`` each of ``ts`` to the active CPU autocast dtype (call only when ``AUTOCAST[0]`` is set)."""
    dt = AUTOCAST[0]
    if dt is None:
        return ts
    return tuple(cast(t, dt) for t in ts)
