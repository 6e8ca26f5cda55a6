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
"""
from __future__ import annotations

import datetime
import enum
import os
import pickle
import warnings
import zlib

import numpy as np

from . import _mpi
from ._mpi import DistError, DistBackendError, DistNetworkError, DistStoreError, PeerFailedError  # noqa: F401

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

default_pg_timeout = datetime.timedelta(minutes=30)      # torch's default for CPU backends
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
    """``Backend("mpi")`` is the string ``"mpi"``; the constants name torch's backends."""
    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"
    UNDEFINED = "undefined"

    def __new__(cls, name: str):
        if not isinstance(name, str):
            raise ValueError(f"Backend constructor parameter must be string-ish, but got: {type(name)}")
        return str.__new__(cls, name.lower())


class _WorldMeta(type):
    @property
    def WORLD(cls):                      # noqa: N802 - torch's name
        return _WORLD


class group(metaclass=_WorldMeta):      # noqa: N801 - torch's name
    """``dist.group.WORLD``: the default process group (None before ``init_process_group``)."""


class GroupMember(metaclass=_WorldMeta):
    """``GroupMember.WORLD`` and ``GroupMember.NON_GROUP_MEMBER`` (what ``new_group`` returns to a rank
    outside the group)."""
    NON_GROUP_MEMBER = -100


# ---- process groups -----------------------------------------------------------------------------------

class ProcessGroup:
    """A set of ranks with its own MPI communicator. ``rank()`` and ``size()`` are within the group."""

    def __init__(self, comm, ranks: list, timeout: float, name: str):
        self._comm = comm
        self._ranks = list(ranks)
        self._timeout = float(timeout)
        self.group_name = name

    def rank(self) -> int:
        return self._comm.Get_rank()

    def size(self) -> int:
        return len(self._ranks)

    def name(self) -> str:
        return "mpi"

    def __repr__(self) -> str:
        return f"ProcessGroup(backend='mpi', ranks={self._ranks}, name={self.group_name!r})"


_WORLD: ProcessGroup | None = None
_GROUPS: list = []
_group_count = 0


def _default() -> ProcessGroup:
    if _WORLD is None:
        raise ValueError(_NOT_INIT)
    return _WORLD


def _resolve(group, op: str):
    """The group to run ``op`` on, or None (with torch's warning) when this rank is not in it."""
    w = _default()
    if group is None:
        return w
    if group is GroupMember.NON_GROUP_MEMBER or (isinstance(group, int) and group == GroupMember.NON_GROUP_MEMBER):
        warnings.warn(f"Running {op} on global rank {w.rank()} which does not belong to the given group.",
                      stacklevel=3)
        return None
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"{op}: group must be a ProcessGroup made by new_group (or None), got {type(group).__name__}")
    if group._comm is None:
        raise ValueError(f"{op}: the process group {group.group_name!r} was destroyed")
    return group


def _timeout_seconds(timeout, default: datetime.timedelta) -> float:
    if timeout is None:
        return default.total_seconds()
    if isinstance(timeout, datetime.timedelta):
        s = timeout.total_seconds()
    elif isinstance(timeout, (int, float)):
        s = float(timeout)
    else:
        raise TypeError(f"timeout must be a datetime.timedelta, got {type(timeout).__name__}")
    if s <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    return s


def is_available() -> bool:
    """True when mpi4py is installed (ember's distributed backend is MPI)."""
    return _mpi.available()


def is_initialized() -> bool:
    return _WORLD is not None


def is_torchelastic_launched() -> bool:
    """True in processes started by ``python -m ember.distributed.run`` (torchrun's interface)."""
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def is_nccl_available() -> bool:
    return False


def is_gloo_available() -> bool:
    return False


def is_mpi_available() -> bool:
    return _mpi.available()


def _env_int(name: str):
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer, got {v!r}") from None


