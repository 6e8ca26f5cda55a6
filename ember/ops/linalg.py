"""Linear algebra, the family's shared base: ``LinAlgError``, the named result types, argument checks
and LAPACK's failure reports (singular, not positive-definite), used by the files that hold the ops:

* ``linalg_products.py``: matmul and the products run through it (mm, bmm, mv, dot, inner, outer, the
  addmm family, tensordot, kron, multi_dot, vecdot), and cross;
* ``linalg_einsum.py``: einsum;
* ``linalg_parts.py``: triangular parts (tril/triu), trace, diagonal;
* ``linalg_solvers.py``: inv, solve, triangular solves, cholesky_solve/inverse, matrix_power, matrix_exp;
* ``linalg_decompositions.py``: cholesky, qr, eigh, svd, and what the SVD gives: pinv, lstsq;
* ``linalg_norms.py``: det/slogdet, the norms behind ``ember.linalg``, cond, matrix_rank;
* ``linalg_lu.py``: LU with partial pivoting (lu_factor(_ex), lu, lu_solve, lu_unpack);
* ``linalg_householder.py``: geqrf and householder_product (orgqr).

Only a few ops are registered: ``matmul`` (every product: mm, bmm, mv, dot, inner, tensordot and the
backward of all of them), ``add_scaled`` (``beta * input + alpha * product`` for the addmm family),
``einsum``, ``tril``/``triu``, ``cross`` and one op per LAPACK routine. Everything else is composed
from those with ember ops, so gradients (and double backward) come for free.
"""
from __future__ import annotations

import collections
import math

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from .registry import dtype_name, FACTORY


_LOW = (_dt.float16, _dt.bfloat16)


class LinAlgError(RuntimeError):
    """Raised when a linear-algebra routine fails on its input (singular or not positive-definite)."""


# torch.return_types equivalents
SlogdetResult = collections.namedtuple("linalg_slogdet", ["sign", "logabsdet"])
QRResult = collections.namedtuple("linalg_qr", ["Q", "R"])
EighResult = collections.namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
SVDResult = collections.namedtuple("linalg_svd", ["U", "S", "Vh"])
SVDOldResult = collections.namedtuple("svd", ["U", "S", "V"])
LstsqResult = collections.namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
InvExResult = collections.namedtuple("linalg_inv_ex", ["inverse", "info"])
CholeskyExResult = collections.namedtuple("linalg_cholesky_ex", ["L", "info"])
SolveExResult = collections.namedtuple("linalg_solve_ex", ["result", "info"])
TriangularSolveResult = collections.namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


# ---- small helpers ----------------------------------------------------------------------------------

_C_NAMES = {_dt.float32: "float", _dt.float64: "double", _dt.float16: "c10::Half", _dt.bfloat16: "c10::BFloat16",
            _dt.int64: "long int", _dt.int32: "int", _dt.int16: "short int", _dt.int8: "signed char",
            _dt.uint8: "unsigned char", _dt.bool: "bool"}


def _cname(d) -> str:
    """The C++ type name torch prints in some dtype-mismatch messages ("float", "long int")."""
    return _C_NAMES.get(d, str(d))


def _tensor_arg(x, op: str, arg: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' must be Tensor, not {type(x).__name__}")
    return x


def _shp(s) -> str:
    return "[" + ", ".join(str(x) for x in s) + "]"


def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _const(arr, dtype) -> Tensor:
    """A constant tensor (no grad) of ``dtype`` from a NumPy array."""
    return wrap(np.asarray(arr, dtype=dtype.np), dtype)


def _eye(n: int, dtype) -> Tensor:
    """An identity matrix: depends on the shape only, so a capturing compiler may keep it as a constant."""
    t = _const(np.eye(n), dtype)
    if FACTORY[0] is not None:
        FACTORY[0](t._data)
    return t


def _out(result: Tensor, out) -> Tensor:
    from .inplace import copy_out
    return copy_out(result, out)


def _out_tuple(results: tuple, out, op: str):
    """``out=(a, b, ...)`` for ops with several results."""
    if not isinstance(out, (tuple, list)) or len(out) != len(results):
        raise TypeError(f"{op}(): argument 'out' must be a tuple of {len(results)} Tensors")
    from .inplace import copy_out
    return type(results)(*[copy_out(r, o) for r, o in zip(results, out)])


def _bcast_shapes(a, b) -> tuple:
    """Broadcast two batch shapes; torch's message (no op prefix) when they don't broadcast."""
    nd = max(len(a), len(b))
    pa = (1,) * (nd - len(a)) + tuple(a)
    pb = (1,) * (nd - len(b)) + tuple(b)
    for i in range(nd - 1, -1, -1):                       # torch reports the rightmost mismatch
        x, y = pa[i], pb[i]
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                               f"non-singleton dimension {i}")
    return tuple(y if x == 1 else x for x, y in zip(pa, pb))


def _not_impl(kernel: str, d) -> NotImplementedError:
    return NotImplementedError(f'"{kernel}" not implemented for \'{dtype_name(d)}\'')


# ---- LAPACK-backed ops ------------------------------------------------------------------------------------

