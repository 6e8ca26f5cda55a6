"""ember.autograd.functional: vjp, jvp, jacobian, hessian, vhp, hvp (torch.autograd.functional).

Everything is built on reverse mode (``autograd.grad``): Jacobians one output element at a time, and
forward-mode products (jvp, hvp) by the double-backward trick: ``u -> vjp(u)`` is linear in ``u``, so
differentiating ``<vjp(u), v>`` with respect to ``u`` gives ``J v``.

    >>> x = ember.tensor([1.0, 2.0])
    >>> ember.autograd.functional.jacobian(lambda t: t * t, x)
    tensor([[2., 0.],
            [0., 4.]])

Inputs are detached copies that require grad (so the caller's graph is untouched) unless
``create_graph=True``, in which case results stay differentiable with respect to the original inputs.
``vectorize`` and the forward-mode ``strategy`` options of torch select implementation strategies with
the same results; ember accepts them and computes the same values in reverse mode.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor, wrap
from . import grad_mode as _gm
from .engine import grad as _grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _as_tuple(x, arg_name: str, fn_name: str):
    is_tuple = isinstance(x, tuple)
    xs = x if is_tuple else (x,)
    for i, el in enumerate(xs):
        if not isinstance(el, Tensor):
            if is_tuple:
                raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                                f"Tensors but the value at index {i} has type {type(el)}.")
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors "
                            f"but the given {arg_name} has type {type(el)}.")
    return is_tuple, xs


def _tuple_post(res, to_unpack):
    if isinstance(to_unpack, tuple):
        outer, inner = to_unpack
        if not inner:
            res = tuple(r[0] for r in res)
        if not outer:
            res = res[0]
        return res
    return res if to_unpack else res[0]


def _preprocess(xs, create_graph: bool, need_graph: bool):
    out = []
    for x in xs:
        if create_graph and x._rg:
            out.append(x.view_as(x))       # keep the link to the caller's graph
        else:
            out.append(x.detach().requires_grad_(need_graph) if x._dtype.grad_ok or not need_graph
                       else x.detach())
    return tuple(out)


def _postprocess(xs, create_graph: bool):
    if isinstance(xs[0], tuple):
        return tuple(_postprocess(x, create_graph) for x in xs)
    return xs if create_graph else tuple(x.detach() for x in xs)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if tuple(el_v.shape) != tuple(el_other.shape):
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be {_size(el_other.shape)} but got "
                               f"{_size(el_v.shape)}.")


def _size(s):
    return "ember.Size([" + ", ".join(map(str, s)) + "])"


def _check_requires_grad(xs, kind: str, strict: bool):
    if not strict:
        return
    for i, x in enumerate(xs):
        if x is None:
            raise RuntimeError(f"The output of the user-provided function is independent of input {i}. "
                               "This is not allowed in strict mode.")
        if not x._rg:
            if kind == "hessian":
                raise RuntimeError(
                    f"The hessian of the user-provided function with respect to input {i} is independent of "
                    "the input. This is not allowed in strict mode. You should ensure that your function is "
                    "thrice differentiable and that the hessian depends on the inputs.")
            if kind == "jacobian":
                raise RuntimeError(
                    "While computing the hessian, found that the jacobian of the user-provided function with "
                    f"respect to input {i} is independent of the input. This is not allowed in strict mode. "
                    "You should ensure that your function is twice differentiable and that the jacobian "
                    "depends on the inputs (this would be violated by a linear function for example).")
            if kind == "grad_inputs":
                raise RuntimeError(f"The gradient with respect to input {i} is independent of the inputs of the "
                                   "user-provided function. This is not allowed in strict mode.")
            raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The "
                               "outputs must be computed in a differentiable manner from the input when "
                               "running in strict mode.")


def _agrad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """autograd.grad over the outputs that require grad (None for every input if none does)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    outs, gos = [], []
    for o, g in zip(outputs, grad_outputs):
        if o is not None and o._rg:
            outs.append(o)
            gos.append(g)
    if not outs:
        return (None,) * len(inputs)
    return _grad(outs, inputs, gos, allow_unused=True, create_graph=create_graph, retain_graph=retain_graph)


