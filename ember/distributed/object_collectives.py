"""The collectives on picklable objects: all_gather_object, broadcast_object_list, gather_object and
scatter_object_list."""
from __future__ import annotations

import pickle

import numpy as np

from . import _mpi
from .arg_check import _check_args
from .process_groups import ProcessGroup, _resolve, _rooted


def _pickle(obj) -> np.ndarray:
    return np.frombuffer(pickle.dumps(obj), dtype=np.uint8)


def _unpickle(buf: np.ndarray):
    return pickle.loads(buf.tobytes())


def _allgather_bytes(pg: ProcessGroup, data: np.ndarray, what: str) -> list:
    MPI = _mpi._MPI
    n = pg.size()
    sizes = np.empty(n, np.int64)
    r = pg._comm.Iallgather([np.array([data.size], np.int64), MPI.INT64_T], [sizes, MPI.INT64_T])
    _mpi.wait_requests([r], what, pg._timeout)
    offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    out = np.empty(int(sizes.sum()), np.uint8)
    r = pg._comm.Iallgatherv([data, MPI.BYTE], [out, (sizes, offs), MPI.BYTE])
    _mpi.wait_requests([r], what, pg._timeout)
    return [out[o:o + s] for o, s in zip(offs, sizes)]


def all_gather_object(object_list, obj, group=None) -> None:
    """Every rank's picklable ``obj`` into every rank's ``object_list`` (of the group's size)."""
    pg = _resolve(group, "all_gather_object")
    if pg is None:
        return None
    n = pg.size()
    err = None
    if not isinstance(object_list, list) or len(object_list) != n:
        err = ValueError(f"all_gather_object: object_list must be a list of {n} entries (one per rank), got "
                         f"{len(object_list) if isinstance(object_list, list) else type(object_list).__name__}")
    _check_args(pg, "all_gather_object", err=err)
    parts = _allgather_bytes(pg, _pickle(obj), "all_gather_object")
    for i, p in enumerate(parts):
        object_list[i] = _unpickle(p)


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None) -> None:
    """Replace ``object_list``'s entries on every rank with rank ``src``'s (default 0)."""
    rooted = _rooted(group, src, group_src, "broadcast_object_list", "src", default0=True)
    if rooted is None:
        return None
    pg, root, me = rooted
    err = None if isinstance(object_list, list) else TypeError(
        f"broadcast_object_list: object_list must be a list, got {type(object_list).__name__}")
    _check_args(pg, "broadcast_object_list", root=root, err=err,
                extra=len(object_list) if isinstance(object_list, list) else -2)
    MPI = _mpi._MPI
    data = _pickle(list(object_list)) if me else None
    size = np.array([data.size if me else 0], np.int64)
    r = pg._comm.Ibcast([size, MPI.INT64_T], root=root)
    _mpi.wait_requests([r], "broadcast_object_list", pg._timeout)
    if not me:
        data = np.empty(int(size[0]), np.uint8)
    r = pg._comm.Ibcast([data, MPI.BYTE], root=root)
    _mpi.wait_requests([r], "broadcast_object_list", pg._timeout)
    if not me:
        object_list[:] = _unpickle(data)


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None) -> None:
    """Every rank's ``obj`` into ``object_gather_list`` on rank ``dst`` (default 0)."""
    rooted = _rooted(group, dst, group_dst, "gather_object", "dst", default0=True)
    if rooted is None:
        return None
    pg, root, me = rooted
    n = pg.size()
    err = None
    if me and (not isinstance(object_gather_list, list) or len(object_gather_list) != n):
        err = ValueError(f"gather_object: object_gather_list on the destination rank must be a list of {n} entries")
    elif not me and object_gather_list:
        err = ValueError("Argument ``object_gather_list`` must NOT be specified on non-destination ranks.")
    _check_args(pg, "gather_object", root=root, err=err)
    parts = _allgather_bytes(pg, _pickle(obj), "gather_object")
    if me:
        for i, p in enumerate(parts):
            object_gather_list[i] = _unpickle(p)


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None, group=None,
                        group_src=None) -> None:
    """``scatter_object_input_list[i]`` on rank ``src`` (default 0) into rank i's
    ``scatter_object_output_list[0]``."""
    rooted = _rooted(group, src, group_src, "scatter_object_list", "src", default0=True)
    if rooted is None:
        return None
    pg, root, me = rooted
    n = pg.size()
    err = None
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        err = ValueError("Expected argument scatter_object_output_list to be a list of size at least 1.")
    elif me and (not isinstance(scatter_object_input_list, list) or len(scatter_object_input_list) != n):
        err = ValueError(f"scatter_object_list: scatter_object_input_list on the source rank must hold {n} objects")
    _check_args(pg, "scatter_object_list", root=root, err=err)
    MPI = _mpi._MPI
    if me:
        parts = [_pickle(o) for o in scatter_object_input_list]
        sizes = np.array([p.size for p in parts], np.int64)
        offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        flat = np.concatenate(parts) if parts else np.empty(0, np.uint8)
    mine = np.empty(1, np.int64)
    r = pg._comm.Iscatter([sizes, MPI.INT64_T] if me else None, [mine, MPI.INT64_T], root=root)
    _mpi.wait_requests([r], "scatter_object_list", pg._timeout)
    buf = np.empty(int(mine[0]), np.uint8)
    r = pg._comm.Iscatterv([flat, (sizes, offs), MPI.BYTE] if me else None, [buf, MPI.BYTE], root=root)
    _mpi.wait_requests([r], "scatter_object_list", pg._timeout)
    scatter_object_output_list[0] = _unpickle(buf)
