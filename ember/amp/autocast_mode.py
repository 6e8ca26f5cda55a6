"""``autocast``: run the matmul-like ops (matmul, mm, bmm, addmm, baddbmm, addbmm, tensordot, einsum
contractions, linear, convolutions) in a lower precision inside a region, as ``torch.autocast``.

CPU autocast really casts: inside ``with ember.autocast("cpu"):`` (bfloat16 by default, float16 also
allowed) those ops cast their float16/bfloat16/float32 inputs to the autocast dtype, so their outputs
come out in that dtype; float64 and integer tensors are left alone, and every other op runs in the
dtype of its inputs. The casts are recorded by autograd, so gradients of float32 leaves stay float32.

ember has no GPU, so autocast for "cuda" (and the other accelerator device types) warns and disables
itself, exactly as torch does on a machine without CUDA.
"""
from __future__ import annotations

import collections.abc
import functools
import warnings

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from . import state as _st

__all__ = ["autocast", "is_autocast_available", "custom_fwd", "custom_bwd", "is_autocast_enabled",
           "get_autocast_dtype", "set_autocast_enabled", "set_autocast_dtype", "is_autocast_cache_enabled",
           "set_autocast_cache_enabled", "clear_autocast_cache", "get_autocast_cpu_dtype",
           "get_autocast_gpu_dtype", "is_autocast_cpu_enabled", "set_autocast_cpu_enabled",
           "set_autocast_cpu_dtype", "autocast_increment_nesting", "autocast_decrement_nesting"]


def _device_key(device_type) -> str:
    """Validate a device type string the way torch's device parser does; return it."""
    if not isinstance(device_type, str):
        raise TypeError(f"expected a device type string such as 'cpu', got {type(device_type).__name__}")
    base = device_type.split(":", 1)[0]
    if base not in _st.KNOWN_DEVICES:
        raise RuntimeError(
            "Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, maia, xla, lazy, "
            f"vulkan, mps, meta, hpu, mtia, privateuseone device type at start of device string: {device_type}")
    return base


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast exists for ``device_type`` (as in torch: cpu, cuda, mps, xpu, ... but not meta).

    Only "cpu" autocast has an effect in ember; the others warn and disable themselves on entry."""
    return _device_key(device_type) in _st.AUTOCAST_DEVICES


def _autocast_device(device_type: str, fn: str) -> str:
    d = _device_key(device_type)
    if d not in _st.AUTOCAST_DEVICES:
        raise RuntimeError(f"{fn}(): unsupported autocast device_type '{device_type}'")
    return d


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type``; without an argument, for "cuda" (torch's legacy
    meaning), which is never on in ember."""
    return _st.ENABLED[_autocast_device("cuda" if device_type is None else device_type, "is_autocast_enabled")]


def get_autocast_dtype(device_type: str) -> _dt.dtype:
    """The dtype autocast uses for ``device_type`` (``ember.bfloat16`` for "cpu" unless changed)."""
    return _st.DTYPE[_autocast_device(device_type, "get_autocast_dtype")]


