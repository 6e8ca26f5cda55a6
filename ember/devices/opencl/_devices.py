"""OpenCL devices: loading pyopencl (lazily), enumerating the devices of all platforms in
``opencl:N`` order, and naming them.
"""
from __future__ import annotations

import sys
import threading

cl = None                  # the pyopencl module once loaded (imported lazily: importing it takes a while)
_CL_ERROR: list = []       # why pyopencl could not be imported
_LOCK = threading.RLock()  # device enumeration, runtime creation, program builds
_DEVICES: list | None = None     # [(platform, device)] in opencl:N order
_UNAVAILABLE: list = [None]      # why there is no device (None when there is one)


def _load_cl() -> bool:
    global cl
    if cl is not None:
        return True
    if _CL_ERROR:
        return False
    try:
        import pyopencl
    except ImportError as e:
        _CL_ERROR.append(f"pyopencl is not installed ({e}); install it with `pip install pyopencl`")
        return False
    cl = pyopencl
    _bind_cl(pyopencl)
    return True


def _bind_cl(module) -> None:
    """Name pyopencl ``cl`` in every module of this package that declares ``cl = None``: they read it as
    a global, and it is imported on first use, not when the package is."""
    prefix = __package__ + "."
    for name, mod in list(sys.modules.items()):
        if (name == __package__ or name.startswith(prefix)) and "cl" in vars(mod):
            mod.cl = module


def _enumerate() -> list:
    global _DEVICES
    if _DEVICES is not None:
        return _DEVICES
    with _LOCK:
        if _DEVICES is not None:
            return _DEVICES
        found, why = [], None
        if not _load_cl():
            why = _CL_ERROR[0]
        else:
            try:
                platforms = cl.get_platforms()
            except cl.Error as e:     # the ICD loader reports "no platform" as an error
                platforms, why = [], f"no OpenCL platform found ({e})"
            for p in sorted(platforms, key=lambda p: (p.name, p.vendor, p.version)):
                try:
                    found.extend((p, d) for d in p.get_devices())
                except cl.Error:      # a platform without devices
                    continue
            if not found:
                why = ((why or "no OpenCL platform with a device found") +
                       "; install an OpenCL driver, e.g. `apt-get install pocl-opencl-icd` (Debian/Ubuntu "
                       "CPU driver), or your GPU vendor's OpenCL ICD")
        _UNAVAILABLE[0] = why
        _DEVICES = found
    return _DEVICES


def is_available() -> bool:
    """True when pyopencl is installed and at least one OpenCL device exists."""
    return bool(_enumerate())


def unavailable_reason() -> str | None:
    """Why ``is_available()`` is False (what to install), or None when it is True."""
    _enumerate()
    return _UNAVAILABLE[0]


def device_count() -> int:
    """The number of OpenCL devices across all platforms (0 without pyopencl or a driver)."""
    return len(_enumerate())


def _index(device) -> int:
    if device is None:
        return 0
    if isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise RuntimeError(f"opencl: device index must be non-negative, got {device}")
        return device
    if isinstance(device, str):
        kind, sep, idx = device.partition(":")
        if kind == "opencl" and (not sep or idx.isdigit()):
            return int(idx) if sep else 0
        raise RuntimeError(f"expected an OpenCL device ('opencl' or 'opencl:N'), got '{device}'")
    kind = getattr(device, "type", None)
    if kind == "opencl":
        return 0 if device.index is None else int(device.index)
    raise RuntimeError(f"expected an OpenCL device ('opencl', 'opencl:N' or an index), got {device!r}")


def _device_entry(i: int) -> tuple:
    devs = _enumerate()
    if not devs:
        raise RuntimeError(f"ember.opencl: no OpenCL device is available: {_UNAVAILABLE[0]}")
    if i >= len(devs):
        raise RuntimeError(f"opencl:{i}: invalid device index; {len(devs)} OpenCL device(s) found "
                           f"(valid: opencl:0 .. opencl:{len(devs) - 1})")
    return devs[i]


def get_device_name(device=None) -> str:
    """The driver's name of device ``device`` (an index, ``"opencl:N"``; default 0)."""
    return _device_entry(_index(device))[1].name.strip()


def _label(i: int) -> str:
    try:
        return f"opencl:{i} ({get_device_name(i)})"
    except RuntimeError:
        return f"opencl:{i}"