def init_process_group(backend=None, init_method=None, timeout=None, world_size: int = -1, rank: int = -1,
                       store=None, group_name: str = "", pg_options=None, device_id=None) -> None:
    """Join the default process group. Rank and world size come from MPI (start the processes with
    ``python -m ember.distributed.run`` or ``mpiexec``); ``RANK``/``WORLD_SIZE`` from the environment
    (``env://``) and explicit ``rank``/``world_size`` must agree with MPI's.

    ``backend`` may be None or ``"mpi"``; ``"gloo"`` (torch's CPU backend) is accepted and also runs on
    MPI, so torch scripts run unchanged. ``timeout`` (default 30 minutes) bounds every wait.
    """
    global _WORLD
    if _WORLD is not None:
        raise ValueError("trying to initialize the default process group twice!")
    name = None if backend is None else str(backend).lower()
    if name not in (None, "mpi", "gloo", "cpu:gloo", "cpu:mpi", "undefined"):
        if name in ("nccl", "cuda:nccl", "xccl", "hccl"):
            raise RuntimeError(f"init_process_group: backend {backend!r} needs accelerator devices, which ember "
                               "does not have; use backend='mpi'")
        raise ValueError(f"init_process_group: invalid backend {backend!r}; ember's backend is 'mpi' "
                         "(Open MPI through mpi4py)")
    if init_method is not None and not (isinstance(init_method, str)
                                        and init_method.split("://", 1)[0] in ("env", "tcp", "file")):
        raise ValueError(f"init_process_group: unsupported init_method {init_method!r} (expected env://, tcp:// "
                         "or file://; with MPI the launcher does the wire-up and the address is not used)")
    if store is not None:
        raise ValueError("init_process_group: ember's MPI backend takes no store (mpiexec does the wire-up)")
    seconds = _timeout_seconds(timeout, default_pg_timeout)
    MPI = _mpi.load()
    comm = MPI.COMM_WORLD
    mpi_rank, mpi_size = comm.Get_rank(), comm.Get_size()
    checks = [("world_size", world_size if world_size != -1 else None, mpi_size),
              ("rank", rank if rank != -1 else None, mpi_rank)]
    if init_method is None or init_method.startswith("env://"):
        checks += [("WORLD_SIZE (environment)", _env_int("WORLD_SIZE"), mpi_size),
                   ("RANK (environment)", _env_int("RANK"), mpi_rank)]
    for what, want, got in checks:
        if want is None or want == got:
            continue
        if mpi_size == 1 and not _mpi.launched_by_mpi():
            raise RuntimeError(f"init_process_group: {what} is {want} but this process was not started by MPI, "
                               "so it is alone (world size 1); start the processes with "
                               "'python -m ember.distributed.run --nproc-per-node N script.py' or "
                               "'mpiexec -n N python script.py'")
        raise ValueError(f"init_process_group: {what} is {want} but MPI gives {got} (MPI rank {mpi_rank} of "
                         f"{mpi_size}); ember takes rank and world size from MPI")
    _mpi.RUNTIME = _mpi.Runtime(MPI)
    _WORLD = ProcessGroup(comm.Dup(), list(range(mpi_size)), seconds, group_name or "0")
    if mpi_size > 1:
        _mpi.install_fault_handler()


def destroy_process_group(group=None) -> None:
    """Free ``group`` (default: the default group and every group made from it)."""
    global _WORLD
    if _WORLD is None:
        raise ValueError(_NOT_INIT)
    if group is None or group is _WORLD:
        for g in [_WORLD] + _GROUPS:
            _free(g)
        _GROUPS.clear()
        _WORLD = None
        _mpi.remove_fault_handler()
        rt, _mpi.RUNTIME = _mpi.RUNTIME, None
        if rt is not None:
            _free_comm(rt.fault)
        return
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    if group in _GROUPS:
        _GROUPS.remove(group)
    _free(group)


def _free(g: ProcessGroup) -> None:
    if g._comm is not None:
        _free_comm(g._comm)
        g._comm = None


