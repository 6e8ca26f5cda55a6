"""ember.compile: capture PyTorch-style Python into graphs and run them as compiled programs.

Pipeline (see docs/architecture.md): capture (capture.py) -> program IR (ir.py) ->
ahead-of-time backward (api.py, traced from the same derivative rules as eager autograd) ->
runtime (runtime.py: the eager and aot_eager interpreters) and, for backend="inductor", native code
(native.py: decompose, fuse, generate C, build with the disk cache in build.py).
"""
from .api import compile, reset, counters, CompiledFunction, OptimizedModule  # noqa: F401
from .capture import GraphBreakError, UnsupportedTrace  # noqa: F401
from .explain import explain  # noqa: F401
from . import api as _api
from .logs import set_logs  # noqa: F401
from .dynamic import mark_dynamic, mark_static, maybe_mark_dynamic, ConstraintViolationError  # noqa: F401
from .user_api import (disable, is_compiling, is_dynamo_compiling, is_exporting, graph_break,  # noqa: F401
                       allow_in_graph, assume_constant_result, cudagraph_mark_step_begin, list_backends,
                       set_stance)


def __getattr__(name):
    if name == "recompile_limit":
        return _api.recompile_limit
    raise AttributeError(name)


def set_recompile_limit(n: int) -> None:
    _api.recompile_limit = int(n)


def kernel_times(compiled) -> list:
    """Per-kernel run times of a compiled function or module, slowest first:
    ``[(kernel, what it fuses, calls, total seconds)]``. The generated code is timed only when it was
    built with ``EMBER_KERNEL_TIMING=1`` in the environment (else the list is empty)::

        EMBER_KERNEL_TIMING=1 python train.py     # then, in train.py:
        for name, what, calls, s in ember.compiler.kernel_times(step)[:10]:
            print(f"{s / calls * 1e3:8.3f} ms  {what}")
    """
    cf = getattr(compiled, "_compiled", compiled)
    rows = []
    for e in getattr(cf, "entries", ()):
        native = getattr(e.runner, "native", None)
        if native is not None and hasattr(native, "kernel_times"):
            rows.extend(native.kernel_times())
    rows.sort(key=lambda r: -r[3])
    return rows
