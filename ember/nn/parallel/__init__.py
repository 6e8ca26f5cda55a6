"""``ember.nn.parallel``: the torch.nn.parallel names: ``DataParallel`` (``data_parallel.py``)
and ``DistributedDataParallel`` (``distributed.py``, on ``ember.distributed``)."""
from .data_parallel import DataParallel, data_parallel  # noqa: F401
from .distributed import DistributedDataParallel  # noqa: F401
from . import distributed  # noqa: F401

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
