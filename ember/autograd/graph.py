"""ember.autograd.graph: the Node type, saved-tensor hooks and version helpers.

``saved_tensors_hooks(pack, unpack)`` calls ``pack(tensor)`` for every tensor an op saves for backward
while the context is active, keeps what pack returns instead of the tensor, and calls ``unpack`` each
time backward reads it. It works by installing one dispatch hook (``registry.HOOKS``) while any
saved-tensor hooks are active, so ordinary dispatch pays nothing for the feature. As in torch, tensors
kept through hooks are not checked against later in-place changes.

    >>> x = ember.ones(3, requires_grad=True)
    >>> with ember.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda p: p):
    ...     y = x * x
    >>> y.sum().backward()
"""
from __future__ import annotations

from ..tensor import Tensor
from .node import Node, AccumulateGrad  # noqa: F401
from . import node as _node

_STACK: list = []          # active (pack, unpack) pairs, innermost last
_DISABLED: list = [None]   # error message while disable_saved_tensors_hooks is active
_BUSY: list = [False]      # inside a pack hook: ops it runs save their tensors as they are


class _Packed:
    """Placeholder in a node's saved arguments for a value kept by a pack hook."""

    __slots__ = ("value", "unpack")

    def __init__(self, value, unpack):
        self.value = value
        self.unpack = unpack


def _pack_saved(op, args, attrs, run):
    # dispatch hook: after the op ran, route what its new node saved through the innermost pack hook
    before = _node._seq[0]
    out = run()
    if op.save and _STACK and not _BUSY[0]:
        for o in (out if isinstance(out, tuple) else (out,)):
            fn = o.grad_fn if isinstance(o, Tensor) else None
            if fn is not None and fn.seq > before and fn.op is op:
                _pack_node(fn, out if isinstance(out, tuple) else (out,))
                break
    return out


def _pack_node(node, outs):
    _BUSY[0] = True
    try:
        _pack_node_inner(node, outs)
    finally:
        _BUSY[0] = False


def _pack_node_inner(node, outs):
    pack, unpack = _STACK[-1]
    save = node.op.save
    if node.args is not None:
        idx = [i for i, a in enumerate(node.args) if isinstance(a, Tensor)
               and ("i" in save or str(i) in save)]
        if idx:
            args = list(node.args)
            for i in idx:
                args[i] = _Packed(pack(args[i]), unpack)
            node.args = tuple(args)
            node.versions = []
            cd = node.ctx_data if node.ctx_data is not None else {}
            cd["packed_in"] = True
            node.ctx_data = cd
    if node.saved_out is not None:
        packed = []
        for i, (data, dt, vc, v) in enumerate(node.saved_out):
            packed.append(_Packed(pack(outs[i]), unpack))
        node.saved_out = None
        cd = node.ctx_data if node.ctx_data is not None else {}
        cd["packed_out"] = packed
        node.ctx_data = cd


def unpack_args(args) -> tuple:
    """``args`` with every packed value replaced by ``unpack(value)``."""
    return tuple(a.unpack(a.value) if type(a) is _Packed else a for a in args)


def pack_for_function(tensors) -> tuple:
    """What a custom Function saves under active hooks (see FunctionCtx.save_for_backward)."""
    if not _STACK or _BUSY[0]:
        return tensors
    pack, unpack = _STACK[-1]
    _BUSY[0] = True
    try:
        return tuple(_Packed(pack(t), unpack) if isinstance(t, Tensor) else t for t in tensors)
    finally:
        _BUSY[0] = False


class saved_tensors_hooks:
    """Context manager: ``pack_hook(tensor) -> object`` when a tensor is saved for backward,
    ``unpack_hook(object) -> Tensor`` when backward reads it."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        if _DISABLED[0] is not None:
            raise RuntimeError(_DISABLED[0])
        from ..ops import registry
        _STACK.append((self.pack_hook, self.unpack_hook))
        if _pack_saved not in registry.HOOKS:
            registry.HOOKS.append(_pack_saved)
        return self

    def __exit__(self, *exc):
        from ..ops import registry
        _STACK.pop()
        if not _STACK and _pack_saved in registry.HOOKS:
            registry.HOOKS.remove(_pack_saved)
        return False


class save_on_cpu(saved_tensors_hooks):
    """torch's hooks that move saved tensors to the CPU. ember's tensors already live on the CPU,
    so the saved tensors are kept as they are."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        super().__init__(lambda t: t, lambda t: t)


class disable_saved_tensors_hooks:
    """Inside, entering ``saved_tensors_hooks`` raises RuntimeError(error_message)."""

    def __init__(self, error_message: str):
        self.error_message = error_message

    def __enter__(self):
        self._prev = _DISABLED[0]
        _DISABLED[0] = self.error_message
        if _STACK:
            _DISABLED[0] = self._prev
            raise RuntimeError(self.error_message)
        return self

    def __exit__(self, *exc):
        _DISABLED[0] = self._prev
        return False


def increment_version(tensor) -> None:
    """Bump ``tensor``'s version counter (as an in-place write would)."""
    for t in (tensor if isinstance(tensor, (list, tuple)) else (tensor,)):
        t._bump()
