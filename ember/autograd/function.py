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
    >>> x = ember.tensor([3.0], requires_grad=True)
    >>> Square.apply(x).backward()
    >>> x.grad
    tensor([6.])

``forward`` runs with grad recording off; one graph node links the tensor outputs to the tensor
inputs and calls ``backward`` (with grad mode on under ``create_graph``, so double backward works when
``backward`` is written in ember ops). The node reuses the engine's op protocol through ``_FnOp``.
"""
from __future__ import annotations

import functools

from ..tensor import Tensor, wrap
from . import grad_mode as _gm
from .node import Node, _version_error, node_class

_FREED = ("Trying to backward through the graph a second time (or directly access saved tensors after "
          "they have already been freed). Saved intermediate values of the graph are freed when you call "
          ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
          "graph a second time or if you need to access saved tensors after calling backward.")


class FunctionCtx:
    """The ``ctx`` object passed to forward and backward; it also carries user attributes."""

    def __init__(self):
        self._saved = ()
        self._saved_versions = ()
        self.needs_input_grad = ()
        self._non_diff = set()
        self._dirty = ()
        self.materialize_grads = True
        self._released = False

    def save_for_backward(self, *tensors):
        """Keep tensors (or None) for backward; an in-place change to one of them is an error later."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        from .graph import pack_for_function
        self._saved = pack_for_function(tensors)
        self._saved_versions = tuple(t._get_vc()[0] if isinstance(t, Tensor) else None for t in self._saved)

    def save_for_forward(self, *tensors):
        """Forward-mode AD is not implemented in ember; the tensors are kept for API compatibility."""
        self._saved_forward = tensors

    @property
    def saved_tensors(self) -> tuple:
        if self._released:
            raise RuntimeError(_FREED)
        for t, v in zip(self._saved, self._saved_versions):
            if isinstance(t, Tensor) and t._get_vc()[0] != v:
                _version_error(t, None, t._vc[0], v)
        from .graph import unpack_args
        return unpack_args(self._saved)

    def _release(self):
        if self._saved:
            self._released = True
            self._saved = ()

    def mark_non_differentiable(self, *tensors):
        """Outputs that get no gradient (their ``requires_grad`` is False)."""
        self._non_diff.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        """Inputs that forward modified in place (they must also be returned as outputs)."""
        self._dirty = tensors

    def set_materialize_grads(self, value: bool):
        """With False, backward receives None (not zeros) for outputs that got no gradient."""
        self.materialize_grads = value


BackwardCFunction = FunctionCtx


