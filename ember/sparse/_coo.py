"""Sparse COO tensors: the storage, the tensor class and the two differentiable ops everything rests on.

A sparse tensor is an ``ember.Tensor`` subclass whose ``_data`` is a ``_CooStore``: int64 ``indices`` of
shape (sparse_dim, nnz), a NumPy ``values`` array of shape (nnz, *dense_shape), the logical ``shape``
and whether the entries are coalesced (sorted, no duplicates). The store answers ``shape``/``ndim``/
``dtype`` like an array, so the generic metadata of ``Tensor`` (``shape``, ``size()``, ``dim()``) works
unchanged, and refuses everything else: a dense op that reaches a sparse tensor's data raises torch's
``NotImplementedError`` naming the layout (``ember/ops/registry.py`` adds the op's name). The dense hot
path has no sparse check at all.

Autograd goes through two ops only:

* ``sparse_coo_tensor_with_dims_and_tensors`` (values -> sparse): its derivative gathers the incoming
  gradient (sparse or dense) at the tensor's indices;
* ``values`` (sparse -> values): its derivative puts the incoming gradient back on the same indices.

Every other sparse op (``_ops.py``) is written as dense ember ops on the values between these two, so
gradients flow to ``values``, to dense operands and to sparse leaves, and double backward works.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from .._layout import sparse_coo, SparseLayoutError
from ..ops.registry import OpDef, apply, record_grad
from .._host_tensor import HostDataTensor
from ..tensor import Tensor, Size, wrap


class _CooStore:
    """The data of a sparse tensor (see the module docstring)."""

    __slots__ = ("indices", "values", "shape", "coalesced")

    def __init__(self, indices: np.ndarray, values: np.ndarray, shape: tuple, coalesced: bool):
        self.indices = indices
        self.values = values
        self.shape = shape
        self.coalesced = coalesced

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise SparseLayoutError(name)

    def __array__(self, *a, **k):
        raise SparseLayoutError("conversion to a dense array")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raise SparseLayoutError(ufunc.__name__)

    def __array_function__(self, func, types, args, kwargs):
        raise SparseLayoutError(func.__name__)

    def __getitem__(self, key):
        raise SparseLayoutError("indexing")

    def __len__(self):
        return self.shape[0]


class SparseTensor(HostDataTensor):
    """A sparse COO tensor (torch's ``layout=torch.sparse_coo``); made by ``ember.sparse_coo_tensor`` or
    ``Tensor.to_sparse()``. ``type(t)`` differs from a dense tensor's, ``isinstance(t, ember.Tensor)`` holds."""

    is_sparse = True
    is_sparse_csr = False

    @property
    def layout(self):
        return sparse_coo

    def sparse_dim(self) -> int:
        return self._data.indices.shape[0]

    def dense_dim(self) -> int:
        return self._data.values.ndim - 1

    def _nnz(self) -> int:
        return self._data.indices.shape[1]

    def is_coalesced(self) -> bool:
        return self._data.coalesced

    def numel(self) -> int:
        return self._data.size

    def _indices(self) -> Tensor:
        return wrap(self._data.indices, _dt.int64)

    def _values(self) -> Tensor:
        return apply(VALUES, (self,), {"store": self._data})

    def indices(self) -> Tensor:
        self._need_coalesced("indices")
        return self._indices()

    def values(self) -> Tensor:
        self._need_coalesced("values")
        return self._values()

    def _need_coalesced(self, what):
        if not self._data.coalesced:
            raise RuntimeError(f"Cannot get {what} on an uncoalesced tensor, please call .coalesce() first")

    def to_sparse(self, sparse_dim=None):
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError(f"to_sparse: conversion from Sparse to Sparse with sparse_dim={sparse_dim} is not "
                               "supported (ember keeps the tensor's own sparse_dim)")
        return self

    def detach(self) -> "SparseTensor":
        return _new(self._data, self._dtype)

    def clone(self, *, memory_format=None) -> "SparseTensor":
        d = self._data
        out = make_sparse(d.indices.copy(), self._values().clone(), d.shape, d.coalesced)
        return out

    def copy_(self, src, non_blocking: bool = False) -> "SparseTensor":
        """Take ``src``'s indices and values (cast to this tensor's dtype), as torch's sparse copy_."""
        if not isinstance(src, SparseTensor):
            raise RuntimeError("copy_() between dense and sparse Tensors is not implemented! Found self type = "
                               "SparseCPU and src type = CPU")
        if tuple(src.shape) != tuple(self.shape):
            raise RuntimeError(f"copy_: sparse sizes differ: {list(self.shape)} vs {list(src.shape)}")
        d = src._data
        self._data = _CooStore(d.indices.copy(), d.values.astype(self._dtype.np, copy=True), d.shape, d.coalesced)
        self._bump()
        return self

    def numpy(self, *, force: bool = False):
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def __array__(self, dtype=None, copy=None):
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def stride(self, dim=None):
        raise RuntimeError("Sparse tensors do not have strides")

    def is_contiguous(self, memory_format=None) -> bool:
        raise RuntimeError("is_contiguous: tensors with layout ember.sparse_coo do not have is_contiguous")

    def data_ptr(self) -> int:
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage (layout ember.sparse_coo)")

    def __repr__(self) -> str:
        from ._repr import sparse_repr
        return sparse_repr(self)

    def __reduce_ex__(self, proto):
        d = self._data
        return (_rebuild_sparse_tensor,
                (sparse_coo, (self._indices(), wrap(d.values, self._dtype), Size(d.shape), d.coalesced)))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment")
        d = self._data
        new = _new(_CooStore(d.indices.copy(), d.values.copy(), d.shape, d.coalesced), self._dtype)
        new._rg = self._rg
        memo[id(self)] = new
        return new


def _new(store: _CooStore, dtype) -> SparseTensor:
    t = SparseTensor.__new__(SparseTensor)
    t._data = store
    t._dtype = dtype
    return t


# ---- the two differentiable ops ------------------------------------------------------------------------------

def _linear(indices: np.ndarray, sparse_shape: tuple) -> np.ndarray:
    """Each entry's flat position over the sparse dims (row-major)."""
    if indices.shape[1] == 0:
        return np.zeros(0, dtype=np.int64)
    return np.ravel_multi_index(tuple(indices), sparse_shape).astype(np.int64, copy=False)


def _grad_at(g, indices: np.ndarray, shape: tuple) -> Tensor:
    """The values of gradient ``g`` (dense, or sparse of ``shape``) at ``indices``: d(values)."""
    sd = indices.shape[0]
    lin = wrap(_linear(indices, shape[:sd]), _dt.int64)
    if not isinstance(g, SparseTensor):
        flat = g.reshape((-1,) + tuple(shape[sd:]))
        return flat.index_select(0, lin)
    gd = g._data
    if gd.indices is indices:
        return g._values()
    from ._ops import coalesce
    gc = coalesce(g)
    glin = _linear(gc._data.indices, shape[:sd])
    want = lin._data
    pos = np.searchsorted(glin, want)
    hit = pos < glin.shape[0]
    hit[hit] = glin[pos[hit]] == want[hit]
    pos = np.where(hit, pos, 0)
    got = gc._values()
    if got.shape[0] == 0:
        from ..ops.creation import zeros
        return zeros((indices.shape[1],) + tuple(shape[sd:]), dtype=g.dtype)
    sel = got.index_select(0, wrap(pos.astype(np.int64), _dt.int64))
    mask = wrap(hit.reshape((-1,) + (1,) * (sel.ndim - 1)), _dt.bool)
    return sel * mask


def _from_values_bw(node, g):
    a = node.attrs
    return (_grad_at(g, a["indices"], a["shape"]),)


def _values_bw(node, g):
    # the gradient of a sparse tensor is the dense gradient read at its positions: with duplicate
    # indices (uncoalesced), each position once (from its first entry), as duplicates would add up
    d = node.attrs["store"]
    idx = d.indices
    if not d.coalesced and idx.shape[1] > 1:
        lin = _linear(idx, d.shape[:idx.shape[0]])
        _, first = np.unique(lin, return_index=True)
        if first.shape[0] < lin.shape[0]:
            return (make_sparse(idx[:, first], g.index_select(0, wrap(first.astype(np.int64), _dt.int64)),
                                d.shape, True),)
    return (make_sparse(idx, g, d.shape, d.coalesced),)


FROM_VALUES = OpDef("sparse_coo_tensor_with_dims_and_tensors", None, _from_values_bw)
VALUES = OpDef("values", lambda s, store: s.values, _values_bw)


def make_sparse(indices: np.ndarray, values: Tensor, shape: tuple, coalesced: bool) -> SparseTensor:
    """A sparse tensor on ``indices`` (int64, (sparse_dim, nnz); trusted) holding the dense tensor ``values``,
    recorded for autograd when ``values`` requires grad."""
    out = _new(_CooStore(indices, values._data, tuple(int(s) for s in shape), bool(coalesced)), values._dtype)
    if values._rg:
        record_grad(FROM_VALUES, (values,), {"indices": indices, "shape": out._data.shape}, (out,))
    return out


def _rebuild_sparse_tensor(layout, data):
    """Rebuild a pickled sparse tensor (torch's ``torch._utils._rebuild_sparse_tensor``)."""
    if layout == "sparse_csr":
        from ._csr import sparse_csr_tensor
        crow, col, values, size = data
        return sparse_csr_tensor(crow, col, values, size)
    if layout == "sparse_csc":
        from ._csc import sparse_csc_tensor
        ccol, row, values, size = data
        return sparse_csc_tensor(ccol, row, values, size)
    if layout != sparse_coo:
        raise NotImplementedError(f"rebuilding sparse tensor for layout {layout}: ember has sparse_coo, "
                                  "sparse_csr and sparse_csc")
    if len(data) == 3:
        indices, values, size = data
        coalesced = None
    else:
        indices, values, size, coalesced = data
    from ._ops import sparse_coo_tensor
    return sparse_coo_tensor(indices, values, size, is_coalesced=coalesced)
