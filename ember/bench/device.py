"""Suite ``device``: ember's OpenCL device in eager mode, against ember on the CPU and torch (CPU).

Four measurements, interleaved per case as usual (medians of ``--repeat`` samples):

1. **Launch overhead** of an eager device op: ``a + b`` on 1,000 floats. Variants: ``ember.opencl``
   (32 adds back to back, then one synchronize: the cost per op when the queue is kept busy; divided
   by 32), ``ember.opencl sync`` (one add, then synchronize: the round trip), ``cl launch`` (the runtime's
   built-in fill kernel on the same array through ``ember.devices.opencl.fill_``: the OpenCL enqueue
   alone, without ember's dispatcher), ``ember`` and ``torch`` on the CPU (32 adds, divided by 32).
   The report adds the host CPU time per op of ``ember.opencl`` and ``cl launch`` (the calling
   thread's ``time.thread_time``), which shared cores do not inflate as they do the wall time.
2. **Copy bandwidth**: ``x.to("opencl")`` (h2d) and ``d.cpu()`` (d2h) of float32 tensors of a few
   sizes, against a host ``np.copyto`` of the same bytes ("host memcpy"); the report gives MB/s.
3. **Training steps** (zero_grad, forward, loss, backward, optimizer step) of the MLP and the small CNN
   (SGD, batch 64) and the small GPT (AdamW, batch 16: ``models.GPTConfig``), eager on the device
   (data already there; the step ends with a synchronize), the same step compiled whole with
   ``ember.compile`` on the device (``ember.opencl compiled``: generated OpenCL kernels, synchronized
   after each call) and on the CPU (``ember compiled``), eager ember on the CPU and torch eager, from
   the same weights and data. The report gives the eager device/CPU ratio, the compiled device/CPU
   ratio and, per step, the CPU fallbacks by op (the ops without a device kernel yet), the kernel
   launches and the copies.
4. **Recurrent layers**: forward and backward (of the output's sum) of one ``nn.LSTM``, ``nn.GRU`` and
   ``nn.RNN`` layer over a whole sequence (``RNN_SHAPE``), on the device (synchronized at the end), on
   the CPU and in torch.

``--quick`` keeps it small for CI: two copy sizes, batch 16 for the MLP and CNN and a one-layer GPT
(32 wide, context 16, batch 2). The first run builds the device kernels (about a second each; the
binaries are cached on disk, so later runs build nothing): the GPT alone needs a few dozen.

Threads: with PoCL (the OpenCL driver that runs on the CPU) the device would use every core; the
suite sets ``POCL_MAX_PTHREAD_COUNT`` to ``--threads`` (unless it is set already) so that the device,
ember and torch each get the same number of cores. The report prints the device's compute units.
"""
from __future__ import annotations

import copy
import os
import sys

import numpy as np

import ember
from . import models as M
from .harness import Case, run_case

LAUNCH_OPS = 32                          # ops per sample call in the launch case
COPY_SIZES = [4 << 10, 256 << 10, 4 << 20, 32 << 20]       # bytes
QUICK_COPY_SIZES = [64 << 10, 1 << 20]
MODEL_SPECS = [("mlp", 64, "sgd"), ("cnn", 64, "sgd"), ("gpt", 16, "adamw")]
QUICK_MODEL_SPECS = [("mlp", 16, "sgd"), ("cnn", 16, "sgd"), ("gpt", 2, "adamw")]
QUICK_GPT = M.GPTConfig(n_layer=1, n_embd=32, n_head=2, block_size=16)
RNN_SHAPE = dict(steps=32, batch=16, input=32, hidden=64)       # (T, B, I, H) of the recurrent-layer rows
QUICK_RNN_SHAPE = dict(steps=8, batch=4, input=8, hidden=16)

_STATE: dict = {"models": {}, "notes": [], "device": None, "host_us": {}}


def cases(name_filter=None) -> list:
    """Everything is measured by :func:`results` (its cases need rescaling and per-step counters)."""
    return []


def _progress(msg: str) -> None:
    print(f"device: {msg}", file=sys.stderr, flush=True)


def _size_name(n: int) -> str:
    return f"{n >> 20}MiB" if n >= 1 << 20 else f"{n >> 10}KiB"