_ZERO_MSG = {
    "back": "The output of the user-provided function is independent of input {}. This is not allowed in "
            "strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {} in the grad_outputs when "
                  "using the double backward trick to compute forward mode gradients. This is not allowed in "
                  "strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {}. This is not allowed "
                   "in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {} in the "
                         "grad_jacobian. This is not allowed in strict mode as it prevents from using the "
                         "double backward trick to replace forward mode AD.",
}


def _fill_zeros(grads, refs, strict: bool, stage: str):
    res = []
    for i, (g, r) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(_ZERO_MSG[stage].format(i))
            g = wrap(np.zeros(r._data.shape, dtype=r._dtype.np), r._dtype)
        res.append(g)
    return tuple(res)


def _zeros_rg(t):
    return wrap(np.zeros(t._data.shape, dtype=t._dtype.np), t._dtype).requires_grad_(True)


def _prepared_inputs(inputs, create_graph, op):
    """``(is_tuple, inputs)``: the inputs as a tuple of fresh leaves requiring grad."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", op)
    return in_tuple, _preprocess(inputs, create_graph, True)


def _outputs_of(func, inputs, strict, op):
    """``(is_tuple, outputs)``: ``func(*inputs)`` as a tuple, checked under ``strict``."""
    out_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", op)
    _check_requires_grad(outputs, "outputs", strict)
    return out_tuple, outputs


def _v_against(v, tensors, is_tuple, create_graph, op, when_none):
    """``v`` checked against ``tensors`` (shapes) and prepared; None only where ``tensors`` is one
    one-element tensor (``when_none`` finishes the error saying so)."""
    if v is not None:
        _, v = _as_tuple(v, "v", op)
        v = _preprocess(v, create_graph, False)
        _validate_v(v, tensors, is_tuple)
    elif len(tensors) != 1 or tensors[0]._data.size != 1:
        raise RuntimeError("The vector v can only be None if " + when_none)
    return v


def _finish_product(outputs, out_tuple, of, wrt, v, like, res_tuple, create_graph, strict, stage):
    """The last step of vjp/jvp/vhp/hvp: the gradient of ``of`` with respect to ``wrt`` against ``v``
    (zeros shaped like ``like`` where independent), with grad mode as ``create_graph`` asks; returns
    ``(outputs, result)``, each a tuple or not as the caller's arguments were."""
    with _gm.set_grad_enabled(True if create_graph else _gm.GRAD[0]):
        res = _fill_zeros(_agrad(of, wrt, v, create_graph=create_graph), like, strict, stage)
    return (_tuple_post(_postprocess(outputs, create_graph), out_tuple),
            _tuple_post(_postprocess(res, create_graph), res_tuple))


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), v^T J)``: the vector-Jacobian product at ``inputs``."""
    with _gm.enable_grad():
        in_tuple, inputs = _prepared_inputs(inputs, create_graph, "vjp")
        out_tuple, outputs = _outputs_of(func, inputs, strict, "vjp")
        v = _v_against(v, outputs, out_tuple, create_graph, "vjp",
                       "the user-provided function returns a single Tensor with a single element.")
    return _finish_product(outputs, out_tuple, outputs, inputs, v, inputs, in_tuple, create_graph, strict, "back")


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), J v)``: the Jacobian-vector product, by the double-backward trick."""
    with _gm.enable_grad():
        in_tuple, inputs = _prepared_inputs(inputs, create_graph, "jvp")
        v = _v_against(v, inputs, in_tuple, create_graph, "jvp",
                       "the input to the user-provided function is a single Tensor with a single element.")
        out_tuple, outputs = _outputs_of(func, inputs, strict, "jvp")
        grad_outputs = tuple(_zeros_rg(o) for o in outputs)
        grad_inputs = _agrad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
    return _finish_product(outputs, out_tuple, grad_inputs, grad_outputs, v, outputs, out_tuple, create_graph,
                           strict, "back_trick")


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: shape ``output.shape + input.shape`` per (output, input)
    pair, nested as tuples when ``func`` returns a tuple or ``inputs`` is a tuple."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                         'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                         'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is "
                                  "only implemented for `vectorize=True`.")
    with _gm.enable_grad():
        in_tuple, inputs = _prepared_inputs(inputs, create_graph, "jacobian")
        out_tuple, outputs = _outputs_of(func, inputs, strict, "jacobian")
        jac = []
        for i, out in enumerate(outputs):
            rows = [[] for _ in inputs]
            flat = out.reshape(-1)
            for j in range(out._data.size):
                vj = _agrad((flat[j],), inputs, retain_graph=True, create_graph=create_graph)
                for k, (g, x) in enumerate(zip(vj, inputs)):
                    if g is None:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is independent of "
                                               f"input {k}. This is not allowed in strict mode.")
                        g = wrap(np.zeros(x._data.shape, dtype=x._dtype.np), x._dtype)
                    elif strict and create_graph and not g._rg:
                        raise RuntimeError("The jacobian of the user-provided function is independent of input "
                                           f"{k}. This is not allowed in strict mode when create_graph=True.")
                    rows[k].append(g)
            jac.append(tuple(_stack_rows(r, out, x) for r, x in zip(rows, inputs)))
        jac = _postprocess(tuple(jac), create_graph)
    return _tuple_post(jac, (out_tuple, in_tuple))


