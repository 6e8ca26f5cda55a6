"""Running the C compiler for ``build.compile_source``: a library's translation units compiled at once
(as many compilers as this process may use cores, the costliest first), then linked.

``_build`` writes the source, the library and its metadata sidecar into a private directory (the
caller moves them into the cache); a failed compilation raises :class:`CompileError` with the compiler's
stderr and keeps the failing unit's source. ``EMBER_BUILD_JOBS`` sets the number of compilers; a
background build (``tiers.py``) runs one fewer.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time

from .cache import CACHE_SCHEMA, _create_private, _mkdir_private, _sha256_file


class CompileError(RuntimeError):
    """The C compiler rejected a generated source. ``.stderr``, ``.command``, ``.source_path``."""

    def __init__(self, message: str, *, stderr: str = "", command: tuple = (), source_path: str | None = None):
        super().__init__(message)
        self.stderr = stderr
        self.command = command
        self.source_path = source_path



_BACKGROUND = threading.local()    # .active: this thread builds in the background (tiers.py)


def _jobs() -> int:
    """How many compilers run at once: ``EMBER_BUILD_JOBS``, else the cores this process may use; a
    background build (``tiers.py``) runs one fewer (at least one), leaving a core to the caller."""
    try:
        n = int(os.environ.get("EMBER_BUILD_JOBS", "0"))
    except ValueError:
        n = 0
    if n <= 0:
        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            n = os.cpu_count() or 1
        if getattr(_BACKGROUND, "active", False):
            n -= 1
    return max(1, n)


def _run_compilers(commands: list, cwd: str, stem: str, costs=None) -> list:
    """Run the compiler commands, up to ``_jobs()`` at a time (waiting passively on each; the costliest
    first by ``costs``, so the cores finish together), and return ``[(command, exit code, stderr)]`` in
    order; after a failure the ones not started are skipped."""
    env = {**os.environ, "LC_ALL": "C"}    # English diagnostics, whatever the user's locale
    jobs, results, running, failed = _jobs(), [None] * len(commands), [], False
    pending = list(enumerate(commands))
    if costs is not None:
        pending.sort(key=lambda item: -costs[item[0]])
    try:
        while pending or running:
            while pending and len(running) < jobs and not failed:
                i, cmd = pending.pop(0)
                err = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
                try:
                    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, env=env)
                except OSError as e:
                    err.close()
                    raise CompileError(f"could not run the C compiler for {stem}: {e}", command=tuple(cmd)) from e
                running.append((i, cmd, proc, err))
            if not running:
                break
            i, cmd, proc, err = _first_done(running)
            code = proc.wait()
            err.seek(0)
            results[i] = (cmd, code, err.read())
            err.close()
            failed |= code != 0
    finally:
        for _, _, proc, err in running:     # (an exception above: nothing is left running)
            proc.kill()
            proc.wait()
            err.close()
    return [r for r in results if r is not None]


def _first_done(running: list):
    """Remove and return the first of the running compilers to finish (passive: a blocking wait when
    only one runs, else a short poll)."""
    while len(running) > 1:
        for n, item in enumerate(running):
            if item[2].poll() is not None:
                return running.pop(n)
        time.sleep(0.002)
    return running.pop(0)


def _unit_cost(text: str, flags) -> float:
    """About how long a unit compiles, for the launch order: its length, less at -O0/-O1."""
    opt = next((f for f in reversed(flags) if f.startswith("-O")), "-O3")
    return len(text) * {"-O0": 0.4, "-O1": 0.7}.get(opt, 1.0)


def _build(units, stem, tmp, key, argv, cflags, ldflags, two_step, meta_extra, stats, failed_dir) -> float:
    """Compile the translation units (``[(text, flags of that unit)]``) into ``stem.so`` and write
    ``stem.json`` (and ``stem.c``, the units one after the other) in the private directory ``tmp``; the
    files are readable and writable by this user only. A failed compilation keeps the failing unit's
    source in ``failed_dir`` (None: a new private temporary directory)."""
    flags = [list(f) for _, f in units]
    units = [text for text, _ in units]
    src, so = stem + ".c", stem + ".so"    # relative names keep the binary independent of `tmp`
    with open(_create_private(os.path.join(tmp, src)), "w", encoding="utf-8") as f:
        f.write(units[0] if len(units) == 1 else "".join(
            f"/* ==== translation unit {i} of {len(units)} ==== */\n{u}" for i, u in enumerate(units)))
    names = [src] if len(units) == 1 else [f"{stem}-u{i}.c" for i in range(len(units))]
    if len(units) > 1:
        for name, text in zip(names, units):
            with open(_create_private(os.path.join(tmp, name)), "w", encoding="utf-8") as f:
                f.write(text)
    if two_step or len(units) > 1:
        # compile with the flags (each unit in a process of its own), link without -ffast-math (see the
        # module docstring: crtfastmath.o)
        objs = [name[:-2] + ".o" for name in names]
        stages = [[[*argv, *cflags, *f, "-c", "-o", o, c] for c, o, f in zip(names, objs, flags)],
                  [[*argv, *[f for f in cflags if f != "-ffast-math"], "-o", so, *objs, *ldflags]]]
    else:
        stages = [[[*argv, *cflags, *flags[0], "-o", so, src, *ldflags]]]
    costs = [_unit_cost(t, f) for t, f in zip(units, flags)]
    reuse = {}
    if len(stages) > 1 and len(units) > 1:
        # a unit with flags of its own compiles the same whatever the library's -O (tiers.py's two builds
        # share the entries' unit): its object from an earlier build in this process is copied
        reuse = {i: _object_key(argv, cflags, flags[i], units[i]) for i in range(len(units)) if flags[i]}
        for i, okey in reuse.items():
            if _copy_object(okey, os.path.join(tmp, objs[i])):
                stages[0][i] = None
        costs = [c for c, cmd in zip(costs, stages[0]) if cmd is not None]
        stages[0] = [cmd for cmd in stages[0] if cmd is not None]
    start = time.perf_counter()
    for stage in stages:
        for cmd, code, stderr in _run_compilers(stage, tmp, stem, costs if len(stage) > 1 else None):
            if code == 0:
                continue
            seconds = time.perf_counter() - start
            _count(stats, seconds)
            unit = next((c for c in names if c in cmd), src)
            kept = _keep_failed_source(os.path.join(tmp, unit), unit[:-2], failed_dir)
            stderr = stderr.strip()
            raise CompileError(f"C compilation of {stem} failed (exit {code}); source kept at "
                               f"{kept}\ncommand: {shlex.join(cmd)}\n{stderr}",
                               stderr=stderr, command=tuple(cmd), source_path=kept)
    seconds = time.perf_counter() - start
    _count(stats, seconds)
    for i, okey in reuse.items():
        _keep_object(okey, os.path.join(tmp, objs[i]))
    built = os.path.join(tmp, so)
    os.chmod(built, 0o700)     # the compiler's mode went through the umask: group-writable under 002
    meta = {"schema": CACHE_SCHEMA, "key": key, "name": stem, "sha256": _sha256_file(built),
            "size": os.path.getsize(built), "command": shlex.join(stages[-1][-1]), "units": len(units),
            "compile_seconds": round(seconds, 4), "created": time.time(), **meta_extra}
    with open(_create_private(os.path.join(tmp, stem + ".json")), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
    return seconds


_THREAD = threading.local()    # .compiles: the libraries this thread built (build.thread_compiles)


def _count(stats, seconds: float) -> None:
    stats["compiles"] += 1
    stats["compile_seconds"] += seconds
    _THREAD.compiles = getattr(_THREAD, "compiles", 0) + 1


_OBJECTS: dict = {}      # object key -> a compiled unit kept by this process (in a private directory)
_OBJECTS_DIR: list = []


def _object_key(argv, cflags, unit_flags, text) -> str:
    if any(f.startswith("-O") for f in unit_flags):
        cflags = [f for f in cflags if not f.startswith("-O")]     # (gcc: the last -O is the one in effect)
    return hashlib.sha256(json.dumps([list(argv), list(cflags), list(unit_flags), text]).encode()).hexdigest()


def _copy_object(okey: str, dst: str) -> bool:
    kept = _OBJECTS.get(okey)
    if kept is None:
        return False
    try:
        shutil.copyfile(kept, dst)
    except OSError:
        return False
    return True


def _keep_object(okey: str, src: str) -> None:
    if okey in _OBJECTS:
        return
    try:
        if not _OBJECTS_DIR:
            _OBJECTS_DIR.append(tempfile.mkdtemp(prefix="ember-objects-"))     # 0700, removed at exit
            atexit.register(shutil.rmtree, _OBJECTS_DIR[0], True)
        kept = os.path.join(_OBJECTS_DIR[0], okey[:32] + ".o")
        shutil.copyfile(src, kept)
        _OBJECTS[okey] = kept
    except OSError:
        pass


def _keep_failed_source(src: str, stem: str, failed_dir: str | None) -> str:
    if failed_dir is None:
        failed_dir = tempfile.mkdtemp(prefix="ember-failed-")
    else:
        _mkdir_private(failed_dir)
    kept = os.path.join(failed_dir, stem + ".c")
    os.replace(src, kept)
    return kept
