"""ember.nn.functional: torch.nn.functional's operations, grouped in family files and re-exported here."""
from ..._reexport import reexport

_FAMILIES = ["activation", "loss", "conv", "pooling", "normalization", "dropout", "sparse", "attention",
             "vision", "distance"]

reexport(globals(), __name__, _FAMILIES)
