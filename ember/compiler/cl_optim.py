"""Optimizer steps on an OpenCL device: one generated program per param group (a multi-tensor step).

``Optimizer.step`` asks :func:`step_group` (through ``optimizer.DEVICE_STEP``, set when the first device
tensor is made) before its per-parameter NumPy loop. For SGD, Adam and AdamW groups whose parameters
with gradients all live on one OpenCL device in float32 (float64 when the device has it), the update
of every parameter is written once in ember's in-place ops (the same rules as the eager CPU
optimizers: ``sgd.py``, ``adam.py``), traced on zero CPU tensors of the parameters' shapes into a
``Program`` and compiled by ``cl_runner.CLRunner``: each parameter's update becomes ONE fused kernel
that reads the gradient and the state and writes the parameter and the state in place, and the whole
group's kernels are enqueued back to back without Python between them.

What changes from step to step is passed as data, not baked into the kernels: a small array of
per-parameter scalars (learning rate; Adam's step size ``lr / (1 - beta1**step)`` and
``sqrt(1 - beta2**step)``; the decoupled decay factor ``1 - lr * wd``), computed on the host in double
precision, as the CPU optimizer does, and uploaded without waiting. Options that rarely change
(momentum, dampening, nesterov, betas, eps, weight decay, maximize, amsgrad) are part of the program's
cache key. ``state['step']`` stays a CPU tensor (as torch keeps it for non-capturable optimizers); the
other state (momentum buffers, moments) lives on the device, created on first use.

Anything else (another optimizer, mixed devices or dtypes in a group, sparse gradients) returns False:
the optimizer then runs its per-parameter host update, a counted CPU fallback.
"""
from __future__ import annotations

import math

import numpy as np

from ..tensor import Tensor, wrap

_CACHE: dict = {}
STATS = {"programs": 0, "steps": 0}


def _sgd_update(ps, gs, states, scal, opts, first):
    """SGD's update in ember ops (``sgd.py``): ``scal[i]`` is parameter i's learning rate."""
    mom, damp, nesterov, wd, maximize = opts
    for i, (p, g) in enumerate(zip(ps, gs)):
        lr = scal[i]
        if maximize:
            g = -g
        if wd != 0:
            g = g + p * wd
        if mom != 0:
            buf = states[i][0]
            if first[i]:
                buf.copy_(g)                    # the first step seeds the buffer with the gradient
            else:
                buf.mul_(mom)
                buf.add_(g * (1 - damp) if damp != 0 else g)
            g = g + buf * mom if nesterov else buf
        p.sub_(g * lr)


def _adam_update(ps, gs, states, scal, opts, first):
    """Adam/AdamW's update in ember ops (``adam.py``): ``scal[3i:3i+3]`` are parameter i's step size
    ``lr / (1 - beta1**step)``, ``sqrt(1 - beta2**step)`` and decoupled decay factor ``1 - lr * wd``."""
    b1, b2, eps, wd, decoupled, amsgrad, maximize = opts
    w = 1 - b1
    for i, (p, g) in enumerate(zip(ps, gs)):
        step_size, bc2_sqrt, decay = scal[3 * i], scal[3 * i + 1], scal[3 * i + 2]
        if maximize:
            g = -g
        if wd != 0:
            if decoupled:
                p.mul_(decay)
            else:
                g = g + p * wd
        m, v = states[i][0], states[i][1]
        if w < 0.5:                             # exp_avg.lerp_(grad, 1 - beta1), torch's two-sided formula
            m.add_((g - m) * w)
        else:
            m.copy_(g - (g - m) * (1 - w))
        v.mul_(b2)
        v.add_(g * (1 - b2) * g)
        if amsgrad:
            mx = states[i][2]
            mx.copy_(mx.maximum(v))
            v = mx
        denom = v.sqrt() / bc2_sqrt + eps
        p.add_(m * -step_size / denom)


def _sgd_state(opt, group, p, st):
    if group["momentum"] == 0:
        return (), False
    buf = st.get("momentum_buffer")
    if buf is None:
        st["momentum_buffer"] = buf = _device_zeros(p)
        return (buf,), True
    return (buf,), False


def _adam_state(opt, group, p, st):
    if not st:
        from ..optim.optimizer import _scalar_step
        st["step"] = _scalar_step(0.0)             # a CPU tensor, as torch keeps it (not capturable)
        st["exp_avg"] = _device_zeros(p)
        st["exp_avg_sq"] = _device_zeros(p)
        if group["amsgrad"]:
            st["max_exp_avg_sq"] = _device_zeros(p)
    keys = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group["amsgrad"] else ())
    return tuple(st[k] for k in keys), False


def _sgd_scalars(opt, group, p, st):
    from ..optim.optimizer import _to_scalar
    return (float(_to_scalar(group["lr"])),)


def _adam_scalars(opt, group, p, st):
    from ..optim.optimizer import _to_scalar
    lr = float(_to_scalar(group["lr"]))
    b1, b2 = (float(_to_scalar(b)) for b in group["betas"])
    step_arr = st["step"]._data
    if type(step_arr) is not np.ndarray:
        # a step loaded onto the device (torch.load(map_location=device)): kept on the host from now on,
        # where the bias corrections read it (its value is all that matters; torch keeps it where it came)
        st["step"] = st["step"].cpu()
        step_arr = st["step"]._data
    step_arr += 1
    step = float(step_arr)
    return (lr / (1 - b1 ** step), math.sqrt(1 - b2 ** step), 1 - lr * group["weight_decay"])


