"""Custom autograd functions: subclass ``ember.autograd.Function`` with static ``forward``/``backward``.

    >>> class Square(Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (x,) = ctx.saved_tensors
    ...         return 2 * x * g

``forward`` runs with grad recording off; one graph node links the outputs to the tensor inputs and
calls ``backward`` (with grad mode on under ``create_graph``, so double backward works when
``backward`` is written in ember ops).
"""
from __future__ import annotations

from ..tensor import Tensor
from . import grad_mode as _gm
from .node import Node


class FunctionCtx:
    """The ``ctx`` object passed to forward and backward."""

    def __init__(self):
        self._saved = ()
        self._saved_versions = ()
        self.needs_input_grad = ()
        self._non_diff = set()
        self.materialize_grads = True
        self._released = False

    def save_for_backward(self, *tensors):
        self._saved = tensors
        self._saved_versions = tuple(t._get_vc()[0] if isinstance(t, Tensor) else None for t in tensors)

    def save_for_forward(self, *tensors):
        pass

    @property
    def saved_tensors(self):
        if self._released:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved tensors "
                "after they have already been freed). Specify retain_graph=True if you need to backward "
                "through the graph a second time or if you need to access saved tensors after calling backward.")
        for t, v in zip(self._saved, self._saved_versions):
            if isinstance(t, Tensor) and t._get_vc()[0] != v:
                from .node import _version_error
                _version_error(t, None, t._vc[0], v)
        return self._saved

    def mark_non_differentiable(self, *tensors):
        self._non_diff.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        pass

    def set_materialize_grads(self, value: bool):
        self.materialize_grads = value


class _FnOp:
    """An OpDef-like adapter so the engine can run a custom Function's backward."""

    __slots__ = ("cls", "name", "node_name", "save", "nondiff_outputs", "differentiable", "nout")

    def __init__(self, cls, nout, nondiff):
        self.cls = cls
        self.name = cls.__name__
        self.node_name = cls.__name__ + "Backward"
        self.save = ""
        self.nondiff_outputs = nondiff
        self.differentiable = True
        self.nout = nout

    def backward(self, node, *grads):
        ctx = node.ctx_data["ctx"]
        if ctx._released:
            ctx.saved_tensors  # raises the standard error
        res = self.cls.backward(ctx, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        nin = len(node.edges)
        if len(res) != nin:
            if len(res) > nin and all(r is None for r in res[nin:]):
                res = res[:nin]
            else:
                raise RuntimeError(f"function {self.node_name} returned an incorrect number of gradients "
                                   f"(expected {nin}, got {len(res)})")
        return res


class _FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._backward_cls = cls


class Function(metaclass=_FunctionMeta):
    """Base class for custom differentiable operations (use ``MyFn.apply(*args)``)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._rg for a in args)
        prev = _gm.GRAD[0]
        _gm.GRAD[0] = False
        try:
            if cls.setup_context is not Function.setup_context:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        finally:
            _gm.GRAD[0] = prev
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        if prev and any(ctx.needs_input_grad):
            tensor_outs = []
            fixed = []
            for o in outs:
                if isinstance(o, Tensor):
                    # an input returned as is must become a new tensor with this node as history
                    if any(o is a for a in args):
                        o = o.detach()
                        o._base = None
                    tensor_outs.append(o)
                fixed.append(o)
            outs = tuple(fixed)
            nondiff = tuple(i for i, o in enumerate(tensor_outs) if id(o) in ctx._non_diff)
            op = _FnOp(cls, len(tensor_outs), nondiff)
            node = Node.record(op, args, {}, tuple(tensor_outs))
            node.ctx_data = dict(node.ctx_data or {}, ctx=ctx)
            node._name = op.node_name
            if ctx.materialize_grads and len(tensor_outs) > 1:
                node.ctx_data["out_meta"] = [(o._data.shape, o._dtype) for o in tensor_outs]
        return outs[0] if single else outs


class InplaceFunction(Function):
    pass


class NestedIOFunction(Function):
    pass


def once_differentiable(fn):
    return fn