def set_autocast_enabled(device_type, enabled=None) -> None:
    """Turn autocast on or off for a device type (``set_autocast_enabled("cpu", True)``); the
    one-argument form ``set_autocast_enabled(True)`` is torch's legacy CUDA flag."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    d = _autocast_device(device_type, "set_autocast_enabled")
    _st.ENABLED[d] = bool(enabled)
    _st.refresh()


def set_autocast_dtype(device_type: str, dtype) -> None:
    """Set the dtype autocast casts to for ``device_type``."""
    d = _autocast_device(device_type, "set_autocast_dtype")
    if not isinstance(dtype, _dt.dtype):
        raise TypeError(f"set_autocast_dtype(): argument 'dtype' must be ember.dtype, not {type(dtype).__name__}")
    _st.DTYPE[d] = dtype
    _st.refresh()


def is_autocast_cache_enabled() -> bool:
    """Whether autocast caches the casts of leaf weights within a region (default True)."""
    return _st.CACHE_ENABLED[0]


def set_autocast_cache_enabled(enabled: bool) -> None:
    _st.CACHE_ENABLED[0] = bool(enabled)


def clear_autocast_cache() -> None:
    """Drop the cached casts of leaf weights."""
    _st.clear_cache()


def autocast_increment_nesting() -> int:
    _st.NESTING[0] += 1
    return _st.NESTING[0]


def autocast_decrement_nesting() -> int:
    _st.NESTING[0] -= 1
    return _st.NESTING[0]


# torch's older per-device spellings
def get_autocast_cpu_dtype() -> _dt.dtype:
    return _st.DTYPE["cpu"]


def get_autocast_gpu_dtype() -> _dt.dtype:
    return _st.DTYPE["cuda"]


def is_autocast_cpu_enabled() -> bool:
    return _st.ENABLED["cpu"]


def set_autocast_cpu_enabled(enabled: bool) -> None:
    set_autocast_enabled("cpu", enabled)


def set_autocast_cpu_dtype(dtype) -> None:
    set_autocast_dtype("cpu", dtype)


def _autocast_dtype():
    """The dtype CPU autocast casts matmul-like inputs to right now, or None (cheap: one list read)."""
    return _st.AUTOCAST[0]


class autocast:
    """Context manager and decorator that enables mixed precision in a region.

        >>> with ember.autocast("cpu"):
        ...     y = ember.ones(2, 3) @ ember.ones(3, 4)
        >>> y.dtype
        ember.bfloat16

    Args:
        device_type: "cpu" (the only device ember computes on; "cuda" and the other accelerator types
            warn and disable themselves, as torch does without such a device). ember defaults it to
            "cpu"; torch requires it.
        dtype: the lower precision, ``ember.bfloat16`` (CPU default) or ``ember.float16``; other dtypes
            warn and disable autocast.
        enabled: False turns autocast off inside the region (also inside an enclosing enabled region).
        cache_enabled: cache casts of leaf weights within the region (default: the global setting).
    """

    def __init__(self, device_type: str = "cpu", dtype: _dt.dtype | None = None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if not is_autocast_available(device_type):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self.device = _device_key(device_type)
        self.fast_dtype = _st.DTYPE[self.device] if dtype is None else dtype
        self._cache_enabled = _st.CACHE_ENABLED[0] if cache_enabled is None else cache_enabled
        if enabled:
            if self.device == "cuda":
                warnings.warn("CUDA is not available. Disabling autocast.", stacklevel=2)
                enabled = False
            elif self.device == "opencl":
                warnings.warn("autocast on the OpenCL device: its kernels compute float32/float64 only (float16 "
                              "and bfloat16 ops would run as CPU fallbacks), so the region runs in float32. "
                              "Disabling autocast.", stacklevel=2)
                enabled = False
            elif self.device != "cpu":
                warnings.warn(f"User provided device_type of '{self.device}', but the device is not available "
                              "in ember (it runs on the CPU only). Disabling autocast.", stacklevel=2)
                enabled = False
            elif self.fast_dtype not in (_dt.bfloat16, _dt.float16):
                warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                              "CPU Autocast only supports dtypes of ember.bfloat16, ember.float16 currently.",
                              stacklevel=2)
                enabled = False
        self._enabled = bool(enabled)
        self._saved: list = []      # one entry per active __enter__, so re-entrant use nests correctly

    def __enter__(self):
        d = self.device
        self._saved.append((_st.ENABLED[d], _st.DTYPE[d], _st.CACHE_ENABLED[0]))
        _st.ENABLED[d] = self._enabled
        _st.DTYPE[d] = self.fast_dtype
        _st.CACHE_ENABLED[0] = self._cache_enabled
        _st.NESTING[0] += 1
        _st.refresh()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        d = self.device
        _st.NESTING[0] -= 1
        if _st.NESTING[0] == 0:
            _st.clear_cache()
        _st.ENABLED[d], _st.DTYPE[d], _st.CACHE_ENABLED[0] = self._saved.pop()
        _st.refresh()
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(
                f"autocast()(func) requires a callable, but got {type(func).__name__}. Did you mean to use autocast "
                "as a context manager? For example:\n    with ember.autocast(device_type=...):\n"
                "        output = model(input)")

        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return decorate_autocast

    def __repr__(self):
        return (f"autocast(device_type='{self.device}', dtype={self.fast_dtype}, enabled={self._enabled}, "
                f"cache_enabled={self._cache_enabled})")


def _cast(value, device_type: str, dtype):
    """Cast the floating (non-float64) tensors inside ``value`` (nested containers) to ``dtype``."""
    if isinstance(value, Tensor):
        ok = value._dtype.is_floating_point and value._dtype is not _dt.float64 and device_type == "cpu"
        return value.to(dtype) if ok else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, collections.abc.Iterable):
        it = (_cast(v, device_type, dtype) for v in value)
        return type(value)(it) if isinstance(value, (list, tuple)) else it
    return value


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """Decorator for the ``forward`` of a custom ``autograd.Function``: inside an autocast region,
    with ``cast_inputs`` it casts floating inputs to that dtype and runs ``forward`` with autocast off;
    without it, ``forward`` runs under the current autocast state (recorded for ``custom_bwd``)."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = get_autocast_dtype(device_type)
        on = is_autocast_enabled(device_type)
        if cast_inputs is None:
            args[0]._fwd_used_autocast = on
            return fwd(*args, **kwargs)
        args[0]._fwd_used_autocast = False
        if not on:
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorator for the ``backward`` of a custom ``autograd.Function``: runs it under the autocast
    state its ``forward`` saw."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(device_type=device_type, enabled=args[0]._fwd_used_autocast, dtype=args[0]._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd
