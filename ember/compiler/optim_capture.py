"""Optimizer updates written in ember ops, used while ember.compile captures a training step.

Eager optimizers update NumPy buffers directly (fast, but invisible to capture). While tracing, the
update for the supported optimizers (SGD, Adam, AdamW) runs through ember's in-place ops instead, so
parameters, gradients and optimizer state are updated by the compiled program. Python decisions the
update makes (is the state initialised? does a parameter have a gradient?) become guards.
"""
from __future__ import annotations

import itertools
import operator
import weakref

import numpy as np

from ..autograd.grad_mode import no_grad
from ..ops.creation import zeros_like
from ..ops.fused_optim import adam_update_, _settings
from .capture import Tracer


def _group_guard(tr, opt, seen):
    """One guard for a parameter group: for each parameter, the optimizer's state dict for it (by
    identity: ``opt.state.clear()`` or ``load_state_dict`` make new ones, and the trace reads the old
    one's tensors by reference) and whether it has a gradient, as they were when the update read them
    (``seen``: (weakref to the parameter, its state dict or None, has a gradient), taken before the
    traced update wrote any state). The guard keeps those dicts alive, so their ids are not reused. A
    tensor put into an existing state dict by hand is not seen. One closure, C-level loops and one tuple
    compare per call instead of two lambdas per parameter (a GPT step has ~50)."""
    if not seen:
        return
    oref = weakref.ref(opt)
    prefs = tuple(r for r, _, _ in seen)
    dicts = tuple(st for _, st, _ in seen)
    expect = (tuple(map(id, dicts)), tuple(g for _, _, g in seen))

    def now(oref=oref, prefs=prefs, call=operator.call, grad=operator.attrgetter("_grad"),
            is_not=operator.is_not, nones=itertools.repeat(None), keep=dicts):
        o = oref()
        if o is None:
            return None
        ps = list(map(call, prefs))
        try:
            return tuple(map(id, map(o.state.get, ps))), tuple(map(is_not, map(grad, ps), nones))
        except AttributeError:                  # a parameter was freed
            return None
    shapes = ", ".join(str(tuple(r().shape)) for r in prefs[:4]) + (", ..." if len(prefs) > 4 else "")
    tr.extra_guards.append((f"{type(opt).__name__} state dicts and gradients present as traced for "
                            f"{len(prefs)} parameter(s) ({shapes})", now, expect))


def _params_with_grad(tr, opt, group, init=None):
    """(parameter, its gradient, negated under ``maximize``) for the group's parameters that have one.
    ``init(opt, p, group)``, when given, makes the empty state of a parameter with a gradient before its
    guard value is read, outside the trace: the trace then reads and updates the state by reference, as
    on every later step, and serves those steps too (no second trace once the state exists). The group's
    guard (``_group_guard``) is recorded once every parameter was seen."""
    maximize = group["maximize"]
    seen = []
    for p in group["params"]:
        if init is not None and p.grad is not None and not opt.state[p]:
            with tr.untraced():
                init(opt, p, group)
        seen.append((weakref.ref(p), opt.state.get(p), p._grad is not None))
        if p.grad is not None:
            yield p, (-p.grad if maximize else p.grad)
    _group_guard(tr, opt, seen)


def _sgd(tr, opt, group):
    lr, mom, damp, wd = group["lr"], group["momentum"], group["dampening"], group["weight_decay"]
    nesterov = group["nesterov"]
    made = False
    for p, g in _params_with_grad(tr, opt, group):
        if wd != 0:
            g = g + p * wd
        if mom != 0:
            st = opt.state[p]
            buf = st.get("momentum_buffer")
            if buf is None:
                buf = g.clone()
                st["momentum_buffer"] = buf
                made = True
            else:
                buf.mul_(mom).add_(g * (1 - damp))
            g = g + buf * mom if nesterov else buf
        p.sub_(g * lr)
    if made:
        # the state this trace stores is made once, by Python: a replay would leave it unset (after
        # ``opt.state.clear()`` the state is empty again and this trace's other guards match), so the
        # trace never replays; from the second step on the state exists and another trace serves
        tr.extra_guards.append(("SGD momentum buffers are made by this trace (a replay cannot make them)",
                                object, _NEVER))
    return True


