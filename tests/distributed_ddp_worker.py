"""DistributedDataParallel checks and fault programs, run by distributed_worker.py (see there)."""
from __future__ import annotations

import datetime
import os
import signal
import sys
import time

import numpy as np

import ember
import ember.distributed as dist
from ember.nn.parallel import DistributedDataParallel as DDP
from ember.bench.models import mlp

from distributed_worker import Checks, accelerator, expect_raises, finish, TIMEOUT

STEPS = 20
BATCH = 8          # per rank


def data(step: int, n: int, seed: int = 0):
    """The combined batch of ``step`` (every rank can make it; rank r uses rows r*BATCH..)."""
    rng = np.random.default_rng(1000 * seed + step)
    x = rng.standard_normal((n * BATCH, 784)).astype(np.float32)
    y = rng.integers(0, 10, n * BATCH)
    return ember.from_numpy(x), ember.from_numpy(y)


def shard(t, r):
    return t[r * BATCH:(r + 1) * BATCH]


def params(m) -> dict:
    return {k: np.array(v._data) for k, v in m.state_dict().items()}


def close(a: dict, b: dict, rtol=2e-5, atol=2e-6):
    bad = [k for k in a if not np.allclose(a[k], b[k], rtol=rtol, atol=atol)]
    if bad:
        k = bad[0]
        return f"{bad} differ; max |diff| of {k}: {np.abs(a[k] - b[k]).max()}"
    return None


def train(model, opt, steps, r, n, seed=0, ddp=True, start=0):
    loss_fn = ember.nn.CrossEntropyLoss()
    for s in range(start, start + steps):
        x, y = data(s, n, seed)
        if ddp:
            x, y = shard(x, r), shard(y, r)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()


def all_equal_across_ranks(d: dict) -> bool:
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, d)
    return all(all(np.array_equal(every[0][k], e[k]) for k in d) for e in every)


