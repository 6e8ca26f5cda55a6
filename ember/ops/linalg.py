"""Linear algebra: matmul and its relatives, einsum/tensordot, triangular parts, and the decompositions
behind ``ember.linalg`` (inv, solve, det, cholesky, qr, eigh, svd, ...).

Only a few ops are registered: ``matmul`` (every product: mm, bmm, mv, dot, inner, tensordot and the
backward of all of them), ``add_scaled`` (``beta * input + alpha * product`` for the addmm family),
``einsum``, ``tril``/``triu``, ``cross`` and one op per LAPACK routine. Everything else is composed
from those with ember ops, so gradients (and double backward) come for free.

Matmul kernels run on NumPy's BLAS: batched operands whose batch dims only broadcast against a matrix
are folded into one large GEMM, and float16/bfloat16 compute in float32 (as torch's CPU kernels
accumulate) before casting back.
"""
from __future__ import annotations

import collections
import warnings
import importlib
import math

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor, wrap
from ..autograd.grad_mode import GRAD
from .registry import register, apply, attach, dtype_name, FACTORY, node_class, rename
from ._util import int_arg
from ..amp.state import AUTOCAST as _AUTOCAST, cast_args as _autocast_args

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


def _safe_div(num: Tensor, den: Tensor) -> Tensor:
    """``num / den`` with 0 where both are 0 (instead of 0/0 = NaN), written in ember ops so that a
    compiled replay decides per element. Eigen/singular-vector derivatives divide by eigenvalue gaps,
    which are 0 for repeated values; the numerator is then exactly 0 when the vectors get no gradient."""
    both = (num == 0) & (den == 0)
    from .binary import where
    return num / where(both, 1.0, den)


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


# ---- matmul: the one product kernel -------------------------------------------------------------------

# dtypes NumPy multiplies natively (float16 and ml_dtypes' bfloat16 go through float32)
_NP_NATIVE = {np.dtype(t) for t in (np.float32, np.float64, np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_)}


def _matmul_kernel(a, b):
    dt = a.dtype
    low = dt not in _NP_NATIVE
    if low:
        # float16/bfloat16: accumulate in float32 like torch's CPU kernels, then round once
        a = a.astype(np.float32)
        b = b.astype(np.float32)
    if a.ndim > 2 and b.ndim <= 2:
        # (..., M, K) @ (K, N): fold the batch into the rows so BLAS runs one large GEMM
        lead = a.shape[:-1]
        r = np.matmul(a.reshape(_prod(lead), a.shape[-1]), b)
        r = r.reshape(lead + r.shape[1:])
    else:
        r = np.matmul(a, b)
    if low:
        r = np.asarray(r).astype(dt)
    return r


def _matmul_bw(ctx, g):
    a, b = ctx.inputs
    need_a, need_b = ctx.edges[0] is not None, ctx.edges[1] is not None
    if a.ndim == 1 and b.ndim == 1:                      # dot product: g is 0-d
        return (g * b if need_a else None), (g * a if need_b else None)
    A = a.unsqueeze(0) if a.ndim == 1 else a
    B = b.unsqueeze(-1) if b.ndim == 1 else b
    G = g
    if a.ndim == 1:
        G = G.unsqueeze(-2)
    if b.ndim == 1:
        G = G.unsqueeze(-1)
    ga = gb = None
    M, K, N = A.shape[-2], A.shape[-1], B.shape[-1]
    if need_a:
        if A.ndim == 2 and B.ndim > 2:
            # sum over B's batch inside one GEMM: (M, batch*N) @ (batch*N, K)
            nb = _prod(B.shape[:-2])
            ga = matmul_raw(G.movedim(-2, 0).reshape(M, nb * N), B.transpose(-1, -2).reshape(nb * N, K))
        else:
            ga = matmul_raw(G, B.mT)                    # broadcast batch dims: the engine sums them back
        if a.ndim == 1:
            ga = ga.squeeze(-2)
    if need_b:
        if B.ndim == 2 and A.ndim > 2:
            # sum over A's batch inside one GEMM: (K, batch*M) @ (batch*M, N)
            na = _prod(A.shape[:-2])
            gb = matmul_raw(A.reshape(na * M, K).mT, G.reshape(na * M, N))
        else:
            gb = matmul_raw(A.mT, G)
        if b.ndim == 1:
            gb = gb.squeeze(-1)
    return ga, gb


MATMUL = register("matmul", _matmul_kernel, _matmul_bw, save="i")
_MM = node_class("MmBackward0")
_MATMUL_2D = {(1, 1): node_class("DotBackward0"), (2, 1): node_class("MvBackward0"),
              (1, 2): node_class("SqueezeBackward4"), (2, 2): _MM}
_CLONE, _UNSAFE_VIEW = node_class("CloneBackward0"), node_class("UnsafeViewBackward0")


def _matmul_node(op, args, attrs, nout):
    """The node for a matmul, named as torch's matmul dispatches on the ranks: dot, mv, mm (a vector @
    matrix is an unsqueezed mm then a squeeze); batched products end in a view, and a matrix @ batch
    with the matrix requiring grad is folded into one mm whose transposed result is copied (a clone).
    (``MATMUL.node_cls``: a hot op, so the class is chosen here in one call.)"""
    na, nb = args[0]._data.ndim, args[1]._data.ndim
    if na == 2 and nb == 2:
        cls = _MM
    elif na <= 2 and nb <= 2:
        cls = _MATMUL_2D[na, nb]
    else:
        cls = _CLONE if na == 2 and args[0]._rg else _UNSAFE_VIEW
    return cls(op, args, attrs, nout)


MATMUL.node_cls = _matmul_node
# the products with names of their own in torch (ember runs them through matmul / add_scaled)
_BMM, _VDOT, _TRACE = node_class("BmmBackward0"), node_class("VdotBackward0"), node_class("TraceBackward0")
_VIEW = node_class("ViewBackward0")
_VECTOR_NORM = node_class("LinalgVectorNormBackward0")
_ADDMM, _ADDMV, _ADDR, _ADDBMM, _BADDBMM = (node_class(n + "Backward0") for n in (
    "Addmm", "Addmv", "Addr", "Addbmm", "Baddbmm"))


def matmul_raw(a: Tensor, b: Tensor) -> Tensor:
    """The matmul op without argument checks (callers have validated shapes and dtypes)."""
    return apply(MATMUL, (a, b))


def _broadcastable(a, b) -> bool:
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and x != 1 and y != 1:
            return False
    return True


def _check_matmul(a: Tensor, b: Tensor, has_out: bool = False) -> None:
    """Validate a matmul; the error (if any) is the one of the kernel torch would dispatch to."""
    na, nb = a._data.ndim, b._data.ndim
    if na == 0 or nb == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {na}D and {nb}D")
    sa, sb = a._data.shape, b._data.shape
    kb = sb[0] if nb == 1 else sb[-2]
    # torch computes empty bool products (its kernels return before dispatching on the dtype)
    dtype_ok = a._dtype is b._dtype and (a._dtype is not _dt.bool or a._data.size == 0 or b._data.size == 0)
    if sa[-1] == kb and dtype_ok and (na < 3 or nb < 3 or _broadcastable(sa[:-2], sb[:-2])):
        return
    _matmul_error(a, b, has_out)


def _should_fold(a: Tensor, b: Tensor, has_out: bool) -> bool:
    """torch's choice of folding an N-D operand into a matrix (mm/mv) instead of running bmm."""
    a_larger = a._data.ndim >= b._data.ndim
    t1 = a if a_larger else b
    shape, strides = list(t1._data.shape), list(t1.stride())
    if not a_larger:                                      # t1 is b.mT
        shape[-2:], strides[-2:] = shape[-1:-3:-1], strides[-1:-3:-1]
    d1, d2 = len(shape), (b._data.ndim if a_larger else a._data.ndim)
    if not (d1 >= 3 and d2 in (1, 2)):
        return False
    if (b if a_larger else a)._rg and not has_out:
        return True
    if a._data.ndim == 2:
        return False
    if t1._data.size == 0:
        return True
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(d1 - 2))


def _mm_error(m1_shape, m2_shape, d1, d2):
    if m1_shape[1] != m2_shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({m1_shape[0]}x{m1_shape[1]} and "
                           f"{m2_shape[0]}x{m2_shape[1]})")
    if d1 is not d2:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_cname(d1)} != {_cname(d2)}")
    raise _not_impl("addmm_impl_cpu_", d1)


def _mv_error(mat_shape, k, dmat, dvec):
    if mat_shape[1] != k:
        raise RuntimeError(f"size mismatch, got input ({mat_shape[0]}), mat ({mat_shape[0]}x{mat_shape[1]}), vec ({k})")
    if dmat is not dvec:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {dtype_name(dvec)}, "
                           f"{dtype_name(dmat)}, and {dtype_name(dvec)}")
    raise _not_impl("addmv_impl_cpu", dmat)


def _matmul_error(a: Tensor, b: Tensor, has_out: bool):
    na, nb = a._data.ndim, b._data.ndim
    sa, sb = a._data.shape, b._data.shape
    da, db = a._dtype, b._dtype
    if na == 1 and nb == 1:
        _check_dot(a, b)
    if na == 2 and nb == 1:
        _mv_error(sa, sb[0], da, db)
    if na == 1 and nb == 2:
        _mm_error((1, sa[0]), sb, da, db)
    if na == 2 and nb == 2:
        _mm_error(sa, sb, da, db)
    if _should_fold(a, b, has_out):
        if na >= nb:                                      # (..., M, K) folded to (P, K)
            rows = (_prod(sa[:-1]), sa[-1])
            if nb == 1:
                _mv_error(rows, sb[0], da, db)
            _mm_error(rows, sb, da, db)
        rows = (_prod(sb[:-2]) * sb[-1], sb[-2])          # b.mT folded: (P * N, K)
        if na == 1:
            _mv_error(rows, sa[0], db, da)
        _mm_error(rows, (sa[1], sa[0]), db, da)
    # bmm on the broadcast batch
    batch = _bcast_shapes(sa[:-2], sb[:-2])
    nbatch = _prod(batch)
    kb = sb[0] if nb == 1 else sb[-2]
    if sa[-1] != kb:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{nbatch}, {sa[-1]}] "
                           f"but got: [{nbatch}, {kb}].")
    if da is not db:
        raise RuntimeError(f"expected scalar type {dtype_name(da)} but found {dtype_name(db)}")
    raise _not_impl("bmm", da)


