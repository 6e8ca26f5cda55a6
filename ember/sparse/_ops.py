"""The ops of sparse COO tensors, each written as dense ember ops on the values between ``make_sparse``
and ``SparseTensor._values`` (see ``_coo.py``), so all of them are differentiable with respect to the
values, the dense operands and sparse leaves. Index bookkeeping (linear positions, unique, sorting) is
NumPy on the int64 indices; it is not differentiable and needs not be.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as _dt
from ..autograd.grad_mode import no_grad
from ..ops.creation import zeros
from ..ops.registry import dtype_name, to_tensor
from ..tensor import Tensor, wrap
from ._coo import SparseTensor, _linear, make_sparse


def _long(a: np.ndarray) -> Tensor:
    return wrap(np.ascontiguousarray(a, dtype=np.int64), _dt.int64)


# ---- construction ---------------------------------------------------------------------------------------------

def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None) -> SparseTensor:
    """torch.sparse_coo_tensor: a COO tensor with ``values[k]`` at ``indices[:, k]``. Duplicates are kept
    (summed by ``coalesce()``/``to_dense()``). Indices are always checked against ``size`` (ember does not
    build a tensor whose indices point outside it)."""
    idx_t = indices if isinstance(indices, Tensor) else to_tensor(indices)
    idx = idx_t.detach().numpy() if not isinstance(idx_t, SparseTensor) else None
    if idx is None or not (np.issubdtype(idx.dtype, np.integer) or np.issubdtype(idx.dtype, np.floating)):
        raise RuntimeError(f"sparse_coo_tensor: indices must be an int64 tensor, got {idx_t.dtype}")
    if idx.ndim != 2:
        raise RuntimeError(f"sparse_coo_tensor: indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    if not np.issubdtype(idx.dtype, np.integer):
        if not np.all(idx == np.trunc(idx)):
            raise RuntimeError("sparse_coo_tensor: indices must be integers")
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    vals = values if isinstance(values, Tensor) else to_tensor(values)
    if isinstance(vals, SparseTensor):
        raise RuntimeError("sparse_coo_tensor: values must be a strided tensor, got a sparse one")
    if dtype is not None and vals.dtype is not dtype:
        vals = vals.to(dtype)
    if device is not None and str(device) not in ("cpu", "cpu:0", "meta"):
        raise RuntimeError(f"sparse_coo_tensor: ember's sparse tensors live on the CPU, got device={device}")
    if vals.ndim == 0:
        raise RuntimeError("sparse_coo_tensor: values must have at least one dimension (nnz)")
    sd, nnz = idx.shape
    if vals.shape[0] != nnz:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: {nnz}, "
                           f"nnz from values: {vals.shape[0]}")
    if nnz and idx.min() < 0:
        d = int(np.nonzero((idx < 0).any(1))[0][0])
        raise RuntimeError(f"found negative index {int(idx[d].min())} for dim {d}")
    if size is None:
        sparse_shape = tuple(int(m) + 1 for m in idx.max(1)) if nnz else (0,) * sd
        shape = sparse_shape + tuple(vals.shape[1:])
    else:
        shape = tuple(int(s) for s in (size if not isinstance(size, int) else (size,)))
        if len(shape) != sd + vals.ndim - 1:
            raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = {len(shape)}, "
                               f"sparse_dim = {sd}, dense_dim = {vals.ndim - 1}")
        if tuple(shape[sd:]) != tuple(vals.shape[1:]):
            raise RuntimeError(f"sparse_coo_tensor: values has dense shape {list(vals.shape[1:])} but size "
                               f"{list(shape)} asks for {list(shape[sd:])}")
        if nnz:
            top = idx.max(1)
            for d in range(sd):
                if top[d] >= shape[d]:
                    raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {shape[d]} but "
                                       f"found index {int(top[d])}")
    coalesced = nnz <= 1
    if is_coalesced:
        lin = _linear(idx, shape[:sd])
        coalesced = bool(np.all(lin[1:] > lin[:-1]))
    out = make_sparse(idx, vals, shape, coalesced)
    if requires_grad:
        if not out._dtype.grad_ok:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if not out._rg:
            out._rg = True
    return out


def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None) -> SparseTensor:
    """Tensor.to_sparse: the nonzero entries of a strided tensor (over its first ``sparse_dim`` dims: an
    entry is kept when any element of its dense slice is nonzero)."""
    if layout == "sparse_csr" or layout == "sparse_csc":
        if sparse_dim is not None or dense_dim is not None or blocksize is not None:
            raise RuntimeError(f"to_sparse: ember converts to {layout} without sparse_dim, dense_dim or blocksize")
        return self.to_sparse_csr() if layout == "sparse_csr" else self.to_sparse_csc()
    if layout is not None and layout != "sparse_coo":
        raise RuntimeError(f"to_sparse: ember converts to the sparse_coo, sparse_csr and sparse_csc layouts, got "
                           f"{layout}")
    nd = self.ndim
    sd = nd if sparse_dim is None else int(sparse_dim)
    if not 0 < sd <= nd if nd else sd != 0:
        raise RuntimeError(f"to_sparse: sparse_dim {sd} must be in [1, {nd}] for a {nd}-D tensor")
    arr = self.detach().numpy()
    lead = arr.reshape(arr.shape[:sd] + (-1,)) if sd < nd else arr[..., None]
    idx = np.stack(np.nonzero(lead.any(-1) if lead.shape[-1] else np.zeros(lead.shape[:-1], bool))).astype(np.int64)
    idx = idx.reshape(sd, -1)
    flat = self.reshape((-1,) + tuple(self.shape[sd:]))
    vals = flat.index_select(0, _long(_linear(idx, tuple(self.shape[:sd]))))
    return make_sparse(idx, vals, tuple(self.shape), True)


# ---- layout changes -------------------------------------------------------------------------------------------

def coalesce(self: SparseTensor) -> SparseTensor:
    """Sorted indices, duplicates summed (``self`` when already coalesced, as torch)."""
    d = self._data
    if d.coalesced:
        return self
    sd = d.indices.shape[0]
    lin = _linear(d.indices, d.shape[:sd])
    uniq, inv = np.unique(lin, return_inverse=True)
    idx = np.stack(np.unravel_index(uniq, d.shape[:sd])).astype(np.int64).reshape(sd, -1)
    v = self._values()
    summed = zeros((uniq.shape[0],) + tuple(v.shape[1:]), dtype=v.dtype).index_add(0, _long(inv.reshape(-1)), v)
    return make_sparse(idx, summed, d.shape, True)


def to_dense(self: SparseTensor, dtype=None, *, masked_grad=None) -> Tensor:
    """The strided tensor (duplicates summed)."""
    d = self._data
    sd = d.indices.shape[0]
    v = self._values()
    if dtype is not None:
        v = v.to(dtype)
    n = int(np.prod(d.shape[:sd], dtype=np.int64))
    flat = zeros((n,) + tuple(d.shape[sd:]), dtype=v.dtype).index_add(0, _long(_linear(d.indices, d.shape[:sd])), v)
    return flat.reshape(d.shape)


def transpose(self: SparseTensor, dim0: int, dim1: int) -> SparseTensor:
    """A transpose of two sparse dims (indices rows swapped)."""
    d = self._data
    nd, sd = len(d.shape), d.indices.shape[0]
    a, b = (dim0 % nd if nd else 0), (dim1 % nd if nd else 0)
    if a >= sd or b >= sd:
        raise RuntimeError("transpose: ember transposes only the sparse dims of a sparse_coo tensor "
                           f"(sparse_dim={sd}), got dims {dim0} and {dim1}")
    order = list(range(sd))
    order[a], order[b] = order[b], order[a]
    shape = list(d.shape)
    shape[a], shape[b] = shape[b], shape[a]
    return make_sparse(d.indices[order], self._values(), tuple(shape), d.coalesced and a == b)


def t(self: SparseTensor) -> SparseTensor:
    if self.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, but self is "
                           f"{self.sparse_dim()} sparse and {self.dense_dim()} dense")
    return self if self.ndim < 2 else transpose(self, 0, 1)


def to(self: SparseTensor, *args, **kwargs) -> SparseTensor:
    """Tensor.to for a sparse tensor: a dtype change of the values (ember keeps sparse tensors on the CPU).
    The arguments are read by the strided ``Tensor.to`` itself, run on an empty tensor of this dtype."""
    probe = Tensor.to(wrap(np.empty(0, self._dtype.np), self._dtype), *args, **kwargs)
    if not probe.is_cpu:
        raise RuntimeError(f"to: ember's sparse tensors live on the CPU, got device={probe.device}")
    if probe.dtype is self._dtype:
        return self
    d = self._data
    return make_sparse(d.indices, self._values().to(probe.dtype), d.shape, d.coalesced)


# ---- arithmetic -----------------------------------------------------------------------------------------------

def _same_shape(op, a, b):
    if tuple(a.shape) != tuple(b.shape):
        raise RuntimeError(f"{op}: expected sizes of 'self' and 'other' to match, but {list(a.shape)} != "
                           f"{list(b.shape)}")


def add(self: SparseTensor, other, *, alpha=1) -> SparseTensor:
    """sparse + sparse (coalesced result); torch refuses sparse + dense the same way."""
    if not isinstance(other, SparseTensor):
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
    _same_shape("add", self, other)
    if self.sparse_dim() != other.sparse_dim():
        raise RuntimeError("add: expected 'self' and 'other' to have the same sparse_dim")
    a, b = self._data, other._data
    vb = other._values()
    if alpha != 1:
        vb = vb * alpha
    va = self._values()
    if va.dtype is not vb.dtype:
        common = _dt.promote_types(va.dtype, vb.dtype)
        va, vb = va.to(common), vb.to(common)
    from ..ops.shape_join import cat
    both = make_sparse(np.concatenate([a.indices, b.indices], 1), cat([va, vb], 0), a.shape, False)
    return coalesce(both)


def radd(self: SparseTensor, other, alpha=1):
    """dense + sparse (Python tries a subclass's reflected method first): a strided result, through
    ``to_dense`` so the gradient reaches both operands."""
    if not isinstance(other, Tensor):
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
    _same_shape("add", other, self)
    dense = to_dense(self)
    return other + (dense * alpha if alpha != 1 else dense)


def rdiv(self: SparseTensor, other):
    raise RuntimeError(f"Sparse division requires a scalar or zero-dim dense tensor divisor (got shape "
                       f"{list(self.shape)} for divisor)")


def mul(self: SparseTensor, other) -> SparseTensor:
    """sparse * scalar, sparse * sparse (the common entries) and sparse * dense (the dense tensor read at
    the sparse entries)."""
    d = self._data
    if isinstance(other, numbers.Number) or (isinstance(other, Tensor) and not isinstance(other, SparseTensor)
                                             and other.ndim == 0):
        return make_sparse(d.indices, self._values() * other, d.shape, d.coalesced)
    if not isinstance(other, Tensor):
        raise TypeError(f"mul: unsupported operand type for a sparse tensor: {type(other).__name__}")
    _same_shape("mul", self, other)
    sd = d.indices.shape[0]
    if isinstance(other, SparseTensor):
        a, b = coalesce(self), coalesce(other)
        la, lb = _linear(a._data.indices, d.shape[:sd]), _linear(b._data.indices, d.shape[:sd])
        _, ia, ib = np.intersect1d(la, lb, assume_unique=True, return_indices=True)
        v = a._values().index_select(0, _long(ia)) * b._values().index_select(0, _long(ib))
        return make_sparse(a._data.indices[:, ia], v, d.shape, True)
    if other.ndim != sd:
        raise RuntimeError("mul: ember multiplies a hybrid sparse tensor only by a scalar or a sparse tensor")
    at = other.reshape(-1).index_select(0, _long(_linear(d.indices, d.shape[:sd])))
    return make_sparse(d.indices, self._values() * at, d.shape, d.coalesced)


def emptied(self: SparseTensor) -> SparseTensor:
    """No entries, same size and dtype (what ``zero_`` leaves, as torch)."""
    d = self._data
    vals = wrap(np.zeros((0,) + d.values.shape[1:], d.values.dtype), self._dtype)
    return make_sparse(np.zeros((d.indices.shape[0], 0), np.int64), vals, d.shape, True)


def neg(self: SparseTensor) -> SparseTensor:
    d = self._data
    return make_sparse(d.indices, -self._values(), d.shape, d.coalesced)


def div(self: SparseTensor, other) -> SparseTensor:
    if isinstance(other, SparseTensor) or (isinstance(other, Tensor) and other.ndim != 0):
        raise RuntimeError("div: ember divides a sparse tensor only by a scalar (a number or a 0-d tensor)")
    d = self._data
    return make_sparse(d.indices, self._values() / other, d.shape, d.coalesced)


# ---- products -------------------------------------------------------------------------------------------------

def mm(sparse: SparseTensor, dense: Tensor) -> Tensor:
    """sparse (n, m) @ dense (m, k) -> dense (n, k); a 1-D ``dense`` gives the matrix-vector product."""
    if not isinstance(sparse, SparseTensor):
        raise RuntimeError("sparse.mm: expected a sparse_coo tensor as the first argument")
    if isinstance(dense, SparseTensor):     # sparse @ sparse: a sparse COO result (through the dense product)
        if dense.ndim != 2:
            raise RuntimeError(f"sparse.mm: expected a 2-D sparse matrix as the second operand, got {dense.ndim}-D")
        return to_sparse(mm(sparse, to_dense(dense)))
    d = sparse._data
    if len(d.shape) != 2 or d.indices.shape[0] != 2:
        raise RuntimeError(f"sparse.mm: expected a 2-D sparse matrix with 2 sparse dims, got size {list(d.shape)} "
                           f"with sparse_dim {d.indices.shape[0]}")
    if dense.ndim not in (1, 2):
        raise RuntimeError(f"sparse.mm: expected a 1-D or 2-D strided operand, got {dense.ndim}-D")
    if dense.shape[0] != d.shape[1]:
        raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {d.shape[1]}, got {dense.shape[0]}")
    if dense.dtype is not sparse.dtype:
        raise RuntimeError(f"expected scalar type {dtype_name(sparse.dtype)} but found {dtype_name(dense.dtype)}")
    rows, cols = _long(d.indices[0]), _long(d.indices[1])
    v = sparse._values()
    picked = dense.index_select(0, cols)
    contrib = picked * (v.reshape(-1, 1) if dense.ndim == 2 else v)
    out_shape = (d.shape[0],) + tuple(dense.shape[1:])
    return zeros(out_shape, dtype=v.dtype).index_add(0, rows, contrib)


def dense_mm_sparse(dense: Tensor, sparse: SparseTensor) -> Tensor:
    """dense (n, m) @ sparse (m, k) = (sparse^T @ dense^T)^T."""
    if dense.ndim == 1:
        return mm(t(sparse), dense)
    return mm(t(sparse), dense.t()).t()


# ---- reductions -----------------------------------------------------------------------------------------------

def sum(input: SparseTensor, dim=None, keepdim=False, dtype=None):  # noqa: A001 - torch's name
    """torch.sparse.sum: a dense 0-d tensor for ``dim=None``, else a sparse tensor over the sparse dims left
    (dense when every sparse dim is summed)."""
    d = input._data
    v = input._values()
    if dtype is not None:
        v = v.to(dtype)
    if dim is None:
        return v.sum()
    if keepdim:
        raise RuntimeError("sparse.sum: keepdim=True is not supported for sparse tensors (as in torch)")
    nd, sd = len(d.shape), d.indices.shape[0]
    dims = sorted({int(x) % nd for x in (dim if isinstance(dim, (list, tuple)) else (dim,))})
    dense_dims = [x - sd + 1 for x in dims if x >= sd]
    if dense_dims:
        v = v.sum(dense_dims)
    keep = [x for x in range(sd) if x not in dims]
    if len(keep) == sd:
        shape = tuple(s for i, s in enumerate(d.shape) if i not in dims)
        return make_sparse(d.indices, v, shape, d.coalesced)
    if not keep:
        return v.sum(0)
    shape = tuple(s for i, s in enumerate(d.shape) if i not in dims)
    return coalesce(make_sparse(d.indices[keep], v, shape, False))


def _softmax(input: SparseTensor, dim: int, dtype, log: bool) -> SparseTensor:
    s = coalesce(input)
    d = s._data
    nd, sd = len(d.shape), d.indices.shape[0]
    dim = int(dim) % nd
    v = s._values()
    if dtype is not None:
        v = v.to(dtype)
    if dim >= sd:        # a dense dim: the ordinary softmax of each entry's slice
        from ..nn import functional as F
        fn = F.log_softmax if log else F.softmax
        return make_sparse(d.indices, fn(v, dim - sd + 1), d.shape, True)
    others = [x for x in range(sd) if x != dim]
    key = (np.ravel_multi_index(tuple(d.indices[others]), tuple(d.shape[x] for x in others))
           if others and d.indices.shape[1] else np.zeros(d.indices.shape[1], dtype=np.int64))
    _, inv = np.unique(key, return_inverse=True)
    inv = inv.reshape(-1)
    ng = int(inv.max()) + 1 if inv.size else 0
    with no_grad():      # the per-group max only shifts the exponent: a constant for the derivative
        vals = v.detach().numpy()
        top = np.full((ng,) + vals.shape[1:], -np.inf, dtype=vals.dtype)
        np.maximum.at(top, inv, vals)
    shift = wrap(top[inv], v.dtype)
    inv_t = _long(inv)
    z = v - shift
    e = z.exp()
    den = zeros((ng,) + tuple(v.shape[1:]), dtype=v.dtype).index_add(0, inv_t, e).index_select(0, inv_t)
    out = z - den.log() if log else e / den
    return make_sparse(d.indices, out, d.shape, True)


def softmax(input: SparseTensor, dim: int, dtype=None) -> SparseTensor:
    """torch.sparse.softmax: softmax over the specified entries along ``dim`` (missing entries count as
    -inf, i.e. they stay out)."""
    return _softmax(input, dim, dtype, False)


def log_softmax(input: SparseTensor, dim: int, dtype=None) -> SparseTensor:
    """torch.sparse.log_softmax (see ``softmax``)."""
    return _softmax(input, dim, dtype, True)
