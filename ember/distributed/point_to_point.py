"""Point to point: send/recv, isend/irecv and batch_isend_irecv.

A message is a header (dtype, shape) with tag 2*tag and the data with tag 2*tag+1, so a receiver whose
tensor does not match raises naming both sides (after draining the data, so nothing is left pending)."""
from __future__ import annotations

import numpy as np

from . import _mpi
from .arg_check import _HDR, _MAX_DIMS, _hdesc, _header
from .process_groups import _resolve
from .tensor_io import _DTYPE_NAMES, _Host, _check_tensor, _desc
from .work import Work


def _p2p_header(t) -> np.ndarray:
    return _header("barrier", t)


def _p2p_peer(pg, rank, group_rank, op, what):
    if group_rank is not None:
        if rank is not None:
            raise ValueError("Can't specify both group_rank and global_rank")
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"{op}: group_{what}={group_rank} is out of range for a group of size {pg.size()}")
        return int(group_rank)
    if rank is None:
        return None
    rank = int(rank)
    if rank not in pg._ranks:
        raise ValueError(f"{op}: {what}={rank} is not a rank of the group (its ranks are {pg._ranks})")
    return pg._ranks.index(rank)


def _tag(tag: int, op: str) -> int:
    tag = int(tag)
    MPI = _mpi._MPI
    ub = MPI.COMM_WORLD.Get_attr(MPI.TAG_UB) or 32767
    if not 0 <= 2 * tag + 1 <= ub:
        raise ValueError(f"{op}: tag must be in [0, {(ub - 1) // 2}], got {tag}")
    return 2 * tag


def isend(tensor, dst=None, group=None, tag: int = 0, group_dst=None):
    """Send ``tensor`` to rank ``dst``; returns a Work."""
    _check_tensor(tensor, "tensor", "isend")
    pg = _resolve(group, "isend")
    if pg is None:
        return None
    peer = _p2p_peer(pg, dst, group_dst, "isend", "dst")
    if peer is None:
        raise ValueError("Must specify global_rank or group_rank")
    if peer == pg.rank():
        raise ValueError("Invalid destination rank: destination rank should not be the same as the rank of the "
                         "current process.")
    t2 = _tag(tag, "isend")
    MPI = _mpi._MPI
    h = _Host(tensor, writes=False)
    hdr = _p2p_header(tensor)
    data = h.arr.copy() if not h.copied else h.arr     # the caller may change the tensor while in flight
    reqs = [pg._comm.Isend([hdr, MPI.INT64_T], dest=peer, tag=t2),
            pg._comm.Isend([data.reshape(-1).view(np.uint8), MPI.BYTE], dest=peer, tag=t2 + 1)]
    w = Work(lambda: MPI.Request.Testall(reqs), f"send of {_desc(tensor)} to rank {pg._ranks[peer]}",
             pg._timeout, None, [tensor])
    w._keep = (hdr, data, reqs)
    return w


def send(tensor, dst=None, group=None, tag: int = 0, group_dst=None) -> None:
    """Send ``tensor`` to rank ``dst`` and wait until it has been sent."""
    w = isend(tensor, dst, group, tag, group_dst)
    if w is not None:
        w.wait()


class _Recv:
    """The stages of a receive: the header (checked against the tensor), then the data."""

    def __init__(self, pg, tensor, peer, tag2):
        MPI = _mpi._MPI
        self.pg, self.tensor, self.tag2 = pg, tensor, tag2
        self.hdr = np.empty(_HDR, np.int64)
        self.status = MPI.Status()
        src = MPI.ANY_SOURCE if peer is None else peer
        self.req = pg._comm.Irecv([self.hdr, MPI.INT64_T], source=src, tag=tag2)
        self.stage = 0
        self.source = peer
        self.error = None

    def poll(self) -> bool:
        MPI = _mpi._MPI
        if self.stage == 0:
            if not self.req.Test(self.status):
                return False
            self.source = self.status.Get_source()
            mine = _p2p_header(self.tensor)
            ok = (self.hdr == mine).all()
            self.h = _Host(self.tensor, writes=True)
            if ok:
                buf = self.h.bytes()
            else:
                sender = self.pg._ranks[self.source]
                self.error = RuntimeError(
                    f"ember.distributed.recv: rank {sender} sent {_hdesc(self.hdr)} but rank "
                    f"{self.pg._ranks[self.pg.rank()]} receives into {_desc(self.tensor)}; send and recv must "
                    "use the same shape and dtype")
                nd = int(self.hdr[6])
                numel = int(np.prod(self.hdr[7:7 + nd])) if 0 <= nd <= _MAX_DIMS else 0
                size = numel * np.dtype(_np_of(_DTYPE_NAMES[int(self.hdr[1])])).itemsize
                buf = np.empty(size, np.uint8)
            self.buf = buf
            self.req = self.pg._comm.Irecv([buf, MPI.BYTE], source=self.source, tag=self.tag2 + 1)
            self.stage = 1
        if self.stage == 1:
            if not self.req.Test():
                return False
            self.stage = 2
            if self.error is not None:
                raise self.error
            self.h.done()
        return True


def _np_of(name: str):
    from .. import dtypes
    return getattr(dtypes, name).np


def irecv(tensor, src=None, group=None, tag: int = 0, group_src=None):
    """Receive into ``tensor`` from rank ``src`` (any rank when None); returns a Work."""
    _check_tensor(tensor, "tensor", "irecv")
    pg = _resolve(group, "irecv")
    if pg is None:
        return None
    peer = _p2p_peer(pg, src, group_src, "irecv", "src")
    if peer is not None and peer == pg.rank():
        raise ValueError("Invalid source rank: source rank should not be the same as the rank of the current "
                         "process.")
    st = _Recv(pg, tensor, peer, _tag(tag, "irecv"))
    frm = "any rank" if peer is None else f"rank {pg._ranks[peer]}"
    w = Work(st.poll, f"recv of {_desc(tensor)} from {frm}", pg._timeout, None, [tensor])
    w._state = st
    w._source_rank = lambda: pg._ranks[st.source] if st.source is not None else -1
    return w


def recv(tensor, src=None, group=None, tag: int = 0, group_src=None) -> int:
    """Receive into ``tensor`` from rank ``src`` (any rank when None); returns the sender's rank."""
    w = irecv(tensor, src, group, tag, group_src)
    if w is None:
        return -1
    w.wait()
    return w._source_rank()


class P2POp:
    """One operation for ``batch_isend_irecv``: ``P2POp(dist.isend, tensor, peer, group=None, tag=0)``."""

    def __init__(self, op, tensor, peer=None, group=None, tag: int = 0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` or "
                             "``torch.distributed.irecv``.")
        self.op, self.tensor, self.peer, self.group = op, tensor, peer, group
        self.tag, self.group_peer = tag, group_peer


def batch_isend_irecv(p2p_op_list) -> list:
    """Start every P2POp of the list; returns their Works."""
    if not isinstance(p2p_op_list, list) or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type ``torch.distributed.P2POp``.")
    return [p.op(p.tensor, p.peer, p.group, p.tag, p.group_peer) for p in p2p_op_list]
