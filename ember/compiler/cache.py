"""The on-disk kernel cache of ``ember.compiler.build`` and the checks that make it safe to load from:
loading a library runs its code (see "Disk cache" and "Trust" in build's docstring).

Where the cache is (``cache_dir``) and how an entry is laid out (``_entry_paths``: ``.so``, ``.c`` and the
``.json`` sidecar); whether a directory, a file and the directories above them can be trusted
(``_why_untrusted``, ``_why_untrusted_ancestors``); private directories and files (``_mkdir_private``,
``_create_private``); the kernel directory (``_kernels_dir``); whether an entry is whole and may be
loaded (``_check_entry``, ``_try_load``); the per-key build lock (``_build_lock``) and moving finished
files into place (``_replace``); removing what killed writers left behind (``sweep_leftovers``).
``ember.devices.opencl``'s program cache uses the same checks.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import stat
import time
import tempfile
import threading
from contextlib import contextmanager

from .logs import log

try:
    import fcntl
except ImportError:    # no flock (Windows): concurrent builds may duplicate work but stay atomic
    fcntl = None

CACHE_SCHEMA = 1


_THREAD = threading.local()    # .root: the cache a background build writes to (the one it started with)


def cache_dir() -> str:
    """The cache root: ``EMBER_CACHE_DIR`` or ``~/.cache/ember`` (read on every call; a background build
    keeps the root of the time it started, ``tiers.py``)."""
    root = getattr(_THREAD, "root", None)
    if root is not None:
        return root
    return os.path.abspath(os.path.expanduser(os.environ.get("EMBER_CACHE_DIR") or "~/.cache/ember"))


def _sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _entry_paths(directory: str, key: str, stem_name: str) -> dict:
    stem = f"{stem_name}-{key[:24]}"
    return {"dir": directory, "stem": stem, "so": os.path.join(directory, stem + ".so"),
            "c": os.path.join(directory, stem + ".c"), "meta": os.path.join(directory, stem + ".json")}


# ---- trusting the cache: loading a library runs its code -----------------------------------------------

_CHECK_OWNER = hasattr(os, "geteuid")    # no POSIX owners and modes (Windows): nothing to check


def _writers(mode: int) -> str:
    return " and ".join(w for w, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if mode & bit)


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISREG, "regular file"), (stat.S_ISDIR, "directory"),
                       (stat.S_ISLNK, "symbolic link"), (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return kind
    return "special file"


def _why_untrusted(path: str, what: str, *, directory: bool) -> str | None:
    """None when ``path`` (not followed if a symlink) is a regular file (a directory) owned by this user
    and writable by nobody else, else why not. Raises OSError (FileNotFoundError) from ``lstat``."""
    st = os.lstat(path)
    if not (stat.S_ISDIR if directory else stat.S_ISREG)(st.st_mode):
        return f"{what} {path} is a {_kind(st.st_mode)}, not a {'directory' if directory else 'regular file'}"
    if not _CHECK_OWNER:
        return None
    uid = os.geteuid()
    if st.st_uid != uid:
        return f"{what} {path} is owned by uid {st.st_uid}, not by this user (uid {uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{what} {path} is writable by {_writers(st.st_mode)} (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _why_untrusted_ancestors(path: str) -> str | None:
    """None when no one but this user and root can rename or replace ``path`` (a resolved path) through
    one of the directories above it: each is owned by this user or root, and is writable by nobody else
    unless sticky (like /tmp, where others cannot rename what they do not own)."""
    if not _CHECK_OWNER:
        return None
    uid = os.geteuid()
    d = os.path.dirname(path)
    while True:
        st = os.lstat(d)
        if st.st_uid not in (uid, 0):
            return f"{d} (above the kernel cache) is owned by uid {st.st_uid}, who could replace the cache"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
            return (f"{d} (above the kernel cache) is writable by {_writers(st.st_mode)} without the sticky "
                    f"bit (mode {stat.S_IMODE(st.st_mode):o}), who could replace the cache")
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _mkdir_private(path: str) -> None:
    """Create ``path`` and missing parents with mode 0700, as the XDG base directory spec asks (an
    existing directory's mode is left alone)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return
    except FileNotFoundError:
        parent = os.path.dirname(path)
        if parent == path:
            raise
        _mkdir_private(parent)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            return
    os.chmod(path, 0o700)    # mkdir's mode went through the umask, which may have taken bits off


def _kernels_dir() -> tuple:
    """``(kernels directory, None)`` when libraries may be loaded from the cache (the directories are
    created 0700 where missing), else ``(None, why not)``. The path is resolved: no symlink is followed
    between this check and the loads."""
    root = cache_dir()
    try:
        _mkdir_private(root)
        root = os.path.realpath(root)
        why = _why_untrusted_ancestors(root) or _why_untrusted(root, "the cache directory", directory=True)
        if why:
            return None, why
        kernels = os.path.join(root, "kernels")
        _mkdir_private(kernels)
        why = _why_untrusted(kernels, "the kernel directory", directory=True)
        if why:
            return None, why
        _mkdir_private(os.path.join(kernels, ".locks"))
    except OSError as e:
        return None, f"cannot create or inspect the kernel cache {root}: {e}"
    return kernels, None


def _check_entry(paths: dict, key: str) -> str | None:
    """None when the cached entry is whole and trusted, else why it is not."""
    try:
        why = _why_untrusted(paths["so"], "the library", directory=False)
    except FileNotFoundError:
        return "not in the cache"
    except OSError as e:
        return f"library unreadable: {e}"
    if why:
        return why + "; not loaded"
    try:
        why = _why_untrusted(paths["meta"], "the metadata sidecar", directory=False)
        if why:
            return why
        with open(paths["meta"], encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return "metadata sidecar missing or unreadable"
    if not isinstance(meta, dict) or meta.get("schema") != CACHE_SCHEMA or meta.get("key") != key:
        return "metadata is for another key or schema"
    try:
        if os.path.getsize(paths["so"]) != meta.get("size"):
            return "library size differs from its metadata (truncated?)"
        if _sha256_file(paths["so"]) != meta.get("sha256"):
            return "library checksum differs from its metadata"
    except OSError as e:
        return f"library unreadable: {e}"
    return None


def _try_load(paths: dict, key: str):
    """(CDLL, None) for a whole cached entry, else (None, reason)."""
    why = _check_entry(paths, key)
    if why is not None:
        return None, why
    try:
        return ctypes.CDLL(paths["so"]), None
    except OSError as e:
        return None, f"dlopen failed: {e}"


@contextmanager
def _build_lock(directory: str, key: str):
    """An exclusive flock on one of 256 stripes, so one process builds a key while the others wait."""
    fd = None
    if fcntl is not None:
        try:
            fd = os.open(os.path.join(directory, ".locks", key[:2] + ".lock"),
                         os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
                         0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as e:    # no flock on this file system, or a bad lock file: builds stay atomic
            log("kernels", f"build lock unavailable ({e}); concurrent builds may duplicate work")
            if fd is not None:
                os.close(fd)
                fd = None
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)    # releases the flock


def _replace(src: str, dst: str, trash: str) -> None:
    """``os.replace(src, dst)``; a directory at ``dst``, which a file cannot replace, is first moved into
    ``trash`` (a directory on the same file system that the caller removes)."""
    try:
        os.replace(src, dst)
    except OSError:
        try:
            in_the_way = stat.S_ISDIR(os.lstat(dst).st_mode)
        except OSError:
            in_the_way = False
        if not in_the_way:
            raise
        os.rename(dst, tempfile.mkdtemp(prefix="stale-", dir=trash))    # onto an empty directory: allowed
        os.replace(src, dst)


def _create_private(path: str) -> int:
    """A new file readable and writable by this user only (whatever the umask), opened for writing."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    if hasattr(os, "fchmod"):
        os.fchmod(fd, 0o600)
    return fd


# ---- leftovers of killed writers ------------------------------------------------------------------------------

LEFTOVER_PREFIXES = (".build-", ".plan-")   # a build's private directory, a plan's temporary file
STALE_SECONDS = 3600.0      # a live writer's leftovers are seconds old (a build, a plan write)
_SWEPT: set = set()         # directories swept by this process


def sweep_leftovers(directory: str, *, stale_seconds: float = STALE_SECONDS) -> int:
    """Remove the temporary files and build directories (with their partial libraries) that a writer
    killed mid-way left in ``directory``: names starting with ``LEFTOVER_PREFIXES``, owned by this user
    and untouched for ``stale_seconds`` (a live writer's are seconds old, and it replaces them within
    its build). Once per directory per process, from the paths that write (a cache miss), never from a
    warm run's loads. Returns how many it removed; what it cannot remove stays."""
    if directory in _SWEPT:
        return 0
    _SWEPT.add(directory)
    now, removed = time.time(), 0
    try:
        names = [n for n in os.listdir(directory) if n.startswith(LEFTOVER_PREFIXES)]
    except OSError:
        return 0
    for name in names:
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
            if now - st.st_mtime < stale_seconds or (_CHECK_OWNER and st.st_uid != os.geteuid()):
                continue
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed += 1
        except OSError:
            continue
    if removed:
        log("kernels", f"removed {removed} leftover(s) of interrupted cache writes in {directory}")
    return removed


def replace_private(directory: str, path: str, data: bytes, prefix: str) -> None:
    """Put ``data`` at ``path`` atomically: a private temporary file in ``directory`` (mode 0600, a unique
    name: concurrent writers never share one; a ``prefix`` of LEFTOVER_PREFIXES lets ``sweep_leftovers``
    remove one a killed writer left), then ``os.replace``. Raises OSError, leaving nothing."""
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