def _scaled(results: list, factor: int, names=None) -> list:
    """Results of calls that did ``factor`` units of work, per unit (only the variants in ``names``)."""
    for r in results:
        if names is None or r.variant in names:
            r.samples = [s / factor for s in r.samples]
    return results


# ---- 1. launch overhead ---------------------------------------------------------------------------------

def launch_results(repeat: int, torch=None) -> list:
    from ember.devices import opencl as ocl
    n = 1000
    a_h = np.linspace(-1, 1, n, dtype=np.float32)
    a, b = ember.tensor(a_h), ember.tensor(a_h[::-1].copy())
    da, db = a.to("opencl"), b.to("opencl")
    raw = ocl.empty((n,), np.float32)
    sync = ember.opencl.synchronize
    np.testing.assert_allclose((da + db).cpu().numpy(), (a + b).numpy())

    def device_pipelined():
        for _ in range(LAUNCH_OPS):
            da + db
        sync()

    def device_sync_each():
        da + db
        sync()

    def cl_launch():
        for _ in range(LAUNCH_OPS):
            ocl.fill_(raw, 1.0)
        sync()

    def cpu():
        for _ in range(LAUNCH_OPS):
            a + b
    variants = {"ember.opencl": device_pipelined, "ember.opencl sync": device_sync_each, "cl launch": cl_launch,
                "ember": cpu}
    if torch is not None:
        ta, tb = torch.tensor(a_h), torch.tensor(a_h[::-1].copy())

        def torch_cpu():
            for _ in range(LAUNCH_OPS):
                ta + tb
        variants["torch"] = torch_cpu
    res = run_case(Case("add_1k_launch", "device", variants, unit="us", per="op"), repeat=repeat)
    _STATE["host_us"] = {k: _host_cpu_per_op(variants[k], repeat) for k in ("ember.opencl", "cl launch")}
    return _scaled(res, LAUNCH_OPS, {"ember.opencl", "cl launch", "ember", "torch"})


def _host_cpu_per_op(fn, repeat: int) -> float:
    """Median CPU time of the calling thread per op (us) over ``repeat`` calls of ``fn`` (LAUNCH_OPS ops
    each): the host cost of an op, which other processes on shared cores do not inflate as they do the
    wall time (the driver's own threads, which run the kernels, are not counted)."""
    import time
    samples = []
    for _ in range(max(repeat, 5)):
        t0 = time.thread_time()
        fn()
        samples.append((time.thread_time() - t0) / LAUNCH_OPS * 1e6)
    return float(np.median(samples))


# ---- 2. copies ------------------------------------------------------------------------------------------------

