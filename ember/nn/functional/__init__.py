"""ember.nn.functional: torch.nn.functional's operations, grouped in family files and re-exported here."""
import importlib

_FAMILIES = ["activation", "loss", "conv", "pooling", "normalization", "dropout", "sparse", "attention",
             "vision", "distance", "misc"]

for _name in _FAMILIES:
    try:
        _mod = importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as _e:
        if _e.name != f"{__name__}.{_name}":
            raise
        continue
    for _k in getattr(_mod, "__all__", []):
        globals()[_k] = getattr(_mod, _k)