def matmul(input, other, *, out=None) -> Tensor:
    """Matrix product with torch's rules: 1-D operands are vectors, batch dims broadcast."""
    _tensor_arg(input, "matmul", "input")
    _tensor_arg(other, "matmul", "other")
    if _AUTOCAST[0] is not None:                          # ember.autocast: run in the low precision
        input, other = _autocast_args(input, other)
    _check_matmul(input, other, out is not None)
    r = apply(MATMUL, (input, other))
    return r if out is None else _out(r, out)


def mm(input, mat2, *, out=None) -> Tensor:
    """Product of two matrices."""
    _tensor_arg(input, "mm", "input")
    _tensor_arg(mat2, "mm", "mat2")
    if _AUTOCAST[0] is not None:
        input, mat2 = _autocast_args(input, mat2)
    if input._data.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if mat2._data.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    _check_matmul(input, mat2)
    r = apply(MATMUL, (input, mat2))
    return r if out is None else _out(r, out)


def _check_bmm(b1: Tensor, b2: Tensor) -> None:
    if b1._data.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b2._data.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    s1, s2 = b1._data.shape, b2._data.shape
    if s2[0] != s1[0] or s2[1] != s1[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{s1[0]}, {s1[2]}] "
                           f"but got: [{s2[0]}, {s2[1]}].")
    if b1._dtype is not b2._dtype:
        raise RuntimeError(f"expected scalar type {dtype_name(b1._dtype)} but found {dtype_name(b2._dtype)}")
    if b1._dtype is _dt.bool:
        raise _not_impl("bmm", b1._dtype)


def bmm(input, mat2, *, out=None) -> Tensor:
    """Batched product of (b, n, m) and (b, m, p) tensors (no broadcasting)."""
    _tensor_arg(input, "bmm", "input")
    _tensor_arg(mat2, "bmm", "mat2")
    if _AUTOCAST[0] is not None:
        input, mat2 = _autocast_args(input, mat2)
    _check_bmm(input, mat2)
    r = rename(apply(MATMUL, (input, mat2)), _BMM)
    return r if out is None else _out(r, out)


def mv(input, vec, *, out=None) -> Tensor:
    """Matrix-vector product."""
    _tensor_arg(input, "mv", "input")
    _tensor_arg(vec, "mv", "vec")
    if input._data.ndim != 2 or vec._data.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input._data.ndim}, {vec._data.ndim}")
    _check_matmul(input, vec)
    r = apply(MATMUL, (input, vec))
    return r if out is None else _out(r, out)


def _check_dot(a: Tensor, b: Tensor) -> None:
    na, nb = a._data.ndim, b._data.ndim
    if na != 1 or nb != 1:
        raise RuntimeError(f"1D tensors expected, but got {na}D and {nb}D tensors")
    if a._dtype is not b._dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {dtype_name(a._dtype)} "
                           f"and {dtype_name(b._dtype)}")
    n, m = a._data.shape[0], b._data.shape[0]
    if n != m:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to have the same number "
                           f"of elements, but got {n} and {m} elements respectively")
    if a._dtype is _dt.bool:
        raise _not_impl("dot", a._dtype)


def dot(input, tensor, *, out=None) -> Tensor:
    """Inner product of two 1-D tensors."""
    _tensor_arg(input, "dot", "input")
    _tensor_arg(tensor, "dot", "tensor")
    _check_dot(input, tensor)
    r = apply(MATMUL, (input, tensor))
    return r if out is None else _out(r, out)


def vdot(input, other, *, out=None) -> Tensor:
    """``dot`` with the first argument conjugated (the same thing for real tensors)."""
    _tensor_arg(input, "vdot", "input")
    _tensor_arg(other, "vdot", "other")
    _check_dot(input, other)
    r = rename(apply(MATMUL, (input, other)), _VDOT)
    return r if out is None else _out(r, out)


