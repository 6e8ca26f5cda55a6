"""The collectives on tensors: barrier, all_reduce, broadcast, reduce, all_gather(_into_tensor),
reduce_scatter(_tensor), gather and scatter."""
from __future__ import annotations

import numpy as np

from . import _mpi
from .arg_check import _check_args
from .process_groups import _resolve, _rooted, _timeout_seconds, default_pg_timeout
from .reductions import ReduceOp, _as_op, _reduction, _reduction_or_error
from .tensor_io import _Host, _check_tensor, _check_tensor_list, _desc, _same, _write
from .work import _Done, _run, _what


def barrier(group=None, async_op: bool = False, device_ids=None):
    """Wait until every rank of the group has called ``barrier``."""
    pg = _resolve(group, "barrier")
    if pg is None:
        return None
    _check_args(pg, "barrier")          # the header exchange is itself a barrier
    return _Done() if async_op else None


def monitored_barrier(group=None, timeout=None, wait_all_ranks: bool = False):
    """``barrier`` with its own timeout (default: the group's)."""
    pg = _resolve(group, "monitored_barrier")
    if pg is None:
        return None
    if pg.size() == 1:
        return None
    secs = pg._timeout if timeout is None else _timeout_seconds(timeout, default_pg_timeout)
    req = pg._comm.Ibarrier()
    _mpi.wait_requests([req], "monitored_barrier", secs)
    return None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``tensor`` over the group with ``op``; every rank gets the result in place."""
    _check_tensor(tensor, "tensor", "all_reduce")
    pg = _resolve(group, "all_reduce")
    if pg is None:
        return None
    op = _as_op(op, "all_reduce")
    spec, err = _reduction_or_error(tensor.dtype, op, "all_reduce")
    _check_args(pg, "all_reduce", tensor, op, err=err)
    h = _Host(tensor, writes=True)
    buf = spec.buffer(h.arr)
    n = pg.size()
    MPI = _mpi._MPI
    reqs = [pg._comm.Iallreduce(MPI.IN_PLACE, [buf, spec.mpi_type], spec.mpi_op)] if n > 1 else []

    def finish():
        spec.finish(buf, h.arr, n)
        h.done()
    return _run(reqs, _what("all_reduce", pg, tensor), pg, async_op, finish, [tensor])


def broadcast(tensor, src=None, group=None, async_op: bool = False, group_src=None):
    """Copy ``tensor`` from rank ``src`` to every rank of the group."""
    _check_tensor(tensor, "tensor", "broadcast")
    rooted = _rooted(group, src, group_src, "broadcast", "src")
    if rooted is None:
        return None
    pg, root, me = rooted
    _check_args(pg, "broadcast", tensor, root=root)
    h = _Host(tensor, writes=not me)
    MPI = _mpi._MPI
    reqs = [pg._comm.Ibcast([h.bytes(), MPI.BYTE], root=root)] if pg.size() > 1 else []
    return _run(reqs, _what("broadcast", pg, tensor), pg, async_op, h.done, [tensor])


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op: bool = False, group_dst=None):
    """Reduce ``tensor`` over the group into rank ``dst``'s tensor (the others' are left as they are)."""
    _check_tensor(tensor, "tensor", "reduce")
    rooted = _rooted(group, dst, group_dst, "reduce", "dst")
    if rooted is None:
        return None
    pg, root, me = rooted
    op = _as_op(op, "reduce")
    spec, err = _reduction_or_error(tensor.dtype, op, "reduce")
    _check_args(pg, "reduce", tensor, op, root=root, err=err)
    h = _Host(tensor, writes=me)
    buf = spec.buffer(h.arr)
    n = pg.size()
    MPI = _mpi._MPI
    reqs = []
    if n > 1:
        if me:
            reqs = [pg._comm.Ireduce(MPI.IN_PLACE, [buf, spec.mpi_type], spec.mpi_op, root=root)]
        else:
            reqs = [pg._comm.Ireduce([buf, spec.mpi_type], None, spec.mpi_op, root=root)]

    def finish():
        if me:
            spec.finish(buf, h.arr, n)
            h.done()
    return _run(reqs, _what("reduce", pg, tensor), pg, async_op, finish, [tensor])


def all_gather(tensor_list, tensor, group=None, async_op: bool = False):
    """Every rank's ``tensor`` into every rank's ``tensor_list`` (one tensor of the same shape per rank)."""
    _check_tensor_list(tensor_list, "tensor_list", "all_gather")
    _check_tensor(tensor, "tensor", "all_gather")
    pg = _resolve(group, "all_gather")
    if pg is None:
        return None
    n = pg.size()
    _check_args(pg, "all_gather", tensor, err=_gather_list_error(tensor_list, tensor, n))
    h = _Host(tensor, writes=False)
    out = np.empty((n,) + h.arr.shape, h.arr.dtype)
    MPI = _mpi._MPI
    reqs = [pg._comm.Iallgather([h.bytes(), MPI.BYTE], [out.reshape(-1).view(np.uint8), MPI.BYTE])]

    def finish():
        for i, t in enumerate(tensor_list):
            _write(t, out[i])
    return _run(reqs, _what("all_gather", pg, tensor), pg, async_op, finish, tensor_list)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op: bool = False):
    """Every rank's ``input_tensor`` concatenated (along dim 0, or stacked) into ``output_tensor``."""
    _check_tensor(output_tensor, "output_tensor", "all_gather_into_tensor")
    _check_tensor(input_tensor, "input_tensor", "all_gather_into_tensor")
    pg = _resolve(group, "all_gather_into_tensor")
    if pg is None:
        return None
    n = pg.size()
    _check_args(pg, "all_gather_into_tensor", input_tensor, err=_gather_into_error(output_tensor, input_tensor, n))
    h = _Host(input_tensor, writes=False)
    o = _Host(output_tensor, writes=True)
    MPI = _mpi._MPI
    reqs = [pg._comm.Iallgather([h.bytes(), MPI.BYTE], [o.bytes(), MPI.BYTE])]
    return _run(reqs, _what("all_gather_into_tensor", pg, input_tensor), pg, async_op, o.done, [output_tensor])


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op: bool = False):  # noqa: A002
    """Reduce ``input`` over the group and give rank i the i-th of ``group size`` equal chunks of it."""
    _check_tensor(output, "output", "reduce_scatter_tensor")
    _check_tensor(input, "input", "reduce_scatter_tensor")
    pg = _resolve(group, "reduce_scatter_tensor")
    if pg is None:
        return None
    return _reduce_scatter(pg, "reduce_scatter_tensor", output, _Host(input, writes=False).arr, input, op, async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce the group's ``input_list``s element-wise; rank i gets the reduced ``input_list[i]``."""
    _check_tensor(output, "output", "reduce_scatter")
    _check_tensor_list(input_list, "input_list", "reduce_scatter")
    pg = _resolve(group, "reduce_scatter")
    if pg is None:
        return None
    n = pg.size()
    if len(input_list) != n or not all(_same(t, output) for t in input_list):
        err = ValueError(f"reduce_scatter: input_list must hold {n} tensors of {_desc(output)} (the output's), got "
                         f"{', '.join(_desc(t) for t in input_list)}")
        _check_args(pg, "reduce_scatter", output, _as_op(op, "reduce_scatter"), err=err)
    stacked = np.stack([_Host(t, writes=False).arr for t in input_list]) if input_list else None
    return _reduce_scatter(pg, "reduce_scatter", output, stacked, output, op, async_op)


def _reduce_scatter(pg, name, output, in_arr, shown, op, async_op):
    n = pg.size()
    op = _as_op(op, name)
    err = spec = None
    try:
        spec = _reduction(output.dtype, op, name)
        if in_arr.dtype != output._data.dtype:
            raise TypeError(f"{name}: input is {shown.dtype.name} but output is {output.dtype.name}")
        if in_arr.size != n * output.numel():
            raise ValueError(f"{name}: input {_desc(shown)} must hold {n} x the output {_desc(output)} "
                             f"({n * output.numel()} elements)")
    except Exception as e:       # noqa: BLE001
        err = e
    _check_args(pg, name, shown, op, err=err)
    o = _Host(output, writes=True)
    send = spec.buffer(in_arr)            # MPI only reads it: the input's own array when no conversion is needed
    recv = spec.buffer(o.arr)
    if n > 1:
        reqs = [pg._comm.Ireduce_scatter_block([send, spec.mpi_type], [recv, spec.mpi_type], spec.mpi_op)]
    else:
        np.copyto(recv, send)
        reqs = []

    def finish():
        spec.finish(recv, o.arr, n)
        o.done()
    return _run(reqs, _what(name, pg, shown), pg, async_op, finish, [output])


def _gather_list_error(tensor_list, tensor, n: int):
    """The error (or None) for all_gather's ``tensor_list``: one tensor like ``tensor`` per rank."""
    if len(tensor_list) != n:
        return ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors, expected one per rank ({n})")
    if not all(_same(t, tensor) for t in tensor_list):
        return ValueError(f"all_gather: every tensor of tensor_list must be {_desc(tensor)} like the input; got "
                          f"{', '.join(_desc(t) for t in tensor_list)}")
    return None


def _gather_into_error(output_tensor, input_tensor, n: int):
    """The error (or None) for all_gather_into_tensor: same dtype, and room for ``n`` inputs."""
    if output_tensor.dtype != input_tensor.dtype:
        return TypeError(f"all_gather_into_tensor: output is {output_tensor.dtype.name} but input is "
                         f"{input_tensor.dtype.name}")
    if output_tensor.numel() != n * input_tensor.numel():
        return ValueError(f"all_gather_into_tensor: output {_desc(output_tensor)} must hold {n} x the input "
                          f"{_desc(input_tensor)} ({n * input_tensor.numel()} elements)")
    return None


def _root_list_error(op: str, param: str, role: str, tensors, me: bool, n: int, tensor):
    """The error (or None) for the list of ``n`` tensors like ``tensor`` that only the root passes
    (gather's ``gather_list``, scatter's ``scatter_list``; ``role``: "destination" or "source")."""
    if me and not tensors:
        return ValueError(f"Argument ``{param}`` must be specified on {role} rank.")
    if not me and tensors:
        return ValueError(f"Argument ``{param}`` must NOT be specified on non-{role} ranks.")
    if me and (len(tensors) != n or not all(_same(t, tensor) for t in tensors)):
        return ValueError(f"{op}: {param} must hold {n} tensors of {_desc(tensor)}, got "
                          f"{', '.join(_desc(t) for t in tensors)}")
    return None


def _rooted_list_op(op: str, tensor, tensors, param: str, role: str, group, root_rank, group_root):
    """The checks gather and scatter share: ``tensor`` and the root's list ``tensors`` (named ``param``),
    the group and root (rooted on rank 0 by default); ``(pg, root, me, group size)``, or None off-group."""
    _check_tensor(tensor, "tensor", op)
    if tensors is not None:
        _check_tensor_list(tensors, param, op)
    rooted = _rooted(group, root_rank, group_root, op, "dst" if role == "destination" else "src", default0=True)
    if rooted is None:
        return None
    pg, root, me = rooted
    n = pg.size()
    _check_args(pg, op, tensor, root=root, err=_root_list_error(op, param, role, tensors, me, n, tensor))
    return pg, root, me, n


def gather(tensor, gather_list=None, dst=None, group=None, async_op: bool = False, group_dst=None):
    """Every rank's ``tensor`` into ``gather_list`` on rank ``dst`` (default 0)."""
    rooted = _rooted_list_op("gather", tensor, gather_list, "gather_list", "destination", group, dst, group_dst)
    if rooted is None:
        return None
    pg, root, me, n = rooted
    h = _Host(tensor, writes=False)
    MPI = _mpi._MPI
    out = np.empty((n,) + h.arr.shape, h.arr.dtype) if me else None
    recv = [out.reshape(-1).view(np.uint8), MPI.BYTE] if me else None
    reqs = [pg._comm.Igather([h.bytes(), MPI.BYTE], recv, root=root)]

    def finish():
        if me:
            for i, t in enumerate(gather_list):
                _write(t, out[i])
    return _run(reqs, _what("gather", pg, tensor), pg, async_op, finish, gather_list or [])


def scatter(tensor, scatter_list=None, src=None, group=None, async_op: bool = False, group_src=None):
    """``scatter_list[i]`` on rank ``src`` (default 0) into rank i's ``tensor``."""
    rooted = _rooted_list_op("scatter", tensor, scatter_list, "scatter_list", "source", group, src, group_src)
    if rooted is None:
        return None
    pg, root, me, n = rooted
    h = _Host(tensor, writes=True)
    MPI = _mpi._MPI
    send = None
    if me:
        stacked = np.ascontiguousarray(np.stack([_Host(t, writes=False).arr for t in scatter_list]))
        send = [stacked.reshape(-1).view(np.uint8), MPI.BYTE]
    reqs = [pg._comm.Iscatter(send, [h.bytes(), MPI.BYTE], root=root)]
    keep = send
    return _run(reqs, _what("scatter", pg, tensor), pg, async_op, lambda: (keep, h.done()), [tensor])
