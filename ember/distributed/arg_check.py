"""The argument check every collective starts with: each rank's header (operation, dtype, shape, root,
reduce op) exchanged among the group, raising the same error on every rank when they differ."""
from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

import numpy as np

from . import _mpi
from .reductions import ReduceOp
from .tensor_io import _DTYPE_CODE, _DTYPE_NAMES

if TYPE_CHECKING:
    from .process_groups import ProcessGroup

_OPS = ("barrier", "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
        "reduce_scatter_tensor", "gather", "scatter", "all_gather_object", "broadcast_object_list", "gather_object",
        "scatter_object_list", "new_group", "monitored_barrier")
_HDR = 16
_MAX_DIMS = _HDR - 8


def _header(op: str, t=None, redop=None, root: int = -1, bad: bool = False, extra: int = 0) -> np.ndarray:
    h = np.full(_HDR, -1, np.int64)
    h[0] = _OPS.index(op)
    h[2] = -1 if redop is None else redop.value
    h[3] = root
    h[4] = int(bad)
    h[5] = extra
    if t is not None:
        h[1] = _DTYPE_CODE[t.dtype.name]
        shape = tuple(t.shape)
        h[6] = len(shape)
        if len(shape) <= _MAX_DIMS:
            h[7:7 + len(shape)] = shape
        else:
            h[7] = zlib.crc32(repr(shape).encode())
    return h


def _hdesc(h) -> str:
    if h[1] < 0:
        return "no tensor"
    nd = int(h[6])
    dims = ", ".join(str(int(d)) for d in h[7:7 + nd]) if nd <= _MAX_DIMS else f"{nd} dims"
    return f"{_DTYPE_NAMES[int(h[1])]}[{dims}]"


def _check_args(pg: ProcessGroup, op: str, t=None, redop=None, root: int = -1, err: Exception | None = None,
                extra: int = 0) -> None:
    """Exchange this rank's header with the group's and raise, on every rank alike, if they differ."""
    if pg.size() == 1:
        if err is not None:
            raise err
        return
    MPI = _mpi._MPI
    h = _header(op, t, redop, root, err is not None, extra)
    out = np.empty((pg.size(), _HDR), np.int64)
    req = pg._comm.Iallgather([h, MPI.INT64_T], [out, MPI.INT64_T])
    _mpi.wait_requests([req], f"{op} (argument exchange)", pg._timeout)
    if err is not None:
        raise err
    if (out == out[0]).all():
        return
    ranks = pg._ranks
    names = [_OPS[int(r[0])] if 0 <= r[0] < len(_OPS) else "?" for r in out]
    if len(set(names)) > 1:
        calls = ", ".join(f"rank {ranks[i]} called {n}" for i, n in enumerate(names))
        raise RuntimeError(f"ember.distributed: ranks called different collectives ({calls}); every rank of a group "
                           "must call the same collectives in the same order")
    bad = [ranks[i] for i, r in enumerate(out) if r[4]]
    if bad:
        raise RuntimeError(f"ember.distributed.{op}: rank(s) {bad} passed invalid arguments (see the error on "
                           "those ranks); no data was exchanged")
    if len({int(r[3]) for r in out}) > 1:
        roots = ", ".join(f"rank {ranks[i]}: {ranks[int(r[3])] if r[3] >= 0 else None}" for i, r in enumerate(out))
        raise RuntimeError(f"ember.distributed.{op}: ranks disagree on the root rank ({roots})")
    if len({int(r[2]) for r in out}) > 1:
        ops = ", ".join(f"rank {ranks[i]}: {ReduceOp(int(r[2])).name}" for i, r in enumerate(out))
        raise RuntimeError(f"ember.distributed.{op}: ranks disagree on the reduce op ({ops})")
    if len({int(r[5]) for r in out}) > 1:
        raise RuntimeError(f"ember.distributed.{op}: ranks passed different arguments "
                           f"({', '.join(f'rank {ranks[i]}' for i in range(len(out)))} disagree)")
    descs = "; ".join(f"rank {ranks[i]}: {_hdesc(r)}" for i, r in enumerate(out))
    raise RuntimeError(f"ember.distributed.{op}: tensor shapes or dtypes differ across ranks ({descs}); "
                       "every rank must pass the same shape and dtype")