def _free_comm(comm) -> None:
    try:
        comm.Free()
    except Exception:           # noqa: BLE001 - freeing is best effort (pending requests after a failure)
        pass


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization: bool = False,
              group_desc=None, device_id=None):
    """A group of ``ranks`` (global ranks; default all). Every rank must call it, as in torch; ranks
    outside the group get ``GroupMember.NON_GROUP_MEMBER``."""
    global _group_count
    w = _default()
    n = w.size()
    if ranks is None:
        ranks = list(range(n))
    ranks = sorted(int(r) for r in ranks)
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"new_group: ranks must be unique, got {ranks}")
    bad = [r for r in ranks if not 0 <= r < n]
    if bad:
        raise ValueError(f"new_group: ranks {bad} are out of range for a world of size {n}")
    if backend is not None and str(backend).lower() not in ("mpi", "gloo", "cpu:gloo"):
        raise ValueError(f"new_group: invalid backend {backend!r}; ember's backend is 'mpi'")
    seconds = _timeout_seconds(timeout, datetime.timedelta(seconds=w._timeout))
    # every rank must be here with the same ranks before the (blocking) communicator creation
    _check_args(w, "new_group", extra=zlib.crc32(repr(ranks).encode()))
    comm = w._comm.Create(w._comm.Get_group().Incl(ranks))
    _group_count += 1
    if comm == _mpi._MPI.COMM_NULL:
        return GroupMember.NON_GROUP_MEMBER
    g = ProcessGroup(comm, ranks, seconds, str(_group_count))
    _GROUPS.append(g)
    return g


def get_rank(group=None) -> int:
    """This process's rank in ``group`` (default: the world); -1 when it is not a member."""
    w = _default()
    if group is None:
        return w.rank()
    g = _resolve_quiet(group)
    return -1 if g is None else g.rank()


def get_world_size(group=None) -> int:
    w = _default()
    if group is None:
        return w.size()
    g = _resolve_quiet(group)
    return -1 if g is None else g.size()


def _resolve_quiet(group):
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"expected a ProcessGroup, got {type(group).__name__}")
    return group


def get_backend(group=None) -> str:
    _default()
    if group is GroupMember.NON_GROUP_MEMBER:
        raise ValueError("Invalid process group specified")
    return Backend.MPI


def get_process_group_ranks(group) -> list:
    g = _default() if group is None else _resolve_quiet(group)
    if g is None:
        raise ValueError("Invalid process group specified")
    return list(g._ranks)


def get_global_rank(group, group_rank: int) -> int:
    g = _default() if group is None else _resolve_quiet(group)
    if g is None or not 0 <= group_rank < g.size():
        raise ValueError(f"Group rank {group_rank} is not part of group {group}")
    return g._ranks[group_rank]


def get_group_rank(group, global_rank: int) -> int:
    g = _default() if group is None else _resolve_quiet(group)
    if g is None or global_rank not in g._ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {group}")
    return g._ranks.index(global_rank)


def _root(pg: ProcessGroup, global_rank, group_rank, op: str, what: str, default0: bool = False) -> int:
    """The group rank of a root given as a global rank (``src``/``dst``) or a group rank."""
    if group_rank is not None:
        if global_rank is not None:
            raise ValueError("Can't specify both group_rank and global_rank")
        r = int(group_rank)
        if not 0 <= r < pg.size():
            raise ValueError(f"{op}: group_{what}={r} is out of range for a group of size {pg.size()}")
        return r
    if global_rank is None:
        if not default0:
            raise ValueError("Must specify global_rank or group_rank")
        global_rank = pg._ranks[0] if pg is not _WORLD else 0
    global_rank = int(global_rank)
    if global_rank not in pg._ranks:
        raise ValueError(f"{op}: {what}={global_rank} is not a rank of the group (its ranks are {pg._ranks})")
    return pg._ranks.index(global_rank)


# ---- tensors in and out -----------------------------------------------------------------------------------

