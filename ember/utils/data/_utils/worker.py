"""The DataLoader worker process: its loop, ``WorkerInfo`` / ``get_worker_info()``, and the small
messages exchanged with the main process.

Protocol (one index queue per worker, one shared result queue):

* main -> worker: ``(task_idx, index)`` to fetch, ``_ResumeIteration()`` to start a new epoch
  (persistent workers), ``None`` to exit;
* worker -> main: ``pickle.dumps((task_idx, data))`` where data is the collated batch, an
  ``ExceptionWrapper`` (re-raised in the main process), or ``_IterableDatasetStopIteration`` when the
  worker's iterable dataset is exhausted. Results are pickled in the worker so that a value that
  cannot be pickled becomes an error in the main process instead of a silent hang.
"""
from __future__ import annotations

import os
import pickle
import queue
import random
import sys
import traceback

import numpy as np

__all__ = ["WorkerInfo", "get_worker_info", "ExceptionWrapper"]

_POLL_INTERVAL = 0.5      # seconds between checks that the main process still wants us
_worker_info = None       # set in a worker process only


class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: ``id`` (0 .. num_workers - 1),
    ``num_workers``, ``seed`` (the seed this worker's generators were given) and ``dataset`` (this
    worker's copy of the dataset)."""

    __initialized = False

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)
        self.__keys = tuple(kwargs.keys())
        self.__initialized = True

    def __setattr__(self, key, val):
        if self.__initialized:
            raise RuntimeError(f"Cannot assign attributes to {self.__class__.__name__} objects")
        return super().__setattr__(key, val)

    def __repr__(self):
        items = ", ".join(f"{k}={getattr(self, k)}" for k in self.__keys)
        return f"{self.__class__.__name__}({items})"


def get_worker_info():
    """Inside a ``DataLoader`` worker process, its ``WorkerInfo``; in the main process, None.

    An ``IterableDataset`` uses it to give each worker its own share of the stream:

        >>> info = get_worker_info()
        >>> start = 0 if info is None else info.id          # doctest: +SKIP
        >>> step = 1 if info is None else info.num_workers  # doctest: +SKIP
    """
    return _worker_info


class ExceptionWrapper:
    """An exception caught in a worker, carried to the main process and re-raised there with the
    worker's traceback in its message."""

    def __init__(self, exc_info=None, where: str = "in background"):
        if exc_info is None:
            exc_info = sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where
        try:
            pickle.dumps(self.exc_type)
        except Exception:           # e.g. an exception class defined inside a function
            self.exc_type = RuntimeError

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            # KeyError would show the message through repr(); keep it readable
            msg = _KeyErrorMessage(msg)
        elif getattr(self.exc_type, "message", None):
            raise self.exc_type(message=msg)
        try:
            exc = self.exc_type(msg)
        except Exception:
            # the exception type needs other constructor arguments: fall back to RuntimeError
            raise RuntimeError(msg) from None
        raise exc


class _KeyErrorMessage(str):
    def __repr__(self):
        return self


class _IterableDatasetStopIteration:
    """Sent by a worker whose iterable dataset is exhausted."""

    def __init__(self, worker_id: int):
        self.worker_id = worker_id


class _ResumeIteration:
    """Sent to persistent workers at the start of a new epoch (and echoed back as the acknowledgement)."""


def _seed_worker(seed: int, worker_id: int, base_seed: int) -> None:
    from ....random import manual_seed
    random.seed(seed)
    manual_seed(seed)
    # NumPy's global generator gets an independent stream per worker (as torch seeds it)
    state = np.random.SeedSequence([worker_id, base_seed & 0xFFFF_FFFF_FFFF_FFFF]).generate_state(4)
    np.random.seed(state)


def _put(data_queue, idx, data, worker_id: int) -> None:
    try:
        payload = pickle.dumps((idx, data), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        payload = pickle.dumps((idx, ExceptionWrapper(where=f"in DataLoader worker process {worker_id} while "
                                                            f"sending a batch (it could not be pickled)")))
    data_queue.put(payload)


def _worker_loop(iterable, dataset, index_queue, data_queue, done_event, auto_collation, collate_fn, drop_last,
                 base_seed, init_fn, worker_id, num_workers, parent_pid):
    """Body of a worker process: seed, run ``init_fn``, then fetch batches until told to stop."""
    global _worker_info
    from .fetch import create_fetcher
    try:
        seed = base_seed + worker_id
        _seed_worker(seed, worker_id, base_seed)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        where = f"in DataLoader worker process {worker_id}"
        init_exception = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = create_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_exception = ExceptionWrapper(where=where)
        iteration_end = False
        while True:
            try:
                r = index_queue.get(timeout=_POLL_INTERVAL)
            except queue.Empty:
                # stop if the main process died, or shut us down without managing to send the exit message
                # (when the loader is garbage-collected, its queues may be finalized before it)
                if os.getppid() != parent_pid or done_event.is_set():
                    break
                continue
            if isinstance(r, _ResumeIteration):
                iteration_end = False
                if iterable and init_exception is None:
                    try:
                        fetcher = create_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
                    except Exception:
                        init_exception = ExceptionWrapper(where=where)
                _put(data_queue, r, None, worker_id)
                continue
            if r is None:
                break
            if done_event.is_set() or iteration_end:
                continue            # draining: the main process no longer wants results
            idx, index = r
            if init_exception is not None:
                data, init_exception = init_exception, None
            else:
                try:
                    data = fetcher.fetch(index)
                except Exception as e:
                    if isinstance(e, StopIteration) and iterable:
                        data = _IterableDatasetStopIteration(worker_id)
                        iteration_end = True
                    else:
                        data = ExceptionWrapper(where=where)
            _put(data_queue, idx, data, worker_id)
            del data, r
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        # do not block exit on flushing results nobody will read
        data_queue.cancel_join_thread()
        data_queue.close()
