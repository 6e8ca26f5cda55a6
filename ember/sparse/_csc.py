"""Sparse CSC matrices (torch's ``layout=torch.sparse_csc``): ``sparse_csc_tensor``, ``Tensor.to_sparse_csc``,
``ccol_indices`` / ``row_indices`` / ``values``, ``t()`` between CSR and CSC, products with strided matrices,
``to_dense``, ``to_sparse_coo`` / ``to_sparse_csr``.

A CSC matrix holds its entries in column-major order without duplicates. ``SparseCscTensor`` is a
``SparseTensor`` over a COO store holding the entries in that order (not row-major, so the store is not
marked coalesced; there are no duplicates to sum): the COO products, ``to_dense`` and autograd to the
values and to the dense operand apply as they are. ``ccol_indices`` is the running count of entries per
column. The transpose of a CSR matrix is the CSC matrix over the same values in the same order (and the
other way round), as in torch.
"""
from __future__ import annotations

import numpy as np

from .._layout import layout
from ..tensor import Tensor
from ._coo import SparseTensor, make_sparse
from ._compressed import CompressedMatrix

sparse_csc = layout("sparse_csc")

__all__ = ["SparseCscTensor", "sparse_csc_tensor", "to_sparse_csc", "sparse_csc"]


def _refuse(what, expected):
    def method(self, *a, **k):
        raise RuntimeError(f"{what} expected {expected} layout but got SparseCsc")
    method.__name__ = what
    return method


class SparseCscTensor(CompressedMatrix):
    """A 2-D sparse CSC matrix (``t.layout is ember.sparse_csc``; ``is_sparse`` and ``is_sparse_csr`` are
    False, as torch's)."""

    is_sparse = False
    is_sparse_csr = False

    @property
    def layout(self):
        return sparse_csc

    _cdim = 1
    _names = ("ccol_indices", "row_indices")

    def ccol_indices(self) -> Tensor:
        return self._pointers()

    def row_indices(self) -> Tensor:
        return self._plain()

    crow_indices = _refuse("crow_indices", "sparse row compressed tensor")
    col_indices = _refuse("col_indices", "sparse row compressed tensor")
    indices = _refuse("indices", "sparse coordinate tensor")
    coalesce = _refuse("coalesce", "sparse coordinate tensor")
    is_coalesced = _refuse("is_coalesced", "sparse coordinate tensor")

    def to_sparse_csc(self, dense_dim=None) -> "SparseCscTensor":
        return self

    def to_sparse_coo(self) -> SparseTensor:
        d = self._data
        return make_sparse(d.indices, self._values(), d.shape, False)    # (torch's: not coalesced either)

    def to_sparse_csr(self, dense_dim=None):
        from ._csr import to_sparse_csr
        return to_sparse_csr(self.to_sparse_coo(), dense_dim)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if layout is None or layout == "sparse_coo":
            return self.to_sparse_coo()
        if layout == sparse_csc:
            return self
        if layout == "sparse_csr":
            return self.to_sparse_csr()
        raise RuntimeError(f"to_sparse: ember converts a CSC matrix to sparse_coo, sparse_csr or sparse_csc, got "
                           f"{layout}")

    def t(self):
        """The transpose: a CSR matrix over the same values in the same order."""
        from ._csr import _csr_from
        d = self._data
        return _csr_from(d.indices[::-1].copy(), self._values(), d.shape[::-1])



def _keeps_layout(name):
    """``SparseTensor.<name>`` on a CSC matrix: the result over the same entries stays CSC (scalar
    products, negation, dtype casts, detach/clone)."""
    base = getattr(SparseTensor, name)

    def method(self, *a, **k):
        r = base(self, *a, **k)
        if type(r) is SparseTensor and r._data.shape == self._data.shape and \
                r._data.indices is self._data.indices:
            r.__class__ = SparseCscTensor
        return r
    method.__name__ = name
    return method


def install() -> None:
    """Give CSC matrices the layout-keeping forms of SparseTensor's value-only methods (called once the
    SparseTensor methods exist)."""
    for name in ("mul", "__mul__", "__rmul__", "neg", "__neg__", "div", "__truediv__", "to", "float", "double",
                 "half", "detach", "clone"):
        if hasattr(SparseTensor, name):
            setattr(SparseCscTensor, name, _keeps_layout(name))


def _csc_from_coo(coo: SparseTensor) -> SparseCscTensor:
    """The entries of a coalesced 2-D COO matrix reordered column by column."""
    d = coo._data
    idx = d.indices
    order = np.lexsort((idx[0], idx[1]))
    vals = coo._values()
    if not np.array_equal(order, np.arange(order.shape[0])):
        from ._ops import _long
        vals = vals.index_select(0, _long(order))
    out = make_sparse(np.ascontiguousarray(idx[:, order]), vals, d.shape, False)
    out.__class__ = SparseCscTensor
    return out


def to_sparse_csc(self, dense_dim=None) -> SparseCscTensor:
    """Tensor.to_sparse_csc: a strided, COO or CSR matrix in CSC form."""
    if dense_dim is not None:
        raise RuntimeError("to_sparse_csc: ember's CSC matrices have no dense dims (dense_dim must be None)")
    if type(self) is SparseCscTensor:
        return self
    if self.ndim != 2:
        raise RuntimeError(f"to_sparse_csc: ember converts 2-D matrices, got {self.ndim}-D (batched CSC is not "
                           "supported)")
    from ._ops import coalesce, to_sparse
    if isinstance(self, SparseTensor):
        coo = self.to_sparse_coo() if getattr(self, "is_sparse_csr", False) else coalesce(self)
    else:
        coo = to_sparse(self)
    return _csc_from_coo(coo)


def sparse_csc_tensor(ccol_indices, row_indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None) -> SparseCscTensor:
    """torch.sparse_csc_tensor: column ``j`` holds ``values[ccol[j]:ccol[j+1]]`` at rows ``row[...]``."""
    from ._compressed import compressed_parts
    indices, vals, shape = compressed_parts("csc", ccol_indices, row_indices, values, size, dtype, device)
    out = make_sparse(indices, vals, shape, False)
    out.__class__ = SparseCscTensor
    if requires_grad:
        out._rg = True
    return out
