"""``ember.distributed``: what single-process programs query of torch.distributed.

ember runs in one process, so ``is_available()`` is False and no process group can be created: code
written as ``if dist.is_available() and dist.is_initialized(): ...`` takes its single-process path.
Collectives and rank queries raise torch's "not initialized" error; ``init_process_group`` explains that
ember has no distributed backend.
"""
from __future__ import annotations

import enum

__all__ = ["is_available", "is_initialized", "is_torchelastic_launched", "init_process_group", "destroy_process_group",
           "get_rank", "get_world_size", "get_backend", "barrier", "all_reduce", "all_gather", "broadcast", "reduce",
           "gather", "scatter", "reduce_scatter", "all_gather_object", "broadcast_object_list", "new_group",
           "ReduceOp", "Backend", "is_nccl_available", "is_gloo_available", "is_mpi_available"]

_NOT_INIT = "Default process group has not been initialized, please make sure to call init_process_group."


class ReduceOp(enum.Enum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8


class Backend(str):
    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"
    UNDEFINED = "undefined"


def is_available() -> bool:
    """False: ember has no distributed backend."""
    return False


def is_initialized() -> bool:
    """False: no process group exists."""
    return False


def is_torchelastic_launched() -> bool:
    return False


def is_nccl_available() -> bool:
    return False


def is_gloo_available() -> bool:
    return False


def is_mpi_available() -> bool:
    return False


def init_process_group(*args, **kwargs):
    raise RuntimeError("ember.distributed: ember runs in a single process and has no distributed backend "
                       "(gloo/nccl/mpi); train without init_process_group")


def _not_initialized(*args, **kwargs):
    raise ValueError(_NOT_INIT)


get_rank = get_world_size = get_backend = barrier = destroy_process_group = new_group = _not_initialized
all_reduce = all_gather = broadcast = reduce = gather = scatter = reduce_scatter = _not_initialized
all_gather_object = broadcast_object_list = _not_initialized