def copy_results(repeat: int, sizes) -> list:
    out = []
    for nbytes in sizes:
        host = np.random.default_rng(0).standard_normal(nbytes // 4).astype(np.float32)
        x = ember.tensor(host)
        d = x.to("opencl")
        np.testing.assert_array_equal(d.cpu().numpy(), host)
        dst = np.empty_like(host)

        def memcpy():
            np.copyto(dst, host)
        name = _size_name(nbytes)
        out += run_case(Case(f"h2d_{name}", "device", {"ember.opencl": lambda: x.to("opencl"),
                                                        "host memcpy": memcpy}, unit="us", per="copy"),
                        repeat=repeat)
        out += run_case(Case(f"d2h_{name}", "device", {"ember.opencl": lambda: d.cpu(), "host memcpy": memcpy},
                             unit="us", per="copy"), repeat=repeat)
        for r in out[-4:]:
            r.nbytes = nbytes            # (for the report; not saved)
    return out


# ---- 3. training steps ------------------------------------------------------------------------------------------

def _build(lib, kind: str, cfg):
    if kind == "mlp":
        return M.mlp(lib)
    if kind == "cnn":
        return M.cnn(lib)
    return M.gpt(lib, cfg)


def _batch(lib, kind: str, batch: int, cfg):
    if kind == "gpt":
        return M.gpt_batch(lib, batch, block_size=cfg.block_size, vocab_size=cfg.vocab_size)
    return M.mlp_batch(lib, batch, kind=kind)


def step_function(lib, kind: str, model, opt, data, sync=None):
    """One training step ``() -> detached loss`` of ``model`` on ``data``; ``sync`` (the device's
    synchronize) ends it when given."""
    cross_entropy = lib.nn.functional.cross_entropy
    x, y = data

    def step():
        opt.zero_grad()
        if kind == "gpt":
            _, loss = model(x, y)
        else:
            loss = cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss = loss.detach()
        if sync is not None:
            sync()
        return loss
    return step


def compiled_step(kind: str, model, opt_name: str, data, device: bool = True):
    """The training step compiled whole with ``ember.compile`` (forward, backward and optimizer as
    generated OpenCL kernels on the device, synchronized after each call like the eager device step;
    with ``device=False`` as native code on the CPU: the baseline of the compiled device step)."""
    step = ember.compile(step_function(ember, kind, model, M.optimizer(ember, opt_name, model.parameters()), data))
    if not device:
        return step

    def run():
        loss = step()
        ember.opencl.synchronize()
        return loss
    return run


def model_name(kind: str, batch: int, opt_name: str) -> str:
    return f"{kind}_b{batch}_{opt_name}_step"


def _per_step_counters(step) -> dict:
    """Fallbacks by op, kernel launches and copies of one call of ``step`` (a device step)."""
    from ember.devices import opencl as ocl
    from ember.compiler import cl_runner
    ocl.reset_fallback_counts()
    ocl.reset_copy_stats()
    launches = cl_runner.STATS["launches"]
    step()
    return {"fallbacks": ocl.fallback_counts(), "launches": cl_runner.STATS["launches"] - launches,
            "copies": ocl.copy_stats()}


def model_results(repeat: int, specs, cfg, torch=None) -> list:
    import warnings
    out = []
    for kind, batch, opt_name in specs:
        name = model_name(kind, batch, opt_name)
        ember.manual_seed(0)
        cpu_model = _build(ember, kind, cfg)
        weights = M.state_dict_numpy(cpu_model)
        dev_model = copy.deepcopy(cpu_model).to("opencl")
        data = _batch(ember, kind, batch, cfg)
        dev_data = tuple(t.to("opencl") for t in data)
        steps = {
            "ember.opencl": step_function(ember, kind, dev_model, M.optimizer(ember, opt_name, dev_model.parameters()),
                                          dev_data, ember.opencl.synchronize),
            "ember": step_function(ember, kind, cpu_model, M.optimizer(ember, opt_name, cpu_model.parameters()), data),
        }
        steps["ember compiled"] = compiled_step(kind, copy.deepcopy(cpu_model), opt_name, data, device=False)
        steps["ember.opencl compiled"] = compiled_step(kind, copy.deepcopy(cpu_model).to("opencl"), opt_name,
                                                       dev_data)
        if torch is not None:
            tmodel = M.load_numpy(torch, _build(torch, kind, cfg), weights)
            steps["torch"] = step_function(torch, kind, tmodel, M.optimizer(torch, opt_name, tmodel.parameters()),
                                           _batch(torch, kind, batch, cfg))
        _progress(f"{name}: first device steps (builds the kernels not cached yet)")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)          # the once-per-op fallback warnings
            losses = {k: [float(fn().cpu().item()) if k != "torch" else float(fn().item()) for _ in range(2)]
                      for k, fn in steps.items()}
            base = losses["ember"]
            for k, ls in losses.items():
                if not np.allclose(ls, base, rtol=1e-3, atol=1e-5):
                    _STATE["notes"].append(f"{name}: WARNING {k} losses {ls} differ from ember's {base}")
            counters = _per_step_counters(steps["ember.opencl"])
            counters["compiled"] = _per_step_counters(steps["ember.opencl compiled"])
            _progress(f"{name}: timing")
            out += run_case(Case(name, "device", steps, unit="ms", per="step"), repeat=repeat)
        _STATE["models"][name] = counters
    return out


# ---- 4. recurrent layers ----------------------------------------------------------------------------------------

def rnn_name(kind: str, shape: dict) -> str:
    return f"{kind.lower()}_t{shape['steps']}_b{shape['batch']}_h{shape['hidden']}_fwd_bwd"


