"""ember.utils.data: datasets, samplers and the ``DataLoader``, with ``torch.utils.data``'s API."""
from .dataset import (Dataset, IterableDataset, TensorDataset, StackDataset, ConcatDataset, ChainDataset,  # noqa: F401
                      Subset, random_split)
from .sampler import (Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler,  # noqa: F401
                      WeightedRandomSampler, BatchSampler)
from .dataloader import DataLoader, default_collate, default_convert  # noqa: F401
from ._utils.worker import get_worker_info, WorkerInfo  # noqa: F401
from .distributed import DistributedSampler  # noqa: F401
from . import _utils, dataloader, dataset, sampler, distributed  # noqa: F401

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DistributedSampler", "DataLoader", "default_collate",
           "default_convert", "get_worker_info"]
