"""``ember.nn.parallel``: the torch.nn.parallel names (see ``ember/nn/modules/parallel.py``)."""
from .modules.parallel import DataParallel, DistributedDataParallel, data_parallel  # noqa: F401

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
