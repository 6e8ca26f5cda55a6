"""``ember.opencl``: ``torch.mps``'s functions for ember's OpenCL device (``"opencl"`` / ``"opencl:N"``).

    >>> import ember.opencl
    >>> ember.opencl.is_available(), ember.opencl.device_count()
    (True, 1)
    >>> ember.opencl.get_device_name(0)
    'pthread-haswell-AMD EPYC'
    >>> ember.opencl.set_per_process_memory_fraction(0.5)     # at most half the device memory
    >>> start, end = ember.opencl.Event(enable_timing=True), ember.opencl.Event(enable_timing=True)
    >>> start.record(); ...; end.record(); start.elapsed_time(end)   # milliseconds on the device
    >>> lib = ember.opencl.compile_shader("__kernel void twice(__global float* o, __global const float* x)"
    ...                                   " { size_t i = get_global_id(0); o[i] = 2 * x[i]; }")
    >>> lib.twice(out, x)                      # user OpenCL kernels on device tensors (see _shader.py)

The runtime behind these (devices, storage, copies, the caching allocator, programs, events, fallback
counters) is :mod:`ember.devices.opencl`; its docstring explains how it works. Everything here works
without pyopencl or an OpenCL driver as far as torch.mps does without a GPU: ``is_available()`` is
False, ``device_count()`` is 0, and calls that need a device raise RuntimeError saying what to
install. Unlike torch.mps, the device functions take an optional ``device`` (an index or
``"opencl:N"``; default 0) since a machine may have several OpenCL devices.
"""
from __future__ import annotations

from ember.devices import opencl as _rt
from ember.devices.opencl import (Event, device_count, empty_cache, fallback_counts, get_device_name,  # noqa: F401
                                  is_available, recommended_max_memory, reset_fallback_counts,
                                  set_per_process_memory_fraction, synchronize)
from . import profiler  # noqa: F401
from ._shader import ShaderLibrary, compile_shader  # noqa: F401

__all__ = ["is_available", "device_count", "get_device_name", "synchronize", "manual_seed", "seed",
           "get_rng_state", "set_rng_state", "empty_cache", "set_per_process_memory_fraction",
           "current_allocated_memory", "driver_allocated_memory", "recommended_max_memory", "Event",
           "profiler", "fallback_counts", "reset_fallback_counts", "compile_shader"]


def current_allocated_memory(device=None) -> int:
    """Bytes occupied by live device arrays (not counting the allocator's cached free blocks)."""
    return _rt.memory_allocated(device)


def driver_allocated_memory(device=None) -> int:
    """Bytes held from the OpenCL driver: live device arrays plus the allocator's cache."""
    return _rt.driver_allocated_memory(device)


def manual_seed(seed: int) -> None:
    """Seed the random number generator of every OpenCL device (works without a device, too)."""
    _rt.manual_seed_all(seed)


def seed() -> None:
    """Seed every OpenCL device's generator with a random number."""
    import numpy as np
    _rt.manual_seed_all(int(np.random.SeedSequence().entropy) & 0xFFFF_FFFF_FFFF_FFFF)


def get_rng_state(device="opencl"):
    """The random number generator state of ``device`` as a uint8 tensor."""
    return _rt.default_generator(device).get_state()


def set_rng_state(new_state, device="opencl") -> None:
    """Restore a state returned by ``get_rng_state``."""
    _rt.default_generator(device).set_state(new_state)
