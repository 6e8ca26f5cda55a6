"""Samplers: iterables of dataset indices (or, for ``BatchSampler``, of lists of indices) that decide
the order a ``DataLoader`` visits a map-style dataset, as in ``torch.utils.data``.

Random samplers draw from an ``ember.Generator`` (the default generator when none is given, through a
fresh seed per epoch as torch does), so a seeded generator makes the order repeatable. The numbers are
ember's, not torch's: the same seed gives a different (but equally uniform) permutation than torch.
"""
from __future__ import annotations

import itertools
from typing import Generic, TypeVar

import numpy as np

from ...random import Generator, _gen

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]

T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):
    """Base class: subclasses implement ``__iter__`` yielding indices, and usually ``__len__``."""

    def __init__(self, data_source=None) -> None:
        if data_source is not None:
            import warnings
            warnings.warn("`data_source` argument is not used and will be removed in 2.2.0.You may still have "
                          "custom implementation that utilizes it.", stacklevel=2)

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler[int]):
    """Indices ``0, 1, ..., len(data_source) - 1`` in order."""

    def __init__(self, data_source) -> None:
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _epoch_generator(generator) -> Generator:
    """The generator an epoch draws from: the given one, or a fresh one seeded from the default
    generator (so each epoch differs, and ``ember.manual_seed`` makes the sequence repeatable)."""
    if generator is not None:
        return generator
    seed = int(_gen(None).integers(-2 ** 63, 2 ** 63 - 1, dtype=np.int64, endpoint=True))
    return Generator().manual_seed(seed)


class RandomSampler(Sampler[int]):
    """Indices in random order: a permutation (``replacement=False``; with ``num_samples`` larger than the
    dataset, several permutations back to back), or ``num_samples`` independent uniform draws
    (``replacement=True``).

        >>> list(RandomSampler(range(5), generator=ember.Generator().manual_seed(0)))  # doctest: +SKIP
        [2, 4, 3, 0, 1]
    """

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None,
                 generator=None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        # the dataset may change size between epochs: read its length each time
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        from ...ops.random_ops import randint, randperm
        n = len(self.data_source)
        g = _epoch_generator(self.generator)
        if self.replacement:
            # draw in chunks of 32 so a long epoch does not materialise all indices up front
            for _ in range(self.num_samples // 32):
                yield from randint(high=n, size=(32,), generator=g).tolist()
            yield from randint(high=n, size=(self.num_samples % 32,), generator=g).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from randperm(n, generator=g).tolist()
            yield from randperm(n, generator=g).tolist()[:self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given ``indices`` in a random order (a new permutation each epoch)."""

    def __init__(self, indices, generator=None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        from ...ops.random_ops import randperm
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices in ``[0, len(weights))`` drawn with probability proportional to
    ``weights`` (with or without replacement), via ``ember.multinomial``."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None) -> None:
        from ...ops.creation import as_tensor
        from ... import dtypes as _dt
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        w = as_tensor(weights, dtype=_dt.float64)
        if len(w.shape) != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        from ...ops.random_ops import multinomial
        yield from multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator).tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list]):
    """Group the indices of ``sampler`` into lists of ``batch_size`` (the last one shorter unless
    ``drop_last``).

        >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
        [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler, batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        it = iter(self.sampler)
        while True:
            batch = list(itertools.islice(it, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
