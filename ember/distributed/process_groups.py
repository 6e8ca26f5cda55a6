"""Process groups: the default group and its state (``init_process_group``, ``destroy_process_group``),
``new_group``, ranks and sizes, the backend names, and resolving a call's group and root rank."""
from __future__ import annotations

import datetime
import os
import warnings
import zlib

from . import _mpi
from .arg_check import _check_args

default_pg_timeout = datetime.timedelta(minutes=30)      # torch's default for CPU backends
_NOT_INIT = "Default process group has not been initialized, please make sure to call init_process_group."


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


def _member_group(group):
    """``group`` (the world for None) as a ProcessGroup, or None when this process is not a member; the
    default group must be initialised."""
    w = _default()
    return w if group is None else _resolve_quiet(group)


def get_rank(group=None) -> int:
    """This process's rank in ``group`` (default: the world); -1 when it is not a member."""
    g = _member_group(group)
    return -1 if g is None else g.rank()


def get_world_size(group=None) -> int:
    """The number of processes in ``group`` (default: the world); -1 when this one is not a member."""
    g = _member_group(group)
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


def _rooted(group, global_rank, group_rank, op: str, what: str, default0: bool = False):
    """``(pg, root, me)`` for a rooted collective: the resolved group, the root's group rank and whether
    this rank is the root; None when this rank is not a member of ``group`` (the op does nothing)."""
    pg = _resolve(group, op)
    if pg is None:
        return None
    root = _root(pg, global_rank, group_rank, op, what, default0)
    return pg, root, pg.rank() == root


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
