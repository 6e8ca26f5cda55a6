"""Keeping views' autograd history current after in-place writes.

A view's ``grad_fn`` is fixed when the view is made. When its base (or another view of the same base)
is later written in place with autograd recording, the view's values change while its history still
points at the old base. torch regenerates such a view's ``grad_fn`` from the base's new history; ember
does the same eagerly: ``apply_view`` records each view that requires grad in a weak set on its root
tensor (``track``), and the in-place machinery calls ``refresh`` after rebasing the root, which gives
every live view of it an ``as_strided`` node on the root's new history.
"""
from __future__ import annotations

import weakref

try:                                    # NumPy 2 moved it; 1.26 has it at the top level
    from numpy.lib.array_utils import byte_bounds as _byte_bounds
except ImportError:                     # pragma: no cover
    from numpy import byte_bounds as _byte_bounds

from ..tensor import Tensor


class _Views:
    """Weak references to a root's views; dead ones are pruned whenever the list doubles."""

    __slots__ = ("refs", "cap")

    def __init__(self):
        self.refs = []
        self.cap = 64

    def add(self, view):
        refs = self.refs
        refs.append(_ref(view))
        if len(refs) > self.cap:
            refs[:] = [r for r in refs if r() is not None]
            self.cap = max(64, 2 * len(refs))

    def live(self):
        return [v for v in (r() for r in self.refs) if v is not None]


_ref = weakref.ref


def track(root: Tensor, view: Tensor) -> None:
    """Remember ``view`` (a view of ``root`` that requires grad) for ``refresh``."""
    views = root.__dict__.get("_views")
    if views is None:
        views = root.__dict__["_views"] = _Views()
    views.add(view)


def refresh(root: Tensor, skip: Tensor | None = None) -> None:
    """Give every tracked live view of ``root`` (except ``skip``) whose memory overlaps the region just
    written (``skip``'s, or all of ``root``) a fresh node on root's new history.

    Views that do not overlap the write keep their values, so their old history stays correct."""
    move_retain_grad(root)
    if skip is not None:
        move_retain_grad(skip)
    views = root.__dict__.get("_views")
    if views is None or not root._rg:
        return
    from ..ops.shape import AS_STRIDED, view_geometry
    from .node import Node
    written = _extent((skip if skip is not None else root)._data)
    if written[0] == written[1]:
        return
    for v in views.live():
        if v is skip or v._base is not root or v._data.size == 0:
            continue
        lo, hi = _extent(v._data)
        if hi <= written[0] or lo >= written[1]:
            continue
        Node.record(AS_STRIDED, (root,), {"geom": view_geometry(root, v)}, (v,))
        v._output_nr = 0
        move_retain_grad(v)


def move_retain_grad(t: Tensor) -> None:
    """After ``t`` got new history, its retained ``.grad`` follows the new value (as in torch); hooks
    registered earlier stay with the old value."""
    handle = t.__dict__.get("_retain_handle")
    if handle is None or t.grad_fn is None or handle.node is t.grad_fn:
        return
    handle.remove()
    t._retains_grad = False
    t.retain_grad()


def _extent(a) -> tuple:
    """[first, last) byte addresses an array touches (an empty range at its pointer when it is empty);
    a device array's are byte offsets in its block."""
    if hasattr(a, "__array_interface__"):
        return _byte_bounds(a)
    lo, hi = a._extent()
    return lo * a.dtype.itemsize, hi * a.dtype.itemsize
