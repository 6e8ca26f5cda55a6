"""``python -m ember.demo``: what ember does, end to end, in about a minute on two cores.

1. A tiny linear regression fitted with autograd (the loss falls).
2. An MLP and a small CNN trained on scikit-learn's bundled digits data set (no download), with a
   progress bar (one line on a terminal, a line per epoch in a log); test accuracy is reported, the checkpoint saved in PyTorch's format, reloaded,
   and the reloaded model checked to give the same predictions.
3. The digits MLP trained again with its whole training step under ``ember.compile`` (forward, loss,
   backward and Adam's update become one compiled program): the same losses as eager training, the
   speed-up per step, and the compile time cold (empty kernel cache) and warm (after
   ``ember.compiler.reset()``, the kernels come back from the disk cache).
4. When an OpenCL device exists (a GPU driver, or PoCL on the CPU): the digits MLP trained on the
   device from the same weights and batches as in 2, its test accuracy next to the CPU's, and the
   profiler's summary of the training: the device kernels, the host<->device copies and the ops that
   ran on the CPU instead (fallbacks). The first run builds the kernels (about a second each); they are
   cached on disk, so later runs start at once.
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember._progress import Progress


def regression_demo(steps: int = 200, lr: float = 0.1, verbose: bool = True) -> list[float]:
    """Fit y = 3x - 2 (plus noise) with plain gradient descent; returns the loss history."""
    ember.manual_seed(0)
    x = ember.rand(256, 1) * 4 - 2
    y = 3 * x - 2 + 0.1 * ember.randn(256, 1)
    w = ember.zeros(1, 1, requires_grad=True)
    b = ember.zeros(1, requires_grad=True)
    losses = []
    for step in range(steps):
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        with ember.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad = None
        b.grad = None
        losses.append(loss.item())
        if verbose and (step % 40 == 0 or step == steps - 1):
            print(f"  step {step:4d}  loss {loss.item():.5f}")
    if verbose:
        print(f"  fitted w = {w.item():.3f} (true 3), b = {b.item():.3f} (true -2)")
    return losses


def load_digits(seed: int = 0):
    """The 8x8 digits (1797 images) scaled to [0, 1], split 80/20 with a fixed permutation."""
    from sklearn.datasets import load_digits as _load
    d = _load()
    x = (d.images / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(x))
    x, y = x[perm], y[perm]
    n_train = int(0.8 * len(x))
    return (ember.from_numpy(x[:n_train].copy()), ember.from_numpy(y[:n_train].copy()),
            ember.from_numpy(x[n_train:].copy()), ember.from_numpy(y[n_train:].copy()))


class MLP(nn.Module):
    def __init__(self, hidden: int = 128):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                 nn.ReLU(), nn.Linear(hidden, 10))

    def forward(self, x):
        return self.net(x)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x):
        x = x.unsqueeze(1)                      # (N, 1, 8, 8)
        x = self.pool(F.relu(self.conv1(x)))    # (N, 16, 4, 4)
        x = self.pool(F.relu(self.conv2(x)))    # (N, 32, 2, 2)
        return self.fc(x.flatten(1))


def accuracy(model: nn.Module, x, y) -> float:
    model.eval()
    with ember.no_grad():
        pred = model(x).argmax(1)
    model.train()
    return (pred == y).float().mean().item()


def train(model: nn.Module, data, epochs: int = 15, batch_size: int = 64, lr: float = 1e-3,
          progress: bool = True, device=None) -> float:
    """Train with Adam and cross-entropy; returns test accuracy. With ``device`` (the model already
    there), each batch and the test set are moved to it."""
    from ember.utils.data import DataLoader, TensorDataset
    x_train, y_train, x_test, y_test = data
    if device is not None:
        x_test, y_test = x_test.to(device), y_test.to(device)
    gen = ember.Generator().manual_seed(0)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=batch_size, shuffle=True, generator=gen)
    opt = ember.optim.Adam(model.parameters(), lr=lr)
    bar = Progress(epochs * len(loader), f"  {type(model).__name__}", per_epoch=progress) if progress else None
    for epoch in range(epochs):
        for xb, yb in loader:
            if device is not None:
                xb, yb = xb.to(device), yb.to(device)
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if bar is not None:
                bar.update(1, f"loss={loss.item():.3f}")
        if bar is not None:
            bar.epoch_end(epoch + 1, epochs, loss=loss.item())
    if bar is not None:
        bar.close()
    return accuracy(model, x_test, y_test)


def checkpoint_roundtrip(model: nn.Module, make, x) -> bool:
    """Save the state_dict in PyTorch's format, reload it into a fresh model, compare predictions."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.pt")
        ember.save(model.state_dict(), path)
        fresh = make()
        fresh.load_state_dict(ember.load(path))
    model.eval()
    fresh.eval()
    with ember.no_grad():
        same = bool((model(x).argmax(1) == fresh(x).argmax(1)).all())
    model.train()
    return same


