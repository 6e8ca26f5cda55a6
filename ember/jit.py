"""``ember.jit``: the torch.jit entry points model code calls, with eager semantics.

ember runs Python directly: ``script`` and ``trace`` return the function or module unchanged (calls
behave exactly as before; ``trace`` runs the example inputs once, as torch does), the decorators
(``ignore``, ``unused``, ``export``, ...) are identities, ``is_scripting()`` / ``is_tracing()`` are False,
and ``annotate`` returns its value. What needs TorchScript itself is refused with a clear error:
``save`` / ``load`` of TorchScript archives (save a state_dict with ``ember.save`` instead).
"""
from __future__ import annotations

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "interface", "is_scripting",
           "is_tracing", "annotate", "Final", "Attribute", "fork", "wait", "freeze", "optimize_for_inference",
           "save", "load", "ScriptModule", "ScriptFunction", "set_fusion_strategy", "enable_onednn_fusion",
           "onednn_fusion_enabled", "isinstance"]

import builtins as _builtins
from typing import Final  # noqa: F401  (torch.jit.Final is typing.Final)


class ScriptModule:
    """Never instantiated by ember (``script`` returns modules unchanged); kept for isinstance checks."""


class ScriptFunction:
    """Never instantiated by ember (``script`` returns functions unchanged); kept for isinstance checks."""


def script(obj=None, optimize=None, _frames_up: int = 0, _rcb=None, example_inputs=None):
    """Return ``obj`` (a function or module) unchanged: ember executes it eagerly."""
    return obj


def trace(func, example_inputs=None, optimize=None, check_trace: bool = True, check_inputs=None,
          check_tolerance: float = 1e-5, strict: bool = True, _force_outplace: bool = False,
          _module_class=None, _compilation_unit=None, example_kwarg_inputs=None, _store_inputs: bool = True):
    """Run ``func`` once on ``example_inputs`` (as torch does while tracing) and return it unchanged."""
    if example_inputs is not None or example_kwarg_inputs is not None:
        args = example_inputs if isinstance(example_inputs, tuple) else (
            () if example_inputs is None else (example_inputs,))
        func(*args, **(example_kwarg_inputs or {}))
    return func


def trace_module(mod, inputs, **kwargs):
    """Run each ``mod.<method>(*inputs[method])`` once and return ``mod`` unchanged."""
    for name, args in inputs.items():
        getattr(mod, name)(*(args if isinstance(args, tuple) else (args,)))
    return mod


def ignore(drop=False, **kwargs):
    """Decorator: leave a function to Python (always the case in ember)."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    """Decorator: identity."""
    return fn


def export(fn):
    """Decorator: identity."""
    return fn


def interface(obj):
    """Decorator: identity."""
    return obj


def _overload(fn):
    return fn


def _overload_method(fn):
    return fn


def is_scripting() -> bool:
    """False: ember never runs code under TorchScript."""
    return False


def is_tracing() -> bool:
    """False: ember never traces code into TorchScript."""
    return False


def annotate(the_type, the_value):
    """Return ``the_value`` (a type hint for the TorchScript compiler in torch)."""
    return the_value


def Attribute(value, type):  # noqa: N802,A002
    """Return ``value`` (a type hint for the TorchScript compiler in torch)."""
    return value


def isinstance(obj, target_type):  # noqa: A001
    """``builtins.isinstance`` (TorchScript's refinement helper)."""
    return _builtins.isinstance(obj, target_type)


class _Future:
    def __init__(self, value):
        self._value = value

    def wait(self):
        return self._value

    def value(self):
        return self._value

    def done(self) -> bool:
        return True


def fork(func, *args, **kwargs):
    """Run ``func(*args, **kwargs)`` now and return a completed future."""
    return _Future(func(*args, **kwargs))


def wait(future):
    """The result of a ``fork``."""
    return future.wait()


def freeze(mod, preserved_attrs=None, optimize_numerics: bool = True):
    """Return ``mod`` (freezing is a TorchScript optimisation)."""
    return mod


def optimize_for_inference(mod, other_methods=None):
    """Return ``mod`` (a TorchScript optimisation)."""
    return mod


_FUSION = [[("STATIC", 2), ("DYNAMIC", 10)], [False]]


def set_fusion_strategy(strategy):
    """Store the fusion strategy (TorchScript's; ember has none to configure) and return the previous one."""
    prev = _FUSION[0]
    _FUSION[0] = list(strategy)
    return prev


def enable_onednn_fusion(enabled: bool) -> None:
    _FUSION[1][0] = bool(enabled)


def onednn_fusion_enabled() -> bool:
    return _FUSION[1][0]


def save(m, f, _extra_files=None):
    """Refused: ember has no TorchScript archives."""
    raise NotImplementedError("ember.jit.save: TorchScript archives are not supported by ember; save the "
                              "module's state_dict with ember.save(model.state_dict(), path) instead")


def load(f, map_location=None, _extra_files=None, _restore_shapes: bool = False):
    """Refused: ember has no TorchScript archives."""
    raise NotImplementedError("ember.jit.load: TorchScript archives are not supported by ember; load a state_dict "
                              "saved with torch.save / ember.save instead")
