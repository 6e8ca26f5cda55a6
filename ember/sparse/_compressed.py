"""What CSR and CSC matrices share, written once for either compressed dim: ``CompressedMatrix`` (the
compressed-pointer accessor, values, transposes, repr, pickling) and the argument checks of
``sparse_csr_tensor`` / ``sparse_csc_tensor`` (torch's invariants for compressed sparse matrices)."""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from ._coo import SparseTensor


class CompressedMatrix(SparseTensor):
    """A 2-D sparse matrix stored as its entries in compressed-dim-major order (``_cdim`` 0: CSR, 1: CSC);
    subclasses name their accessors (``_names``: compressed, plain) and their layout."""

    _cdim = 0
    _names = ("crow_indices", "col_indices")

    def _pointers(self) -> Tensor:
        """The running count of entries per row (CSR) or column (CSC), from 0 to nnz."""
        d = self._data
        counts = np.bincount(d.indices[self._cdim], minlength=d.shape[self._cdim])
        return wrap(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), _dt.int64)

    def _plain(self) -> Tensor:
        return wrap(self._data.indices[1 - self._cdim].copy(), _dt.int64)

    def values(self) -> Tensor:
        return self._values()

    def sparse_dim(self) -> int:
        return 2

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
        cname, pname = self._names
        text = (part(cname, self._pointers()._data, _dt.int64)[len(pad):] + ",\n"
                + part(pname, d.indices[1 - self._cdim], _dt.int64) + ",\n" + part("values", d.values, dt))
        suffixes = suffixes_of(self, [f"size={tuple(d.shape)}", f"nnz={d.indices.shape[1]}"],
                               (_dt.get_default_dtype(),), self.layout.name)
        return _add_suffixes("tensor(" + text, suffixes, len(pad))

    def __reduce_ex__(self, proto):
        from ._coo import _rebuild_sparse_tensor
        return (_rebuild_sparse_tensor, (self.layout, (self._pointers(), self._plain(),
                                                       wrap(self._data.values, self._dtype), tuple(self._data.shape))))

# per layout: (function, compressed-indices name, plain-indices name, compressed dim, layout word,
#              the plain dim's size name, the compressed dim's name in the sortedness message)
_NAMES = {"csr": ("sparse_csr_tensor", "crow_indices", "col_indices", 0, "CSR", "ncols", "nrows"),
          "csc": ("sparse_csc_tensor", "ccol_indices", "row_indices", 1, "CSC", "nrows", "ncols")}


def compressed_parts(kind, compressed_indices, plain_indices, values, size, dtype, device):
    """Validate a compressed matrix; returns (indices (2, nnz) int64 in storage order, values, shape)."""
    from ..ops.registry import to_tensor
    fn, cname, pname, cdim, word, psize, cword = _NAMES[kind]
    comp = (compressed_indices if isinstance(compressed_indices, Tensor) else to_tensor(compressed_indices))
    plain = (plain_indices if isinstance(plain_indices, Tensor) else to_tensor(plain_indices))
    comp, plain = comp.detach().numpy(), plain.detach().numpy()
    vals = values if isinstance(values, Tensor) else to_tensor(values)
    if dtype is not None and vals.dtype is not dtype:
        vals = vals.to(dtype)
    if device is not None and str(device) not in ("cpu", "cpu:0"):
        raise RuntimeError(f"{fn}: ember's sparse tensors live on the CPU, got device={device}")
    if comp.ndim != 1 or plain.ndim != 1:
        raise RuntimeError(f"{fn}: ember supports 2-D {word} matrices (1-D {cname} and {pname}), got {cname} of "
                           f"{comp.ndim} dims and {pname} of {plain.ndim} dims")
    if not (np.issubdtype(comp.dtype, np.integer) and np.issubdtype(plain.dtype, np.integer)):
        raise RuntimeError(f"{cname} and {pname} must be integer tensors")
    if vals.ndim != 1:
        raise RuntimeError(f"{fn}: ember supports 1-D values (no dense dims), got {vals.ndim}-D")
    nnz = plain.shape[0]
    if vals.shape[0] != nnz:
        raise RuntimeError(f"{pname} and values must have the same number of elements, but got {nnz} and "
                           f"{vals.shape[0]}")
    if comp.shape[0] < 1 or comp[0] != 0 or comp[-1] != nnz or np.any(np.diff(comp) < 0):
        raise RuntimeError(f"`{cname}[..., 0] == 0` and `{cname}[..., -1] == nnz` must hold and {cname} must be "
                           "non-decreasing")
    n_comp = comp.shape[0] - 1
    pdim = 1 - cdim
    if size is None:
        shape = [0, 0]
        shape[cdim], shape[pdim] = n_comp, (int(plain.max()) + 1 if nnz else 0)
        shape = tuple(shape)
    else:
        shape = tuple(int(s) for s in size)
        if len(shape) != 2 or shape[cdim] != n_comp:
            raise RuntimeError(f"size {list(shape)} does not match {cname} of length {comp.shape[0]} (ember "
                               f"supports 2-D {word} matrices)")
    if nnz and (plain.min() < 0 or plain.max() >= shape[pdim]):
        raise RuntimeError(f"`0 <= {pname} < {psize}` is not satisfied ({psize} = {shape[pdim]})")
    outer = np.repeat(np.arange(n_comp, dtype=np.int64), np.diff(comp))
    lin = outer * max(shape[pdim], 1) + plain
    if nnz > 1 and not np.all(lin[1:] > lin[:-1]):
        raise RuntimeError(f"`{pname}[..., {cname}[..., i - 1]:{cname}[..., i]] for all i = 1, ..., {cword} are "
                           "sorted and distinct along the last dimension values` is not satisfied.")
    idx = [None, None]
    idx[cdim], idx[pdim] = outer, plain.astype(np.int64)
    return np.stack(idx), vals, shape