def _adam_step(model, opt, xb, yb):
    """One training step (what ``compile_demo`` compiles): returns the loss, detached."""
    opt.zero_grad()
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    return loss.detach()


def _train_steps(step, model, batches, lr: float) -> tuple:
    """Run ``step`` over ``batches`` with a fresh Adam; returns (losses, seconds per call for each call)."""
    opt = ember.optim.Adam(model.parameters(), lr=lr)
    losses, times = [], []
    for xb, yb in batches:
        t0 = time.perf_counter()
        loss = step(model, opt, xb, yb)
        times.append(time.perf_counter() - t0)
        losses.append(loss)
    return [l.item() for l in losses], times


def compile_demo(data, epochs: int = 10, batch_size: int = 64, lr: float = 1e-3, hidden: int = 128,
                 verbose: bool = True) -> dict:
    """Train the digits MLP eagerly and compiled from the same weights on the same batches.

    Returns a dict: ``eager_ms``/``compiled_ms`` (median per step after the first two), ``speedup``,
    ``cold_s``/``warm_s`` (the first two compiled steps, where capture and compilation happen, with an
    empty kernel cache and again after ``ember.compiler.reset()``), ``max_loss_diff`` (compiled vs eager,
    relative), ``accuracy`` (of the compiled-trained model), ``native`` (whether native code ran) and
    ``disk_hits`` (kernel libraries the warm compile loaded from the disk cache).
    """
    import statistics
    from ember.utils.data import DataLoader, TensorDataset
    from ember.compiler import build
    x_train, y_train, x_test, y_test = data
    # a fixed list of equal-sized batches: one shape, so one compiled program serves every step
    gen = ember.Generator().manual_seed(0)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=batch_size, shuffle=True, generator=gen,
                        drop_last=True)
    batches = [b for _ in range(epochs) for b in loader]
    ember.manual_seed(0)
    init = MLP(hidden).state_dict()

    def fresh():
        m = MLP(hidden)
        m.load_state_dict(init)
        return m
    old_cache = os.environ.get("EMBER_CACHE_DIR")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["EMBER_CACHE_DIR"] = cache          # an empty kernel cache: the cold compile is real
        try:
            eager_losses, eager_t = _train_steps(_adam_step, fresh(), batches, lr)
            model = fresh()
            cstep = ember.compile(_adam_step)
            comp_losses, comp_t = _train_steps(cstep, model, batches, lr)
            native = any(getattr(e.runner, "native", None) is not None for e in cstep.entries)
            # warm: forget every compiled program in memory; compiling again finds the kernels on disk
            ember.compiler.reset()
            hits0 = build.STATS["disk_hits"]
            _, warm_t = _train_steps(ember.compile(_adam_step), fresh(), batches[:4], lr)
            disk_hits = build.STATS["disk_hits"] - hits0
        finally:
            if old_cache is None:
                os.environ.pop("EMBER_CACHE_DIR", None)
            else:
                os.environ["EMBER_CACHE_DIR"] = old_cache
    eager_ms = statistics.median(eager_t[2:]) * 1e3
    compiled_ms = statistics.median(comp_t[2:]) * 1e3
    diff = max(abs(a - b) / abs(b) for a, b in zip(comp_losses, eager_losses))
    res = {"eager_ms": eager_ms, "compiled_ms": compiled_ms, "speedup": eager_ms / compiled_ms,
           "cold_s": sum(comp_t[:2]), "warm_s": sum(warm_t[:2]), "max_loss_diff": diff,
           "accuracy": accuracy(model, x_test, y_test), "native": native, "disk_hits": disk_hits,
           "steps": len(batches)}
    if verbose:
        how = "native C" if native else "the interpreter (no native code)"
        print(f"  {len(batches)} Adam steps of batch {batch_size}, eager and compiled ({how}) from the same "
              f"weights: losses agree to {diff:.1e} (relative); test accuracy {res['accuracy'] * 100:.1f}%")
        print(f"  per step: eager {eager_ms:.2f} ms, compiled {compiled_ms:.2f} ms: "
              f"{res['speedup']:.2f}x {'faster' if res['speedup'] >= 1 else 'slower'}")
        print(f"  compile time (first two steps: the first finds no optimizer state yet, so it compiles "
              f"twice): cold {res['cold_s']:.2f} s, warm {res['warm_s']:.2f} s "
              f"(after ember.compiler.reset(): {disk_hits} kernel "
              f"{'library' if disk_hits == 1 else 'libraries'} loaded from the disk cache)")
    return res


