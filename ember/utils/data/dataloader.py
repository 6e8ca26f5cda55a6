"""``DataLoader``: iterate a dataset in (optionally shuffled) batches, as ``torch.utils.data.DataLoader``.

``num_workers=0`` loads in the main process. ``num_workers > 0`` starts that many worker processes
(``multiprocessing``, the platform's default start method unless ``multiprocessing_context`` says
otherwise); each gets a copy of the dataset, is seeded (``random``, ember's default generator and
NumPy's global generator) with ``base_seed + worker_id``, runs ``worker_init_fn(worker_id)``, and
fetches whole batches, which come back in sampler order. ``get_worker_info()`` identifies the worker
inside it (and is None in the main process). ``pin_memory`` is accepted and does nothing (there is no
GPU to pin for).
"""
from __future__ import annotations

import itertools
import math
import multiprocessing as _mp
import os
import pickle
import queue
import atexit
import warnings
import weakref

import numpy as np

from .dataset import IterableDataset
from .sampler import Sampler, SequentialSampler, RandomSampler, BatchSampler
from ._utils import collate as _collate
from ._utils.fetch import create_fetcher
from ._utils.worker import (ExceptionWrapper, _IterableDatasetStopIteration, _ResumeIteration, _worker_loop,
                            get_worker_info)

__all__ = ["DataLoader", "get_worker_info", "default_collate", "default_convert"]

default_collate = _collate.default_collate
default_convert = _collate.default_convert

_STATUS_CHECK_INTERVAL = 1.0    # seconds between liveness checks of the workers while waiting
_LIVE_ITERATORS: "weakref.WeakSet" = weakref.WeakSet()


def _shutdown_all() -> None:
    # registered after multiprocessing's own exit hook, so it runs first (atexit is last-in first-out):
    # the queues still work, and the workers exit cleanly instead of being waited on and terminated
    for it in list(_LIVE_ITERATORS):
        it._shutdown_workers()


atexit.register(_shutdown_all)


class _InfiniteConstantSampler(Sampler):
    """``None`` forever: the index stream for iterable datasets (only the batch size matters)."""

    def __iter__(self):
        while True:
            yield None


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class DataLoader:
    """Combine a dataset and a sampler into an iterable over batches.

    Args:
        dataset: a map-style ``Dataset`` (``__getitem__`` + ``__len__``) or an ``IterableDataset``.
        batch_size: samples per batch (default 1); None turns automatic batching off (each item is
            converted with ``default_convert`` instead of collated).
        shuffle: reshuffle the indices every epoch (a ``RandomSampler`` drawing from ``generator``).
        sampler: an iterable of indices (mutually exclusive with ``shuffle``).
        batch_sampler: an iterable of index lists (mutually exclusive with batch_size, shuffle, sampler,
            drop_last).
        num_workers: 0 loads in the main process; n > 0 uses n worker processes (see the module doc).
        collate_fn: merges a list of samples into a batch (default ``default_collate``).
        pin_memory: accepted; a no-op (ember has no GPU).
        drop_last: drop the last incomplete batch.
        timeout: seconds to wait for a batch from the workers (0: wait indefinitely; must be 0 when
            ``num_workers=0``, as in torch).
        worker_init_fn: called as ``worker_init_fn(worker_id)`` in each worker after seeding.
        multiprocessing_context: a start method name ("fork", "spawn", "forkserver") or context.
        generator: the ``ember.Generator`` used for shuffling and for the workers' base seed.
        prefetch_factor: batches each worker loads ahead (default 2 when ``num_workers > 0``).
        persistent_workers: keep the worker processes alive between epochs.
        pin_memory_device, in_order: accepted; results always come back in sampler order.
    """

    __initialized = False

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None, sampler=None,
                 batch_sampler=None, num_workers: int = 0, collate_fn=None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > "
                             "0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        # dataset checks come first, so users learn early that iterable datasets take no sampler
        if isinstance(dataset, IterableDataset):
            self._iterable = True
            if shuffle not in {False, None}:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
            self._iterable = False

        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                             "drop_last")

        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self.__initialized = True
        self._IterableDataset_len_called = None
        self._iterator = None
        self.check_worker_number_rationality()

    # ---- configuration ---------------------------------------------------------------------------

    @property
    def multiprocessing_context(self):
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, ctx) -> None:
        if ctx is not None:
            if self.num_workers <= 0:
                raise ValueError(f"multiprocessing_context can only be used with multi-process loading "
                                 f"(num_workers > 0), but got num_workers={self.num_workers}")
            if isinstance(ctx, str):
                methods = _mp.get_all_start_methods()
                if ctx not in methods:
                    raise ValueError(f"multiprocessing_context option should specify a valid start method in "
                                     f"{methods!r}, but got multiprocessing_context={ctx!r}")
                ctx = _mp.get_context(ctx)
            if not isinstance(ctx, _mp.context.BaseContext):
                raise TypeError(f"multiprocessing_context option should be a valid context object or a string "
                                f"specifying the start method, but got multiprocessing_context={ctx}")
        self.__multiprocessing_context = ctx

    def __setattr__(self, attr, val) -> None:
        if self.__initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                           "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after {self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        # batches of indices with automatic batching, single indices without
        return self.batch_sampler if self._auto_collation else self.sampler

    def check_worker_number_rationality(self) -> None:
        """Warn when more workers are requested than this process may use CPUs."""
        if self.num_workers > 0:
            n = _cpu_count()
            if self.num_workers > n:
                warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in total. Our "
                              f"suggested max number of worker in current system is {n}, which is smaller than what "
                              "this DataLoader is going to create. Please be aware that excessive worker creation "
                              "might get DataLoader running slow or even freeze, lower the worker number to avoid "
                              "potential slowness/freeze if necessary.", stacklevel=3)

    # ---- iteration -------------------------------------------------------------------------------

    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        self.check_worker_number_rationality()
        return _MultiProcessingDataLoaderIter(self)

    def __iter__(self):
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def __len__(self) -> int:
        if self._iterable:
            # trust the dataset's own length (the loader warns if more samples come than it said)
            length = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)


