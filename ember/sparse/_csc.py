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

from .. import dtypes as _dt
from .._layout import layout
from ..tensor import Tensor, wrap
from ._coo import SparseTensor, make_sparse

sparse_csc = layout("sparse_csc")

__all__ = ["SparseCscTensor", "sparse_csc_tensor", "to_sparse_csc", "sparse_csc"]


def _refuse(what, expected):
    def method(self, *a, **k):
        raise RuntimeError(f"{what} expected {expected} layout but got SparseCsc")
    method.__name__ = what
    return method


class SparseCscTensor(SparseTensor):
    """A 2-D sparse CSC matrix (``t.layout is ember.sparse_csc``; ``is_sparse`` and ``is_sparse_csr`` are
    False, as torch's)."""

    is_sparse = False
    is_sparse_csr = False

    @property
    def layout(self):
        return sparse_csc

    def ccol_indices(self) -> Tensor:
        d = self._data
        counts = np.bincount(d.indices[1], minlength=d.shape[1])
        return wrap(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), _dt.int64)

    def row_indices(self) -> Tensor:
        return wrap(self._data.indices[0].copy(), _dt.int64)

    def values(self) -> Tensor:
        return self._values()

    crow_indices = _refuse("crow_indices", "sparse row compressed tensor")
    col_indices = _refuse("col_indices", "sparse row compressed tensor")
    indices = _refuse("indices", "sparse coordinate tensor")
    coalesce = _refuse("coalesce", "sparse coordinate tensor")
    is_coalesced = _refuse("is_coalesced", "sparse coordinate tensor")

    def sparse_dim(self) -> int:
        return 2

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

    def transpose(self, dim0, dim1):
        if {int(dim0) % 2, int(dim1) % 2} == {0, 1}:
            return self.t()
        return self.clone()

    @property
    def T(self):
        return self.t()

    def __repr__(self) -> str:
        from .._tensor_str import _add_suffixes
        from ._repr import _part, suffixes_of
        d, dt = self._data, self._dtype
        pad = " " * len("tensor(")

        def part(name, arr, adt):
            head = pad + name + "="
            return head + _part(arr, adt, len(head))
        text = (part("ccol_indices", self.ccol_indices()._data, _dt.int64)[len(pad):] + ",\n"
                + part("row_indices", d.indices[0], _dt.int64) + ",\n" + part("values", d.values, dt))
        suffixes = suffixes_of(self, [f"size={tuple(d.shape)}", f"nnz={d.indices.shape[1]}"],
                               (_dt.get_default_dtype(),), "sparse_csc")
        return _add_suffixes("tensor(" + text, suffixes, len(pad))

    def __reduce_ex__(self, proto):
        from ._coo import _rebuild_sparse_tensor
        return (_rebuild_sparse_tensor, (sparse_csc, (self.ccol_indices(), self.row_indices(),
                                                      wrap(self._data.values, self._dtype), tuple(self._data.shape))))


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