def device_summary(prof, top: int = 5) -> dict:
    """The profiler's view of device training, in short: the ``top`` kernels by device time, the copies
    per direction and the CPU fallbacks per op (with the reason of the first)."""
    kernels, copies, fallbacks = [], [], []
    for row in prof.key_averages():
        if row.kind == "kernel" and row.device_type != "CPU":
            kernels.append((row.key, row.count, row.device_time_total))
        elif row.kind == "memcpy":
            copies.append((row.fields.get("direction", row.key), row.count, row.fields.get("bytes", 0),
                           row.device_time_total))
        elif row.kind == "fallback":
            fallbacks.append((row.fields.get("op", row.key), row.count, row.fields.get("reason", "")))
    kernels.sort(key=lambda k: -k[2])
    fallbacks.sort(key=lambda f: -f[1])
    return {"kernels": kernels, "copies": copies, "fallbacks": fallbacks,
            "kernel_time_us": sum(k[2] for k in kernels), "launches": sum(k[1] for k in kernels), "top": top}


def _print_device_summary(summary: dict) -> None:
    top = summary["top"]
    print(f"  device kernels: {summary['launches']} launches, {summary['kernel_time_us'] / 1e3:.1f} ms on the "
          f"device; the top {min(top, len(summary['kernels']))} by device time:")
    for name, count, us in summary["kernels"][:top]:
        print(f"    {name:28s} {count:6d} x {us / max(count, 1):8.1f} us = {us / 1e3:8.2f} ms")
    for direction, count, nbytes, us in summary["copies"]:
        print(f"  copies {direction}: {count} ({nbytes / 1e6:.2f} MB, {us / 1e3:.2f} ms on the device)")
    if summary["fallbacks"]:
        print("  ops that ran on the CPU instead (fallbacks):")
        for op, count, reason in summary["fallbacks"][:top]:
            print(f"    {op:28s} {count:6d} x  ({reason})")
    else:
        print("  ops that ran on the CPU instead (fallbacks): none")


def device_demo(data, epochs: int = 15, cpu_accuracy: float | None = None, progress: bool = True,
                verbose: bool = True) -> dict | None:
    """Train the digits MLP on the OpenCL device under ``ember.profiler.profile`` from the same weights
    and batches as ``train`` on the CPU; returns ``{"accuracy", "seconds", "summary"}`` (see
    ``device_summary``), or None when no OpenCL device exists (it says why)."""
    import warnings
    from ember.devices import opencl as ocl
    from ember.profiler import profile
    if not ocl.is_available():
        if verbose:
            print(f"  skipped: {ocl.unavailable_reason()}")
        return None
    if verbose:
        print(f"  opencl:0 is {ocl.get_device_name(0)}; the first run builds its kernels (cached on disk)")
    ember.manual_seed(0)
    model = MLP().to("opencl")
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)      # the once-per-op fallback notices: summarised below
        with profile() as prof:
            acc = train(model, data, epochs=epochs, progress=progress, device="opencl")
    dt = time.perf_counter() - t0
    summary = device_summary(prof)
    if verbose:
        vs = f" (CPU: {cpu_accuracy * 100:.1f}%)" if cpu_accuracy is not None else ""
        print(f"  MLP on opencl:0: test accuracy {acc * 100:.1f}%{vs} in {dt:.1f}s, profiled")
        _print_device_summary(summary)
    return {"accuracy": acc, "seconds": dt, "summary": summary}


def main() -> None:
    print("1. A tiny regression fitted with autograd")
    regression_demo()
    print("\n2. Digits (scikit-learn's bundled 8x8 images): an MLP and a small CNN")
    data = load_digits()
    accs = {}
    for name, make, epochs in (("MLP", MLP, 15), ("CNN", SmallCNN, 12)):
        ember.manual_seed(0)
        model = make()
        t0 = time.perf_counter()
        acc = train(model, data, epochs=epochs)
        dt = time.perf_counter() - t0
        same = checkpoint_roundtrip(model, make, data[2])
        accs[name] = acc
        print(f"  {name}: test accuracy {acc * 100:.1f}% in {dt:.1f}s; "
              f"checkpoint reloaded: {'same predictions' if same else 'PREDICTIONS DIFFER'}")
    print("\n3. The digits MLP again, its training step compiled with ember.compile")
    compile_demo(data)
    print("\n4. The digits MLP on the OpenCL device")
    device_demo(data, epochs=15, cpu_accuracy=accs["MLP"])


if __name__ == "__main__":
    main()