_DTYPE_NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
_DTYPE_CODE = {n: i for i, n in enumerate(_DTYPE_NAMES)}


def _check_tensor(t, param: str, op: str):
    from ..tensor import Tensor
    if not isinstance(t, Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{param}` of type Tensor but got "
                        f"{type(t)} instead ({op}).")


def _check_tensor_list(ts, param: str, op: str):
    from ..tensor import Tensor
    if not isinstance(ts, list) or not all(isinstance(t, Tensor) for t in ts):
        raise TypeError(f"Invalid function argument. Expected parameter `{param}` of type List[Tensor] but got "
                        f"{type(ts)} instead ({op}).")


def _desc(t) -> str:
    return f"{t.dtype.name}[{', '.join(str(d) for d in t.shape)}]"


class _Host:
    """A C-contiguous host array of a tensor's values; ``done()`` writes changes back and bumps the
    version. Device tensors go through ``.cpu()`` and ``copy_``; strided CPU tensors through a copy."""

    def __init__(self, t, writes: bool):
        self.t = t
        self.writes = writes
        self.host = None
        if t.device.type != "cpu":
            self.host = t.detach().cpu()
            src = self.host._data
        else:
            src = t._data
        self.arr = src if src.flags.c_contiguous else np.ascontiguousarray(src)
        self.copied = self.arr is not src

    def bytes(self):
        return self.arr.reshape(-1).view(np.uint8)

    def done(self) -> None:
        if not self.writes:
            return
        t = self.t
        if self.host is not None:
            if self.copied:
                np.copyto(self.host._data, self.arr)
            from ..autograd.grad_mode import no_grad
            with no_grad():
                t.copy_(self.host)
            return
        if self.copied:
            np.copyto(t._data, self.arr)
        t._bump()


class _Reduction:
    """How a dtype is reduced with one ReduceOp over MPI: the work buffer's NumPy dtype, the MPI datatype
    and op, and whether AVG divides afterwards."""

    def __init__(self, dt, op: ReduceOp, opname: str):
        MPI = _mpi._MPI
        if not isinstance(op, ReduceOp):
            raise TypeError(f"{opname}: op must be a ReduceOp, got {op!r}")
        if op is ReduceOp.PREMUL_SUM:
            raise ValueError(f"{opname}: ReduceOp.PREMUL_SUM is not supported by ember's MPI backend")
        name = dt.name
        bitwise = op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)
        self.avg = op is ReduceOp.AVG
        if name == "bool":
            if self.avg:
                raise RuntimeError(f"{opname}: ReduceOp.AVG is not defined for bool tensors")
            self.np = np.dtype(np.uint8)
            self.mpi_type = MPI.UINT8_T
            self.mpi_op = {ReduceOp.SUM: MPI.MAX, ReduceOp.MAX: MPI.MAX, ReduceOp.PRODUCT: MPI.MIN,
                           ReduceOp.MIN: MPI.MIN, ReduceOp.BAND: MPI.BAND, ReduceOp.BOR: MPI.BOR,
                           ReduceOp.BXOR: MPI.BXOR}[op]
            return
        if bitwise and dt.is_floating_point:
            raise RuntimeError(f"{opname}: ReduceOp.{op.name} needs an integral or bool tensor, got {name}")
        work = "float32" if name in ("float16", "bfloat16") else name
        self.np = np.dtype(work)
        self.mpi_type = {"uint8": MPI.UINT8_T, "int8": MPI.INT8_T, "int16": MPI.INT16_T, "int32": MPI.INT32_T,
                         "int64": MPI.INT64_T, "float32": MPI.FLOAT, "float64": MPI.DOUBLE}[work]
        self.mpi_op = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
                       ReduceOp.MIN: MPI.MIN, ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND,
                       ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}[op]

    def buffer(self, arr: np.ndarray) -> np.ndarray:
        """The array to reduce: ``arr`` itself when MPI reduces its dtype directly, else a converted copy."""
        if arr.dtype == self.np:
            return arr.reshape(-1)
        return arr.reshape(-1).astype(self.np)

    def finish(self, buf: np.ndarray, out: np.ndarray, n: int) -> None:
        """Divide for AVG and write the result into ``out`` (same number of elements)."""
        if self.avg:
            if buf.dtype.kind == "f":
                buf /= n
            else:
                q = np.abs(buf) // n
                np.copyto(buf, np.where(buf < 0, -q, q), casting="unsafe")
        flat = out.reshape(-1)
        if buf.__array_interface__["data"][0] != flat.__array_interface__["data"][0] or buf.dtype != flat.dtype:
            np.copyto(flat, buf, casting="unsafe")         # a converted work buffer (not the tensor's memory)


_REDUCTIONS: dict = {}


def _reduction(dt, op: ReduceOp, opname: str) -> _Reduction:
    """The (cached) _Reduction of ``dt`` with ``op``; raises for combinations that do not exist."""
    key = (dt.name, op)
    spec = _REDUCTIONS.get(key)
    if spec is None:
        spec = _REDUCTIONS[key] = _Reduction(dt, op, opname)
    return spec


def _as_op(op, opname: str) -> ReduceOp:
    if isinstance(op, ReduceOp):
        return op
    raise TypeError(f"{opname}: op must be a ReduceOp (e.g. ReduceOp.SUM), got {op!r}")


# ---- the argument check every collective starts with -------------------------------------------------------

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


class _What:
    """An operation's description for error messages, formatted only when one is raised."""
    __slots__ = ("op", "pg", "t")

    def __init__(self, op, pg, t):
        self.op, self.pg, self.t = op, pg, t

    def __str__(self) -> str:
        return _describe(self.op, self.pg, self.t)


def _what(op: str, pg: ProcessGroup, t=None) -> "_What":
    return _What(op, pg, t)


def _describe(op: str, pg: ProcessGroup, t=None) -> str:
    s = f"{op}" + (f" of {_desc(t)}" if t is not None else "")
    return s if pg is _WORLD else f"{s} in the group of ranks {pg._ranks}"


# ---- Work ---------------------------------------------------------------------------------------------------

class Work:
    """An operation in flight (``async_op=True``): ``wait()`` blocks until it is done (raising if a peer
    failed or the timeout passed), ``is_completed()`` asks without blocking, ``result()`` gives the
    output tensors."""

    def __init__(self, poll, what: str, timeout: float, finish=None, result=None, nbytes: int = 0):
        self._poll = poll
        self._nbytes = nbytes
        self._what = what
        self._timeout = timeout
        self._finish = finish
        self._result = result or []
        self._done = False
        self._exc = None

    def _complete(self) -> None:
        self._done = True
        if self._finish is not None:
            f, self._finish = self._finish, None
            f()

    def wait(self, timeout=None) -> bool:
        if not self._done:
            secs = self._timeout if timeout is None else _timeout_seconds(timeout, default_pg_timeout)
            try:
                _mpi.wait(self._poll, self._what, secs, self._nbytes)
            except Exception as e:
                self._exc = e
                raise
            self._complete()
        return True

    def is_completed(self) -> bool:
        if not self._done and self._poll():
            self._complete()
        return self._done

    def is_success(self) -> bool:
        return self.is_completed() and self._exc is None

    def exception(self):
        return self._exc

    def result(self) -> list:
        self.wait()
        return list(self._result)

    def synchronize(self) -> None:
        self.wait()

    def __repr__(self) -> str:
        return f"Work({self._what}, {'completed' if self._done else 'pending'})"


def _run(reqs: list, what: str, pg: ProcessGroup, async_op: bool, finish=None, result=None):
    MPI = _mpi._MPI
    nbytes = sum(t.numel() * t.dtype.itemsize for t in result or ())
    work = Work(lambda: MPI.Request.Testall(reqs), what, pg._timeout, finish, result, nbytes)
    work._reqs = reqs          # keep buffers' requests reachable
    if async_op:
        return work
    work.wait()
    return None


class _Done(Work):
    def __init__(self, result=None):
        super().__init__(lambda: True, "no-op", 0.0, None, result)
        self._done = True


# ---- collectives --------------------------------------------------------------------------------------------

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
    err = spec = None
    try:
        spec = _reduction(tensor.dtype, op, "all_reduce")
    except Exception as e:       # noqa: BLE001 - raised on every rank by _check_args
        err = e
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
    pg = _resolve(group, "broadcast")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "broadcast", "src")
    _check_args(pg, "broadcast", tensor, root=root)
    h = _Host(tensor, writes=pg.rank() != root)
    MPI = _mpi._MPI
    reqs = [pg._comm.Ibcast([h.bytes(), MPI.BYTE], root=root)] if pg.size() > 1 else []
    return _run(reqs, _what("broadcast", pg, tensor), pg, async_op, h.done, [tensor])


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op: bool = False, group_dst=None):
    """Reduce ``tensor`` over the group into rank ``dst``'s tensor (the others' are left as they are)."""
    _check_tensor(tensor, "tensor", "reduce")
    pg = _resolve(group, "reduce")
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "reduce", "dst")
    op = _as_op(op, "reduce")
    err = spec = None
    try:
        spec = _reduction(tensor.dtype, op, "reduce")
    except Exception as e:       # noqa: BLE001
        err = e
    _check_args(pg, "reduce", tensor, op, root=root, err=err)
    me = pg.rank() == root
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


def _same(t, ref) -> bool:
    return t.dtype == ref.dtype and tuple(t.shape) == tuple(ref.shape)


def all_gather(tensor_list, tensor, group=None, async_op: bool = False):
    """Every rank's ``tensor`` into every rank's ``tensor_list`` (one tensor of the same shape per rank)."""
    _check_tensor_list(tensor_list, "tensor_list", "all_gather")
    _check_tensor(tensor, "tensor", "all_gather")
    pg = _resolve(group, "all_gather")
    if pg is None:
        return None
    n = pg.size()
    err = None
    if len(tensor_list) != n:
        err = ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors, expected one per rank ({n})")
    elif not all(_same(t, tensor) for t in tensor_list):
        err = ValueError(f"all_gather: every tensor of tensor_list must be {_desc(tensor)} like the input; got "
                         f"{', '.join(_desc(t) for t in tensor_list)}")
    _check_args(pg, "all_gather", tensor, err=err)
    h = _Host(tensor, writes=False)
    out = np.empty((n,) + h.arr.shape, h.arr.dtype)
    MPI = _mpi._MPI
    reqs = [pg._comm.Iallgather([h.bytes(), MPI.BYTE], [out.reshape(-1).view(np.uint8), MPI.BYTE])]

    def finish():
        for i, t in enumerate(tensor_list):
            _write(t, out[i])
    return _run(reqs, _what("all_gather", pg, tensor), pg, async_op, finish, tensor_list)


def _write(t, values: np.ndarray) -> None:
    """Copy ``values`` into tensor ``t`` (its own layout, device through a host copy) and bump its version."""
    if t.device.type != "cpu":
        from ..autograd.grad_mode import no_grad
        from ..tensor import wrap
        with no_grad():
            t.copy_(wrap(np.ascontiguousarray(values), t.dtype))
        return
    np.copyto(t._data, values.reshape(t._data.shape))
    t._bump()


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op: bool = False):
    """Every rank's ``input_tensor`` concatenated (along dim 0, or stacked) into ``output_tensor``."""
    _check_tensor(output_tensor, "output_tensor", "all_gather_into_tensor")
    _check_tensor(input_tensor, "input_tensor", "all_gather_into_tensor")
    pg = _resolve(group, "all_gather_into_tensor")
    if pg is None:
        return None
    n = pg.size()
    err = None
    if output_tensor.dtype != input_tensor.dtype:
        err = TypeError(f"all_gather_into_tensor: output is {output_tensor.dtype.name} but input is "
                        f"{input_tensor.dtype.name}")
    elif output_tensor.numel() != n * input_tensor.numel():
        err = ValueError(f"all_gather_into_tensor: output {_desc(output_tensor)} must hold {n} x the input "
                         f"{_desc(input_tensor)} ({n * input_tensor.numel()} elements)")
    _check_args(pg, "all_gather_into_tensor", input_tensor, err=err)
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


def gather(tensor, gather_list=None, dst=None, group=None, async_op: bool = False, group_dst=None):
    """Every rank's ``tensor`` into ``gather_list`` on rank ``dst`` (default 0)."""
    _check_tensor(tensor, "tensor", "gather")
    if gather_list is not None:
        _check_tensor_list(gather_list, "gather_list", "gather")
    pg = _resolve(group, "gather")
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "gather", "dst", default0=True)
    n = pg.size()
    me = pg.rank() == root
    err = None
    if me and not gather_list:
        err = ValueError("Argument ``gather_list`` must be specified on destination rank.")
    elif not me and gather_list:
        err = ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    elif me and (len(gather_list) != n or not all(_same(t, tensor) for t in gather_list)):
        err = ValueError(f"gather: gather_list must hold {n} tensors of {_desc(tensor)}, got "
                         f"{', '.join(_desc(t) for t in gather_list)}")
    _check_args(pg, "gather", tensor, root=root, err=err)
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
    _check_tensor(tensor, "tensor", "scatter")
    if scatter_list is not None:
        _check_tensor_list(scatter_list, "scatter_list", "scatter")
    pg = _resolve(group, "scatter")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "scatter", "src", default0=True)
    n = pg.size()
    me = pg.rank() == root
    err = None
    if me and not scatter_list:
        err = ValueError("Argument ``scatter_list`` must be specified on source rank.")
    elif not me and scatter_list:
        err = ValueError("Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    elif me and (len(scatter_list) != n or not all(_same(t, tensor) for t in scatter_list)):
        err = ValueError(f"scatter: scatter_list must hold {n} tensors of {_desc(tensor)}, got "
                         f"{', '.join(_desc(t) for t in scatter_list)}")
    _check_args(pg, "scatter", tensor, root=root, err=err)
    h = _Host(tensor, writes=True)
    MPI = _mpi._MPI
    send = None
    if me:
        stacked = np.ascontiguousarray(np.stack([_Host(t, writes=False).arr for t in scatter_list]))
        send = [stacked.reshape(-1).view(np.uint8), MPI.BYTE]
    reqs = [pg._comm.Iscatter(send, [h.bytes(), MPI.BYTE], root=root)]
    keep = send
    return _run(reqs, _what("scatter", pg, tensor), pg, async_op, lambda: (keep, h.done()), [tensor])


# ---- objects ------------------------------------------------------------------------------------------------

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
    pg = _resolve(group, "broadcast_object_list")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "broadcast_object_list", "src", default0=True)
    err = None if isinstance(object_list, list) else TypeError(
        f"broadcast_object_list: object_list must be a list, got {type(object_list).__name__}")
    _check_args(pg, "broadcast_object_list", root=root, err=err,
                extra=len(object_list) if isinstance(object_list, list) else -2)
    MPI = _mpi._MPI
    me = pg.rank() == root
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
    pg = _resolve(group, "gather_object")
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "gather_object", "dst", default0=True)
    n = pg.size()
    me = pg.rank() == root
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
    pg = _resolve(group, "scatter_object_list")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "scatter_object_list", "src", default0=True)
    n = pg.size()
    me = pg.rank() == root
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


# ---- point to point -----------------------------------------------------------------------------------------
# A message is a header (dtype, shape) with tag 2*tag and the data with tag 2*tag+1, so a receiver whose
# tensor does not match raises naming both sides (after draining the data, so nothing is left pending).

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