def inner(input, other, *, out=None) -> Tensor:
    """Contract the last dimension of both inputs (a scalar operand multiplies)."""
    _tensor_arg(input, "inner", "input")
    _tensor_arg(other, "inner", "other")
    if input._data.ndim == 0 or other._data.ndim == 0:
        r = input * other
        return r if out is None else _out(r, out)
    sa, sb = input._data.shape, other._data.shape
    if sa[-1] != sb[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{_shp(sa)} and {_shp(sb)}")
    if input._dtype is not other._dtype:
        raise RuntimeError("both inputs should have same dtype")
    if input._data.ndim == 1 and other._data.ndim == 1:
        r = dot(input, other)
    else:
        if _AUTOCAST[0] is not None:                      # a matmul in torch, so it autocasts
            input, other = _autocast_args(input, other)
        r = _tensordot(input, other, [input._data.ndim - 1], [other._data.ndim - 1])
    return r if out is None else _out(r, out)


def outer(input, vec2, *, out=None) -> Tensor:
    """Outer product of two vectors (types promote, as torch's implementation is a product)."""
    _tensor_arg(input, "outer", "input")
    _tensor_arg(vec2, "outer", "vec2")
    if input._data.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D argument self, but got {input._data.ndim}-D")
    if vec2._data.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D argument vec2, but got {vec2._data.ndim}-D")
    r = input.unsqueeze(1) * vec2
    return r if out is None else _out(r, out)


def ger(input, vec2, *, out=None) -> Tensor:
    """Alias of ``outer``."""
    return outer(input, vec2, out=out)


Tensor.__matmul__ = lambda self, other: matmul(self, other) if isinstance(other, Tensor) else NotImplemented
Tensor.__rmatmul__ = lambda self, other: matmul(other, self) if isinstance(other, Tensor) else NotImplemented


# ---- beta * input + alpha * product (addmm family) ----------------------------------------------------


def _add_scaled_kernel(inp, prod, beta, alpha):
    dt = prod.dtype
    if dt == np.bool_:
        r = np.logical_and(prod, bool(alpha))
        return np.logical_or(r, np.logical_and(inp, bool(beta))) if beta else np.broadcast_to(r, prod.shape).copy()
    if dt.kind in "iu":
        # integer results take integral scalars, as torch casts alpha/beta to the result type
        beta, alpha = int(beta), int(alpha)
    r = prod if alpha == 1 else prod * np.asarray(alpha, dtype=dt)
    if beta == 0:
        # beta == 0 ignores input entirely (nan/inf in it do not propagate), as documented by torch
        return np.array(np.broadcast_to(r, prod.shape), dtype=dt, copy=True)
    r = r + (inp if beta == 1 else inp * np.asarray(beta, dtype=dt))
    return r.astype(dt, copy=False)


def _add_scaled_bw(ctx, g):
    beta, alpha = ctx.attrs["beta"], ctx.attrs["alpha"]
    gi = (g * beta if beta != 1 else g) if ctx.edges[0] is not None else None
    gp = (g * alpha if alpha != 1 else g) if ctx.edges[1] is not None else None
    return gi, gp


ADD_SCALED = register("add_scaled", _add_scaled_kernel, _add_scaled_bw)


def _add_scaled(inp: Tensor, prod: Tensor, beta, alpha) -> Tensor:
    inp = inp.expand(prod._data.shape)
    return apply(ADD_SCALED, (inp, prod), {"beta": beta, "alpha": alpha})


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)``."""
    _tensor_arg(input, "addmm", "input")
    if _AUTOCAST[0] is not None:
        input, mat1, mat2 = _autocast_args(input, mat1, mat2)
    if mat1._data.ndim != 2:
        raise RuntimeError(f"mat1 must be a matrix, got {mat1._data.ndim}-D tensor")
    if mat2._data.ndim != 2:
        raise RuntimeError(f"mat2 must be a matrix, got {mat2._data.ndim}-D tensor")
    _check_matmul(mat1, mat2)
    if input._dtype is not mat2._dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {dtype_name(input._dtype)} and "
                           f"{dtype_name(mat2._dtype)}")
    r = rename(_add_scaled(input, apply(MATMUL, (mat1, mat2)), beta, alpha), _ADDMM)
    return r if out is None else _out(r, out)


def addmv(input, mat, vec, *, beta=1, alpha=1, out=None) -> Tensor:
    """``beta * input + alpha * (mat @ vec)``."""
    _tensor_arg(input, "addmv", "input")
    if mat._data.ndim != 2 or vec._data.ndim != 1 or input._data.ndim > 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input._data.ndim}, {mat._data.ndim}, "
                           f"{vec._data.ndim}")
    if not (input._dtype is mat._dtype is vec._dtype):
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {dtype_name(input._dtype)}, "
                           f"{dtype_name(mat._dtype)}, and {dtype_name(vec._dtype)}")
    sm = mat._data.shape
    n_in = input._data.shape[0] if input._data.ndim == 1 else 1
    if sm[1] != vec._data.shape[0] or (n_in != sm[0] and n_in != 1):
        raise RuntimeError(f"size mismatch, got input ({n_in}), mat ({sm[0]}x{sm[1]}), vec ({vec._data.shape[0]})")
    _check_matmul(mat, vec)
    r = rename(_add_scaled(input, apply(MATMUL, (mat, vec)), beta, alpha), _ADDMV)
    return r if out is None else _out(r, out)


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)`` (types promote)."""
    _tensor_arg(input, "addr", "input")
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v._data.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v._data.ndim}-D")
    dt = _dt.result_type(input, vec1, vec2)
    if dt.category < 2:
        for name, s in (("beta", beta), ("alpha", alpha)):
            if isinstance(s, float):
                raise RuntimeError(f"For integral input tensors, argument {name} must not be a floating point number.")
    prod = outer(vec1.to(dt), vec2.to(dt))
    r = rename(_add_scaled(input.to(dt), prod, beta, alpha), _ADDR)
    return r if out is None else _out(r, out)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None) -> Tensor:
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    _tensor_arg(input, "addbmm", "input")
    if _AUTOCAST[0] is not None:
        input, batch1, batch2 = _autocast_args(input, batch1, batch2)
    s1, s2 = batch1._data.shape, batch2._data.shape
    if len(s1) >= 2 and len(s2) >= 3:
        input.expand(s1[1], s2[2])                 # torch sizes the result before checking ranks
    if batch1._data.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if batch2._data.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if s1[0] != s2[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {s1[0]} and {s2[0]}")
    if s1[2] != s2[1]:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({s1[1]}x{s1[2]} and {s2[1]}x{s2[2]})")
    if input._dtype is not batch2._dtype or batch1._dtype is not batch2._dtype:
        other = batch2._dtype if input._dtype is not batch2._dtype else batch1._dtype
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {dtype_name(input._dtype)} and "
                           f"{dtype_name(other)}")
    _check_bmm(batch1, batch2)
    from .reduce import sum as _sum
    prod = _sum(apply(MATMUL, (batch1, batch2)), 0)
    r = rename(_add_scaled(input, prod, beta, alpha), _ADDBMM)
    return r if out is None else _out(r, out)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)``."""
    _tensor_arg(input, "baddbmm", "input")
    if _AUTOCAST[0] is not None:
        input, batch1, batch2 = _autocast_args(input, batch1, batch2)
    s1, s2 = batch1._data.shape, batch2._data.shape
    if len(s1) >= 2 and len(s2) >= 3:
        input.expand(s1[0], s1[1], s2[2])          # torch sizes the result before checking ranks
    if batch1._data.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if batch2._data.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if not (input._dtype is batch1._dtype is batch2._dtype):
        raise RuntimeError(f"Input dtypes must be the same, got: input {_cname(input._dtype)}, batch1: "
                           f"{_cname(batch1._dtype)}, batch2: {_cname(batch2._dtype)}")
    _check_bmm(batch1, batch2)
    r = rename(_add_scaled(input, apply(MATMUL, (batch1, batch2)), beta, alpha), _BADDBMM)
    return r if out is None else _out(r, out)


def _inplace_method(fn, name):
    def method(self, *args, **kw):
        from .inplace import write_result
        return write_result(self, lambda s: fn(s, *args, **kw), name)
    method.__name__ = name
    method.__doc__ = f"In-place form of ``{fn.__name__}``."
    return method


# ---- einsum -------------------------------------------------------------------------------------------

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _einsum_single(x, sub, keep):
    """Reduce one operand to the letters in ``keep`` (taking diagonals of repeated letters)."""
    kept = "".join(c for i, c in enumerate(sub) if c in keep and c not in sub[:i])
    if kept == sub:
        return x, sub
    return np.einsum(f"{sub}->{kept}", x), kept


def _einsum_pair(a, sa, b, sb, keep):
    """Contract two operands with one matmul: (batch, left, contracted) @ (batch, contracted, right)."""
    a, sa = _einsum_single(a, sa, keep | set(sb))
    b, sb = _einsum_single(b, sb, keep | set(sa))
    batch = [c for c in sa if c in sb and c in keep]
    contr = [c for c in sa if c in sb and c not in keep]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    size = {c: n for c, n in zip(sa, a.shape)}
    size.update({c: n for c, n in zip(sb, b.shape)})
    pa = a.transpose([sa.index(c) for c in batch + left + contr])
    pb = b.transpose([sb.index(c) for c in batch + contr + right])
    nb = _prod(size[c] for c in batch)
    nl, nc, nr = _prod(size[c] for c in left), _prod(size[c] for c in contr), _prod(size[c] for c in right)
    if batch:
        r = np.matmul(pa.reshape(nb, nl, nc), pb.reshape(nb, nc, nr))
    else:
        r = np.matmul(pa.reshape(nl, nc), pb.reshape(nc, nr))
    sub = "".join(batch + left + right)
    return r.reshape(tuple(size[c] for c in sub)), sub


def _einsum_kernel(*xs, subs, out):
    dt = xs[0].dtype
    low = dt not in _NP_NATIVE
    if low:
        xs = [x.astype(np.float32) for x in xs]
    if len(xs) == 1:
        if dt.kind in "biu" and set(out) != set(subs[0]):
            # a one-operand reduction is a sum: integers and bools accumulate in int64, as torch.sum
            dt = np.dtype(np.int64)
            xs = [xs[0].astype(dt)]
        r = np.einsum(f"{subs[0]}->{out}", xs[0])
    else:
        cur, cs = xs[0], subs[0]
        for i in range(1, len(xs)):
            # letters still needed: the output's and those of operands not yet contracted
            keep = set(out).union(*[set(s) for s in subs[i + 1:]])
            cur, cs = _einsum_pair(cur, cs, xs[i], subs[i], keep)
        cur, cs = _einsum_single(cur, cs, set(out))
        r = cur.transpose([cs.index(c) for c in out]) if cs != out else cur
    r = np.asarray(r)
    if low:
        r = r.astype(dt)
    elif any(np.may_share_memory(r, x) for x in xs):
        r = r.copy()                                       # outputs never alias inputs
    return r.astype(dt, copy=False)


def _einsum_bw(ctx, g):
    xs = ctx.inputs
    subs, out = ctx.attrs["subs"], ctx.attrs["out"]
    used = set(out).union(*[set(s) for s in subs])
    free = iter(c for c in _LETTERS if c not in used)
    grads = []
    for i, x in enumerate(xs):
        if ctx.edges[i] is None:
            grads.append(None)
            continue
        ops, osubs = [g], [out]
        for j, y in enumerate(xs):
            if j != i:
                ops.append(y)
                osubs.append(subs[j])
        avail = set(out).union(*[set(s) for j, s in enumerate(subs) if j != i])
        target = []
        seen = set()
        for c, n in zip(subs[i], x._data.shape):
            if c in seen:
                # a repeated letter (a diagonal): write through a Kronecker delta with a fresh letter
                f = next(free)
                ops.append(_eye(n, g._dtype))
                osubs.append(c + f)
                target.append(f)
                continue
            seen.add(c)
            if c not in avail:
                # a letter summed only in this operand: its gradient is broadcast along it
                ops.append(_const(np.ones(n), g._dtype))
                osubs.append(c)
                avail.add(c)
            target.append(c)
        grads.append(apply(EINSUM, tuple(ops), {"subs": tuple(osubs), "out": "".join(target)}))
    return tuple(grads)


EINSUM = register("einsum", _einsum_kernel, _einsum_bw, save="i")


def _einsum_node_name(args, attrs):
    """torch's einsum ends in a sum (one operand, letters summed out), a permute (one operand, none
    summed), the view after a bmm (operands with a contraction) or a mul (operands without one)."""
    subs, out = attrs["subs"], attrs["out"]
    summed = set().union(*map(set, subs)) - set(out)
    if len(subs) == 1:
        return "SumBackward1" if summed else "PermuteBackward0"
    return "ViewBackward0" if summed else "MulBackward0"


EINSUM.node_name = _einsum_node_name


def _parse_sublist_form(args):
    """einsum(op0, [0, 1], op1, [1, 2], [0, 2]) -> ("ab,bc->ac", [op0, op1])."""
    ops, parts = [], []

    def conv(sub):
        s = ""
        for v in sub:
            if v is Ellipsis:
                s += "..."
            elif isinstance(v, int) and 0 <= v < 52:
                s += _LETTERS[26 + v] if v < 26 else _LETTERS[v - 26]
            else:
                raise ValueError(f"einsum(): subscript in subscript list is not within the valid range [0, 52)")
        return s
    i = 0
    while i + 1 < len(args) and isinstance(args[i], Tensor):
        ops.append(args[i])
        parts.append(conv(args[i + 1]))
        i += 2
    eq = ",".join(parts)
    if i < len(args):
        eq += "->" + conv(args[i])
    return eq, ops


def _parse_operand(part, pos0):
    """Split one operand's subscripts into (letters before '...', has_ellipsis, letters after)."""
    if part.count("...") > 1 or part.replace("...", "").count("."):
        raise RuntimeError("einsum(): found '.' for operand that is not part of any ellipsis")
    pre, ell, post = part.partition("...")
    for k, c in enumerate(pre + post):
        if c not in _LETTERS:
            raise RuntimeError(f"einsum(): invalid subscript given at index {pos0 + k} in the equation string, "
                               f"subscripts must be in [a-zA-Z]")
    return pre, bool(ell), post


