"""ember.multiprocessing: torch.multiprocessing's module path on Python's ``multiprocessing``.

Everything ``multiprocessing`` exports is here (``Process``, ``Queue``, ``get_context``,
``set_start_method``, ``cpu_count``, ``Pool``, ...), plus torch's ``spawn``/``start_processes`` with
``ProcessContext`` and its exceptions (``spawn.py``), and the sharing-strategy functions.

Tensors sent through a ``Queue``/``Pipe`` (or as ``Process`` arguments) arrive intact, by pickling
(``Tensor.__reduce_ex__``: dtype, shape, values, ``requires_grad``, the Parameter class). Unlike torch,
ember does **not** move them into shared memory: the receiver gets a copy, and an in-place change on
one side is not seen by the other. ``share_memory_()`` and the sharing strategies are accepted for
compatibility and change nothing.
"""
from __future__ import annotations

import multiprocessing as _mp
from multiprocessing import *  # noqa: F401,F403  (torch.multiprocessing re-exports the standard module)

from .spawn import (ProcessContext, ProcessException, ProcessExitedException, ProcessRaisedException,  # noqa: F401
                    spawn, start_processes)

__all__ = list(_mp.__all__) + ["spawn", "start_processes", "ProcessContext", "ProcessException",
                               "ProcessRaisedException", "ProcessExitedException", "get_sharing_strategy",
                               "set_sharing_strategy", "get_all_sharing_strategies"]

_STRATEGIES = {"file_descriptor", "file_system"}
_strategy = ["file_descriptor"]


def get_all_sharing_strategies() -> set:
    """The strategy names torch knows (ember pickles tensors whatever the strategy: see the docstring)."""
    return set(_STRATEGIES)


def get_sharing_strategy() -> str:
    return _strategy[0]


def set_sharing_strategy(new_strategy: str) -> None:
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"invalid sharing strategy {new_strategy!r}: expected one of {sorted(_STRATEGIES)}")
    _strategy[0] = new_strategy
