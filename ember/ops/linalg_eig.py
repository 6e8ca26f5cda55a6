"""The general (non-symmetric) eigendecomposition: ``linalg.eig`` and ``linalg.eigvals``.

Eigenvalues and eigenvectors are complex (complex64 for float32 input, complex128 for float64), from
LAPACK's geev through NumPy, the routine torch's CPU kernel calls (so the order, the unit norm and the
phase of each eigenvector agree). The derivative is torch's: with ``E_ij = conj(L_j - L_i)``,
``gA = V^-H (diag(gL) + (V^H gV - V^H V Re(diag(V^H gV))) / E) V^H``, taken to its real part for real
input. It is one NumPy kernel (ember's solvers take real matrices), so it is not differentiable again.
"""
from __future__ import annotations

import collections

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from .registry import register, apply
from .linalg import _check_linalg

__all__ = ["eig", "eigvals"]

EigResult = collections.namedtuple("linalg_eig", ["eigenvalues", "eigenvectors"])

_COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128,
            np.dtype(np.complex64): np.complex64, np.dtype(np.complex128): np.complex128}


def _eig_kernel(a):
    ct = _COMPLEX[a.dtype]
    w, v = np.linalg.eig(a)
    return w.astype(ct, copy=False), v.astype(ct, copy=False)


def _eig_bw_kernel(gL, gV, L, V, real_input):
    """torch's linalg_eig_backward in NumPy (complex arithmetic; gL/gV may be None)."""
    Vh = np.conj(np.swapaxes(V, -1, -2))
    n = L.shape[-1]
    inner = np.zeros(V.shape, V.dtype)
    if gV is not None:
        VhgV = Vh @ gV
        d = np.real(np.diagonal(VhgV, 0, -2, -1))
        VhgV = VhgV - Vh @ (V * d[..., None, :])
        Lc = np.conj(L)
        E = Lc[..., None, :] - Lc[..., :, None]
        idx = np.arange(n)
        E[..., idx, idx] = 1.0
        inner = VhgV / E
        inner[..., idx, idx] = 0.0
    if gL is not None:
        inner = inner + gL[..., None, :] * np.eye(n, dtype=V.dtype)
    gA = np.linalg.solve(Vh, inner @ Vh)
    return np.real(gA).astype(V.real.dtype) if real_input else gA.astype(V.dtype)


EIG_BW = register("linalg_eig_backward", _eig_bw_kernel, differentiable=False)


def _eig_bw(ctx, gL, gV):
    from ..autograd.grad_mode import GRAD
    if GRAD[0]:
        raise NotImplementedError("linalg.eig: ember computes its first derivative only (create_graph=True, a "
                                  "double backward through eig, is not supported)")
    A = ctx.inputs[0]
    L, V = ctx.outputs
    return apply(EIG_BW, (gL, gV, L, V), {"real_input": not A.dtype.is_complex})


EIG = register("linalg_eig", _eig_kernel, _eig_bw, save="io", nout=2)


def eig(A, *, out=None):
    """Complex eigenvalues and eigenvectors of a square matrix (``A @ V = V @ diag(L)``)."""
    _check_linalg(A, "linalg.eig")
    if A.dtype in (_dt.float16, _dt.bfloat16):
        raise RuntimeError(f"linalg.eig: Low precision dtypes not supported. Got {str(A.dtype).split('.')[-1]}")
    if out is not None:
        raise RuntimeError("linalg.eig: out= is not supported by ember")
    return EigResult(*apply(EIG, (A,), {}))


def eigvals(A, *, out=None) -> Tensor:
    """The complex eigenvalues of a square matrix (differentiable as ``eig``'s)."""
    if out is not None:
        raise RuntimeError("linalg.eigvals: out= is not supported by ember")
    return eig(A).eigenvalues
