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

On the CPU, ``compiled softshrink``: ``ember.compile`` of a function calling the op with its C kernel,
forward and backward, where the generated program calls the C functions itself (``native C call``)
or, with ``ember.compiler.c_externs.ENABLED`` off while it is built, runs the op as a Python extern
between its segments (``python extern``).

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


def _compiled_cases(ex, quick) -> list:
    import ember
    from ..compiler import c_externs
    out = []
    for batch in ((32,) if quick else (128, 512)):
        x = ember.randn(batch, 256, requires_grad=True)
        variants = {}
        # (scales differ so the two programs are not one cache entry; the switch is read when a program
        # is first rendered, which may be a few calls in, so every call sets it)
        for label, native, scale in (("native C call", True, 2.0), ("python extern", False, 2.5)):
            f = ember.compile(lambda t, s=scale: (ember.ops.examples.softshrink(t * s, 0.5) ** 2).sum(),
                              fullgraph=True)

            def run(f=f, native=native):
                c_externs.ENABLED[0] = native
                try:
                    x.grad = None
                    f(x).backward()
                finally:
                    c_externs.ENABLED[0] = True
            variants[label] = run
        out.append(Case(f"compiled softshrink fwd+bwd b{batch} (cpu)", "custom_kernels", variants))
    return out


def cases(quick: bool = False) -> list:
    import warnings
    import ember
    if not os.path.exists(_EXAMPLE):
        return []
    warnings.simplefilter("ignore", UserWarning)       # the once-per-op fallback warning
    ex = _example()
    out = _compiled_cases(ex, quick)
    if not ember.opencl.is_available():
        return out
    F = ember.nn.functional
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
    ratios = {}
    for name, v in by.items():
        for fast, slow in (("custom kernel", "fallback"), ("native C call", "python extern")):
            if fast in v and slow in v:
                ratios[name] = v[slow] / v[fast]
                print(f"custom_kernels {name}: {fast} {ratios[name]:.2f}x the speed of the {slow}")
    return {"speedup": ratios}
