"""ember.nn: modules, parameters, functional ops, initialisation and utilities (torch.nn's API)."""
from .parameter import Parameter, Buffer, UninitializedParameter, UninitializedBuffer  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import Module, Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict  # noqa: F401
from . import modules as _modules
from . import functional  # noqa: F401

globals().update({k: getattr(_modules, k) for k in dir(_modules) if not k.startswith("_") and isinstance(getattr(_modules, k), type)})

import importlib as _il
import importlib.util as _ilu

for _sub in ("init", "utils", "attention", "parallel"):
    if _ilu.find_spec(f"{__name__}.{_sub}") is not None:
        globals()[_sub] = _il.import_module(f"{__name__}.{_sub}")
