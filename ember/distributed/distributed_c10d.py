"""torch.distributed's functional API on MPI (Open MPI through mpi4py).

Design:

- The default group owns a duplicate of ``MPI.COMM_WORLD`` (so a program's own mpi4py traffic never
  mixes with ember's); ``new_group`` makes sub-communicators. Ranks given to the API (``src``, ``dst``)
  are global ranks, as in torch; ``group_src``/``group_dst`` are ranks within the group.
- Every operation is an MPI non-blocking call; ``async_op=True`` returns a :class:`Work` around its
  requests, otherwise the call waits for it (see ``_mpi.wait``: polling with a deadline and a fault
  channel, so a dead or failing peer gives an error, never a hang).
- Before moving data, each collective exchanges a small header (operation, dtype, shape, root, reduce
  op) among the group's ranks: mismatched shapes, dtypes, roots or collectives called in a different
  order raise the same error on every rank, naming the ranks and what each passed. Invalid arguments on
  one rank (a wrong ``gather_list``, say) are flagged in the header too, so the other ranks raise
  instead of waiting.
- Data moves as raw bytes except in reductions, which use MPI's typed reductions: float16/bfloat16 are
  reduced in float32, bool as uint8 (SUM and MAX are logical or, PRODUCT and MIN logical and), and AVG
  is SUM divided by the group size (integers: truncated, as NCCL does).
- Tensors on a device other than the CPU go through host copies (``.cpu()`` then ``copy_`` back).

The API is made of ``process_groups`` (the default group and its state, ``new_group``, ranks), ``tensor_io``
(tensors' host arrays), ``reductions`` (``ReduceOp`` and how a dtype is reduced), ``arg_check`` (the header
every collective starts with), ``work`` (``Work``), ``collectives``, ``object_collectives`` and
``point_to_point``; this module is torch's ``distributed_c10d``: it re-exports their public names and gives
their private ones through ``__getattr__``, read when asked (``_WORLD``, the default group, changes).
"""
from __future__ import annotations

from . import arg_check, collectives, object_collectives, point_to_point, process_groups, reductions, tensor_io, work
from ._mpi import DistBackendError, DistError, DistNetworkError, DistStoreError, PeerFailedError
from .collectives import (
    all_gather, all_gather_into_tensor, all_reduce, barrier, broadcast, gather, monitored_barrier, reduce,
    reduce_scatter, reduce_scatter_tensor, scatter
)
from .object_collectives import all_gather_object, broadcast_object_list, gather_object, scatter_object_list
from .point_to_point import batch_isend_irecv, irecv, isend, P2POp, recv, send
from .process_groups import (
    Backend, default_pg_timeout, destroy_process_group, get_backend, get_global_rank, get_group_rank,
    get_process_group_ranks, get_rank, get_world_size, group, GroupMember, init_process_group, is_available,
    is_gloo_available, is_initialized, is_mpi_available, is_nccl_available, is_torchelastic_launched, new_group,
    ProcessGroup
)
from .reductions import ReduceOp
from .work import Work

__all__ = [
    "is_available", "is_initialized", "is_torchelastic_launched", "init_process_group", "destroy_process_group",
    "get_rank", "get_world_size", "get_backend", "barrier", "monitored_barrier", "all_reduce", "broadcast",
    "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "gather",
    "scatter", "send", "recv", "isend", "irecv", "batch_isend_irecv", "P2POp", "all_gather_object",
    "broadcast_object_list", "gather_object", "scatter_object_list", "new_group", "get_process_group_ranks",
    "get_global_rank", "get_group_rank", "ReduceOp", "Backend", "Work", "ProcessGroup", "GroupMember", "group",
    "is_nccl_available", "is_gloo_available", "is_mpi_available", "DistError", "DistBackendError",
    "DistNetworkError", "DistStoreError", "PeerFailedError", "default_pg_timeout",
]

_PARTS = (process_groups, tensor_io, reductions, arg_check, work, collectives, object_collectives, point_to_point)


def __getattr__(name: str):
    """A private name of one of the parts (``_resolve``, ``_Host``, ``_WORLD``, ...), read when asked."""
    for part in _PARTS:
        if name in vars(part):
            return vars(part)[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
