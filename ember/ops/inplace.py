"""In-place writes: ``op_`` methods, ``copy_``, ``out=`` and the autograd bookkeeping they need.

An in-place op is computed out of place and its result written into the tensor's buffer, so every
view sees it and the version counter moves. With autograd, the tensor's history is rebased onto the
new node; if the tensor is a view, its base gets a ``copy_slices`` node (the base with the view's
region replaced) and the view becomes an ``as_strided`` view of the new base, as torch does.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor, wrap
from ..autograd.grad_mode import GRAD
from ..autograd.node import Node, node_class
from ..autograd.views import refresh as refresh_views
from .. import memory as _mem
from .registry import dtype_name, apply

# set by ember.compiler while capturing: called as hook(target, value) after each in-place write
CAPTURE_WRITE = [None]


def check_inplace_allowed(self: Tensor, name: str) -> None:
    if GRAD[0] and self._rg:
        if self.grad_fn is None and self._base is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        base = self._base
        if base is not None and base._rg and base.grad_fn is None:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
        if base is not None and type(self.grad_fn) in _MULTI_VIEW_NODES:
            fn = type(self.grad_fn).__name__.removesuffix("Backward0")
            raise RuntimeError(
                f"{name}(): output {self._output_nr} of {fn} is a view and is being modified inplace. "
                "This view is the output of a function that returns multiple views. Such "
                "functions do not allow the output views to be modified inplace. You should replace the "
                "inplace operation by an out-of-place one.")


# torch refuses in-place writes to the views these functions return (several views from one node)
_MULTI_VIEW_NODES = tuple(node_class(n) for n in ("SplitBackward0", "SplitWithSizesBackward0", "UnbindBackward0"))


def _writable(self: Tensor, name: str) -> None:
    d = self._data
    if type(d) is not np.ndarray:
        if any(st == 0 and n > 1 for n, st in zip(d.shape, d.strides)):
            raise RuntimeError(
                f"{name}: unsupported operation: the tensor being written to (shape {list(d.shape)}) is an "
                "expanded view in which more than one element refers to a single memory location. Please "
                "clone() the tensor before performing the operation.")
        return
    if not d.flags.writeable:
        raise RuntimeError(
            f"{name}: unsupported operation: the tensor being written to (shape {list(self._data.shape)}) "
            "is an expanded or read-only view in which more than one element refers to a single memory "
            "location. Please clone() the tensor before performing the operation.")


def write_result(self: Tensor, fn, name: str) -> Tensor:
    """Compute ``fn(self)`` and store it in ``self``'s buffer; rebase autograd history when needed."""
    _writable(self, name)
    if GRAD[0] and self._rg:
        check_inplace_allowed(self, name)
    # under a memory limit the out-of-place result is a temporary: it may pass the limit by self's size
    r = fn(self) if _mem._LIMIT[0] is None else _mem._scratch(self._data.nbytes, fn, self)
    if r._data.shape != self._data.shape:
        try:
            np.broadcast_to(r._data, self._data.shape)
        except ValueError:
            pass
        raise RuntimeError(
            f"{name}: output with shape {list(self._data.shape)} doesn't match the broadcast shape "
            f"{list(r._data.shape)}")
    if not (GRAD[0] and (r._rg or self._rg)):
        _store(self, r)
        self._bump()
        if CAPTURE_WRITE[0] is not None:
            CAPTURE_WRITE[0](self, r)
        return self
    # autograd path: recompute from a snapshot so saved inputs keep the pre-write value
    if r.grad_fn is not None and r.grad_fn.versions:
        snap = _snapshot(self)
        r = fn(snap)
    _store(self, r)
    self._bump()
    if CAPTURE_WRITE[0] is not None:
        CAPTURE_WRITE[0](self, r)
    rebase_history(self, r)
    return self


