"""gradcheck / gradgradcheck: compare analytical gradients with central finite differences.

    >>> x = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    >>> ember.autograd.gradcheck(lambda t: t * t, (x,))
    True

The analytical Jacobian is built one output element at a time with ``autograd.grad``; the numerical one
perturbs each input element in place by ``±eps`` (any layout, as long as the input is writable).
"""
from __future__ import annotations

import warnings

import numpy as np

from ..tensor import Tensor, wrap
from .engine import grad as _grad


class GradcheckError(RuntimeError):
    """Raised by gradcheck when analytical and numerical gradients differ."""


def _flat_outputs(out):
    if isinstance(out, Tensor):
        return (out,)
    return tuple(o for o in out if isinstance(o, Tensor))


def _fail(msg, raise_exception):
    if raise_exception:
        raise GradcheckError(msg)
    return False


def _numerical(func, inputs, x, oi, n_out, eps):
    """d output[oi] / d x by central differences, shape (x.numel(), n_out)."""
    data = x._data
    if not data.flags.writeable:
        raise GradcheckError("gradcheck: an input that requires grad is a read-only (e.g. expanded) view; "
                             "pass a tensor with its own memory (clone() it)")
    jac = np.zeros((data.size, n_out))
    for i, idx in enumerate(np.ndindex(data.shape)):
        orig = data[idx].item()
        data[idx] = orig + eps
        plus = _flat_outputs(func(*inputs))[oi]._data.astype(np.float64).reshape(-1).copy()
        data[idx] = orig - eps
        minus = _flat_outputs(func(*inputs))[oi]._data.astype(np.float64).reshape(-1).copy()
        data[idx] = orig
        jac[i] = (plus - minus) / (2 * eps)
    return jac


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
              check_grad_dtypes: bool = False, check_batched_grad: bool = False,
              check_batched_forward_grad: bool = False, check_forward_ad: bool = False,
              check_backward_ad: bool = True, fast_mode: bool = False, masked=None) -> bool:
    """True when every analytical Jacobian entry of ``func(*inputs)`` matches finite differences
    (``|a - n| <= atol + rtol * |n|``); otherwise raise GradcheckError (or return False)."""
    if check_forward_ad or check_batched_grad or check_batched_forward_grad:
        raise RuntimeError("gradcheck: ember implements reverse mode only; check_forward_ad, check_batched_grad "
                           "and check_batched_forward_grad must be False")
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    diff_inputs = [x for x in inputs if isinstance(x, Tensor) and x._rg]
    if not diff_inputs:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them "
                         "have requires_grad=True.")
    for x in diff_inputs:
        if x._dtype.name != "float64":
            warnings.warn(f"Input #{_index(inputs, x)} requires gradient and is not a double precision floating "
                          "point. This check will likely fail if all the inputs are not of double precision "
                          "floating point. ")
    outputs = _flat_outputs(func(*inputs))
    for oi, out in enumerate(outputs):
        if not out._dtype.is_floating_point:
            continue
        n_out = out._data.size
        analytical = [np.zeros((x._data.size, n_out)) for x in diff_inputs]
        if out._rg:
            for j in range(n_out):
                g = np.zeros(out._data.shape, dtype=out._dtype.np)
                g.reshape(-1)[j] = 1
                res = _grad(out, diff_inputs, wrap(g), retain_graph=True, allow_unused=True)
                for k, r in enumerate(res):
                    if r is not None:
                        analytical[k][:, j] = np.asarray(r._data, dtype=np.float64).reshape(-1)
        for k, x in enumerate(diff_inputs):
            numerical = _numerical(func, inputs, x, oi, n_out, eps)
            a = analytical[k]
            if not np.allclose(a, numerical, rtol=rtol, atol=atol):
                return _fail(f"Jacobian mismatch for output {oi} with respect to input {_index(inputs, x)},\n"
                             f"numerical:{_show(numerical)}\nanalytical:{_show(a)}\n", raise_exception)
    return True


def _index(inputs, x):
    return next(i for i, t in enumerate(inputs) if t is x)


def _show(a):
    return np.array2string(a, precision=4, threshold=200)


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False, raise_exception: bool = True,
                  nondet_tol: float = 0.0, check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                  check_batched_grad: bool = False, check_fwd_over_rev: bool = False,
                  check_rev_over_rev: bool = True, fast_mode: bool = False, masked=None) -> bool:
    """Check second derivatives: gradcheck the map (inputs, grad_outputs) -> first-order gradients."""
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    outs = _flat_outputs(func(*inputs))
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(wrap(rng.standard_normal(o._data.shape).astype(o._dtype.np)).requires_grad_(True)
                             for o in outs if o._rg and o._dtype.is_floating_point)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = (grad_outputs,)
    grad_outputs = tuple(grad_outputs)
    n_in = len(inputs)

    def first(*args):
        xs = args[:n_in]
        gos = args[n_in:]
        o = [t for t in _flat_outputs(func(*xs)) if t._rg and t._dtype.is_floating_point]
        d = [x for x in xs if isinstance(x, Tensor) and x._rg]
        r = _grad(o, d, gos, create_graph=True, allow_unused=True)
        return tuple(t for t in r if t is not None)
    return gradcheck(first, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
