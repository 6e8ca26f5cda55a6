"""Operations in flight: :class:`Work` (what ``async_op=True`` returns), running an operation's MPI requests
(``_run``) and an operation's description for error messages."""
from __future__ import annotations

from . import _mpi, process_groups
from .process_groups import ProcessGroup, _timeout_seconds, default_pg_timeout
from .tensor_io import _desc


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
    return s if pg is process_groups._WORLD else f"{s} in the group of ranks {pg._ranks}"


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
