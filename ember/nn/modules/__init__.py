"""nn layers. Each family file defines its modules and lists them in ``__all__``; all are re-exported."""
import importlib

from .module import Module, register_module_forward_hook, register_module_forward_pre_hook  # noqa: F401
from .container import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict  # noqa: F401

_FAMILIES = ["linear", "activation", "loss", "conv", "pooling", "normalization", "dropout", "sparse",
             "rnn", "transformer", "padding", "flatten", "upsampling", "distance", "pixelshuffle", "fold", "parallel"]

for _name in _FAMILIES:
    try:
        _mod = importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as _e:
        if _e.name != f"{__name__}.{_name}":
            raise
        continue
    for _k in getattr(_mod, "__all__", []):
        globals()[_k] = getattr(_mod, _k)
