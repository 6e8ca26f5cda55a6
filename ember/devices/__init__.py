"""``ember.devices``: the device runtimes behind ember tensors, looked up by device type name.

Each device type is a module with the same small host-facing interface:

    ``is_available()``, ``device_count()``, ``synchronize(device=None)``,
    ``empty(shape, dtype, device=None)``, ``from_numpy(arr, device=None, non_blocking=False)``,
    ``to_numpy(storage)``, ``copy_(dst, src)``

``"cpu"`` (:mod:`ember.devices.cpu`) stores data in NumPy arrays; ``"opencl"``
(:mod:`ember.devices.opencl`) stores it in OpenCL buffers (``DeviceArray``). Code that moves data
between devices asks this registry for the module instead of branching on the name:

    >>> from ember import devices
    >>> mod, index = devices.parse("opencl:0")          # (ember.devices.opencl, 0)
    >>> host = devices.get("cpu").to_numpy(arr)

A new device type is one ``register(name, "package.module")`` call; modules are imported on first
lookup, so ``import ember.devices`` never imports pyopencl.
"""
from __future__ import annotations

import importlib

__all__ = ["get", "parse", "register", "names"]

_MODULES: dict = {"cpu": "ember.devices.cpu", "opencl": "ember.devices.opencl"}


def register(name: str, module: str) -> None:
    """Make device type ``name`` resolve to the module named ``module`` (imported on first use)."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"register: a device type name is a non-empty string without ':', got {name!r}")
    _MODULES[name] = module


def names() -> tuple:
    """The registered device type names."""
    return tuple(_MODULES)


def get(name: str):
    """The runtime module of device type ``name`` (``"cpu"``, ``"opencl"``)."""
    try:
        path = _MODULES[name]
    except (KeyError, TypeError):
        raise RuntimeError(f"Expected one of {', '.join(_MODULES)} device type at start of device string: "
                           f"{name}") from None
    return importlib.import_module(path)


def parse(device) -> tuple:
    """``(module, index)`` for ``"type"``, ``"type:N"`` or an object with ``.type`` and ``.index``
    (an ``ember.device``); a missing index is 0."""
    if isinstance(device, str):
        name, sep, idx = device.partition(":")
        if sep:
            if not (idx.isascii() and idx.isdigit()) or idx[:1] == "0" != idx:  # torch: no leading 0
                raise RuntimeError(f"Invalid device string: '{device}'")
            return get(name), int(idx)
        if name not in _MODULES and not name.replace("_", "a").isalpha():
            raise RuntimeError(f"Invalid device string: '{device}'")
        return get(name), 0
    kind = getattr(device, "type", None)
    if kind is None:
        raise TypeError(f"expected a device (str or ember.device), got {type(device).__name__}")
    index = getattr(device, "index", None)
    return get(kind), 0 if index is None else int(index)