_LOW_KERNEL = {"linalg.det": "lu_cpu", "linalg.slogdet": "lu_cpu", "linalg.solve": "lu_cpu", "logdet": "lu_cpu",
               "linalg.cholesky": "cholesky_cpu", "cholesky": "cholesky_cpu", "linalg.eigh": "linalg_eigh_cpu",
               "linalg.eigvalsh": "linalg_eigh_cpu", "linalg.svd": "linalg_svd_cpu", "linalg.svdvals": "linalg_svd_cpu",
               "linalg.qr": "geqrf_cpu", "linalg.pinv": "linalg_svd_cpu", "linalg.lstsq": "linalg_lstsq",
               "linalg.solve_triangular": "lu_cpu", "linalg.matrix_rank": "linalg_svd_cpu"}


def _check_linalg(A, op: str, square: bool = True, arg: str = "A") -> None:
    """torch's checks for a (batch of) matrix input: >= 2 dims, float32/float64, square if needed."""
    _tensor_arg(A, op, arg)
    if A._data.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {arg} must have at least 2 dimensions.")
    if A._dtype.is_complex:
        raise NotImplementedError(f"{op}: complex matrices are not supported by ember yet (float32 and float64 "
                                  f"are), got {dtype_name(A._dtype)}")
    if not A._dtype.is_floating_point:
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {dtype_name(A._dtype)}")
    if A._dtype in _LOW:
        if op == "linalg.inv":
            raise RuntimeError(f"linalg.inv: Low precision dtypes not supported. Got {dtype_name(A._dtype)}")
        raise _not_impl(_LOW_KERNEL.get(op, op), A._dtype)
    if square:
        _check_square(A, op)


def _check_square(A, op: str) -> None:
    m, n = A._data.shape[-2:]
    if m != n:
        raise RuntimeError(f"{op}: A must be batches of square matrices, but they are {m} by {n} matrices")


def _check_square_input(A, op: str) -> None:
    """A (batch of) square matrices of any dtype (matrix_power, matrix_exp check their dtypes themselves)."""
    _tensor_arg(A, op, "A")
    if A._data.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    _check_square(A, op)


def _lu_zero_pivot(a: np.ndarray) -> int:
    """1-based index of the first zero pivot of LU with partial pivoting (LAPACK getrf's info), or 0."""
    a = np.array(a, dtype=np.float64 if a.dtype == np.float64 else np.float32, copy=True)
    n = a.shape[0]
    first = 0
    for k in range(n):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        if a[p, k] == 0:
            first = first or k + 1
            continue
        if p != k:
            a[[k, p]] = a[[p, k]]
        a[k + 1:, k] /= a[k, k]
        a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:])
    return first


def _chol_fail_order(a: np.ndarray) -> int:
    """Order of the first leading minor that is not positive-definite (potrf's info), or 0."""
    return _chol_partial(a)[1]


def _chol_partial(a: np.ndarray):
    """LAPACK's unblocked Cholesky (potf2, lower) -> (L, info): where it stops at a pivot that is not positive
    (or NaN), that pivot holds the failing value and the columns after it keep A's lower triangle, which
    is what torch's ``cholesky_ex`` returns for a matrix that is not positive-definite."""
    a = np.asarray(a, dtype=np.float64)
    n = a.shape[0]
    L = np.tril(a)
    for j in range(n):
        d = a[j, j] - L[j, :j] @ L[j, :j]
        if not d > 0:
            L[j, j] = d
            return L, j + 1
        L[j, j] = math.sqrt(d)
        L[j + 1:, j] = (a[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return L, 0


def _first_failure(A: np.ndarray, find):
    """(flat batch index, info) of the first matrix in a batch for which ``find`` reports a failure."""
    flat = A.reshape((-1,) + A.shape[-2:])
    for i in range(flat.shape[0]):
        info = find(flat[i])
        if info:
            return i, info
    return None, 0


def _batch_prefix(A: np.ndarray, idx) -> str:
    return f"(Batch element {idx}): " if A.ndim > 2 else ""


def _singular_error(op: str, A: np.ndarray) -> LinAlgError:
    if op == "linalg.solve":
        return LinAlgError("torch.linalg.solve: The solver failed because the input matrix is singular.")
    idx, info = _first_failure(A, _lu_zero_pivot)
    if idx is None:
        return LinAlgError(f"{op}: The inversion could not be completed because the input matrix is singular.")
    return LinAlgError(f"{op}: {_batch_prefix(A, idx)}The diagonal element {info} is zero, the inversion could not "
                       f"be completed because the input matrix is singular.")


def _not_pd_error(op: str, A: np.ndarray) -> LinAlgError:
    idx, info = _first_failure(A, _chol_fail_order)
    if idx is None:
        return LinAlgError(f"{op}: The factorization could not be completed because the input is not "
                           f"positive-definite.")
    return LinAlgError(f"{op}: {_batch_prefix(A, idx)}The factorization could not be completed because the input is "
                       f"not positive-definite (the leading minor of order {info} is not positive-definite).")


def _nan_matrices(a: np.ndarray):
    """The batch mask of matrices holding a NaN (None when there are none). LAPACK's LU runs through a NaN
    and torch returns NaN for those matrices (all of inv, solve, det), where NumPy may call them singular
    or, for det, return 0; the kernels below solve the others and fill these with NaN."""
    if a.size == 0 or not np.isnan(a).any():
        return None
    return np.isnan(a).any(axis=(-2, -1))


def _without_nan_matrices(a: np.ndarray, mask) -> np.ndarray:
    return np.where(mask[..., None, None], np.eye(a.shape[-1], dtype=a.dtype), a)


def _info_array(a: np.ndarray, find) -> np.ndarray:
    flat = a.reshape((-1,) + a.shape[-2:])
    return np.array([find(m) for m in flat], dtype=np.int32).reshape(a.shape[:-2])
