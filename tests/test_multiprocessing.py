"""ember.multiprocessing (torch.multiprocessing's path): spawn with torch's signature and errors,
Process/Queue/get_context re-exported from the standard module, tensors through queues."""
import os
import sys

import numpy as np
import pytest
import torch.multiprocessing as tmp

import ember
import ember.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mp_children  # noqa: E402


def test_same_names_as_torch():
    public = [n for n in dir(tmp) if not n.startswith("_") and n not in ("torch", "sys", "multiprocessing", "reducer",
                                                                            "reductions", "init_reductions",
                                                                            "ENV_VAR_PARALLEL_START", "SpawnContext")]
    missing = [n for n in public if not hasattr(mp, n)]
    assert not missing, missing
    assert mp.cpu_count() == os.cpu_count()
    assert mp.get_context("spawn").get_start_method() == "spawn"
    assert issubclass(mp.ProcessRaisedException, mp.ProcessException) and issubclass(mp.ProcessException, Exception)
    assert ember.multiprocessing is mp
    import inspect
    assert str(inspect.signature(mp.spawn)) == str(inspect.signature(tmp.spawn))


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_spawn_runs_fn_with_rank_and_args(tmp_path, method):
    assert mp.spawn(mp_children.write_rank, args=(str(tmp_path), 10.0), nprocs=2, start_method=method) is None
    for i in range(2):
        got = ember.load(str(tmp_path / f"rank{i}.pt"))
        assert got["rank"] == i
        np.testing.assert_array_equal(got["t"].numpy(), np.arange(4) * 10.0 + i)


def test_child_exception_raises_process_raised_exception_with_its_traceback():
    with pytest.raises(mp.ProcessRaisedException) as info:
        mp.spawn(mp_children.fail_on_one, nprocs=2, start_method="fork")
    e = info.value
    assert e.error_index == 1 and isinstance(e.pid, int)
    assert "-- Process 1 terminated with the following error:" in str(e)
    assert "ValueError: child 1 refuses: bad shard" in str(e) and "Traceback" in str(e)


def test_child_exit_code_and_signal_raise_process_exited_exception():
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit code 3") as info:
        mp.spawn(mp_children.exit_with, args=(3,), nprocs=2, start_method="fork")
    assert info.value.exit_code == 3
    with pytest.raises(mp.ProcessExitedException, match="signal SIGKILL") as info:
        mp.spawn(mp_children.kill_self, nprocs=1, start_method="fork")
    assert info.value.signal_name == "SIGKILL" and info.value.exit_code == -9


def test_join_false_returns_a_process_context():
    ctx = mp.spawn(mp_children.fail_on_one, nprocs=1, join=False, start_method="fork")
    assert isinstance(ctx, mp.ProcessContext) and len(ctx.pids()) == 1
    while not ctx.join(timeout=30):
        pass


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_tensors_through_queues_arrive_intact(method):
    ctx = mp.get_context(method)
    inq, outq = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=mp_children.double_through_queues, args=(inq, outq))
    p.start()
    sent = [ember.arange(6, dtype=ember.float32).reshape(2, 3), ember.tensor([1, 2, 3], dtype=ember.int64),
            ember.randn(3, 4, dtype=ember.float64).t(), ember.nn.Parameter(ember.ones(2))]
    for t in sent:
        inq.put(t)
    inq.put(None)
    got = [outq.get(timeout=60) for _ in sent]
    p.join(60)
    assert p.exitcode == 0
    for t, (doubled, dt, shape, rg, cls) in zip(sent, got):
        assert dt is t.dtype and shape == tuple(t.shape) and rg == t.requires_grad
        np.testing.assert_array_equal(doubled.detach().numpy(), (t * 2).detach().numpy())
    assert got[3][4] == "Parameter"
