"""``ember._dynamo``: the names code written for ``torch._dynamo`` reaches for (marks on sizes, reset,
explain), re-exported from ``ember.compiler``."""
from ..compiler import reset, explain  # noqa: F401
from ..compiler.dynamic import mark_dynamic, mark_static, maybe_mark_dynamic  # noqa: F401
from . import exc  # noqa: F401
from ..compiler import api as _api


class _Config:
    """``ember._dynamo.config``: ``recompile_limit`` (alias ``cache_size_limit``) of ember.compile."""

    def __getattr__(self, name):
        if name in ("recompile_limit", "cache_size_limit"):
            return _api.recompile_limit
        raise AttributeError(f"ember._dynamo.config has no setting {name!r}")

    def __setattr__(self, name, value):
        if name not in ("recompile_limit", "cache_size_limit"):
            raise AttributeError(f"ember._dynamo.config has no setting {name!r}")
        _api.recompile_limit = int(value)


config = _Config()
