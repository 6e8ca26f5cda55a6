"""The harness the runner and the printed repros share, as text (``HARNESS``), and executed once (``_H``):
``make_inputs`` makes a call's inputs from the specs, ``run`` runs a function on them, backward included."""
from __future__ import annotations

HARNESS = '''\
import numpy as np
import ember
import ember.nn.functional as F


def make_inputs(specs, seed, call, upcast=False):
    """Fresh inputs for one call: floats N(0, 1), integers in [-4, 4], index tensors in [0, bound);
    ``transposed``: stored with the dimensions reversed (a non-contiguous argument); ``upcast``: floats
    as float64 (the same values)."""
    r = np.random.default_rng([seed, call])
    xs = []
    for shape, dtype, grad, bound, transposed in specs:
        if bound is not None:
            a = r.integers(0, max(bound, 1), shape)
        elif dtype.startswith("float"):
            a = r.standard_normal(shape)
        else:
            a = r.integers(-4, 5, shape)
        a = np.asarray(a).astype(dtype)
        if upcast and dtype.startswith("float"):
            a = a.astype(np.float64)
        if transposed:
            a = np.ascontiguousarray(a.T).T
        t = ember.from_numpy(a)
        xs.append(t.requires_grad_() if grad else t)
    return xs, r


def run(g, specs, seed, call, upcast=False):
    """g's outputs, the inputs' gradients through a random cotangent and the inputs' values after the call
    (as NumPy arrays)."""
    xs, r = make_inputs(specs, seed, call, upcast)
    outs = g(*xs)
    diff = [o for o in outs if o.requires_grad]
    if diff:
        cots = [ember.from_numpy(r.standard_normal(tuple(o.shape)).astype(o.detach().numpy().dtype)) for o in diff]
        ember.autograd.backward(diff, cots)
    return ([o.detach().numpy().copy() for o in outs],
            [None if x.grad is None else x.grad.numpy().copy() for x in xs],
            [x.detach().numpy().copy() for x in xs])
'''

_H: dict = {}
exec(compile(HARNESS, "<ember.compiler.fuzz harness>", "exec"), _H)
