"""``DistributedSampler``: each rank's share of a dataset, as ``torch.utils.data.distributed``.

The indices (``0..len-1``, or a permutation drawn from a generator seeded with ``seed + epoch`` when
``shuffle``, the same on every rank) are padded by repeating the first ones to a multiple of
``num_replicas`` (or cut down to one, with ``drop_last``); rank ``r`` takes every ``num_replicas``-th
index starting at ``r``. So the ranks' shares are disjoint, equally long, and together cover the
dataset. Call ``set_epoch(epoch)`` at the start of every epoch for a new order. The permutation is
ember's (its generator is not torch's Mersenne Twister): with ``shuffle=False`` the shares equal
torch's exactly; with shuffling they follow the same rule on ember's permutation.
"""
from __future__ import annotations

import math

from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """``DistributedSampler(dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False)``;
    ``num_replicas`` and ``rank`` default to the default process group's world size and rank."""

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            from ... import distributed as dist
            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
            if num_replicas is None:
                num_replicas = dist.get_world_size()
            if rank is None:
                rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if self.drop_last and n % self.num_replicas != 0:
            # the largest length every rank can have without padding
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            from ...random import Generator
            from ...ops.random_ops import randperm
            g = Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        if len(indices) != self.total_size:
            raise AssertionError(f"DistributedSampler: {len(indices)} indices, expected {self.total_size}")
        mine = indices[self.rank:self.total_size:self.num_replicas]
        if len(mine) != self.num_samples:
            raise AssertionError(f"DistributedSampler: {len(mine)} indices for rank {self.rank}, "
                                 f"expected {self.num_samples}")
        return iter(mine)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch (with ``seed``) picks the permutation: call it before each epoch when shuffling."""
        self.epoch = epoch
