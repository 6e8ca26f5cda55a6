"""gradcheck: compare analytical gradients with central finite differences (in float64)."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor, wrap
from .engine import grad as _grad


class GradcheckError(RuntimeError):
    pass


def _flat_outputs(out):
    if isinstance(out, Tensor):
        return (out,)
    return tuple(o for o in out if isinstance(o, Tensor))


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
              fast_mode: bool = False, **kw) -> bool:
    """True when every analytical Jacobian entry matches its finite-difference estimate."""
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    diff_inputs = [x for x in inputs if isinstance(x, Tensor) and x._rg]
    if not diff_inputs:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them have requires_grad=True.")
    for x in diff_inputs:
        if x._dtype.name != "float64":
            import warnings
            warnings.warn(f"Input #{inputs.index(x)} requires gradient and is not a double precision floating "
                          "point. This check will likely fail if all the inputs are not of double precision "
                          "floating point. ")
    outputs = _flat_outputs(func(*inputs))
    for oi, out in enumerate(outputs):
        if not out._rg:
            continue
        n_out = out._data.size
        # analytical: one backward per output element
        analytical = [np.zeros((x._data.size, n_out)) for x in diff_inputs]
        for j in range(n_out):
            g = np.zeros(out._data.shape, dtype=out._dtype.np)
            g.reshape(-1)[j] = 1
            res = _grad(out, diff_inputs, wrap(g), retain_graph=True, allow_unused=True)
            for k, r in enumerate(res):
                if r is not None:
                    analytical[k][:, j] = r._data.reshape(-1)
        # numerical
        for k, x in enumerate(diff_inputs):
            numerical = np.zeros((x._data.size, n_out))
            flat = x._data.reshape(-1) if x._data.flags.c_contiguous else None
            if flat is None:
                raise GradcheckError("gradcheck needs contiguous inputs")
            for i in range(x._data.size):
                orig = flat[i].item()
                flat[i] = orig + eps
                plus = _flat_outputs(func(*inputs))[oi]._data.astype(np.float64).reshape(-1).copy()
                flat[i] = orig - eps
                minus = _flat_outputs(func(*inputs))[oi]._data.astype(np.float64).reshape(-1).copy()
                flat[i] = orig
                numerical[i] = (plus - minus) / (2 * eps)
            if not np.allclose(analytical[k], numerical, rtol=rtol, atol=atol):
                if raise_exception:
                    raise GradcheckError(
                        f"Jacobian mismatch for output {oi} with respect to input {inputs.index(x)},\n"
                        f"numerical:{numerical}\nanalytical:{analytical[k]}\n")
                return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, **kw) -> bool:
    """Check second derivatives by gradchecking the function that returns first derivatives."""
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    diff = [x for x in inputs if isinstance(x, Tensor) and x._rg]
    outs = _flat_outputs(func(*inputs))
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(wrap(rng.standard_normal(o._data.shape).astype(o._dtype.np)) for o in outs)
    grad_outputs = tuple(grad_outputs)
    for g in grad_outputs:
        g.requires_grad_(True)

    def first(*args):
        xs = args[:len(inputs)]
        gos = args[len(inputs):]
        o = _flat_outputs(func(*xs))
        d = [x for x in xs if isinstance(x, Tensor) and x._rg]
        r = _grad(o, d, gos, create_graph=True, allow_unused=True)
        return tuple(t for t in r if t is not None)
    return gradcheck(first, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception)
