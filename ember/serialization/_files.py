"""File handling that reading and writing share: what counts as a path, the chunk size of record I/O,
and the atomic write (a temp file renamed over the target) of ``save`` and ``save_safetensors``.
"""
from __future__ import annotations

import os
import tempfile

_CHUNK = 1 << 24


def _is_path(f) -> bool:
    return isinstance(f, (str, os.PathLike))



def _umask() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _atomic_write(path, write) -> None:
    """Write a file through a temp file in the same directory, renamed over ``path`` once complete."""
    real = os.path.realpath(os.fspath(path))
    parent = os.path.dirname(real)
    if not os.path.isdir(parent):
        raise RuntimeError(f"Parent directory {os.path.dirname(os.path.abspath(os.fspath(path)))} does not exist.")
    try:
        mode = os.stat(real).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(real) + ".", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh, tmp)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