class _FnOp:
    """An OpDef-like adapter so the engine can run a custom Function's backward."""

    __slots__ = ("cls", "name", "node_name", "node_cls", "save", "nondiff_outputs", "differentiable", "nout")

    def __init__(self, cls, nout, nondiff):
        self.cls = cls
        self.name = cls.__name__
        self.node_name = cls.__name__ + "Backward"
        self.node_cls = node_class(self.node_name)
        self.save = ""
        self.nondiff_outputs = nondiff
        self.differentiable = True
        self.nout = nout

    def backward(self, node, *grads):
        ctx = node.ctx_data["ctx"]
        cls = self.cls
        # a subclass may define vjp instead of backward
        bw = cls.vjp if cls.backward is Function.backward and cls.vjp is not Function.vjp else cls.backward
        res = bw(ctx, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        nin = len(node.edges)
        if len(res) != nin:
            if len(res) > nin and all(r is None for r in res[nin:]):
                res = res[:nin]
            else:
                raise RuntimeError(f"function {self.node_name} returned an incorrect number of gradients "
                                   f"(expected {nin}, got {len(res)})")
        for i, r in enumerate(res):
            if r is not None and not ctx._input_is_tensor[i]:
                raise RuntimeError(f"function {self.node_name} returned a gradient different than None at "
                                   f"position {i + 1}, but the corresponding forward input was not a Variable")
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

    @staticmethod
    def vjp(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("ember does not implement forward-mode AD (jvp)")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please "
                           "use new-style autograd function with static forward method. (Example: "
                           "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` without recording, then link the outputs to the inputs with one node."""
        ctx = FunctionCtx()
        grad_on = _gm.GRAD[0]
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._rg and grad_on for a in args)
        ctx._input_is_tensor = tuple(isinstance(a, Tensor) for a in args)
        _gm.GRAD[0] = False
        try:
            if cls.setup_context is not Function.setup_context:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        finally:
            _gm.GRAD[0] = grad_on
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        dirty = {id(t) for t in ctx._dirty}
        for t in ctx._dirty:
            if not any(o is t for o in outs):
                raise RuntimeError("Some elements marked as dirty during the forward method were not returned "
                                   "as output. The inputs that are modified inplace must all be outputs of the "
                                   "Function.")
        if not (grad_on and any(ctx.needs_input_grad)):
            return out
        fixed = []
        tensor_outs = []
        rebase = []
        for o in outs:
            if isinstance(o, Tensor):
                if id(o) in dirty:
                    # modified in place: the node's output is an alias, onto which o is rebased below
                    _check_dirty(o)
                    a = _alias(o)
                    rebase.append((o, a))
                    tensor_outs.append(a)
                    fixed.append(o)
                    continue
                if any(o is a for a in args):
                    # an input returned as is becomes a new tensor (same data) carrying this node
                    o = _alias(o)
                tensor_outs.append(o)
            fixed.append(o)
        nondiff = tuple(i for i, o in enumerate(tensor_outs) if id(o) in ctx._non_diff
                        or any(id(d) in ctx._non_diff and a is o for d, a in rebase))
        op = _FnOp(cls, len(tensor_outs), nondiff)
        node = Node.record(op, args, {}, tuple(tensor_outs))
        node._name = op.node_name
        cd = dict(node.ctx_data or {})
        cd["ctx"] = ctx
        if ctx.materialize_grads and len(tensor_outs) > 1:
            # non-differentiable outputs still get zero gradients, as torch documents
            cd["out_meta"] = [(o._data.shape, o._dtype) for o in tensor_outs]
        else:
            cd.pop("out_meta", None)
        node.ctx_data = cd
        if rebase:
            from ..ops.inplace import rebase_history
            for o, a in rebase:
                if a._rg:
                    rebase_history(o, a)
        fixed = tuple(fixed)
        return fixed[0] if single else fixed


def _alias(t: Tensor) -> Tensor:
    out = wrap(t._data, t._dtype)
    out._vc = t._get_vc()
    out._storage_src = t
    return out


def _check_dirty(t: Tensor) -> None:
    base = t._base
    if base is not None and base._rg and base.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    if t._rg and t.grad_fn is None and base is None:
        raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")


class InplaceFunction(Function):
    """A Function with an ``inplace`` flag (torch's legacy helper base class)."""

    def __init__(self, inplace=False):
        self.inplace = inplace


class NestedIOFunction(Function):
    """Not supported by ember: torch's legacy nested-IO Function API."""

    @classmethod
    def apply(cls, *args, **kwargs):
        raise RuntimeError("ember does not support NestedIOFunction (a deprecated torch API); "
                           "use autograd.Function with static forward/backward")


class _OnceDifferentiableError(Function):
    """Identity whose backward refuses: the result of a @once_differentiable backward."""

    @staticmethod
    def forward(ctx, *grads):
        return grads if len(grads) != 1 else grads[0]

    @staticmethod
    def backward(ctx, *gg):
        raise RuntimeError("trying to differentiate twice a function that was marked with "
                           "@once_differentiable")


def once_differentiable(fn):
    """Decorate a ``backward`` that is not itself differentiable: it runs under no_grad, and trying to
    differentiate its result (double backward) raises."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with _gm.no_grad():
            out = fn(ctx, *args)
        if not _gm.GRAD[0]:
            return out
        if not any(isinstance(a, Tensor) and a._rg for a in args):
            return out
        outs = out if isinstance(out, tuple) else (out,)
        # results become outputs of a node that raises when differentiated (torch's DelayedError)
        fake = [o.detach().requires_grad_() if isinstance(o, Tensor) and o._dtype.grad_ok else o
                for o in outs]
        return _OnceDifferentiableError.apply(*fake)
    return wrapper
