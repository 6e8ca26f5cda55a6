"""``ember._dynamo.config``: torch._dynamo's settings that programs commonly set.

``recompile_limit`` (alias ``cache_size_limit``) is ember.compile's limit of entries per function. The
others are accepted with torch's defaults and kept, but ember's behavior does not depend on them: its
capture records ``.item()`` reads and data-dependent sizes as guarded graph breaks whatever
``capture_scalar_outputs`` says, a call that cannot be compiled always runs eagerly (as
``suppress_errors=True`` would make torch do), and sizes that change between calls become dynamic
(``automatic_dynamic_shapes``). Unknown names raise AttributeError, so a typo is not silently kept.
"""
from ..compiler import api as _api

_LIMITS = ("recompile_limit", "cache_size_limit")
_KEPT = {
    "suppress_errors": False, "verbose": False, "capture_scalar_outputs": False,
    "capture_dynamic_output_shape_ops": False, "optimize_ddp": True, "automatic_dynamic_shapes": True,
    "assume_static_by_default": True, "accumulated_cache_size_limit": 256, "accumulated_recompile_limit": 256,
    "inline_inbuilt_nn_modules": True, "specialize_int": False, "specialize_float": False,
    "force_parameter_static_shapes": True, "guard_nn_modules": True, "error_on_recompile": False,
    "allow_unspec_int_on_nn_module": False, "compiled_autograd": False,
    "skip_nnmodule_hook_guards": True, "dynamic_shapes": True,
}


class _Config:
    def __init__(self):
        object.__setattr__(self, "_kept", dict(_KEPT))

    def __getattr__(self, name):
        if name in _LIMITS:
            return _api.recompile_limit
        kept = object.__getattribute__(self, "_kept")
        if name in kept:
            return kept[name]
        raise AttributeError(f"ember._dynamo.config has no setting {name!r}")

    def __setattr__(self, name, value):
        if name in _LIMITS:
            _api.recompile_limit = int(value)
        elif name in self._kept:
            self._kept[name] = value
        else:
            raise AttributeError(f"ember._dynamo.config has no setting {name!r}")


config = _Config()
