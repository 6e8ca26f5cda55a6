"""ember.compile: capture PyTorch-style Python into graphs and run them as compiled programs.

Pipeline (see ../../shared/ARCHITECTURE.md): capture (capture.py) -> program IR (ir.py) ->
ahead-of-time backward (api.py, traced from the same derivative rules as eager autograd) ->
runtime (runtime.py: the eager and aot_eager interpreters) and, for backend="inductor", native code
(native.py: decompose, fuse, generate C, build with the disk cache in build.py).
"""
from .api import compile, reset, counters, CompiledFunction, OptimizedModule  # noqa: F401
from .capture import GraphBreakError, UnsupportedTrace  # noqa: F401
from .explain import explain  # noqa: F401
from . import api as _api
from .logs import set_logs  # noqa: F401


def __getattr__(name):
    if name == "recompile_limit":
        return _api.recompile_limit
    raise AttributeError(name)


def set_recompile_limit(n: int) -> None:
    _api.recompile_limit = int(n)