def _stack_rows(rows, out, x):
    shape = tuple(out._data.shape) + tuple(x._data.shape)
    if not rows:
        return wrap(np.zeros(shape, dtype=x._dtype.np), x._dtype)
    from ..ops.registry import FUNCTIONS
    return FUNCTIONS["stack"](rows, 0).reshape(shape)


def hessian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar function: shape ``input.shape + input.shape`` (nested for tuples)."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    if outer_jacobian_strategy == "forward-mode" and not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is "
                                  "only implemented for `vectorize=True`.")

    def single_output(*inp):
        out = func(*inp)
        out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict)
        if out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out._data.size != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single "
                               "element")
        return out.reshape(())

    def jac_func(*inp):
        j = jacobian(single_output, inp, create_graph=True)
        _check_requires_grad(j, "jacobian", strict)
        return j
    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict)
    return _tuple_post(res, (in_tuple, in_tuple))


def _hv_setup(func, inputs, v, create_graph, strict, name):
    in_tuple, inputs = _prepared_inputs(inputs, create_graph, name)
    v = _v_against(v, inputs, in_tuple, create_graph, name,
                   "the input to the user-provided function is a single Tensor with a single element.")
    out_tuple, outputs = _outputs_of(func, inputs, strict, name)
    if out_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outputs[0]._data.size != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {name} should contain a single element")
    jac = _agrad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict)
    return in_tuple, out_tuple, inputs, v, outputs, jac


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), v^T H)``: vector-Hessian product of a scalar function."""
    with _gm.enable_grad():
        in_tuple, out_tuple, inputs, v, outputs, jac = _hv_setup(func, inputs, v, create_graph, strict, "vhp")
    return _finish_product(outputs, out_tuple, jac, inputs, v, inputs, in_tuple, create_graph, strict, "double_back")


def hvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), H v)``: Hessian-vector product of a scalar function (double-backward trick)."""
    with _gm.enable_grad():
        in_tuple, out_tuple, inputs, v, outputs, jac = _hv_setup(func, inputs, v, create_graph, strict, "hvp")
        grad_jac = tuple(_zeros_rg(x) for x in inputs)
        double_back = _agrad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict)
    return _finish_product(outputs, out_tuple, double_back, grad_jac, v, inputs, in_tuple, create_graph, strict,
                           "double_back_trick")
