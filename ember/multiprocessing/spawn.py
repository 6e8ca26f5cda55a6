"""torch.multiprocessing.spawn: start ``nprocs`` processes running ``fn(i, *args)`` and join them; a child
that raises makes ``join`` stop the others and raise ``ProcessRaisedException`` carrying the child's
traceback, a child that dies (exit code or signal) raises ``ProcessExitedException``."""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback


class ProcessException(Exception):
    """A child process of ``spawn`` failed: ``error_index`` is its rank, ``pid`` its process id."""

    __slots__ = ["error_index", "error_pid"]

    def __init__(self, msg: str, error_index: int, pid: int):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """The child raised an exception; the message holds its traceback."""

    def __init__(self, msg: str, error_index: int, error_pid: int):
        super().__init__(msg, error_index, error_pid)


class ProcessExitedException(ProcessException):
    """The child ended with a non-zero exit code or was killed by a signal."""

    __slots__ = ["exit_code"]

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int, signal_name: str | None = None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn, i, args, error_file):
    """The child's entry: ``fn(i, *args)``; an exception's traceback goes to ``error_file`` (exit code 1)."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except Exception:
        with open(error_file, "wb") as f:
            pickle.dump(traceback.format_exc(), f)
        sys.exit(1)


class ProcessContext:
    """The processes of one ``spawn`` call (``join=False`` returns it)."""

    def __init__(self, processes, error_files):
        self.error_files = error_files
        self.processes = processes
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [int(p.pid) for p in self.processes]

    def _stop_all(self, grace_period=None):
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        end = time.monotonic() + (grace_period or 0)
        for p in self.processes:
            p.join(max(0.0, end - time.monotonic()) if grace_period else None)
            if p.is_alive():          # still running after terminate and the grace period
                p.kill()
                p.join()

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """Wait (up to ``timeout`` s) for the processes; True once all ended successfully, False while some
        still run. The first failure stops the others and raises (see the module docstring)."""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        failed = None
        for sentinel in ready:
            i = self.sentinels.pop(sentinel)
            p = self.processes[i]
            p.join()
            if p.exitcode != 0:
                failed = i
                break
        if failed is None:
            return not self.sentinels
        self._stop_all(grace_period)
        p = self.processes[failed]
        path = self.error_files[failed]
        if os.path.exists(path) and os.path.getsize(path):
            with open(path, "rb") as f:
                trace = pickle.load(f)
            raise ProcessRaisedException(f"\n\n-- Process {failed} terminated with the following error:\n{trace}",
                                         failed, p.pid)
        code = p.exitcode
        if code < 0:
            name = signal.Signals(-code).name
            raise ProcessExitedException(f"process {failed} terminated with signal {name}", failed, p.pid, code, name)
        raise ProcessExitedException(f"process {failed} terminated with exit code {code}", failed, p.pid, code)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start ``nprocs`` processes running ``fn(i, *args)`` with ``start_method``; join them when ``join``
    (returning None), else return their ``ProcessContext``."""
    ctx = multiprocessing.get_context(start_method)
    error_files, processes = [], []
    for i in range(nprocs):
        fd, path = tempfile.mkstemp(prefix="ember-spawn-")
        os.close(fd)
        error_files.append(path)
        p = ctx.Process(target=_wrap, args=(fn, i, args, path), daemon=daemon)
        p.start()
        processes.append(p)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    try:
        while not context.join():
            pass
    finally:
        for path in error_files:
            try:
                os.unlink(path)
            except OSError:
                pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """torch.multiprocessing.spawn (see ``start_processes``)."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
