"""The program tests/test_distributed_syncbn.py starts with ``mpiexec -n 2``: ``python
distributed_syncbn_worker.py OUT.json``. Each rank trains SyncBatchNorm layers on its half of a batch;
the reference is one process's BatchNorm on the whole (concatenated) batch, computed by every rank from
the same seeded data. Rank r writes {check: [ok, detail]} to OUT.json.r."""
from __future__ import annotations

import datetime
import json
import sys
import traceback

import numpy as np

import ember
import ember.distributed as dist
import ember.nn as nn


def _close(name, got, want, tol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"{name}: shape {got.shape} != {want.shape}")
    err = float(np.abs(got - want).max()) if got.size else 0.0
    if err > tol * (1 + float(np.abs(want).max() if want.size else 0)):
        raise AssertionError(f"{name}: max abs diff {err}")


def check_layer(rank, n, shape, dtype, tol, **kw):
    """SyncBatchNorm on rank slices == BatchNorm on the whole batch: outputs, input gradients, running
    statistics over 3 steps, and the weight/bias gradients summed over ranks."""
    rng = np.random.default_rng(7)
    full = [rng.standard_normal(shape).astype(dtype) * 3 + 1.5 for _ in range(3)]
    ups = [rng.standard_normal(shape).astype(dtype) for _ in range(3)]
    per = shape[0] // n
    ref = nn.BatchNorm1d(shape[1], **kw) if len(shape) <= 3 else nn.BatchNorm2d(shape[1], **kw)
    syn = nn.SyncBatchNorm(shape[1], **kw)
    if dtype == np.float64:
        ref.double()
        syn.double()
    with ember.no_grad():
        if ref.weight is not None:
            ref.weight.copy_(ember.tensor(rng.standard_normal(shape[1]).astype(dtype)))
            ref.bias.copy_(ember.tensor(rng.standard_normal(shape[1]).astype(dtype)))
            syn.weight.copy_(ref.weight)
            syn.bias.copy_(ref.bias)
    for step in range(3):
        xf = ember.tensor(full[step], requires_grad=True)
        yf = ref(xf)
        (yf * ember.tensor(ups[step])).sum().backward()
        xs = ember.tensor(full[step][rank * per:(rank + 1) * per], requires_grad=True)
        ys = syn(xs)
        (ys * ember.tensor(ups[step][rank * per:(rank + 1) * per])).sum().backward()
        _close(f"out[{step}]", ys.detach().numpy(), yf.detach().numpy()[rank * per:(rank + 1) * per], tol)
        _close(f"grad_in[{step}]", xs.grad.numpy(), xf.grad.numpy()[rank * per:(rank + 1) * per], tol)
        if ref.running_mean is not None:
            _close(f"running_mean[{step}]", syn.running_mean.numpy(), ref.running_mean.numpy(), tol)
            _close(f"running_var[{step}]", syn.running_var.numpy(), ref.running_var.numpy(), tol)
            assert int(syn.num_batches_tracked) == step + 1
        if ref.weight is not None:
            gw, gb = syn.weight.grad.clone(), syn.bias.grad.clone()
            dist.all_reduce(gw)
            dist.all_reduce(gb)
            _close(f"grad_weight[{step}]", gw.numpy(), ref.weight.grad.numpy(), tol)
            _close(f"grad_bias[{step}]", gb.numpy(), ref.bias.grad.numpy(), tol)
            for p in list(ref.parameters()) + list(syn.parameters()):
                p.grad = None
    syn.eval()
    ref.eval()
    x = ember.tensor(full[0][:2])
    _close("eval", syn(x).detach().numpy(), ref(x).detach().numpy(), tol)


def main(out):
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=60))
    rank, n = dist.get_rank(), dist.get_world_size()
    results = {}
    cases = {
        "nc_float64": lambda: check_layer(rank, n, (8, 3), np.float64, 1e-10),
        "ncl_float32": lambda: check_layer(rank, n, (6, 4, 5), np.float32, 2e-5),
        "nchw_float32": lambda: check_layer(rank, n, (4, 2, 3, 3), np.float32, 2e-5),
        "no_affine_momentum_none": lambda: check_layer(rank, n, (8, 3, 2), np.float64, 1e-10, affine=False,
                                                       momentum=None),
        "no_running_stats": lambda: check_layer(rank, n, (8, 3, 2), np.float64, 1e-10, track_running_stats=False),
    }

    def converted_model():
        ember.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 1))
        s = nn.SyncBatchNorm.convert_sync_batchnorm(m)
        assert type(s[1]) is nn.SyncBatchNorm and s[1].weight is m[1].weight
        rng = np.random.default_rng(3)
        x = rng.standard_normal((8, 4)).astype(np.float32)
        ref_bn = nn.BatchNorm1d(6)
        ref_bn.load_state_dict(m[1].state_dict())
        h = m[0](ember.tensor(x)).detach()
        want = ref_bn(h).detach().numpy()[rank * 4:(rank + 1) * 4]
        got = s[1](m[0](ember.tensor(x[rank * 4:(rank + 1) * 4]))).detach().numpy()
        _close("converted", got, want, 2e-5)
    cases["convert_sync_batchnorm"] = converted_model
    for name, fn in cases.items():
        try:
            fn()
            results[name] = [True, ""]
        except Exception:
            results[name] = [False, traceback.format_exc()[-1500:]]
    with open(f"{out}.{rank}", "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