def einsum(*args) -> Tensor:
    """Einstein summation: ``einsum("ij,jk->ik", a, b)``, operands as varargs or one list, or the
    sublist form. Supports ellipsis, repeated subscripts (diagonals) and size-1 broadcasting."""
    if not args:
        raise TypeError("einsum(): must specify the equation string and at least one operand, or at least one "
                        "operand and its subscripts list")
    if isinstance(args[0], str):
        eq = args[0]
        ops = list(args[1][0:]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else list(args[1:])
    else:
        eq, ops = _parse_sublist_form(args)
    for o in ops:
        if not isinstance(o, Tensor):
            raise TypeError(f"einsum(): operands must be Tensors, got {type(o).__name__}")
    if _AUTOCAST[0] is not None and len(ops) > 1:        # contractions run as bmm, which autocasts
        ops = list(_autocast_args(*ops))
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    parts = lhs.split(",")
    if len(parts) > len(ops):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(parts) < len(ops):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    if not ops:
        raise RuntimeError("einsum(): must provide at least one operand")
    parsed = []
    pos = 0
    for p in parts:
        parsed.append(_parse_operand(p, pos))
        pos += len(p) + 1
    used = set("".join(a + b for a, _, b in parsed)) | set(rhs.replace(".", ""))
    ell_n = 0
    for i, ((pre, ell, post), x) in enumerate(zip(parsed, ops)):
        k, nd = len(pre) + len(post), x._data.ndim
        if not ell and k != nd:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({k}) does not match the number "
                               f"of dimensions ({nd}) for operand {i} and no ellipsis was given")
        if ell and k > nd:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({k}) is more than the number "
                               f"of dimensions ({nd}) for operand {i}")
        if ell:
            ell_n = max(ell_n, nd - k)
    free = [c for c in _LETTERS if c not in used]
    if ell_n > len(free):
        raise RuntimeError("einsum(): too many dimensions: ember's einsum supports at most 52 subscripts")
    ell_letters = "".join(free[:ell_n])
    subs = []
    for (pre, ell, post), x in zip(parsed, ops):
        n = x._data.ndim - len(pre) - len(post) if ell else 0
        subs.append(pre + (ell_letters[ell_n - n:] if n else "") + post)
    # sizes per letter (repeats must agree; size 1 broadcasts across operands)
    size = {}
    for i, (s, x) in enumerate(zip(subs, ops)):
        local = {}
        for c, n in zip(s, x._data.shape):
            if c in local and local[c] != n:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {i} but the sizes don't match, "
                                   f"{n} != {local[c]}")
            local[c] = n
        for c, n in local.items():
            prev = size.get(c)
            if prev is None or prev == 1:
                size[c] = n
            elif n != prev and n != 1:
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {i} which does not broadcast "
                                   f"with previously seen size {prev}")
    if arrow:
        opre, oell, opost = _parse_operand(rhs, len(lhs) + 2)
        for c in opre + opost:
            if c not in size:
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                                   f"operand")
        seen = set()
        for c in opre + opost:
            if c in seen:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
            seen.add(c)
        out = opre + (ell_letters if oell else "") + opost
    else:
        counts = collections.Counter("".join(a + b for a, _, b in parsed))
        out = ell_letters + "".join(c for c in _LETTERS if counts.get(c) == 1)
    dt = ops[0]._dtype
    for o in ops[1:]:
        if o._dtype is not dt:
            raise RuntimeError(f"expected scalar type {dtype_name(dt)} but found {dtype_name(o._dtype)}")
    if dt is _dt.bool and len(ops) > 1:
        raise _not_impl("bmm", dt)
    # size-1 dims that broadcast: expand (a view; expand's backward sums the gradient back)
    xs = []
    for s, x in zip(subs, ops):
        want = tuple(size[c] for c in s)
        xs.append(x if want == x._data.shape else x.expand(want))
    return apply(EINSUM, tuple(xs), {"subs": tuple(subs), "out": out})


# ---- tensordot / kron ------------------------------------------------------------------------------------


def _tensordot(a: Tensor, b: Tensor, dims_a, dims_b) -> Tensor:
    na, nb = a._data.ndim, b._data.ndim
    sa, sb = a._data.shape, b._data.shape
    free_a = [d for d in range(na) if d not in dims_a]
    free_b = [d for d in range(nb) if d not in dims_b]
    k = _prod(sa[d] for d in dims_a)
    pa = a.permute(free_a + list(dims_a)).reshape(_prod(sa[d] for d in free_a), k)
    pb = b.permute(list(dims_b) + free_b).reshape(k, _prod(sb[d] for d in free_b))
    r = apply(MATMUL, (pa, pb))
    return r.reshape(tuple(sa[d] for d in free_a) + tuple(sb[d] for d in free_b))


def tensordot(a, b, dims=2, out=None) -> Tensor:
    """Contract ``dims`` (an int: last n of a with first n of b; or two lists of dims)."""
    _tensor_arg(a, "tensordot", "a")
    _tensor_arg(b, "tensordot", "b")
    if _AUTOCAST[0] is not None:
        a, b = _autocast_args(a, b)
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    na, nb = a._data.ndim, b._data.ndim
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > na or dims > nb:
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da, db = list(range(-dims, 0)), list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
        if len(da) != len(db):
            raise RuntimeError("both dimension lists should have same length")
    if a._dtype is not b._dtype:
        raise RuntimeError("both inputs should have same dtype")
    from ._util import wrap_dim
    wa = [wrap_dim(d, na) for d in da]
    wb = [wrap_dim(d, nb) for d in db]
    for x, y, ox, oy in zip(wa, wb, da, db):
        if a._data.shape[x] != b._data.shape[y]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a._data.shape[x]} in dim "
                               f"{ox} and second has size {b._data.shape[y]} in dim {oy}")
    r = _tensordot(a, b, wa, wb)
    return r if out is None else _out(r, out)


def kron(input, other, *, out=None) -> Tensor:
    """Kronecker product (types promote)."""
    _tensor_arg(input, "kron", "input")
    _tensor_arg(other, "kron", "other")
    nd = max(input._data.ndim, other._data.ndim)
    sa = (1,) * (nd - input._data.ndim) + input._data.shape
    sb = (1,) * (nd - other._data.ndim) + other._data.shape
    # interleave: a as (a0, 1, a1, 1, ...), b as (1, b0, 1, b1, ...), product, then merge pairs
    a = input.reshape(tuple(x for s in sa for x in (s, 1)))
    b = other.reshape(tuple(x for s in sb for x in (1, s)))
    r = (a * b).reshape(tuple(x * y for x, y in zip(sa, sb)))
    return rename(r, _UNSAFE_VIEW) if out is None else _out(r, out)


# ---- triangular parts, trace, cross ---------------------------------------------------------------------

TRIL = register("tril", lambda x, k: np.tril(x, k), lambda ctx, g: (apply(TRIL, (g,), ctx.attrs),))
TRIU = register("triu", lambda x, k: np.triu(x, k), lambda ctx, g: (apply(TRIU, (g,), ctx.attrs),))


def tril(input, diagonal: int = 0, *, out=None) -> Tensor:
    """The lower triangle of the last two dims (``diagonal`` shifts the border)."""
    if input._data.ndim < 2:
        raise RuntimeError("tril: input tensor must have at least 2 dimensions")
    r = apply(TRIL, (input,), {"k": int_arg(diagonal, "tril", "diagonal")})
    return r if out is None else _out(r, out)


def triu(input, diagonal: int = 0, *, out=None) -> Tensor:
    """The upper triangle of the last two dims (``diagonal`` shifts the border)."""
    if input._data.ndim < 2:
        raise RuntimeError("triu: input tensor must have at least 2 dimensions")
    r = apply(TRIU, (input,), {"k": int_arg(diagonal, "triu", "diagonal")})
    return r if out is None else _out(r, out)


def tril_(self, diagonal: int = 0) -> Tensor:
    from .inplace import write_result
    if self._data.ndim < 2:
        raise RuntimeError("tril: input tensor must have at least 2 dimensions")
    return write_result(self, lambda s: tril(s, diagonal), "tril_")


def triu_(self, diagonal: int = 0) -> Tensor:
    from .inplace import write_result
    if self._data.ndim < 2:
        raise RuntimeError("triu: input tensor must have at least 2 dimensions")
    return write_result(self, lambda s: triu(s, diagonal), "triu_")


def trace(input) -> Tensor:
    """Sum of the main diagonal of a matrix (integers sum in int64)."""
    if input._data.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input._data.ndim}")
    if input._dtype is _dt.bool:
        raise _not_impl("trace", input._dtype)
    from .reduce import sum as _sum
    return rename(_sum(input.diagonal()), _TRACE)


def _cross_bw(ctx, g):
    a, b = ctx.inputs
    dim = ctx.attrs["dim"]
    ga = apply(CROSS, (b, g), {"dim": dim}) if ctx.edges[0] is not None else None
    gb = apply(CROSS, (g, a), {"dim": dim}) if ctx.edges[1] is not None else None
    return ga, gb


CROSS = register("cross", lambda a, b, dim: np.cross(a, b, axis=dim), _cross_bw, save="i")
CROSS.node_name = "LinalgCrossBackward0"


def _linalg_cross(input, other, dim):
    if input._data.ndim != other._data.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    from ._util import wrap_dim
    nd = input._data.ndim
    d = wrap_dim(dim, nd) - nd
    sa, sb = input._data.shape, other._data.shape
    na, nb = sa[d], sb[d]
    if na != 3 or nb != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {na} and {nb}")
    _bcast_shapes(sa, sb)
    if input._dtype is not other._dtype:
        raise RuntimeError(f"expected scalar type {dtype_name(input._dtype)} but found {dtype_name(other._dtype)}")
    return apply(CROSS, (input, other), {"dim": d})