class _BaseDataLoaderIter:
    def __init__(self, loader: DataLoader) -> None:
        from ...random import _gen
        self._dataset = loader.dataset
        self._iterable = loader._iterable
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._prefetch_factor = loader.prefetch_factor
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(self._index_sampler)
        # drawn every epoch from the loader's generator (as torch does), seeds the workers
        self._base_seed = int(_gen(loader.generator).integers(-2 ** 63, 2 ** 63 - 1, dtype=np.int64, endpoint=True))
        self._persistent_workers = loader.persistent_workers
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _reset(self, loader, first_iter: bool = False) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self):
        return next(self._sampler_iter)

    def _next_data(self):
        raise NotImplementedError(f"{type(self).__name__} must implement _next_data")

    def __next__(self):
        if self._sampler_iter is None:
            self._reset()
        data = self._next_data()
        self._num_yielded += 1
        if self._iterable and self._IterableDataset_len_called is not None and \
                self._num_yielded > self._IterableDataset_len_called:
            msg = (f"Length of IterableDataset {self._dataset} was reported to be {self._IterableDataset_len_called}"
                   f"(when accessing len(dataloader)), but {self._num_yielded} samples have been fetched. ")
            if self._num_workers > 0:
                msg += ("For multiprocessing data-loading, this could be caused by not properly configuring the "
                        "IterableDataset replica at each worker (use get_worker_info() to split the stream).")
            warnings.warn(msg, stacklevel=2)
        return data

    def __len__(self) -> int:
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError(f"{self.__class__.__name__} cannot be pickled")


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    """Loads every batch in the calling process."""

    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        if self._timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0")
        self._fetcher = create_fetcher(self._iterable, self._dataset, self._auto_collation, self._collate_fn,
                                       self._drop_last)

    def _next_data(self):
        index = self._next_index()              # StopIteration ends the epoch
        return self._fetcher.fetch(index)       # an exhausted iterable dataset also ends it


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """Loads batches in worker processes, ``prefetch_factor`` batches per worker in flight, and yields
    them in sampler order (results that arrive early wait in ``_task_info``)."""

    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        ctx = loader.multiprocessing_context or _mp
        self._worker_init_fn = loader.worker_init_fn
        self._shutdown = False
        self._owner_pid = os.getpid()
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        self._worker_result_queue = ctx.Queue()
        self._workers_done_event = ctx.Event()
        self._index_queues = []
        self._workers = []
        try:
            for i in range(self._num_workers):
                q = ctx.Queue()
                # the main process never joins on flushing its index messages at exit
                q.cancel_join_thread()
                w = ctx.Process(target=_worker_loop, daemon=True,
                                args=(self._iterable, self._dataset, q, self._worker_result_queue,
                                      self._workers_done_event, self._auto_collation, self._collate_fn,
                                      self._drop_last, self._base_seed, self._worker_init_fn, i, self._num_workers,
                                      os.getpid()))
                w.start()
                self._index_queues.append(q)
                self._workers.append(w)
        except BaseException:
            self._shutdown_workers()
            raise
        _LIVE_ITERATORS.add(self)
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter: bool = False) -> None:
        super()._reset(loader, first_iter)
        self._send_idx = 0
        self._rcvd_idx = 0
        # task index -> (worker_id,) while in flight, (worker_id, data) once it arrived out of order
        self._task_info: dict = {}
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        if not first_iter:
            # persistent workers: start a new epoch in each and wait for every acknowledgement, dropping
            # results of the previous (unfinished) epoch that are still on their way
            for q in self._index_queues:
                q.put(_ResumeIteration())
            remaining = self._num_workers
            while remaining > 0:
                idx, _ = self._get_data()
                if isinstance(idx, _ResumeIteration):
                    remaining -= 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_put_index(self) -> None:
        if self._tasks_outstanding >= self._prefetch_factor * self._num_workers:
            return
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_queue_idx_cycle)
            if self._workers_status[worker_id]:
                break
        else:
            return          # every worker has exhausted its iterable dataset
        self._index_queues[worker_id].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _get_data(self):
        """The next message from any worker, checking periodically that the workers are alive."""
        waited = 0.0
        while True:
            wait = _STATUS_CHECK_INTERVAL
            if self._timeout > 0:
                wait = min(wait, self._timeout - waited)
            try:
                payload = self._worker_result_queue.get(timeout=max(wait, 1e-3))
                return pickle.loads(payload)
            except queue.Empty:
                waited += wait
                dead = [w for i, w in enumerate(self._workers) if self._workers_status[i] and not w.is_alive()]
                if dead:
                    pids = ", ".join(str(w.pid) for w in dead)
                    codes = ", ".join(str(w.exitcode) for w in dead)
                    self._shutdown_workers()
                    raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly (exit code(s) "
                                       f"{codes})") from None
                if self._timeout > 0 and waited >= self._timeout:
                    self._shutdown_workers()
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None

    def _next_data(self):
        while True:
            # skip tasks of workers that ran out of data (iterable datasets)
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._workers_status[info[0]]:
                    break
                # that worker ignores tasks once its data ran out: this one will never come back
                del self._task_info[self._rcvd_idx]
                self._tasks_outstanding -= 1
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                data = self._task_info.pop(self._rcvd_idx)[1]
                self._rcvd_idx += 1
                return self._process_data(data)
            if self._shutdown:
                raise StopIteration
            idx, data = self._get_data()
            self._tasks_outstanding -= 1
            if isinstance(data, _IterableDatasetStopIteration):
                if self._persistent_workers:
                    self._workers_status[data.worker_id] = False
                else:
                    self._mark_worker_as_unavailable(data.worker_id)
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                self._task_info[idx] += (data,)     # arrived early: keep until its turn
            else:
                del self._task_info[idx]
                self._rcvd_idx += 1
                return self._process_data(data)

    def _process_data(self, data):
        self._try_put_index()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return data

    def _mark_worker_as_unavailable(self, worker_id: int) -> None:
        self._workers_status[worker_id] = False
        self._index_queues[worker_id].put(None)      # let it exit

    def _shutdown_workers(self) -> None:
        if self._shutdown or os.getpid() != self._owner_pid:
            return      # done already, or a forked worker of another loader collecting its copy of us
        self._shutdown = True
        try:
            self._workers_done_event.set()
            for q in self._index_queues:
                try:
                    q.put(None)
                except (OSError, ValueError):
                    pass
            for w in self._workers:
                w.join(timeout=5.0)
                if w.is_alive():
                    w.terminate()
                    w.join(timeout=1.0)
            for q in self._index_queues:
                q.cancel_join_thread()
                q.close()
            self._worker_result_queue.cancel_join_thread()
            self._worker_result_queue.close()
        except Exception:
            pass

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:
            pass
