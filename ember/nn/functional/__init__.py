"""ember.nn.functional: torch.nn.functional's operations, grouped in family files and re-exported here."""
from ..._reexport import reexport

_FAMILIES = ["activation", "activation_softmax", "loss", "conv", "pooling", "normalization", "dropout", "sparse", "attention",
             "vision", "distance", "fractional_pool"]

reexport(globals(), __name__, _FAMILIES)

# the public functions carry this package's name, as torch.nn.functional's do: pickles (a module holding
# ``activation=F.relu``) name ``ember.nn.functional.relu``, which ember.save writes as torch's path
for _name, _obj in list(globals().items()):
    if (not _name.startswith("_") and callable(_obj) and getattr(_obj, "__name__", None) == _name
            and str(getattr(_obj, "__module__", "")).startswith(__name__ + ".")):
        _obj.__module__ = __name__
del _name, _obj