def _sgd_opts(opt, group):
    return (group["momentum"], group["dampening"], bool(group["nesterov"]), group["weight_decay"],
            bool(group["maximize"]))


def _adam_opts(opt, group):
    from ..optim.optimizer import _to_scalar
    b1, b2 = (float(_to_scalar(b)) for b in group["betas"])
    decoupled = bool(group.get("decoupled_weight_decay", False))
    return (b1, b2, group["eps"], group["weight_decay"], decoupled, bool(group["amsgrad"]), bool(group["maximize"]))


# optimizer class name -> (options, state (tensors, first use?), per-step scalars, update in ember ops)
_KINDS = {
    "SGD": (_sgd_opts, _sgd_state, _sgd_scalars, _sgd_update),
    "Adam": (_adam_opts, _adam_state, _adam_scalars, _adam_update),
    "AdamW": (_adam_opts, _adam_state, _adam_scalars, _adam_update),
}


def _device_zeros(p: Tensor) -> Tensor:
    from ..devices import opencl as _ocl
    d = p._data
    return wrap(_ocl.fill_(_ocl.empty(d.shape, d.dtype, d.device, op="optimizer state"), 0), p._dtype)


def _supported(opt, group):
    """The kind entry for ``opt`` when its class is one of ours (not a subclass changing the update)."""
    from .. import optim
    name = type(opt).__name__
    kind = _KINDS.get(name)
    if kind is None or type(opt) is not getattr(optim, name, None):
        return None
    return kind


def step_group(opt, group) -> bool:
    """Update ``group`` on its device (see the module docstring); False when this path does not apply."""
    from ..devices.opencl import DeviceArray
    params = [p for p in group["params"] if p.grad is not None]
    if not params:
        return False
    d0 = params[0]._data
    if type(d0) is not DeviceArray:
        return False
    kind = _supported(opt, group)
    dev, dt = d0.device, d0.dtype
    if kind is None or dt not in _float_dtypes(dev):
        return False
    for p in params:
        d, g = p._data, p.grad._data
        if (type(d) is not DeviceArray or type(g) is not DeviceArray or d.device != dev or g.device != dev
                or d.dtype != dt or g.dtype != dt or p.grad.is_sparse or g.shape != d.shape):
            return False
    opts_fn, state_fn, scal_fn, update = kind
    opts = opts_fn(opt, group)
    states, first, scalars = [], [], []
    for p in params:
        s, f = state_fn(opt, group, p, opt.state[p])
        if any(type(t._data) is not DeviceArray or t._data.device != dev or t._data.dtype != dt for t in s):
            return False                         # state left on the CPU (a checkpoint loaded there)
        states.append(s)
        first.append(f)
    for p in params:
        scalars.extend(scal_fn(opt, group, p, opt.state[p]))
    key = (type(opt).__name__, opts, dev, np.dtype(dt).str, tuple(first),
           tuple((p._data.shape, len(s)) for p, s in zip(params, states)))
    runner = _CACHE.get(key)
    if runner is None:
        runner = _CACHE[key] = _build(update, opts, params, states, first, len(scalars), dt, dev)
    _run(runner, params, states, np.asarray(scalars, dtype=dt), dev)
    for p in params:
        p._bump()
    STATS["steps"] += 1
    return True


def _float_dtypes(dev):
    from .cl_device import runtime
    return (np.dtype(np.float32), np.dtype(np.float64)) if runtime(dev).fp64 else (np.dtype(np.float32),)


def _build(update, opts, params, states, first, n_scalars, dt, dev):
    """Trace ``update`` on zero CPU tensors of the same shapes into a Program; compile it for ``dev``."""
    from ..autograd.grad_mode import no_grad
    from .capture import Tracer
    from .cl_runner import CLRunner
    from .. import dtypes as _dt
    edt = _dt.from_numpy_dtype(dt)

    def z(shape):
        return wrap(np.zeros(shape, dt), edt)
    ps = [z(p._data.shape) for p in params]
    gs = [z(p._data.shape) for p in params]
    sts = [tuple(z(t._data.shape) for t in s) for s in states]
    scal = z((n_scalars,))
    tr = Tracer()
    with no_grad(), np.errstate(all="ignore"), tr:     # (zeros: 0/0 while tracing)
        flat = ps + gs + [t for s in sts for t in s] + [scal]
        for i, t in enumerate(flat):
            tr.add_arg(t, (i,))
        update(ps, gs, sts, [scal[i] for i in range(n_scalars)], opts, first)
    if tr.unsupported is not None:
        raise RuntimeError(f"optimizer step on the device: internal: the update was not capturable: {tr.unsupported}")
    prog = tr.program(None)
    STATS["programs"] += 1
    return CLRunner(prog, name="optimizer_step", rt=None if dev == 0 else _rt(dev), require_native=True)


def _rt(dev):
    from .cl_device import runtime
    return runtime(dev)


def _run(runner, params, states, scalars, dev):
    from ..devices import opencl as _ocl
    scal = _ocl.from_numpy(scalars, dev, non_blocking=True, op="optimizer step")
    args = ([p._data for p in params] + [p.grad._data for p in params] +
            [t._data for s in states for t in s] + [scal])
    runner(args, grad_enabled=False)
