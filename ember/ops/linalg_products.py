"""Products: ``matmul`` (the one product kernel: mm, bmm, mv, dot, vdot, inner, outer, ger, tensordot,
kron, multi_dot and the backward of all of them), ``add_scaled`` (``beta * input + alpha * product``
for the addmm family), vecdot and cross.

Matmul kernels run on NumPy's BLAS: batched operands whose batch dims only broadcast against a matrix
are folded into one large GEMM, and float16/bfloat16 compute in float32 (as torch's CPU kernels
accumulate) before casting back.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from .registry import register, apply, attach, dtype_name, node_class, rename
from ..amp.state import AUTOCAST as _AUTOCAST, cast_args as _autocast_args
from .linalg import _bcast_shapes, _cname, _not_impl, _out, _prod, _shp, _tensor_arg
from ._reduce_util import dim_from_axis


# ---- matmul: the one product kernel -------------------------------------------------------------------

# dtypes NumPy multiplies natively (float16 and ml_dtypes' bfloat16 go through float32)
_NP_NATIVE = {np.dtype(t) for t in (np.float32, np.float64, np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_,
                                    np.complex64, np.complex128)}


_EAGER_GEMM: list = []


def _mm(a, b):
    # large float32 products on several threads: ember's GEMM (its pool sleeps; NumPy's BLAS spins)
    if a.dtype == np.float32 and a.ndim >= 2:
        if not _EAGER_GEMM:
            from ..compiler.gemm import eager_matmul
            _EAGER_GEMM.append(eager_matmul)
        r = _EAGER_GEMM[0](a, b)
        if r is not None:
            return r
    return np.matmul(a, b)


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
        r = _mm(a.reshape(_prod(lead), a.shape[-1]), b)
        r = r.reshape(lead + r.shape[1:])
    else:
        r = _mm(a, b)
    if low:
        r = np.asarray(r).astype(dt)
    return r


def _matmul_bw(ctx, g):
    a, b = ctx.inputs
    need_a, need_b = ctx.edges[0] is not None, ctx.edges[1] is not None
    a_nd, b_nd = a._data.ndim, b._data.ndim               # (the arrays' ranks and shapes: no Size objects)
    if a_nd == 1 and b_nd == 1:                          # dot product: g is 0-d
        return (g * b if need_a else None), (g * a if need_b else None)
    A = a.unsqueeze(0) if a_nd == 1 else a
    B = b.unsqueeze(-1) if b_nd == 1 else b
    G = g
    if a_nd == 1:
        G = G.unsqueeze(-2)
    if b_nd == 1:
        G = G.unsqueeze(-1)
    ga = gb = None
    a_shape, b_shape = A._data.shape, B._data.shape
    M, K, N = a_shape[-2], a_shape[-1], b_shape[-1]
    if need_a:
        if len(a_shape) == 2 and len(b_shape) > 2:
            # sum over B's batch inside one GEMM: (M, batch*N) @ (batch*N, K)
            nb = _prod(b_shape[:-2])
            ga = matmul_raw(G.movedim(-2, 0).reshape(M, nb * N), B.transpose(-1, -2).reshape(nb * N, K))
        else:
            ga = matmul_raw(G, B.mT)                    # broadcast batch dims: the engine sums them back
        if a_nd == 1:
            ga = ga.squeeze(-2)
    if need_b:
        if len(b_shape) == 2 and len(a_shape) > 2:
            # sum over A's batch inside one GEMM: (K, batch*M) @ (batch*M, N)
            na = _prod(a_shape[:-2])
            gb = matmul_raw(A.reshape(na * M, K).mT, G.reshape(na * M, N))
        else:
            gb = matmul_raw(A.mT, G)
        if b_nd == 1:
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
_BMM, _VDOT = node_class("BmmBackward0"), node_class("VdotBackward0")
_VIEW = node_class("ViewBackward0")
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
    if input._dtype.is_complex:
        input = input.conj()
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


def _batched_operands(op, input, batch1, batch2, result_shape):
    """addbmm/baddbmm's first checks: ``input`` broadcasts to the result (torch sizes the result before
    checking ranks: ``result_shape(s1, s2)``), then both batches are 3-D; the operands after autocast."""
    _tensor_arg(input, op, "input")
    if _AUTOCAST[0] is not None:
        input, batch1, batch2 = _autocast_args(input, batch1, batch2)
    s1, s2 = batch1._data.shape, batch2._data.shape
    if len(s1) >= 2 and len(s2) >= 3:
        input.expand(*result_shape(s1, s2))
    for name, b in (("batch1", batch1), ("batch2", batch2)):
        if b._data.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    return input, batch1, batch2


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None) -> Tensor:
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    input, batch1, batch2 = _batched_operands("addbmm", input, batch1, batch2, lambda s1, s2: (s1[1], s2[2]))
    s1, s2 = batch1._data.shape, batch2._data.shape
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
    input, batch1, batch2 = _batched_operands("baddbmm", input, batch1, batch2,
                                              lambda s1, s2: (s1[0], s1[1], s2[2]))
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


# ---- chains of products and vecdot --------------------------------------------------------------------


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


# ---- cross --------------------------------------------------------------------------------------------


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


def cross(input, other, dim=None, *, out=None, axis=None) -> Tensor:
    """Cross product along ``dim`` (default: the first dim of size 3, as torch's deprecated default)."""
    if axis is not None:
        dim = dim_from_axis("cross", dim, axis)
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


# ---- exports ------------------------------------------------------------------------------------------

for _n, _f in [("matmul", matmul), ("mm", mm), ("bmm", bmm), ("mv", mv), ("dot", dot), ("vdot", vdot),
               ("inner", inner), ("outer", outer), ("ger", ger), ("addmm", addmm), ("addmv", addmv),
               ("addr", addr), ("addbmm", addbmm), ("baddbmm", baddbmm), ("kron", kron), ("cross", cross)]:
    attach(_n, _f)
for _n, _f in [("tensordot", tensordot), ("chain_matmul", chain_matmul)]:
    attach(_n, _f, method=False)
for _n, _f in [("addmm_", addmm), ("addmv_", addmv), ("addr_", addr), ("addbmm_", addbmm), ("baddbmm_", baddbmm)]:
    attach(_n, _inplace_method(_f, _n), function=False)
attach("addmv_", _inplace_method(addmv, "addmv_"), method=False)   # torch.addmv_ exists as a function too
