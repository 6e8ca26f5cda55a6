"""``ember._dynamo``: the names code written for ``torch._dynamo`` reaches for (marks on sizes, reset,
explain, disable, graph_break, config), re-exported from ``ember.compiler``."""
from ..compiler import reset, explain, OptimizedModule  # noqa: F401
from ..compiler.dynamic import mark_dynamic, mark_static, maybe_mark_dynamic  # noqa: F401
from ..compiler.user_api import (disable, is_compiling, graph_break, allow_in_graph,  # noqa: F401
                                 assume_constant_result, list_backends, set_stance)
from . import exc  # noqa: F401
from .config import config  # noqa: F401
from ..compiler import api as _api


def optimize(backend="inductor", *, nopython: bool = False, dynamic=None, disable: bool = False):
    """The older spelling of ``compile``: ``ember._dynamo.optimize("inductor")(fn)``; ``nopython=True`` is
    ``fullgraph=True``."""
    def wrap(fn):
        return _api.compile(fn, backend=backend, fullgraph=nopython, dynamic=dynamic, disable=disable)
    return wrap