def rnn_results(repeat: int, shape: dict, torch=None, kinds=("LSTM", "GRU", "RNN")) -> list:
    """Forward and backward (of the output's sum) of one recurrent layer over a whole sequence: on the
    device (synchronized at the end), on the CPU, and in torch."""
    T, B, I, H = shape["steps"], shape["batch"], shape["input"], shape["hidden"]
    out = []
    for kind in kinds:
        ember.manual_seed(0)
        cpu = getattr(ember.nn, kind)(I, H)
        dev = copy.deepcopy(cpu).to("opencl")
        x = ember.randn(T, B, I)
        xd = x.to("opencl")

        def run(m, xx, sync=None):
            def call():
                for p in m.parameters():
                    p.grad = None
                m(xx)[0].sum().backward()
                if sync is not None:
                    sync()
            return call
        variants = {"ember.opencl": run(dev, xd, ember.opencl.synchronize), "ember": run(cpu, x)}
        if torch is not None:
            tm = getattr(torch.nn, kind)(I, H)
            tm.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in cpu.state_dict().items()})
            variants["torch"] = run(tm, torch.tensor(x.numpy()))
        name = rnn_name(kind, shape)
        _progress(f"{name}: first device calls (builds the kernels not cached yet)")
        variants["ember.opencl"]()
        out += run_case(Case(name, "device", variants, unit="ms", per="call"), repeat=repeat)
    return out


# ---- the suite ------------------------------------------------------------------------------------------------

def results(repeat: int = 15, name_filter=None, threads: int = 1, quick: bool = False) -> list:
    """Run the suite (cases whose name contains ``name_filter``); nothing when no OpenCL device exists."""
    _STATE["models"].clear()
    _STATE["notes"].clear()
    os.environ.setdefault("POCL_MAX_PTHREAD_COUNT", str(threads))
    from ember.devices import opencl as ocl
    if not ocl.is_available():
        _STATE["device"] = None
        _STATE["notes"].append(f"no OpenCL device: {ocl.unavailable_reason()}")
        _progress(_STATE["notes"][-1])
        return []
    rt = ocl._runtime(0)
    _STATE["device"] = {"name": ocl.get_device_name(0), "compute_units": int(rt.device.max_compute_units),
                        "POCL_MAX_PTHREAD_COUNT": os.environ.get("POCL_MAX_PTHREAD_COUNT")}
    try:
        import torch
    except ImportError:
        torch = None

    def wanted(name):
        return not name_filter or name_filter in name
    out = []
    if wanted("add_1k_launch"):
        _progress("launch overhead")
        out += launch_results(repeat, torch)
    sizes = [s for s in (QUICK_COPY_SIZES if quick else COPY_SIZES)
             if wanted(f"h2d_{_size_name(s)}") or wanted(f"d2h_{_size_name(s)}")]
    if sizes:
        _progress("copies")
        out += [r for r in copy_results(repeat, sizes) if wanted(r.name)]
    specs = [s for s in (QUICK_MODEL_SPECS if quick else MODEL_SPECS) if wanted(model_name(*s))]
    out += model_results(repeat, specs, QUICK_GPT if quick else M.GPTConfig(), torch)
    rshape = QUICK_RNN_SHAPE if quick else RNN_SHAPE
    kinds = [k for k in ("LSTM", "GRU", "RNN") if wanted(rnn_name(k, rshape))]
    if kinds:
        out += rnn_results(repeat, rshape, torch, kinds)
    return out


