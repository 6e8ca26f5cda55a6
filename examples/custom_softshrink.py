"""Custom kernels as ember ops: Softshrink written in C and in OpenCL C, one op with autograd.

The story: an MLP (784-256-256-256-10, Softshrink activations) trains on the "opencl" device, but its
Softshrink has no device kernel, so every call falls back to the CPU: the profiler shows a fallback
and two copies (the input to the host, the result back) per Softshrink per step. Writing the kernel
by hand and registering it as the op's "opencl" kernel makes the fallbacks and copies disappear.

    python examples/custom_softshrink.py              # checks, profiler counts, step times
    python examples/custom_softshrink.py --steps 50 --batch 256

The pieces:
- ``C_SOURCE`` built by ``ember.utils.cpp_extension.load_inline``: plain C functions called with tensors;
- ``CL_SOURCE`` built by ``ember.opencl.compile_shader``: OpenCL kernels called with device tensors;
- ``examples::softshrink`` and ``examples::softshrink_backward``: ``ember.library.custom_op``s with a
  "cpu" kernel (the C function) and an "opencl" kernel (the shader), a fake impl (shapes for
  ``ember.compile``) and, for the forward, ``register_autograd`` calling the backward op. Inside
  ``ember.compile(fullgraph=True)`` each is one node of the graph: on the CPU the generated native
  program calls the C function itself; on the device the compiled program enqueues the OpenCL kernel
  between its own kernels.

Without the custom kernel, the fallback is forced with ``ember.devices.dispatch.FORCE_FALLBACK``
(ember's own softshrink then runs on the CPU, as an op without a device kernel does).
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import warnings

import numpy as np

import ember
from ember import Tensor, nn
from ember.library import custom_op

C_SOURCE = r"""
/* softshrink: x - l above l, x + l below -l, 0 in between */
void softshrink_f32(const float* x, float* out, long n, float l) {
    for (long i = 0; i < n; i++) {
        float v = x[i];
        out[i] = v > l ? v - l : (v < -l ? v + l : 0.0f);
    }
}
/* its derivative: the gradient passes where |x| > l */
void softshrink_backward_f32(const float* g, const float* x, float* gx, long n, float l) {
    for (long i = 0; i < n; i++)
        gx[i] = (x[i] > l || x[i] < -l) ? g[i] : 0.0f;
}
"""

CL_SOURCE = r"""
__kernel void softshrink(__global float* out, __global const float* x, float l) {
    size_t i = get_global_id(0);
    float v = x[i];
    out[i] = v > l ? v - l : (v < -l ? v + l : 0.0f);
}
__kernel void softshrink_backward(__global float* gx, __global const float* g, __global const float* x,
                                  float l) {
    size_t i = get_global_id(0);
    float v = x[i];
    gx[i] = (v > l || v < -l) ? g[i] : 0.0f;
}
"""

_OPS: dict = {}


def _float32(x: Tensor, op: str) -> Tensor:
    if x.dtype != ember.float32:
        raise TypeError(f"{op}: the hand-written kernels take float32 tensors, got {x.dtype}")
    return x.contiguous()


def ops():
    """The two custom ops (built and registered on first use): ``(softshrink, softshrink_backward)``."""
    if _OPS:
        return _OPS["softshrink"], _OPS["softshrink_backward"]
    from ember.utils.cpp_extension import load_inline
    c = load_inline("softshrink_example", c_sources=C_SOURCE,
                    functions=["softshrink_f32", "softshrink_backward_f32"])
    shaders = ember.opencl.compile_shader(CL_SOURCE) if ember.opencl.is_available() else None

    @custom_op("examples::softshrink", mutates_args=(), device_types="cpu")
    def softshrink(x: Tensor, lambd: float) -> Tensor:
        x = _float32(x, "examples::softshrink")
        out = ember.empty_like(x)
        c.softshrink_f32(x, out, x.numel(), lambd)
        return out

    @custom_op("examples::softshrink_backward", mutates_args=(), device_types="cpu")
    def softshrink_backward(grad: Tensor, x: Tensor, lambd: float) -> Tensor:
        g, x = _float32(grad, "examples::softshrink_backward"), _float32(x, "examples::softshrink_backward")
        out = ember.empty_like(x)
        c.softshrink_backward_f32(g, x, out, x.numel(), lambd)
        return out

    if shaders is not None:
        @softshrink.register_kernel("opencl")
        def _(x, lambd):
            x = _float32(x, "examples::softshrink")
            out = ember.empty_like(x)
            shaders.softshrink(out, x, lambd)
            return out

        @softshrink_backward.register_kernel("opencl")
        def _(grad, x, lambd):
            g, x = _float32(grad, "examples::softshrink_backward"), _float32(x, "examples::softshrink_backward")
            out = ember.empty_like(x)
            shaders.softshrink_backward(out, g, x, lambd)
            return out

    softshrink.register_fake(lambda x, lambd: ember.empty_like(x))
    softshrink_backward.register_fake(lambda grad, x, lambd: ember.empty_like(x))

    def setup_context(ctx, inputs, output):
        ctx.x, ctx.lambd = inputs

    softshrink.register_autograd(lambda ctx, g: (softshrink_backward(g, ctx.x, ctx.lambd), None),
                                 setup_context=setup_context)
    _OPS.update(softshrink=softshrink, softshrink_backward=softshrink_backward)
    return softshrink, softshrink_backward


class CustomSoftshrink(nn.Module):
    """``nn.Softshrink`` on the custom op."""

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, x):
        return ember.ops.examples.softshrink(x, self.lambd)


def mlp(act, seed: int = 0) -> nn.Module:
    ember.manual_seed(seed)
    return nn.Sequential(nn.Linear(784, 256), act(), nn.Linear(256, 256), act(), nn.Linear(256, 256), act(),
                         nn.Linear(256, 10))


def train_step(model, lr, x, y):
    """One SGD step. The loss is cross-entropy written as log_softmax + nll_loss and the update is
    written out, because ember's fused cross_entropy backward and optim.SGD.step have no device
    kernels yet: with them the step would carry fallbacks of its own, unrelated to Softshrink."""
    for p in model.parameters():
        p.grad = None
    loss = nn.functional.nll_loss(nn.functional.log_softmax(model(x), dim=1), y)
    loss.backward()
    with ember.no_grad():
        for p in model.parameters():
            p.sub_(p.grad * lr)
    return loss


@contextlib.contextmanager
def forced_fallback(op: str = "softshrink"):
    """ember's ``op`` without its device kernel (a counted CPU fallback) inside the block."""
    from ember.devices import dispatch
    added = op not in dispatch.FORCE_FALLBACK
    dispatch.FORCE_FALLBACK.add(op)
    try:
        yield
    finally:
        if added:
            dispatch.FORCE_FALLBACK.discard(op)