_NEVER = object()       # equal to no fresh object(): a guard that always fails


def _adam_state(opt, p, group):
    """The state eager Adam creates on a parameter's first step (zeros; the step count a float32 0-dim
    tensor, on a device parameter's device: a compiled step then runs wholly there; eager keeps it on the
    CPU, and both read and advance it wherever it is)."""
    from ..ops.creation import zeros
    from .. import dtypes as _dt
    st = opt.state[p]
    st["step"] = zeros((), dtype=_dt.float32, device=p.device)
    st["exp_avg"] = zeros_like(p)
    st["exp_avg_sq"] = zeros_like(p)
    if group["amsgrad"]:
        st["max_exp_avg_sq"] = zeros_like(p)


def _adam(tr, opt, group):
    lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
    amsgrad = group["amsgrad"]
    decoupled = type(opt).__name__ == "AdamW" or group.get("decoupled_weight_decay", False)
    fused = None if amsgrad else _fused_settings(tr, group, decoupled)
    for p, g in _params_with_grad(tr, opt, group, _adam_state):
        st = opt.state[p]
        step_t = st["step"]
        step_t.add_(1)
        if fused is not None and _fits_fused(p, g, st):
            # one recorded op (and three writes) for the update instead of ~20 (ops/fused_optim.py)
            adam_update_(p, g, st["exp_avg"], st["exp_avg_sq"], step_t, fused)
            continue
        if wd != 0:
            if decoupled:
                p.mul_(1 - lr * wd)
            else:
                g = g + p * wd
        m, v = st["exp_avg"], st["exp_avg_sq"]
        # eager Adam's own arithmetic (optim/adam.py _moments): m.lerp_(g, 1 - b1), v = v * b2 + g * (1 - b2) * g,
        # in 4 ops and 2 writes instead of 7 and 4 (a training step's trace is mostly optimizer ops)
        m.lerp_(g, 1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        step = step_t.double()
        bc1 = 1 - b1 ** step
        bc2 = 1 - b2 ** step
        if amsgrad:
            mx = st["max_exp_avg_sq"]
            mx.copy_(mx.maximum(v))
            vv = mx
        else:
            vv = v
        denom = (vv.sqrt() / bc2.sqrt().to(p.dtype)) + eps
        p.sub_((m / denom) * (lr / bc1).to(p.dtype))
    return True


def _fused_settings(tr, group, decoupled):
    """``adam_update``'s attributes for ``group``, or None when the update is traced op by op: options that
    are not plain numbers (a tensor lr). Symbolic-size traces fuse too (parameters never have symbolic sizes)."""
    if not FUSED:
        return None
    lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
    if not all(type(x) in (float, int) or isinstance(x, (np.floating, np.integer)) for x in (lr, b1, b2, eps, wd)):
        return None
    return _settings(lr, b1, b2, eps, wd, decoupled)


def _fits_fused(p, g, st) -> bool:
    """Whether ``p``'s update may be the one op: float32/float64 CPU arrays of one shape and dtype, the
    step count a 0-dim tensor."""
    d = p._data
    if type(d) is not np.ndarray or d.dtype not in _FUSED_DTYPES or st["step"]._data.shape != ():
        return False
    return all(type(t._data) is np.ndarray and t._data.dtype == d.dtype and t._data.shape == d.shape
               for t in (g, st["exp_avg"], st["exp_avg_sq"]))


FUSED = True        # False: every Adam/AdamW update is traced op by op (tests compare the two)
_FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

_SUPPORTED = {"SGD": _sgd, "Adam": _adam, "AdamW": _adam}


def step_group(opt, group) -> bool:
    tr = Tracer.active
    if tr is None:
        return False
    fn = _SUPPORTED.get(type(opt).__name__)
    if fn is None:
        tr.refuse(f"optimizer {type(opt).__name__} is not capturable yet (supported: SGD, Adam, AdamW)",
                  "call optimizer.step() outside the compiled function")
        return False
    with no_grad():
        return fn(tr, opt, group)
