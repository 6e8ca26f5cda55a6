"""ember.sparse: torch.sparse's COO tensors (``ember.sparse_coo_tensor``, ``Tensor.to_sparse()``).

What is supported on a sparse tensor: construction (with torch's checks), ``coalesce``/``is_coalesced``,
``indices``/``values`` (and the ``_`` forms), ``_nnz``, ``sparse_dim``/``dense_dim``, ``to_dense``,
``t``/``T``/``transpose`` of sparse dims, ``to(dtype)``, sparse + sparse, dense + sparse and dense -
sparse (strided results), sparse * scalar / sparse / dense, negation, division by a scalar, the in-place
``add_``/``mul_``/``div_``/``zero_``/``copy_``, ``ember.sparse.mm``/``ember.mm``/``ember.matmul``/
``ember.spmm``/``@`` with a sparse operand on either side, ``sparse.sum``, ``sparse.softmax``/
``log_softmax``, ``sparse.addmm``, autograd through all of these (to the values, the dense operands and
sparse leaves), printing, pickling and ``ember.save``/``ember.load`` in torch's format; ``ember.compile``
runs a call with a sparse argument eagerly. Any other op raises ``NotImplementedError`` naming the op
and the layout. Sparse tensors live on the CPU. ``sparse.mm`` of two COO matrices gives a COO matrix
(through the dense product: memory of the dense result).

CSR matrices (``_csr.py``): ``ember.sparse_csr_tensor``, ``Tensor.to_sparse_csr()``, ``crow_indices`` /
``col_indices`` / ``values``, ``@`` / ``mm`` / ``matmul`` / ``sparse.mm`` with a strided matrix (gradients to
the values and the strided operand), ``to_dense``, ``to_sparse_coo``, printing and saving in torch's format.
CSC matrices (``_csc.py``): the same for ``ember.sparse_csc_tensor`` / ``Tensor.to_sparse_csc()`` with
``ccol_indices`` / ``row_indices``; ``t()`` turns CSR into CSC and back, as torch's.
"""
from __future__ import annotations

from .._layout import layout, sparse_coo, strided
from ..tensor import Tensor
from . import _ops
from ._coo import SparseTensor, SparseLayoutError, _rebuild_sparse_tensor  # noqa: F401
from ._ops import coalesce, log_softmax, mm, softmax, sparse_coo_tensor, sum, to_dense, to_sparse  # noqa: F401
from . import _csr
from ._csr import SparseCsrTensor  # noqa: F401
from . import _csc
from ._csc import SparseCscTensor  # noqa: F401

_SPARSE_TYPES = frozenset({SparseTensor, SparseCsrTensor, SparseCscTensor})

__all__ = ["mm", "sum", "softmax", "log_softmax", "addmm", "check_sparse_tensor_invariants"]


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """torch.sparse.addmm: ``beta * mat + alpha * (mat1 @ mat2)`` with ``mat1`` sparse."""
    prod = mm(mat1, mat2)
    return (mat * beta if beta != 1 else mat) + (prod * alpha if alpha != 1 else prod)


def spmm(input, mat2):
    """torch.spmm: sparse @ dense."""
    return mm(input, mat2)


class check_sparse_tensor_invariants:
    """torch.sparse.check_sparse_tensor_invariants: ember always checks the invariants (indices within
    the size), so this context manager/decorator only records the setting."""

    _enabled = True

    def __init__(self, enable=True):
        self.enable = enable

    @staticmethod
    def is_enabled():
        return check_sparse_tensor_invariants._enabled

    @staticmethod
    def enable():
        check_sparse_tensor_invariants._enabled = True

    @staticmethod
    def disable():
        check_sparse_tensor_invariants._enabled = False

    def __enter__(self):
        self._saved = check_sparse_tensor_invariants._enabled

    def __exit__(self, *exc):
        check_sparse_tensor_invariants._enabled = self._saved
        return False

    def __call__(self, fn):
        def wrapped(*a, **k):
            with self:
                return fn(*a, **k)
        return wrapped


def _legacy(name, dt):
    def make(*args):
        """torch.sparse.<Type>Tensor: ``(indices, values, size)`` or ``(*sizes)`` (an empty sparse tensor)."""
        from .. import dtypes as _dt
        from ..ops.creation import zeros
        if args and isinstance(args[0], Tensor):
            return sparse_coo_tensor(*args)
        size = tuple(args[0]) if len(args) == 1 and not isinstance(args[0], int) else tuple(args)
        dtype = getattr(_dt, dt)
        return sparse_coo_tensor(zeros((len(size), 0), dtype=_dt.int64), zeros((0,), dtype=dtype), size)
    make.__name__ = make.__qualname__ = name
    return make


FloatTensor = _legacy("FloatTensor", "float32")
DoubleTensor = _legacy("DoubleTensor", "float64")
LongTensor = _legacy("LongTensor", "int64")


def _sum_method(self, dim=None, keepdim=False, *, dtype=None):
    return sum(self, dim, keepdim, dtype)


def _matmul_method(self, other):
    return mm(self, other)


def _rmatmul_method(self, other):
    return _ops.dense_mm_sparse(other, self)


def _cast(dt):
    return lambda self, memory_format=None: _ops.to(self, dt)