def main(out_path):
    c = Checks()
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=TIMEOUT))
    r, n = dist.get_rank(), dist.get_world_size()

    def launcher_env():
        env = os.environ
        got = (env.get("RANK"), env.get("WORLD_SIZE"), env.get("LOCAL_RANK"), env.get("LOCAL_WORLD_SIZE"))
        if got != (str(r), str(n), str(r), str(n)):
            return f"launcher environment {got}"
        if not dist.is_torchelastic_launched() or sys.argv[1:] != ["ddp", out_path]:
            return f"torchelastic flag or argv {sys.argv}"
    c.run("launcher_env", launcher_env)

    def mlp_steps():
        ember.manual_seed(r)                       # different initial weights: DDP broadcasts rank 0's
        model = mlp(ember)
        init = None
        if r == 0:
            init = params(model)
        ddp = DDP(model)
        opt = ember.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        train(ddp, opt, STEPS, r, n)
        mine = params(model)
        if not all_equal_across_ranks(mine):
            return "replicas differ after training"
        objs = [init]
        dist.broadcast_object_list(objs, src=0)
        ref = mlp(ember)
        ref.load_state_dict({k: ember.from_numpy(v) for k, v in objs[0].items()})
        ropt = ember.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
        train(ref, ropt, STEPS, r, n, ddp=False)     # one process, the combined batch
        err = close(mine, params(ref))
        if err:
            return err
        if ddp._ddp_stats()["backward_syncs"] != STEPS:
            return f"stats {ddp._ddp_stats()}"
    c.run("mlp_20_steps", mlp_steps)

    def no_sync():
        ember.manual_seed(0)
        model = mlp(ember)
        ref = mlp(ember)
        ref.load_state_dict(model.state_dict())
        ddp = DDP(model, bucket_cap_mb=0.1)            # several buckets
        if len(ddp._bucket_sizes()) < 3:
            return f"buckets {ddp._bucket_sizes()}"
        ddp._reset_ddp_stats()
        loss_fn = ember.nn.CrossEntropyLoss()
        with ddp.no_sync():
            for s in range(2):
                x, y = data(100 + s, n)
                loss_fn(ddp(shard(x, r)), shard(y, r)).backward()
        local = params_grads(model)
        if all_equal_across_ranks(local):
            return "gradients were synchronised inside no_sync"
        x, y = data(102, n)
        loss_fn(ddp(shard(x, r)), shard(y, r)).backward()          # synchronises the accumulated gradients
        for s in range(3):
            x, y = data(100 + s, n)
            loss_fn(ref(x), y).backward()
        st = ddp._ddp_stats()
        if (st["backward_syncs"], st["launched_in_backward"] + st["launched_at_end"]) != (1, len(ddp._bucket_sizes())):
            return f"one synchronised backward expected, all buckets launched once: {st}"
        if st["launched_in_backward"] < len(ddp._bucket_sizes()) - 1:
            return f"buckets should start while backward runs (only the last may wait for its end): {st}"
        if not ddp._reducer.background:
            return "the buckets in flight were not handed to the MPI progress thread"
        g = params_grads(model)
        if not all_equal_across_ranks(g):
            return "gradients differ across ranks after the synchronised backward"
        return close(g, params_grads(ref), rtol=1e-4, atol=1e-6)
    c.run("no_sync", no_sync)

    def compiled(kind):
        def run():
            ember.manual_seed(3)
            model = mlp(ember)
            ref = mlp(ember)
            ref.load_state_dict(model.state_dict())
            if kind == "inner":
                ddp = DDP(ember.compile(model, backend="aot_eager"))
                if "module.0.weight" not in ddp.state_dict():
                    return f"state_dict keys {list(ddp.state_dict())[:3]}"
                step_model = ddp
            else:
                step_model = ember.compile(DDP(model), backend="aot_eager")
            opt = ember.optim.SGD(model.parameters(), lr=0.05)
            train(step_model, opt, 4, r, n, seed=7)
            ropt = ember.optim.SGD(ref.parameters(), lr=0.05)
            train(ref, ropt, 4, r, n, seed=7, ddp=False)
            from ember.compiler import counters
            if counters["replays"] == 0:
                return "the compiled module never replayed"
            return close(params(model), params(ref))
        return run
    c.run("compiled_module", compiled("inner"))
    c.run("compile_ddp", compiled("outer"))

    def unused():
        class Branchy(ember.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = ember.nn.Linear(4, 4)
                self.b = ember.nn.Linear(4, 4)          # used by rank 0 only
                self.c = ember.nn.Linear(4, 4)          # used by no rank

            def forward(self, x):
                y = self.a(x)
                return self.b(y) if dist.get_rank() == 0 else y

        ember.manual_seed(0)
        m = Branchy()
        ddp = DDP(m, find_unused_parameters=True)
        x = ember.ones(2, 4) * (r + 1)
        ddp(x).sum().backward()
        every = [None] * n
        dist.all_gather_object(every, {k: None if p.grad is None else np.array(p.grad._data)
                                       for k, p in m.named_parameters()})
        ember.manual_seed(0)
        loc = Branchy()
        grads = []
        for i in range(n):
            for p in loc.parameters():
                p.grad = None
            y = loc.a(ember.ones(2, 4) * (i + 1))
            (loc.b(y) if i == 0 else y).sum().backward()
            grads.append({k: None if p.grad is None else np.array(p.grad._data) for k, p in loc.named_parameters()})
        for k in every[r]:
            got = every[r][k]
            if k.startswith("c."):
                if got is not None:
                    return f"{k}: no rank used it, its grad should stay None"
                continue
            want = sum(g[k] if g[k] is not None else 0 for g in grads) / n
            if got is None or not np.allclose(got, want, rtol=1e-6):
                return f"{k}: got {got}, want {want}"
        ember.manual_seed(0)
        strict = DDP(Branchy())
        expect_raises(lambda: strict(x).sum().backward(), RuntimeError, "find_unused_parameters=True", "c.weight")
    c.run("unused_parameters", unused)

    def buffers():
        ember.manual_seed(0)
        m = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4))
        ddp = DDP(m)
        x = ember.from_numpy(np.random.default_rng(r).standard_normal((6, 3)).astype(np.float32))
        ddp(x).sum().backward()
        rm = np.array(m[1].running_mean._data)
        if all_equal_across_ranks({"rm": rm}):
            return "running stats should differ after a forward on different data"
        ddp.eval()
        with ember.no_grad():
            ddp(x)                       # broadcasts rank 0's buffers first; eval mode keeps them
        if not all_equal_across_ranks({"rm": np.array(m[1].running_mean._data)}):
            return "buffers not broadcast before forward"
        # compiled around DDP: the buffer broadcast cannot be captured, so those calls run eagerly
        from ember.compiler import counters
        ember.manual_seed(0)
        m2 = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4))
        step = ember.compile(DDP(m2), backend="aot_eager")
        for _ in range(2):
            step(x).sum().backward()
            if all_equal_across_ranks({"rm": np.array(m2[1].running_mean._data)}):
                return "running stats should differ after a forward on different data"
        if not any("broadcasts buffers" in r for r in counters["fallback_reasons"]):
            return f"no eager fallback recorded: {counters['fallback_reasons']}"
        m2.eval()
        with ember.no_grad():
            step(x)
        if not all_equal_across_ranks({"rm": np.array(m2[1].running_mean._data)}):
            return "compiled DDP did not broadcast buffers before forward"
    c.run("buffers_broadcast", buffers)

    def state_dict():
        ember.manual_seed(0)
        m = mlp(ember)
        ddp = DDP(m)
        keys = list(ddp.state_dict())
        if keys[0] != "module.0.weight" or len(keys) != len(m.state_dict()) or ddp.module is not m:
            return f"keys {keys}"
        ddp.load_state_dict(ddp.state_dict())
    c.run("state_dict", state_dict)

    def initial_broadcast():
        ember.manual_seed(10 + r)
        m = ember.nn.Linear(5, 3)
        m.register_buffer("count", ember.tensor([float(r)]))
        DDP(m)
        if not all_equal_across_ranks(params(m)) or m.count.tolist() != [0.0]:
            return "parameters/buffers not rank 0's after construction"
    c.run("initial_broadcast", initial_broadcast)

    def shape_check():
        m = ember.nn.Linear(4, 3 + r)
        expect_raises(lambda: DDP(m), RuntimeError, "rank 0 has 'weight' float32[3, 4]",
                      "rank 1 has 'weight' float32[4, 4]")
    c.run("shape_verification", shape_check)

    def sampler_loader():
        from ember.utils.data import DataLoader, TensorDataset, DistributedSampler
        ds = TensorDataset(ember.arange(11))
        seen = []
        for epoch in range(2):
            s = DistributedSampler(ds, shuffle=True, seed=5)
            s.set_epoch(epoch)
            mine = [int(v) for (b,) in DataLoader(ds, batch_size=2, sampler=s) for v in b.tolist()]
            every = [None] * n
            dist.all_gather_object(every, mine)
            if sorted(sum(every, [])) != sorted(list(range(11)) + [every[0][0]] * (n * 6 - 11)):
                return f"epoch {epoch}: shares {every}"
            seen.append(every)
        if seen[0] == seen[1]:
            return "set_epoch did not change the order"
    c.run("sampler_loader", sampler_loader)

    def device_module():
        """A model on the accelerator: gradients averaged through host copies, left on the device."""
        dev, skip = accelerator()
        if skip:
            return skip
        ember.manual_seed(4)
        m = ember.nn.Sequential(ember.nn.Linear(6, 5), ember.nn.Tanh(), ember.nn.Linear(5, 3))
        ref = ember.nn.Sequential(ember.nn.Linear(6, 5), ember.nn.Tanh(), ember.nn.Linear(5, 3))
        ref.load_state_dict(m.state_dict())
        ddp = DDP(m.to(dev), device_ids=[0])              # inputs are moved to the module's device
        rng = np.random.default_rng(11)
        x = ember.from_numpy(rng.standard_normal((4 * n, 6)).astype(np.float32))
        ddp(x[4 * r:4 * r + 4]).square().mean().backward()
        ref(x).square().mean().backward()       # one process, the combined batch (the mean of the ranks' means)
        for (k, p), q in zip(m.named_parameters(), ref.parameters()):
            if p.grad is None or p.grad.device.type != dev:
                return f"{k}: grad {None if p.grad is None else p.grad.device}"
            if not np.allclose(p.grad.cpu()._data, q.grad._data, rtol=1e-5, atol=1e-6):
                return f"{k}: {p.grad.cpu()._data} vs {q.grad._data}"
    c.run("device_module", device_module)

    finish(c, out_path)


def params_grads(m) -> dict:
    return {k: np.array(p.grad._data) for k, p in m.named_parameters()}


# ---- faults: each run ends the job -----------------------------------------------------------------------

def fault(kind: str) -> None:
    timeout = 3.0 if kind == "timeout" else TIMEOUT
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=timeout))
    r = dist.get_rank()
    print(f"rank {r} ready", file=sys.stderr, flush=True)
    if kind == "raise":
        x = ember.ones(3)
        dist.all_reduce(x)
        if r == 1:
            raise ValueError("boom from rank 1")
        dist.all_reduce(x)             # rank 0 waits here for rank 1, which has failed
    elif kind == "kill":
        ember.manual_seed(0)
        ddp = DDP(mlp(ember))
        opt = ember.optim.SGD(ddp.parameters(), lr=0.01)
        for s in range(1000):
            if r == 1 and s == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            x, y = data(s, 2)
            opt.zero_grad()
            ember.nn.functional.cross_entropy(ddp(shard(x, r)), shard(y, r)).backward()
            opt.step()
    elif kind == "timeout":
        if r == 1:
            time.sleep(60)             # never joins the collective
        dist.all_reduce(ember.ones(2))
    print(f"rank {r} finished (unexpected)", file=sys.stderr, flush=True)