def cross(input, other, dim=None, *, out=None) -> Tensor:
    """Cross product along ``dim`` (default: the first dim of size 3, as torch's deprecated default)."""
    _tensor_arg(input, "cross", "input")
    _tensor_arg(other, "cross", "other")
    if dim is None:
        dim = next((i for i, s in enumerate(input._data.shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    r = _linalg_cross(input, other, dim)
    return r if out is None else _out(r, out)


def linalg_cross(input, other, *, dim=-1, out=None) -> Tensor:
    """``torch.linalg.cross``: cross product along ``dim`` (default -1), batch dims broadcast."""
    _tensor_arg(input, "linalg.cross", "input")
    _tensor_arg(other, "linalg.cross", "other")
    r = _linalg_cross(input, other, dim)
    return r if out is None else _out(r, out)


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
    if not A._dtype.is_floating_point:
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {dtype_name(A._dtype)}")
    if A._dtype in _LOW:
        if op == "linalg.inv":
            raise RuntimeError(f"linalg.inv: Low precision dtypes not supported. Got {dtype_name(A._dtype)}")
        raise _not_impl(_LOW_KERNEL.get(op, op), A._dtype)
    if square:
        m, n = A._data.shape[-2:]
        if m != n:
            raise RuntimeError(f"{op}: A must be batches of square matrices, but they are {m} by {n} matrices")


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


def _inv_kernel(a, op="linalg.inv"):
    mask = _nan_matrices(a)
    if mask is not None:
        return np.where(mask[..., None, None], np.nan, _inv_kernel(_without_nan_matrices(a, mask), op)).astype(a.dtype)
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular_error(op, a) from None


def _inv_bw(ctx, g):
    Ainv = ctx.output
    AinvT = Ainv.mT
    return (-matmul_raw(AinvT, matmul_raw(g, AinvT)),)


INV = register("linalg_inv", _inv_kernel, _inv_bw, save="o")


def _solve_kernel(a, b):
    mask = _nan_matrices(a)
    if mask is not None:
        x = _solve_kernel(_without_nan_matrices(a, mask), b)
        return np.where(mask[..., None, None], np.nan, x).astype(x.dtype)
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise _singular_error("linalg.solve", a) from None


def _solve_bw(ctx, g):
    A, B = ctx.inputs
    X = ctx.output
    gB = apply(SOLVE, (A.mT, g))
    gA = -matmul_raw(gB, X.mT) if ctx.edges[0] is not None else None
    return gA, (gB if ctx.edges[1] is not None else None)


SOLVE = register("linalg_solve", _solve_kernel, _solve_bw, save="io")


def _adjugate_T(a: np.ndarray) -> np.ndarray:
    """Transposed adjugate (the derivative of det) of each matrix, valid for singular ones too."""
    u, s, vh = np.linalg.svd(a)
    n = s.shape[-1]
    adj = np.empty_like(s)
    for i in range(n):
        adj[..., i] = np.prod(np.delete(s, i, axis=-1), axis=-1)
    sign = np.linalg.det(u) * np.linalg.det(vh)
    return (u * adj[..., None, :]) @ vh * sign[..., None, None]


def _det_bw(ctx, g):
    A, = ctx.inputs
    d = ctx.output
    if A._data.shape[-1] == 0:
        return (A * 0,)
    if np.all(d._data != 0):
        return ((g * d).unsqueeze(-1).unsqueeze(-1) * apply(INV, (A,)).mT,)
    # singular matrices: det' = adj(A)^T, computed directly (first order only)
    return (g.unsqueeze(-1).unsqueeze(-1) * _const(_adjugate_T(A._data), A._dtype),)


def _det_kernel(a):
    d = np.asarray(np.linalg.det(a), dtype=a.dtype)
    mask = _nan_matrices(a)
    return d if mask is None else np.where(mask, np.nan, d).astype(a.dtype)


DET = register("linalg_det", _det_kernel, _det_bw, save="io")


def _slogdet_kernel(a):
    s, l = np.linalg.slogdet(a)
    mask = _nan_matrices(a)
    if mask is not None:
        s, l = np.where(mask, 0, s), np.where(mask, np.nan, l)
    return np.asarray(s, dtype=a.dtype), np.asarray(l, dtype=a.dtype)


def _slogdet_bw(ctx, gs, gl):
    A, = ctx.inputs
    if A._data.shape[-1] == 0:
        return (A * 0,)
    return (gl.unsqueeze(-1).unsqueeze(-1) * apply(INV, (A,)).mT,)


SLOGDET = register("linalg_slogdet", _slogdet_kernel, _slogdet_bw, save="i", nout=2)


def _cholesky_kernel(a, op="linalg.cholesky"):
    try:
        L = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise _not_pd_error(op, a) from None
    if L.size and np.isnan(np.diagonal(L, axis1=-2, axis2=-1)).any() and _first_failure(a, _chol_fail_order)[0] is not None:
        raise _not_pd_error(op, a)      # a NaN pivot fails potrf's check, as a non-positive one does
    return L


def _solve_right(X, A):
    """X @ A^{-1} via a solve: (A^T \\ X^T)^T."""
    return apply(SOLVE, (A.mT, X.mT)).mT


def _cholesky_bw(ctx, gL):
    L = ctx.output
    # gA = L^{-T} Phi L^{-1}, Phi = sym(tril(L^T gL)) with halved diagonal (torch's formula)
    P = apply(TRIL, (matmul_raw(L.mT, gL),), {"k": 0})
    P = (P + apply(TRIL, (P,), {"k": -1}).mT) * 0.5
    gA = apply(SOLVE, (L.mT, P))
    return (_solve_right(gA, L),)


CHOLESKY = register("linalg_cholesky", _cholesky_kernel, _cholesky_bw, save="o")


def _qr_kernel(a, mode):
    if mode == "r":
        r = np.linalg.qr(a, mode="r")
        return np.zeros((0,), dtype=a.dtype), r
    q, r = np.linalg.qr(a, mode=mode)
    return q, r


def _qr_square_bw(gQ, gR, Q, R):
    """gA for A = QR with m >= n: (gQ + Q copyltu(M)) R^{-T}, M = gR R^T - Q^T gQ."""
    M = matmul_raw(gR, R.mT) - matmul_raw(Q.mT, gQ)
    S = apply(TRIU, (M,), {"k": 0})
    S = S + apply(TRIU, (S,), {"k": 1}).mT
    return _solve_right(matmul_raw(Q, S) + gQ, R.mT)


def _qr_bw(ctx, gQ, gR):
    mode = ctx.attrs["mode"]
    Q, R = ctx.outputs
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please "
                           "use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
    m, n = Q._data.shape[-2], R._data.shape[-1]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    if m >= n:
        return (_qr_square_bw(gQ, gR, Q, R),)
    # wide A = Q [U | V]: the square part X = Q U plus Y = Q V
    sl = (Ellipsis, slice(None), slice(0, m))
    sr = (Ellipsis, slice(None), slice(m, n))
    U, V = R[sl], R[sr]
    gU, gV = gR[sl], gR[sr]
    gX = _qr_square_bw(gQ + matmul_raw(Q, matmul_raw(V, gV.mT)), gU, Q, U)
    gY = matmul_raw(Q, gV)
    # place the two blocks side by side with constant selection matrices (keeps it differentiable)
    E1 = _const(np.eye(m, n), gX._dtype)
    E2 = _const(np.eye(n - m, n, k=m), gX._dtype)
    return (matmul_raw(gX, E1) + matmul_raw(gY, E2),)


QR = register("linalg_qr", _qr_kernel, _qr_bw, save="o", nout=2)


def _eigh_kernel(a, UPLO):
    w, v = np.linalg.eigh(a, UPLO=UPLO)
    return w.astype(a.dtype, copy=False), v.astype(a.dtype, copy=False)


# The eigen/singular-vector parts of these derivatives are always computed, never skipped by looking
# at the gradient's values: gradients of unused outputs arrive as zeros, a compiled backward is traced
# with zero gradients, and a double backward sends gradients to the vectors even of eigvalsh/svdvals.
# ``_safe_div`` keeps the terms finite (zero) for repeated values when the vectors get no gradient.


def _eigh_bw(ctx, gL, gV):
    L, V = ctx.outputs
    n = L._data.shape[-1]
    eye = _eye(n, L._dtype)
    VhgV = matmul_raw(V.mT, gV)
    VhgV = (VhgV - VhgV.mT) * 0.5
    E = L.unsqueeze(-2) - L.unsqueeze(-1) + eye           # E[i, j] = L[j] - L[i], 1 on the diagonal
    X = _safe_div(VhgV, E) + gL.unsqueeze(-1) * eye
    return (matmul_raw(V, matmul_raw(X, V.mT)),)


EIGH = register("linalg_eigh", _eigh_kernel, _eigh_bw, save="o", nout=2)


def _svd_kernel(a, full_matrices, compute_uv):
    try:
        return _svd_np(a, full_matrices, compute_uv)
    except np.linalg.LinAlgError:
        if not np.isfinite(a).all():
            raise LinAlgError("linalg.svd: The algorithm failed to converge because the input matrix contained "
                              "non-finite values.") from None
        raise LinAlgError("linalg.svd: The algorithm failed to converge because the input matrix is "
                          "ill-conditioned or has too many repeated singular values.") from None


def _svd_np(a, full_matrices, compute_uv):
    if not compute_uv:
        s = np.linalg.svd(a, compute_uv=False)
        return np.zeros((0,), dtype=a.dtype), s.astype(a.dtype, copy=False), np.zeros((0,), dtype=a.dtype)
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return u, s.astype(a.dtype, copy=False), vh


def _svd_bw(ctx, gU, gS, gVh):
    U, S, Vh = ctx.outputs
    k = S._data.shape[-1]
    m, n = U._data.shape[-2], Vh._data.shape[-1]
    if ctx.attrs["full_matrices"]:
        # only the first k singular vectors carry information (torch narrows them the same way)
        U, gU = U[..., :, :k], gU[..., :, :k]
        Vh, gVh = Vh[..., :k, :], gVh[..., :k, :]
    eye = _eye(k, S._dtype)
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye          # E[j, k] = S_k^2 - S_j^2, 1 on the diagonal
    UhgU = matmul_raw(U.mT, gU)
    VhgV = matmul_raw(Vh, gVh.mT)
    num = (UhgU - UhgU.mT) * S.unsqueeze(-2) + S.unsqueeze(-1) * (VhgV - VhgV.mT)
    gA = _safe_div(num, E) + gS.unsqueeze(-1) * eye
    if m > n:
        gA = matmul_raw(U, gA)
        gUSinv = _safe_div(gU, S.unsqueeze(-2))
        gA = gA + gUSinv - matmul_raw(U, matmul_raw(U.mT, gUSinv))
        gA = matmul_raw(gA, Vh)
    elif m < n:
        gA = matmul_raw(gA, Vh)
        SinvgVh = _safe_div(gVh, S.unsqueeze(-1))
        gA = gA + SinvgVh - matmul_raw(matmul_raw(SinvgVh, Vh.mT), Vh)
        gA = matmul_raw(U, gA)
    else:
        gA = matmul_raw(U, matmul_raw(gA, Vh))
    return (gA,)


SVD = register("linalg_svd", _svd_kernel, _svd_bw, save="o", nout=3)


# ---- public linalg functions ------------------------------------------------------------------------------


def inv(A, *, out=None) -> Tensor:
    """Inverse of a (batch of) square matrix; ``LinAlgError`` if singular."""
    _check_linalg(A, "linalg.inv")
    r = apply(INV, (A,))
    return r if out is None else _out(r, out)


def inverse(input, *, out=None) -> Tensor:
    """``torch.inverse``: alias of ``linalg.inv``."""
    return inv(input, out=out)


def inv_ex(A, *, check_errors: bool = False, out=None):
    """``(inverse, info)``; info is the LAPACK code (0 = success) instead of an error."""
    _check_linalg(A, "linalg.inv_ex")
    info = _info_array(A._data, _lu_zero_pivot)
    if not info.any():
        res = InvExResult(apply(INV, (A,)), _const(info, _dt.int32))
    elif check_errors:
        raise _singular_error("linalg.inv_ex", A._data)
    else:
        res = InvExResult(_const(np.full(A._data.shape, np.nan), A._dtype), _const(info, _dt.int32))
    return res if out is None else _out_tuple(res, out, "linalg.inv_ex")


def _info_array(a: np.ndarray, find) -> np.ndarray:
    flat = a.reshape((-1,) + a.shape[-2:])
    return np.array([find(m) for m in flat], dtype=np.int32).reshape(a.shape[:-2])


def _solve_is_vector(A, B) -> bool:
    # torch: B is a (batch of) vector(s) if it is 1-D, or has one dim fewer than A and matches A's batch
    nb = B._data.ndim
    return nb == 1 or (nb == A._data.ndim - 1 and B._data.shape == A._data.shape[:-1])


def solve(A, B, *, left: bool = True, out=None) -> Tensor:
    """Solve ``A X = B`` (or ``X A = B`` with ``left=False``); batch dims broadcast."""
    _check_linalg(A, "linalg.solve")
    _tensor_arg(B, "linalg.solve", "B")
    if A._dtype is not B._dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                           f"{dtype_name(A._dtype)} and B of type {dtype_name(B._dtype)} instead")
    vec = _solve_is_vector(A, B)
    Bm = B.unsqueeze(-1) if vec else B
    n = A._data.shape[-1]
    if left:
        ok = Bm._data.ndim >= 2 and Bm._data.shape[-2] == n
    else:
        ok = Bm._data.ndim >= 2 and Bm._data.shape[-1] == n
    if vec and not left:
        Bm = B.unsqueeze(-2)
        ok = Bm._data.shape[-1] == n
    if not ok:
        bs = Bm._data.shape
        eqn = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation {eqn} ({n}x{n} and "
                           f"{bs[-2]}x{bs[-1]})")
    _bcast_shapes(A._data.shape[:-2], Bm._data.shape[:-2])
    if left:
        X = apply(SOLVE, (A, Bm))
    else:
        X = apply(SOLVE, (A.mT, Bm.mT)).mT
    if vec:
        X = X.squeeze(-1) if left else X.squeeze(-2)
    return X if out is None else _out(X, out)


def solve_ex(A, B, *, left: bool = True, check_errors: bool = False, out=None):
    """``(result, info)`` form of ``solve``."""
    _check_linalg(A, "linalg.solve_ex")
    info = _info_array(A._data, _lu_zero_pivot)
    if info.any() and not check_errors:
        shape = solve(_const(np.eye(A._data.shape[-1]), A._dtype).expand(A._data.shape), B, left=left)._data.shape
        res = SolveExResult(_const(np.full(shape, np.nan), A._dtype), _const(info, _dt.int32))
    else:
        res = SolveExResult(solve(A, B, left=left), _const(info, _dt.int32))
    return res if out is None else _out_tuple(res, out, "linalg.solve_ex")


def solve_triangular(A, B, *, upper: bool, left: bool = True, unitriangular: bool = False, out=None) -> Tensor:
    """Solve a triangular system (only the ``upper`` or lower triangle of A is read)."""
    _check_linalg(A, "linalg.solve_triangular")
    _tensor_arg(B, "linalg.solve_triangular", "B")
    if B._data.ndim < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 dimensions.")
    if A._dtype is not B._dtype:
        raise RuntimeError(f"linalg.solve_triangular: Expected A and B to have the same dtype, but found A of type "
                           f"{dtype_name(A._dtype)} and B of type {dtype_name(B._dtype)} instead")
    T = triu(A) if upper else tril(A)
    if unitriangular:
        n = A._data.shape[-1]
        eye = _eye(n, A._dtype)
        T = T * _const(1 - np.eye(n), A._dtype) + eye
    r = solve(T, B, left=left)
    return r if out is None else _out(r, out)


def det(A, *, out=None) -> Tensor:
    """Determinant of a (batch of) square matrix."""
    _check_linalg(A, "linalg.det")
    r = apply(DET, (A,))
    return r if out is None else _out(r, out)


def slogdet(A, *, out=None):
    """``(sign, logabsdet)`` of the determinant (stable for large/small determinants)."""
    _check_linalg(A, "linalg.slogdet")
    res = SlogdetResult(*apply(SLOGDET, (A,)))
    return res if out is None else _out_tuple(res, out, "linalg.slogdet")


def logdet(input) -> Tensor:
    """log(det(A)): nan for a negative determinant, -inf for zero."""
    _check_linalg(input, "logdet")
    sign, logabs = apply(SLOGDET, (input,))
    bad = np.where(sign._data < 0, np.nan, 0.0)
    return logabs + _const(bad, input._dtype) if bad.any() or np.isnan(bad).any() else logabs


def cholesky(A, *, upper: bool = False, out=None) -> Tensor:
    """Cholesky factor of a symmetric positive-definite matrix (lower, or upper with ``upper=True``)."""
    _check_linalg(A, "linalg.cholesky")
    L = apply(CHOLESKY, (A,), {"op": "linalg.cholesky"})
    r = L.mT if upper else L
    return r if out is None else _out(r, out)


def cholesky_legacy(input, upper: bool = False, *, out=None) -> Tensor:
    """``torch.cholesky`` (deprecated in torch in favour of ``linalg.cholesky``)."""
    _check_linalg(input, "cholesky")
    L = apply(CHOLESKY, (input,), {"op": "cholesky"})
    r = L.mT if upper else L
    return r if out is None else _out(r, out)


def cholesky_ex(A, *, upper: bool = False, check_errors: bool = False, out=None):
    """``(L, info)`` form of ``cholesky``; info is the order of the failing minor (0 = success)."""
    _check_linalg(A, "linalg.cholesky_ex")
    info = _info_array(A._data, _chol_fail_order)
    if not info.any() or check_errors:
        res = CholeskyExResult(cholesky(A, upper=upper), _const(info, _dt.int32))
    else:
        a = A._data
        part = np.stack([_chol_partial(m)[0] for m in a.reshape((-1,) + a.shape[-2:])]).reshape(a.shape)
        L = _const(part.astype(a.dtype), A._dtype)
        res = CholeskyExResult(L.mT if upper else L, _const(info, _dt.int32))
    return res if out is None else _out_tuple(res, out, "linalg.cholesky_ex")


def cholesky_solve(B, L, upper: bool = False, *, out=None) -> Tensor:
    """Solve ``A X = B`` given the Cholesky factor of ``A``."""
    _check_linalg(L, "cholesky_solve", arg="L")
    Lo = L.mT if upper else L
    Lo = tril(Lo)
    Y = solve(Lo, B)
    r = solve(Lo.mT, Y)
    return r if out is None else _out(r, out)


def cholesky_inverse(L, upper: bool = False, *, out=None) -> Tensor:
    """Inverse of ``A`` given its Cholesky factor."""
    _check_linalg(L, "cholesky_inverse", arg="L")
    n = L._data.shape[-1]
    eye = _eye(n, L._dtype).expand(L._data.shape)
    return cholesky_solve(eye, L, upper, out=out)


def qr(A, mode: str = "reduced", *, out=None):
    """QR decomposition: ``mode`` "reduced" (default), "complete" or "r" (Q is then empty)."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           f"or 'complete'")
    _check_linalg(A, "linalg.qr", square=False)
    res = QRResult(*apply(QR, (A,), {"mode": mode}))
    return res if out is None else _out_tuple(res, out, "linalg.qr")


def qr_legacy(input, some: bool = True, *, out=None):
    """``torch.qr(input, some=True)``: reduced (``some``) or complete QR."""
    r = qr(input, "reduced" if some else "complete")
    r = collections.namedtuple("qr", ["Q", "R"])(*r)
    return r if out is None else _out_tuple(r, out, "qr")


def _check_uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def eigh(A, UPLO: str = "L", *, out=None):
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix (reads the ``UPLO`` triangle)."""
    _check_linalg(A, "linalg.eigh")
    _check_uplo(UPLO)
    res = EighResult(*apply(EIGH, (A,), {"UPLO": UPLO}))
    return res if out is None else _out_tuple(res, out, "linalg.eigh")


def eigvalsh(A, UPLO: str = "L", *, out=None) -> Tensor:
    """Eigenvalues (ascending) of a symmetric matrix."""
    _check_linalg(A, "linalg.eigvalsh")
    _check_uplo(UPLO)
    r = apply(EIGH, (A,), {"UPLO": UPLO})[0]
    return r if out is None else _out(r, out)


def svd(A, full_matrices: bool = True, *, driver=None, out=None):
    """Singular value decomposition ``A = U diag(S) Vh`` (S descending)."""
    _check_linalg(A, "linalg.svd", square=False)
    res = SVDResult(*apply(SVD, (A,), {"full_matrices": full_matrices, "compute_uv": True}))
    return res if out is None else _out_tuple(res, out, "linalg.svd")


def svdvals(A, *, driver=None, out=None) -> Tensor:
    """Singular values (descending)."""
    _check_linalg(A, "linalg.svdvals", square=False)
    need_uv = GRAD[0] and A._rg
    r = apply(SVD, (A,), {"full_matrices": False, "compute_uv": need_uv})[1]
    return r if out is None else _out(r, out)


def svd_legacy(input, some: bool = True, compute_uv: bool = True, *, out=None):
    """``torch.svd``: returns ``(U, S, V)`` (V, not Vh); zero U, V when ``compute_uv=False``."""
    _check_linalg(input, "svd", square=False)
    if compute_uv:
        U, S, Vh = apply(SVD, (input,), {"full_matrices": not some, "compute_uv": True})
        res = SVDOldResult(U, S, Vh.mT)
    else:
        S = svdvals(input)
        m, n = input._data.shape[-2:]
        b = input._data.shape[:-2]
        res = SVDOldResult(_const(np.zeros(b + (m, m)), input._dtype), S, _const(np.zeros(b + (n, n)), input._dtype))
    return res if out is None else _out_tuple(res, out, "svd")


def _pinv_tol(S: np.ndarray, m: int, n: int, atol, rtol, npdt) -> np.ndarray:
    """max(atol, rtol * s_max) per matrix (shape (..., 1)); torch's defaults for unset tolerances."""
    smax = S.max(axis=-1, keepdims=True) if S.shape[-1] else np.zeros(S.shape[:-1] + (1,), dtype=S.dtype)
    if isinstance(atol, np.ndarray) and atol.ndim:
        atol = atol[..., None]
    if isinstance(rtol, np.ndarray) and rtol.ndim:
        rtol = rtol[..., None]
    if rtol is None:
        # rtol defaults to eps * max(m, n), or to 0 when a positive atol is given
        atol_set = atol is not None and not (np.ndim(atol) == 0 and atol == 0)
        rtol = 0.0 if atol_set else np.finfo(npdt).eps * max(m, n)
    return np.maximum(0.0 if atol is None else atol, rtol * smax)


def _safe_recip(x: np.ndarray, keep: np.ndarray) -> np.ndarray:
    return np.where(keep, 1.0 / np.where(keep, x, 1), 0).astype(x.dtype, copy=False)


def _pinv_kernel(a, atol, rtol, hermitian):
    m, n = a.shape[-2:]
    if hermitian:
        w, v = np.linalg.eigh(a)
        mag = np.abs(w)
        winv = _safe_recip(w, mag > _pinv_tol(mag, m, n, atol, rtol, a.dtype))
        return np.matmul(v * winv[..., None, :], np.swapaxes(v, -1, -2))
    u, s, vh = _svd_kernel(a, False, True)
    sinv = _safe_recip(s, s > _pinv_tol(s, m, n, atol, rtol, a.dtype))
    return np.matmul(np.swapaxes(vh, -1, -2) * sinv[..., None, :], np.swapaxes(u, -1, -2))


def _pinv_bw(ctx, g):
    # torch's pinv_backward: the derivative of the pseudo-inverse as a function of the whole matrix
    A, = ctx.inputs
    P = ctx.output
    m, n = A._data.shape[-2:]
    Ph, gh = P.mT, g.mT
    if m <= n:
        K = matmul_raw(gh, P)
        KPh = matmul_raw(K, Ph)
        return (-matmul_raw(P, K).mT + KPh - matmul_raw(matmul_raw(A, P), KPh)
                + matmul_raw(matmul_raw(Ph, P), gh - matmul_raw(K, A)),)
    K = matmul_raw(P, gh)
    PhK = matmul_raw(Ph, K)
    return (-matmul_raw(K, P).mT + PhK - matmul_raw(matmul_raw(PhK, P), A)
            + matmul_raw(matmul_raw(gh - matmul_raw(A, K), P), Ph),)


PINV = register("linalg_pinv", _pinv_kernel, _pinv_bw, save="io")


def _tol_arg(t):
    return t._data if isinstance(t, Tensor) else t


def pinv(A, *, atol=None, rtol=None, hermitian: bool = False, out=None) -> Tensor:
    """Moore-Penrose pseudo-inverse (singular values below ``max(atol, rtol * s_max)`` are dropped)."""
    _check_linalg(A, "linalg.pinv", square=False)
    r = apply(PINV, (A,), {"atol": _tol_arg(atol), "rtol": _tol_arg(rtol), "hermitian": bool(hermitian)})
    return r if out is None else _out(r, out)


def pinverse(input, rcond: float = 1e-15) -> Tensor:
    """``torch.pinverse``: pseudo-inverse with relative tolerance ``rcond``."""
    return pinv(input, rtol=rcond)


def matrix_power(A, n: int, *, out=None) -> Tensor:
    """``A`` to the integer power ``n`` (``n < 0`` inverts first; ``n == 0`` gives the identity)."""
    _tensor_arg(A, "linalg.matrix_power", "A")
    if A._data.ndim < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 dimensions.")
    p, q = A._data.shape[-2:]
    if p != q:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are {p} by {q} "
                           f"matrices")
    if not isinstance(n, (int, np.integer)):
        raise TypeError(f"matrix_power(): argument 'n' must be int, not {type(n).__name__}")
    n = int(n)
    if n == 0:
        # the identity, still attached to A's graph (with a zero gradient) like torch's copy_ of eye
        eye = _const(np.broadcast_to(np.eye(p), A._data.shape), A._dtype)
        r = apply(ADD_SCALED, (A, eye), {"beta": 0, "alpha": 1})
        return r if out is None else _out(r, out)
    if n < 0:
        A = inv(A)
        n = -n
    if A._dtype is _dt.bool:
        raise _not_impl("bmm", A._dtype)
    # binary powering: O(log n) products
    result = None
    base = A
    while n:
        if n & 1:
            result = base if result is None else matmul_raw(result, base)
        n >>= 1
        if n:
            base = matmul_raw(base, base)
    if result is A:
        result = result.clone()
    return result if out is None else _out(result, out)


def matrix_rank(A, *, atol=None, rtol=None, hermitian: bool = False, out=None) -> Tensor:
    """Numerical rank: the number of singular values above ``max(atol, rtol * s_max)`` (int64)."""
    _check_linalg(A, "linalg.matrix_rank", square=False)
    m, n = A._data.shape[-2:]
    if hermitian:
        S = np.abs(np.linalg.eigvalsh(A._data))
    else:
        S = _svd_kernel(A._data, False, False)[1]
    r = _const((S > _pinv_tol(S, m, n, _tol_arg(atol), _tol_arg(rtol), A._dtype.np)).sum(-1), _dt.int64)
    return r if out is None else _out(r, out)


def cond(A, p=None, *, out=None) -> Tensor:
    """Condition number: ``s_max / s_min`` for p in (None, 2, -2), else ``norm(A, p) * norm(inv(A), p)``."""
    _check_linalg(A, "linalg.cond", square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        S = svdvals(A)
        hi, lo = S[..., 0], S[..., -1]
        r = hi / lo if p != -2 else lo / hi
    else:
        mn = _reduce_more("matrix_norm")
        r = mn(A, p) * mn(inv(A), p)
    return r if out is None else _out(r, out)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """Least-squares solution of ``A X = B`` -> ``(solution, residuals, rank, singular_values)``.

    Which of residuals/rank/singular_values are filled follows torch's CPU drivers: gelsy (default)
    gives rank only; gelsd/gelss give all three; gels gives residuals only. Residuals are computed
    only when A is tall (m > n) and of full rank."""
    _check_linalg(A, "linalg.lstsq", square=False)
    _tensor_arg(B, "linalg.lstsq", "B")
    if driver is None:
        driver = "gelsy"
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if A._dtype is not B._dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
                           f"dtype {dtype_name(A._dtype)} and other's dtype {dtype_name(B._dtype)}")
    vec = B._data.ndim == A._data.ndim - 1
    Bm = B.unsqueeze(-1) if vec else B
    m, n = A._data.shape[-2:]
    if Bm._data.shape[-2] != m:
        which = "other.size(-1)" if vec else "other.size(-2)"
        raise RuntimeError(f"torch.linalg.lstsq: input.size(-2) should match {which}")
    batch = _bcast_shapes(A._data.shape[:-2], Bm._data.shape[:-2])
    # the solution is pinv(A) @ B (the minimum-norm least-squares solution); its gradient is torch's
    rtol = rcond if rcond is not None and rcond >= 0 else None
    if driver == "gels":
        rtol, atol = 0.0, 0.0
    else:
        atol = None
    X = matmul_raw(apply(PINV, (A,), {"atol": atol, "rtol": rtol, "hermitian": False}), Bm)
    S = _svd_kernel(A._data, False, False)[1]
    keep = S > _pinv_tol(S, m, n, atol, rtol, A._dtype.np)
    rank_np = keep.sum(-1).astype(np.int64)
    empty = _const(np.zeros((0,)), A._dtype)
    full_rank = bool(np.all(rank_np == min(m, n)))
    if driver != "gelsy" and m > n and (full_rank or driver == "gels"):
        Rsd = matmul_raw(A, X) - Bm
        from .reduce import sum as _sum
        residuals = _sum(Rsd * Rsd, -2)
    else:
        # an empty residuals tensor that is still part of the graph, as torch's
        from .shape import getitem_basic
        residuals = getitem_basic(X.reshape(-1), (slice(0, 0),))
    rank = _const(np.zeros((0,)), _dt.int64) if driver == "gels" else _const(rank_np, _dt.int64)
    sv = _const(S, A._dtype) if driver in ("gelsd", "gelss") else empty
    if vec:
        X = X.squeeze(-1)
    return LstsqResult(X, residuals, rank, sv)


def multi_dot(tensors, *, out=None) -> Tensor:
    """Product of a chain of matrices in the cheapest order (first/last may be vectors)."""
    tensors = list(tensors)
    k = len(tensors)
    if k < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {k}")
    for i, t in enumerate(tensors):
        _tensor_arg(t, "multi_dot", "tensors")
        nd = t._data.ndim
        if i == 0 and nd not in (1, 2):
            raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got {nd}D")
        if i == k - 1 and i and nd not in (1, 2):
            raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got {nd}D")
        if 0 < i < k - 1 and nd != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {nd}D")
    if _AUTOCAST[0] is not None:
        tensors = list(_autocast_args(*tensors))
    dt = tensors[0]._dtype
    for i, t in enumerate(tensors[1:], 1):
        if t._dtype is not dt:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is {_cname(dt)} "
                               f"and tensor {i} {_cname(t._dtype)}")
    first_vec = tensors[0]._data.ndim == 1
    last_vec = tensors[-1]._data.ndim == 1
    mats = list(tensors)
    if first_vec:
        mats[0] = mats[0].unsqueeze(0)
    if last_vec:
        mats[-1] = mats[-1].unsqueeze(-1)
    for i in range(k - 1):
        if mats[i]._data.shape[1] != mats[i + 1]._data.shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {_shp(tensors[i]._data.shape)} and "
                               f"{_shp(tensors[i + 1]._data.shape)} cannot be multiplied")
    if dt is _dt.bool:
        raise _not_impl("addmm_impl_cpu_", dt)
    r = _chain(mats)
    if first_vec and last_vec:
        r = r.reshape(())
    elif first_vec:
        r = r.squeeze(0)
    elif last_vec:
        r = r.squeeze(-1)
    if out is None:
        return rename(r, _VIEW)     # torch's multi_dot ends by viewing the product in the result's shape
    return _out(r, out)


