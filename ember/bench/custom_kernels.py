"""Suite ``custom_kernels``: what a hand-written device kernel saves over a CPU fallback.

The scenario of ``examples/custom_softshrink.py`` (loaded from the repository's ``examples`` folder):
on the OpenCL device, Softshrink either falls back to the CPU (ember's softshrink with its generated
kernel switched off by ``ember.devices.dispatch.FORCE_FALLBACK``: per call a host copy of the input,
NumPy, and a copy of the result back) or runs as the custom op ``examples::softshrink`` with its
OpenCL kernel (``ember.opencl.compile_shader``). Variants ``fallback`` and ``custom kernel``, same
weights and data, interleaved:

- ``softshrink fwd+bwd``: one Softshrink forward and backward on a (batch, 256) float32 tensor;
- ``mlp step``: a training step of the MLP 784-256-256-256-10 (forward, loss, backward, SGD update;
  ends with a synchronize), batch 128 and 512.

``python -m ember.bench custom_kernels``; the table gives medians per call; the report the ratios.
"""
from __future__ import annotations

import importlib.util
import os

from .harness import Case

_EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "examples", "custom_softshrink.py")
_MOD: list = []


def _example():
    if not _MOD:
        spec = importlib.util.spec_from_file_location("custom_softshrink", _EXAMPLE)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mod.ops()
        _MOD.append(mod)
    return _MOD[0]


def _variants(ex, make):
    """``{"fallback": fn, "custom kernel": fn}`` from ``make(name) -> callable`` (run in its context)."""
    import ember
    out = {}
    for label, name in (("fallback", "fallback"), ("custom kernel", "custom")):
        fn = make(name)

        def run(fn=fn, name=name):
            with ex.variant(name):
                fn()
                ember.opencl.synchronize()
        out[label] = run
    return out


def cases(quick: bool = False) -> list:
    import warnings
    import ember
    if not ember.opencl.is_available() or not os.path.exists(_EXAMPLE):
        return []
    warnings.simplefilter("ignore", UserWarning)       # the once-per-op fallback warning
    ex = _example()
    F = ember.nn.functional
    out = []
    for batch in ((32,) if quick else (128, 512)):
        x = ember.randn(batch, 256, device="opencl", requires_grad=True)

        def act(name, x=x):
            f = F.softshrink if name == "fallback" else ember.ops.examples.softshrink

            def fn():
                x.grad = None
                f(x, 0.5).sum().backward()
            return fn
        out.append(Case(f"softshrink fwd+bwd b{batch}", "custom_kernels", _variants(ex, act)))
        data, labels, models = ex.setup(batch)

        def step(name, data=data, labels=labels, models=models):
            return lambda: ex.train_step(models[name], 0.01, data, labels)
        out.append(Case(f"mlp step b{batch}", "custom_kernels", _variants(ex, step), per="step", unit="ms"))
    return out


def report(results) -> dict:
    by = {}
    for r in results:
        if r.suite == "custom_kernels":
            by.setdefault(r.name, {})[r.variant] = r.median
    ratios = {name: v["fallback"] / v["custom kernel"] for name, v in by.items()
              if "fallback" in v and "custom kernel" in v}
    for name, q in ratios.items():
        print(f"custom_kernels {name}: custom kernel {q:.2f}x the speed of the CPU fallback")
    return {"speedup": ratios}
