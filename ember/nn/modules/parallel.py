"""``DataParallel`` for ``ember.nn``: it lives in ``ember/nn/parallel/data_parallel.py`` (torch's
``torch.nn.parallel.data_parallel``); this family file puts it into ``ember.nn``."""
from ..parallel.data_parallel import DataParallel, data_parallel  # noqa: F401

__all__ = ["DataParallel"]
