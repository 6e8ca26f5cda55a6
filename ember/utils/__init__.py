"""ember.utils: ``data`` (datasets, samplers, DataLoader), plus any helper modules present in this
package (e.g. ``checkpoint``, ``hooks``), which are imported when they exist."""
import importlib as _il
import importlib.util as _ilu

from . import data  # noqa: F401

for _sub in ("checkpoint", "hooks", "benchmark", "_pytree", "cpp_extension"):
    if _ilu.find_spec(f"{__name__}.{_sub}") is not None:
        globals()[_sub] = _il.import_module(f"{__name__}.{_sub}")