def _store(self: Tensor, r: Tensor) -> None:
    """Write ``r``'s values into ``self``'s buffer (cast to its dtype): NumPy on the CPU, a device copy."""
    d = self._data
    if type(d) is np.ndarray:
        np.copyto(d, r._data, casting="unsafe")
        return
    if getattr(d, "is_meta", False):
        return                          # (no values to write)
    from ..devices import opencl
    from ..autograd.grad_mode import no_grad
    if r._dtype is not self._dtype or r.device != self.device:
        with no_grad():
            r = r.to(self.device, self._dtype)
    opencl.copy_(d, r._data)


def _snapshot(self: Tensor) -> Tensor:
    # through the dispatcher (a clone of a history-free alias) so that a capturing compiler sees the copy
    from .copies import CLONE
    from ..autograd.grad_mode import no_grad
    if CAPTURE_WRITE[0] is not None and self._rg and self.grad_fn is not None:
        # while ember.compile captures: a recorded clone with history, so a replay op by op
        # (backend="eager") links the snapshot to the old graph as this branch does by hand below
        return apply(CLONE, (self,))
    alias = wrap(self._data, self._dtype)
    with no_grad():
        snap = apply(CLONE, (alias,))
    if self._rg:
        snap._rg = True
        snap.grad_fn = self.grad_fn
        snap._output_nr = self._output_nr
        if self.grad_fn is None:    # a leaf: gradient must reach the leaf itself
            return self
    return snap


def rebase_history(self: Tensor, r: Tensor) -> None:
    """Make ``self`` (now holding ``r``'s values) carry ``r``'s autograd history."""
    if r._dtype is not self._dtype:
        r = r.to(self._dtype)
    base = self._base
    if base is None and not r._rg:
        # overwritten by a constant: the old history must receive a zero gradient
        from .shape import COPY_SLICES
        old = wrap(self._data, self._dtype)
        old._rg, old.grad_fn, old._output_nr = True, self.grad_fn, self._output_nr
        geom = np.arange(self._data.size, dtype=np.int64).reshape(self._data.shape)
        Node.record(COPY_SLICES, (old, r), {"geom": geom}, (self,))
        self._output_nr = 0
        refresh_views(self)
        return
    if base is None:
        self.grad_fn = r.grad_fn
        self._output_nr = r._output_nr
        self._rg = True
        refresh_views(self)
        return
    from .shape import COPY_SLICES, AS_STRIDED, view_geometry
    geom = view_geometry(base, self)
    old_base = base.detach()
    if base._rg:
        old_base._rg = True
        old_base.grad_fn = base.grad_fn
        old_base._output_nr = base._output_nr
    # the base now equals "old base with the view's region replaced by r"
    Node.record(COPY_SLICES, (old_base, r), {"geom": geom}, (base,))
    base._output_nr = 0
    Node.record(AS_STRIDED, (base,), {"geom": geom}, (self,))
    self._output_nr = 0
    refresh_views(base, skip=self)


def copy_out(result: Tensor, out: Tensor) -> Tensor:
    """Implement ``out=``: write ``result`` into ``out`` (resizing an empty ``out``)."""
    if not isinstance(out, Tensor):
        raise TypeError(f"argument 'out' must be Tensor, not {type(out).__name__}")
    if GRAD[0] and (result._rg or out._rg):
        raise RuntimeError(
            "functions with out=... arguments don't support automatic differentiation, but one of the "
            "arguments requires grad.")
    from ._util import can_cast
    if not can_cast(result._dtype, out._dtype):
        raise RuntimeError(f"result type {dtype_name(result._dtype)} can't be cast to the desired output "
                           f"type {dtype_name(out._dtype)}")
    if out._data.shape != result._data.shape:
        if out._base is None:
            out._data = np.empty(result._data.shape, dtype=out._dtype.np)
        else:
            raise RuntimeError(f"out= tensor of shape {list(out._data.shape)} is a view and cannot be resized "
                               f"to {list(result._data.shape)}")
    np.copyto(out._data, result._data, casting="unsafe")
    out._bump()
    if CAPTURE_WRITE[0] is not None:
        CAPTURE_WRITE[0](out, result)
    return out
