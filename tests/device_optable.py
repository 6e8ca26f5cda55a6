"""The op table on the OpenCL device: each case of ``tests/optable`` run with its inputs on "opencl" and
compared with the same call on the CPU (values, and gradients for float inputs), recording which ops
ran as device kernels and which fell back to the CPU (``ember.opencl.FALLBACK_HOOKS``).

``run_device_case(case)`` returns a :class:`DeviceResult`; ``python tests/device_optable.py`` runs the
whole table and prints the fallbacks by op (how ``KNOWN_FALLBACKS`` in ``test_opencl_optable.py`` was
made).
"""
from __future__ import annotations

import dataclasses

import numpy as np

import ember
from ember.devices import opencl as ocl
from oracle import case_arrays, paired_inputs, _flatten, FLOATS


@dataclasses.dataclass
class DeviceResult:
    name: str
    fallbacks: dict                 # op name -> count, while the device call and its backward ran
    ops: set                        # every op the device call ran
    error: str = ""                 # a mismatch with the CPU, or an exception only the device raised
    portable: bool = True           # False: the case makes CPU tensors itself (mixing devices)


def _np(t):
    return t.detach().cpu().numpy()


def _compare(dev, cpu, case, what):
    d_list, c_list = _flatten(dev), _flatten(cpu)
    if len(d_list) != len(c_list):
        return f"{what}: {len(d_list)} outputs on the device, {len(c_list)} on the CPU"
    for k, (d, c) in enumerate(zip(d_list, c_list)):
        if isinstance(c, ember.Tensor):
            if not isinstance(d, ember.Tensor):
                return f"{what}[{k}]: a {type(d).__name__}, not a Tensor"
            if d.device.type != "opencl":
                return f"{what}[{k}]: on {d.device}, not on the device"
            if tuple(d.shape) != tuple(c.shape) or d.dtype is not c.dtype:
                return f"{what}[{k}]: {d.dtype}{list(d.shape)} != CPU {c.dtype}{list(c.shape)}"
            dn, cn = _np(d), _np(c)
            if cn.dtype.kind == "f" or cn.dtype.kind == "c":
                tol = max(case.atol, 1e-5), max(case.rtol, 1e-4)
                if not np.allclose(dn, cn, atol=tol[0], rtol=tol[1], equal_nan=True):
                    return f"{what}[{k}]: values differ (max abs {np.nanmax(np.abs(dn - cn))})"
            elif not np.array_equal(dn, cn):
                return f"{what}[{k}]: values differ"
        elif isinstance(c, float):
            if not (abs(d - c) <= 1e-5 + 1e-4 * abs(c) or (d != d and c != c)):
                return f"{what}[{k}]: {d} != {c}"
    return ""


def _on_cpu_and_device(c):
    return c, c.to("opencl")


def run_device_case(case, dtype="float32", seed=0) -> DeviceResult:
    """``case`` on the CPU and on the device with the same inputs (see the module docstring)."""
    rng = np.random.default_rng(seed)
    arrs, grad_idx = case_arrays(case, dtype, "contig", rng, "f", FLOATS)
    do_grad = bool(grad_idx)
    cpu_in, dev_in = paired_inputs(arrs, grad_idx, lambda a: _on_cpu_and_device(ember.from_numpy(a.copy())))
    ember.manual_seed(seed)
    try:
        cpu_out = case.fn(ember, *cpu_in)
    except Exception:
        return DeviceResult(case.name, {}, set())          # the CPU refuses it too: nothing to compare
    fb: dict = {}
    ops: set = set()

    def on_fallback(rec):
        fb[rec.op] = fb.get(rec.op, 0) + 1

    def seen(op, args, attrs, run):
        ops.add(op.name)
        return run()
    from ember.ops import registry
    ocl.FALLBACK_HOOKS.append(on_fallback)
    registry.HOOKS.insert(0, seen)
    try:
        ember.manual_seed(seed)
        dev_out = case.fn(ember, *dev_in)
        err = _compare(dev_out, cpu_out, case, "forward")
        if not err and do_grad:
            c_outs = [o for o in _flatten(cpu_out) if isinstance(o, ember.Tensor) and o.requires_grad]
            d_outs = [o for o in _flatten(dev_out) if isinstance(o, ember.Tensor) and o.requires_grad]
            if c_outs and len(c_outs) == len(d_outs):
                ws = [rng.standard_normal(tuple(o.shape)).astype(np.float32 if dtype == "float32" else np.float64)
                      for o in c_outs]
                c_loss = sum((o * ember.from_numpy(w.copy())).sum() for o, w in zip(c_outs, ws))
                d_loss = sum((o * ember.from_numpy(w.copy()).to("opencl")).sum() for o, w in zip(d_outs, ws))
                c_leaves = [cpu_in[i] for i in grad_idx]
                d_leaves = [dev_in[i] for i in grad_idx]
                c_g = ember.autograd.grad(c_loss, c_leaves, allow_unused=True)
                d_g = ember.autograd.grad(d_loss, d_leaves, allow_unused=True)
                c_g = [g if g is not None else ember.zeros_like(x) for g, x in zip(c_g, c_leaves)]
                d_g = [g if g is not None else ember.zeros_like(x) for g, x in zip(d_g, d_leaves)]
                err = _compare(d_g, c_g, case, "grad")
    except Exception as e:
        if "Expected all tensors to be on the same device" in str(e):
            # the case makes CPU tensors of its own (a weight, running statistics): torch refuses it
            # on an accelerator in the same way, so there is nothing to compare
            return DeviceResult(case.name, fb, ops, "", portable=False)
        err = f"the device raised {type(e).__name__}: {str(e)[:200]}"
    finally:
        registry.HOOKS.remove(seen)
        ocl.FALLBACK_HOOKS.remove(on_fallback)
    return DeviceResult(case.name, fb, ops, err)


def run_table(cases, progress=None) -> list:
    out = []
    for i, c in enumerate(cases):
        out.append(run_device_case(c, "float32" if "float32" in c.dtypes else c.dtypes[0]))
        if progress:
            progress(i, c, out[-1])
    return out


if __name__ == "__main__":                   # pragma: no cover - the tool that lists the fallbacks
    import sys
    import time
    import warnings
    warnings.simplefilter("ignore")
    from optable import all_cases
    cases = all_cases()
    if len(sys.argv) > 1:
        cases = [c for c in cases if any(a in c.name for a in sys.argv[1:])]
    t0 = time.time()
    res = run_table(cases, lambda i, c, r: print(f"{i} {c.name} {r.error} {r.fallbacks}", file=sys.stderr,
                                                  flush=True))
    by_op: dict = {}
    for r in res:
        for op, n in r.fallbacks.items():
            by_op.setdefault(op, []).append(r.name)
    print(f"{len(res)} cases in {time.time() - t0:.0f} s; {len(by_op)} ops fell back")
    for op in sorted(by_op):
        print(f"  {op}: {len(by_op[op])} case(s), e.g. {by_op[op][0]}")
    print("mismatches:")
    for r in res:
        if r.error:
            print(f"  {r.name}: {r.error}")