def _inplace(name, fn):
    """``Tensor.<name>_`` for a sparse tensor: the out-of-place result's indices and values become this
    tensor's (version bumped); a leaf that requires grad refuses, as in torch."""
    def method(self, *args, **kwargs):
        from ..autograd.grad_mode import GRAD, no_grad
        if self._rg and self.grad_fn is None and GRAD[0]:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        with no_grad():
            res = fn(self, *args, **kwargs)
        self._data = res._data if res._dtype is self._dtype else _ops.to(res, self._dtype)._data
        self._bump()
        return self
    method.__name__ = name + "_"
    return method


def _install_methods():
    from .. import dtypes as _dt
    S = SparseTensor
    for name, fn in [("coalesce", coalesce), ("to_dense", to_dense), ("t", _ops.t), ("transpose", _ops.transpose),
                     ("to", _ops.to), ("add", _ops.add), ("__add__", _ops.add), ("mul", _ops.mul),
                     ("__mul__", _ops.mul), ("__rmul__", _ops.mul), ("neg", _ops.neg), ("__neg__", _ops.neg),
                     ("div", _ops.div), ("__truediv__", _ops.div), ("mm", mm), ("matmul", _matmul_method),
                     ("__matmul__", _matmul_method), ("__rmatmul__", _rmatmul_method), ("sum", _sum_method),
                     ("float", _cast(_dt.float32)), ("double", _cast(_dt.float64)), ("half", _cast(_dt.float16)),
                     ("long", _cast(_dt.int64)), ("int", _cast(_dt.int32)), ("bool", _cast(_dt.bool))]:
        setattr(S, name, fn)
    S.T = property(_ops.t)
    S.add_ = _inplace("add", _ops.add)
    S.mul_ = _inplace("mul", _ops.mul)
    S.div_ = _inplace("div", _ops.div)
    S.zero_ = _inplace("zero", _ops.emptied)
    S.sub = S.__sub__ = lambda self, other, *, alpha=1: _ops.add(self, other, alpha=-alpha)
    S.__radd__ = _ops.radd
    S.__rsub__ = lambda self, other: _ops.radd(self, other, alpha=-1)
    S.__rtruediv__ = _ops.rdiv
    # the strided side: conversions and the layout predicates
    Tensor.to_sparse = to_sparse
    Tensor.to_sparse_coo = lambda self: to_sparse(self)
    Tensor.to_dense = lambda self, dtype=None, *, masked_grad=None: self if dtype is None else self.to(dtype)
    Tensor.is_sparse = False
    Tensor.is_sparse_csr = False
    Tensor.to_sparse_csr = _csr.to_sparse_csr
    Tensor.to_sparse_csc = _csc.to_sparse_csc


def _sparse_aware(dense_fn, name):
    """``ember.mm``/``ember.matmul``: sparse operands go to the sparse product (only these function forms
    look; the dense path pays one type check here and nothing in ``apply``)."""
    def fn(input, other, *, out=None):
        if type(input) in _SPARSE_TYPES or type(other) in _SPARSE_TYPES:
            if out is not None:
                raise RuntimeError(f"{name}: out= is not supported with a sparse operand")
            return mm(input, other) if type(input) in _SPARSE_TYPES else _ops.dense_mm_sparse(input, other)
        return dense_fn(input, other, out=out)
    if name == "mm":                        # (torch's keyword for mm's second operand is mat2)
        def fn(input, mat2, *, out=None, _fn=fn):
            return _fn(input, mat2, out=out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = dense_fn.__doc__
    fn.__module__ = "ember"
    return fn


def _sparse_addmm(dense_fn):
    """``ember.addmm``: a sparse ``mat1`` or ``mat2`` (COO, CSR, CSC) goes to the sparse product."""
    def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
        if type(mat1) in _SPARSE_TYPES or type(mat2) in _SPARSE_TYPES:
            if out is not None:
                raise RuntimeError("addmm: out= is not supported with a sparse operand")
            prod = mm(mat1, mat2) if type(mat1) in _SPARSE_TYPES else _ops.dense_mm_sparse(mat1, mat2)
            return (input * beta if beta != 1 else input) + (prod * alpha if alpha != 1 else prod)
        return dense_fn(input, mat1, mat2, beta=beta, alpha=alpha, out=out)
    addmm.__doc__ = dense_fn.__doc__
    addmm.__module__ = "ember"
    return addmm


def _install(ns: dict) -> None:
    """Called by ``ember/__init__``: the top-level names (torch.sparse_coo_tensor, torch.spmm, layouts)."""
    from ..ops.registry import FUNCTIONS
    for name in ("mm", "matmul"):
        ns[name] = FUNCTIONS[name] = _sparse_aware(FUNCTIONS[name], name)
    ns["addmm"] = FUNCTIONS["addmm"] = _sparse_addmm(FUNCTIONS["addmm"])
    ns.update(sparse_coo_tensor=sparse_coo_tensor, spmm=spmm, layout=layout, strided=strided, sparse_coo=sparse_coo,
              sparse_csr_tensor=_csr.sparse_csr_tensor, sparse_csr=_csr.sparse_csr,
              sparse_csc_tensor=_csc.sparse_csc_tensor, sparse_csc=_csc.sparse_csc)


_install_methods()
_csc.install()