def profile_step(step) -> dict:
    """Run ``step()`` under ``ember.profiler.profile``: the CPU fallbacks, the copies between host and
    device, and the custom ops' device time as the profiler sees them."""
    from ember.profiler import profile
    with profile() as prof:
        step()
        ember.opencl.synchronize()
    evs = prof.events()
    device_us = {}
    for e in evs:
        if e.name.startswith("ember::examples::"):
            device_us[e.name] = device_us.get(e.name, 0.0) + e.device_time_total
    return {"fallbacks": sum(1 for e in evs if e.kind == "fallback"),
            "copies": sum(1 for e in evs if e.kind == "memcpy" and e.fields["direction"] in ("HtoD", "DtoH")),
            "fallback_ops": sorted({e.fields["op"] for e in evs if e.kind == "fallback"}),
            "custom_op_device_us": device_us}


def setup(batch: int, device: str = "opencl"):
    """Data on ``device`` and the two models: ``{"fallback": nn.Softshrink, "custom": the custom op}``
    (the same initial weights)."""
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((batch, 784)).astype(np.float32), device=device)
    y = ember.tensor(rng.integers(0, 10, batch), device=device)
    return x, y, {"fallback": mlp(nn.Softshrink).to(device), "custom": mlp(CustomSoftshrink).to(device)}


def variant(name):
    """The context a model variant runs in: ember's softshrink forced to fall back, or nothing."""
    return forced_fallback() if name == "fallback" else contextlib.nullcontext()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30, help="timed steps per variant (interleaved)")
    ap.add_argument("--batch", type=int, default=128)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", UserWarning)       # the once-per-op fallback warning
    softshrink, _ = ops()
    F = nn.functional

    # 1. values and gradients: the C kernel (cpu) and the OpenCL kernel against ember's softshrink
    xs = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    ref = ember.tensor(xs, requires_grad=True)
    F.softshrink(ref, 0.5).pow(2).sum().backward()
    for device in ("cpu", "opencl"):
        x = ember.tensor(xs, device=device, requires_grad=True)
        softshrink(x, 0.5).pow(2).sum().backward()
        xc = ember.tensor(xs, device=device, requires_grad=True)
        ember.compile(lambda t: softshrink(t, 0.5).pow(2).sum(), fullgraph=True)(xc).backward()
        for what, g in (("eager", x.grad), ("compiled", xc.grad)):
            err = float(np.abs(g.cpu().numpy() - ref.grad.numpy()).max())
            print(f"{device:6s} {what:8s}: max |grad - F.softshrink grad| = {err:.2e}")

    # 2. the MLP step on the device: fallbacks and copies in the profiler
    x, y, models = setup(args.batch)
    lr = 0.01
    for name, model in models.items():
        with variant(name):
            train_step(model, lr, x, y)                  # kernels built outside the profile
            stats = profile_step(lambda: train_step(model, lr, x, y))
        print(f"{name:8s}: {stats['fallbacks']} CPU fallbacks ({', '.join(stats['fallback_ops']) or '-'}), "
              f"{stats['copies']} host<->device copies per step; custom ops' device time (us): "
              f"{ {k: round(v, 1) for k, v in stats['custom_op_device_us'].items()} }")

    # 3. step time, the two variants interleaved
    times = {name: [] for name in models}
    for _ in range(args.steps):
        for name, model in models.items():
            with variant(name):
                ember.opencl.synchronize()
                t0 = time.perf_counter()
                train_step(model, lr, x, y)
                ember.opencl.synchronize()
                times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print(f"step median over {args.steps} (batch {args.batch}): fallback {med['fallback']:.2f} ms, custom kernel "
          f"{med['custom']:.2f} ms ({med['fallback'] / med['custom']:.2f}x)")

if __name__ == "__main__":
    main()
