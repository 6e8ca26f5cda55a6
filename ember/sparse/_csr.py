"""Sparse CSR matrices (torch's ``layout=torch.sparse_csr``): ``sparse_csr_tensor``, ``Tensor.to_sparse_csr``,
``crow_indices`` / ``col_indices`` / ``values``, products with strided matrices, ``to_dense``,
``to_sparse_coo``.

A CSR matrix holds its entries in row-major order without duplicates, which is exactly a coalesced 2-D COO
tensor: ``SparseCsrTensor`` is a ``SparseTensor`` over the same store (so the COO products, ``to_dense``
and autograd to the values and to the dense operand apply as they are) that answers with CSR's layout,
compressed row pointers and repr. ``crow_indices`` is the running count of entries per row.
"""
from __future__ import annotations

import numpy as np

from .._layout import layout
from ..tensor import Tensor
from ._coo import SparseTensor, make_sparse
from ._compressed import CompressedMatrix

sparse_csr = layout("sparse_csr")

__all__ = ["SparseCsrTensor", "sparse_csr_tensor", "to_sparse_csr", "sparse_csr"]


class SparseCsrTensor(CompressedMatrix):
    """A 2-D sparse CSR matrix (``type(t)`` differs from a COO tensor's; ``t.layout is ember.sparse_csr``)."""

    is_sparse = False
    is_sparse_csr = True

    @property
    def layout(self):
        return sparse_csr

    _cdim = 0
    _names = ("crow_indices", "col_indices")

    def crow_indices(self) -> Tensor:
        return self._pointers()

    def col_indices(self) -> Tensor:
        return self._plain()

    def indices(self):
        raise RuntimeError("indices expected sparse coordinate tensor layout but got SparseCsr")

    def to_sparse_csr(self, dense_dim=None) -> "SparseCsrTensor":
        return self

    def to_sparse_coo(self) -> SparseTensor:
        d = self._data
        return make_sparse(d.indices, self._values(), d.shape, True)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if layout == "sparse_csc":
            from ._csc import to_sparse_csc
            return to_sparse_csc(self)
        if layout is not None and layout != "sparse_coo" and layout != sparse_csr:
            raise RuntimeError(f"to_sparse: ember converts a CSR matrix to sparse_coo, sparse_csr or sparse_csc, "
                               f"got {layout}")
        return self if layout == sparse_csr else self.to_sparse_coo()

    def coalesce(self):
        raise RuntimeError("coalesce expected sparse coordinate tensor layout but got SparseCsr")

    def detach(self) -> "SparseCsrTensor":
        return _as_csr(super().detach())

    def clone(self, *, memory_format=None) -> "SparseCsrTensor":
        return _as_csr(super().clone())

    def t(self):
        """The transpose: a CSC matrix over the same values in the same order (as torch's)."""
        from ._csc import SparseCscTensor
        d = self._data
        out = make_sparse(d.indices[::-1].copy(), self._values(), d.shape[::-1], False)
        out.__class__ = SparseCscTensor
        return out



def _as_csr(t: SparseTensor) -> SparseCsrTensor:
    """The same tensor object viewed as CSR (its store must be a coalesced 2-D COO store)."""
    t.__class__ = SparseCsrTensor
    return t


def _csr_from(indices: np.ndarray, values: Tensor, shape) -> SparseCsrTensor:
    return _as_csr(make_sparse(indices, values, tuple(shape), True))


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None) -> SparseCsrTensor:
    """torch.sparse_csr_tensor: row ``i`` holds ``values[crow[i]:crow[i+1]]`` at columns ``col[...]``."""
    from ._compressed import compressed_parts
    indices, vals, shape = compressed_parts("csr", crow_indices, col_indices, values, size, dtype, device)
    out = _csr_from(indices, vals, shape)
    if requires_grad:
        out._rg = True
    return out


def to_sparse_csr(self, dense_dim=None) -> SparseCsrTensor:
    """Tensor.to_sparse_csr: the nonzero entries of a strided matrix (or a COO matrix) in CSR form."""
    if dense_dim is not None:
        raise RuntimeError("to_sparse_csr: ember's CSR matrices have no dense dims")
    if isinstance(self, SparseTensor):
        if self.ndim != 2:
            raise RuntimeError(f"to_sparse_csr: expected a 2-D matrix, got {self.ndim}-D")
        from ._ops import coalesce
        c = coalesce(self)
        return _csr_from(c._data.indices, c._values(), c._data.shape)
    if self.ndim != 2:
        raise RuntimeError(f"to_sparse_csr: ember converts 2-D strided matrices, got {self.ndim}-D (batched CSR is "
                           "not supported)")
    from ._ops import to_sparse
    coo = to_sparse(self)
    return _csr_from(coo._data.indices, coo._values(), coo._data.shape)