def report(results, file=None) -> dict:
    """Print bandwidths, device/CPU step ratios and per-step fallbacks after the results table; returns
    them as a JSON-able dict (saved by ``--json``)."""
    file = file if file is not None else sys.stdout
    mine = [r for r in results if r.suite == "device"]
    by_case: dict = {}
    for r in mine:
        by_case.setdefault(r.name, {})[r.variant] = r
    dev = _STATE["device"]
    doc = {"device": dev, "launch_us": {}, "bandwidth_MBps": {}, "steps": {}, "notes": list(_STATE["notes"]),
           "host_cpu_us_per_op": dict(_STATE.get("host_us", {}))}
    if dev:
        print(f"\ndevice: opencl:0 {dev['name']}, {dev['compute_units']} compute unit(s) "
              f"(POCL_MAX_PTHREAD_COUNT={dev['POCL_MAX_PTHREAD_COUNT']})", file=file)
    launch = by_case.get("add_1k_launch")
    if launch:
        doc["launch_us"] = {k: r.median * 1e6 for k, r in launch.items()}
        print("add of 1k floats, median us per op: " +
              ", ".join(f"{k} {v:.1f}" for k, v in doc["launch_us"].items()), file=file)
        if doc["host_cpu_us_per_op"]:
            print("  host CPU time per op (the calling thread's): " +
                  ", ".join(f"{k} {v:.1f}" for k, v in doc["host_cpu_us_per_op"].items()), file=file)
    copies = [(name, rs) for name, rs in by_case.items() if name.startswith(("h2d_", "d2h_"))]
    if copies:
        print(f"\n{'copy':12s} {'bytes':>10s} {'opencl MB/s':>12s} {'memcpy MB/s':>12s}", file=file)
        for name, rs in copies:
            r = rs["ember.opencl"]
            nbytes = getattr(r, "nbytes", None) or _bytes_of(name)
            bw = {k: nbytes / x.median / 1e6 for k, x in rs.items()}
            doc["bandwidth_MBps"][name] = bw
            print(f"{name:12s} {nbytes:10d} {bw['ember.opencl']:12.1f} {bw.get('host memcpy', float('nan')):12.1f}",
                  file=file)
    steps = [(name, rs) for name, rs in by_case.items() if name.endswith("_step")]
    if steps:
        print(f"\n{'step':22s} {'opencl ms':>10s} {'compiled':>9s} {'cpu ms':>9s} {'cpu comp':>9s} {'torch ms':>9s} "
              f"{'opencl/cpu':>11s} {'comp/comp':>10s} {'launches':>9s} {'h2d':>4s} {'d2h':>4s}  fallbacks per step (op: count)",
              file=file)
        for name, rs in steps:
            med = {k: r.median * 1e3 for k, r in rs.items()}
            c = _STATE["models"].get(name, {})
            fb = c.get("fallbacks", {})
            cp = c.get("copies", {})
            comp = med.get("ember.opencl compiled", float("nan")) / med.get("ember compiled", float("nan"))
            row = {"ms": med, "opencl_vs_cpu": med["ember.opencl"] / med["ember"] if "ember" in med else None,
                   "compiled_opencl_vs_compiled_cpu": comp,
                   "fallbacks": fb, "fallbacks_total": sum(fb.values()), "launches": c.get("launches"),
                   "copies": cp, "compiled": c.get("compiled")}
            doc["steps"][name] = row
            fbs = ", ".join(f"{k}: {v}" for k, v in sorted(fb.items(), key=lambda kv: -kv[1])) or "none"
            print(f"{name:22s} {med['ember.opencl']:10.2f} {med.get('ember.opencl compiled', float('nan')):9.2f} "
                  f"{med.get('ember', float('nan')):9.2f} {med.get('ember compiled', float('nan')):9.2f} "
                  f"{med.get('torch', float('nan')):9.2f} {row['opencl_vs_cpu'] or float('nan'):10.2f}x {comp:9.2f}x "
                  f"{row['launches'] or 0:9d} {cp.get('h2d', {}).get('count', 0):4d} "
                  f"{cp.get('d2h', {}).get('count', 0):4d}  {sum(fb.values())}: {fbs}", file=file)
    rnns = [(name, rs) for name, rs in by_case.items() if name.endswith("_fwd_bwd")]
    if rnns:
        print(f"\n{'recurrent layer':28s} {'opencl ms':>10s} {'cpu ms':>9s} {'torch ms':>9s} {'opencl/cpu':>11s}",
              file=file)
        doc["rnn"] = {}
        for name, rs in rnns:
            med = {k: r.median * 1e3 for k, r in rs.items()}
            doc["rnn"][name] = med
            print(f"{name:28s} {med['ember.opencl']:10.2f} {med.get('ember', float('nan')):9.2f} "
                  f"{med.get('torch', float('nan')):9.2f} {med['ember.opencl'] / med['ember']:10.1f}x", file=file)
    if _STATE["notes"]:
        print("\nnotes:", file=file)
        for n in _STATE["notes"]:
            print(f"  {n}", file=file)
    return doc


def _bytes_of(name: str) -> int:
    size = name.split("_", 1)[1]
    return int(size[:-3]) << (20 if size.endswith("MiB") else 10)