def _chain(mats):
    """Multiply matrices in the order minimising scalar multiplications (classic dynamic programme)."""
    k = len(mats)
    if k <= 2:
        return matmul_raw(mats[0], mats[1]) if k == 2 else mats[0]
    dims = [mats[0]._data.shape[0]] + [m._data.shape[1] for m in mats]
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):
        for i in range(k - length):
            j = i + length
            best = None
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if best is None or c < best:
                    best, split[i][j] = c, s
            cost[i][j] = best

    def build(i, j):
        if i == j:
            return mats[i]
        s = split[i][j]
        return matmul_raw(build(i, s), build(s + 1, j))
    return build(0, k - 1)


def chain_matmul(*matrices, out=None) -> Tensor:
    """``torch.chain_matmul`` (deprecated in torch): product of 2-D matrices in the cheapest order."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if len(matrices) == 1:
        r = matrices[0].clone()
        return r if out is None else _out(r, out)
    for m in matrices:
        if m._data.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m._data.ndim}, expected 2 instead.")
    return multi_dot(matrices, out=out)


def vecdot(x, y, *, dim: int = -1, out=None) -> Tensor:
    """Dot product of vectors along ``dim`` (batch dims broadcast)."""
    _tensor_arg(x, "linalg.vecdot", "x")
    _tensor_arg(y, "linalg.vecdot", "y")
    if _AUTOCAST[0] is not None:
        x, y = _autocast_args(x, y)
    if x._dtype is not y._dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{dtype_name(x._dtype)} and y of type {dtype_name(y._dtype)} instead")
    if not x._dtype.is_floating_point:
        raise RuntimeError(f"linalg.vecdot: Expected a floating point or complex tensor as input. Got "
                           f"{dtype_name(x._dtype)}")
    _bcast_shapes(x._data.shape, y._data.shape)
    from .reduce import sum as _sum
    r = _sum(x * y, dim)
    return r if out is None else _out(r, out)


def linalg_diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """``torch.linalg.diagonal``: the diagonal of the last two dims by default."""
    from .shape import diagonal
    return diagonal(A, offset, dim1, dim2)


# ---- norms: implemented in reduce_more, dispatched here ----------------------------------------------


def _reduce_more(name: str):
    """Fetch ``vector_norm``/``matrix_norm`` from ember.ops.reduce_more (imported lazily: it is optional)."""
    try:
        mod = importlib.import_module("ember.ops.reduce_more")
    except ModuleNotFoundError as e:
        if e.name != "ember.ops.reduce_more":
            raise
        mod = None
    fn = getattr(mod, name, None)
    if fn is None:
        raise NotImplementedError(f"linalg.{name} is not available: it is implemented by ember.ops.reduce_more."
                                  f"{name}, which is missing from this build")
    return fn


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """Vector norm over ``dim`` (all dims by default); see ``ember.ops.reduce_more.vector_norm``."""
    r = _reduce_more("vector_norm")(x, ord, dim, keepdim, dtype=dtype, out=out)
    return r if out is not None else rename(r, _VECTOR_NORM)     # one op in torch, whatever ord


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """Matrix norm over the two dims ``dim``; see ``ember.ops.reduce_more.matrix_norm``."""
    r = _reduce_more("matrix_norm")(A, ord, dim, keepdim, dtype=dtype, out=out)
    # torch computes the Frobenius norm as a vector norm (other orders end in other reductions)
    return rename(r, _VECTOR_NORM) if out is None and ord == "fro" else r


def norm(A, ord=None, dim=None, keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """``torch.linalg.norm``: a vector norm or a matrix norm depending on ``dim``/``ord``/``A.ndim``."""
    _tensor_arg(A, "linalg.norm", "A")
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {_shp(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype, out=out)
    nd = A._data.ndim
    if nd == 1 and not isinstance(ord, str):       # ('fro' and 'nuc' are matrix norms: a 1-D input fails there)
        return vector_norm(A, ord, None, keepdim, dtype=dtype, out=out)
    if nd <= 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype, out=out)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {nd}D.")


# ---- legacy triangular_solve ----------------------------------------------------------------------------


def triangular_solve(b, A, upper: bool = True, transpose: bool = False, unitriangular: bool = False):
    """Deprecated torch API: solve ``A X = b`` (``A^T X = b`` with ``transpose``) for triangular ``A``;
    returns ``(solution, cloned_coefficient)``. Use ``linalg.solve_triangular`` in new code."""
    warnings.warn("torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be removed "
                  "in a future PyTorch release.\ntorch.linalg.solve_triangular has its arguments reversed and does "
                  "not return a copy of one of the inputs.\nX = torch.triangular_solve(B, A).solution\nshould be "
                  "replaced with\nX = torch.linalg.solve_triangular(A, B).", UserWarning, stacklevel=2)
    M = A.mT if transpose else A
    x = solve_triangular(M, b, upper=upper != transpose, unitriangular=unitriangular)
    return TriangularSolveResult(x, A.clone())


# ---- matrix exponential ----------------------------------------------------------------------------------

_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
           10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152


def matrix_exp(A) -> Tensor:
    """The matrix exponential of (batches of) square matrices, by scaling and squaring with the degree-13
    Padé approximant (Higham 2005). Written with matmul and solve, so autograd differentiates the same
    computation (double backward included)."""
    _tensor_arg(A, "linalg.matrix_exp", "A")
    if A._data.ndim < 2:
        raise RuntimeError("linalg.matrix_exp: The input tensor A must have at least 2 dimensions.")
    p, q = A._data.shape[-2:]
    if p != q:
        raise RuntimeError(f"linalg.matrix_exp: A must be batches of square matrices, but they are {p} by {q} "
                           "matrices")
    if not A._dtype.is_floating_point:
        raise _not_impl("linalg_matrix_exp", A._dtype)
    if A._data.size == 0:
        return A.clone()
    # one scaling for the whole batch: the largest 1-norm decides how often to square
    norm = float(np.abs(A._data.astype(np.float64)).sum(axis=-2).max())
    s = max(0, int(np.ceil(np.log2(norm / _THETA13)))) if norm > _THETA13 else 0
    a = A / (2.0 ** s) if s else A
    b = _PADE13
    ident = _const(np.broadcast_to(np.eye(p), A._data.shape), A._dtype)
    a2 = matmul_raw(a, a)
    a4 = matmul_raw(a2, a2)
    a6 = matmul_raw(a4, a2)
    u = matmul_raw(a, matmul_raw(a6, b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
                   + b[1] * ident)
    v = matmul_raw(a6, b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * ident
    r = solve(v - u, v + u)
    for _ in range(s):
        r = matmul_raw(r, r)
    return r


# ---- exports -------------------------------------------------------------------------------------------

for _n, _f in [("matmul", matmul), ("mm", mm), ("bmm", bmm), ("mv", mv), ("dot", dot), ("vdot", vdot),
               ("inner", inner), ("outer", outer), ("ger", ger), ("addmm", addmm), ("addmv", addmv),
               ("addr", addr), ("addbmm", addbmm), ("baddbmm", baddbmm), ("kron", kron), ("tril", tril),
               ("triu", triu), ("trace", trace), ("cross", cross), ("cholesky", cholesky_legacy),
               ("cholesky_solve", cholesky_solve), ("cholesky_inverse", cholesky_inverse), ("det", det),
               ("logdet", logdet), ("slogdet", slogdet), ("inverse", inverse), ("pinverse", pinverse),
               ("matrix_power", matrix_power), ("qr", qr_legacy), ("svd", svd_legacy), ("matrix_exp", matrix_exp),
               ("triangular_solve", triangular_solve)]:
    attach(_n, _f)
for _n, _f in [("einsum", einsum), ("tensordot", tensordot), ("chain_matmul", chain_matmul)]:
    attach(_n, _f, method=False)
for _n, _f in [("addmm_", addmm), ("addmv_", addmv), ("addr_", addr), ("addbmm_", addbmm), ("baddbmm_", baddbmm)]:
    attach(_n, _inplace_method(_f, _n), function=False)
attach("tril_", tril_, function=False)
attach("triu_", triu_, function=False)
attach("addmv_", _inplace_method(addmv, "addmv_"), method=False)   # torch.addmv_ exists as a function too
