"""nn layers. Each family file defines its modules and lists them in ``__all__``; all are re-exported."""
from ..._reexport import reexport

from .module import Module, register_module_forward_hook, register_module_forward_pre_hook  # noqa: F401
from .container import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict  # noqa: F401

_FAMILIES = ["linear", "activation", "loss", "conv", "pooling", "normalization", "batchnorm", "instancenorm",
             "dropout", "sparse", "rnn", "transformer", "padding", "flatten", "upsampling", "distance", "pixelshuffle",
             "channelshuffle", "fold", "parallel", "lazy", "adaptive"]

reexport(globals(), __name__, _FAMILIES)
