"""Householder representations of Q: ``geqrf`` (LAPACK's compact QR: R above the diagonal, the reflector
vectors below it, and their scales ``tau``) and ``linalg.householder_product`` (alias ``orgqr``), the
product H_1 ... H_k of the reflectors H_i = I - tau_i v_i v_i^T with v_i = (0, ..., 0, 1, A[i+1:, i]).

``geqrf`` runs NumPy's LAPACK call (``qr(mode="raw")``) and has no derivative, as in torch;
``householder_product`` is composed of ember ops (one rank-one update per reflector), so it is
differentiable in both arguments.
"""
from __future__ import annotations

import collections

import numpy as np

from ..tensor import Tensor
from .registry import attach
from .linalg import _check_linalg, _const, _eye, _out, _out_tuple, _tensor_arg
from .linalg_parts import tril
from .linalg_products import matmul_raw

__all__ = ["geqrf", "householder_product"]

GeqrfResult = collections.namedtuple("geqrf", ["a", "tau"])


def geqrf(input, *, out=None):  # noqa: A002 - torch's name
    """``(a, tau)``: LAPACK's QR in compact form (no gradient, as in torch)."""
    _check_linalg(input, "geqrf", square=False, arg="input")
    a = input._data
    if a.size == 0:
        h, tau = np.array(a, copy=True), np.zeros(a.shape[:-2] + (min(a.shape[-2:]),), a.dtype)
    else:
        h, tau = np.linalg.qr(a, mode="raw")
        h = np.ascontiguousarray(np.swapaxes(h, -1, -2))
    res = GeqrfResult(_const(h.astype(a.dtype, copy=False), input._dtype),
                      _const(tau.astype(a.dtype, copy=False), input._dtype))
    return res if out is None else _out_tuple(res, out, "geqrf")


def householder_product(A, tau, *, out=None) -> Tensor:
    """The first n columns of H_1 ... H_k for A (m x n, m >= n) holding the reflectors below its diagonal."""
    op = "torch.linalg.householder_product"
    _tensor_arg(A, "linalg.householder_product", "input")
    _tensor_arg(tau, "linalg.householder_product", "tau")
    if A._data.ndim < 2:
        raise RuntimeError(f"{op}: input must have at least 2 dimensions.")
    m, n = A._data.shape[-2:]
    k = tau._data.shape[-1] if tau._data.ndim else 1
    if m < n:
        raise RuntimeError(f"{op}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if n < k:
        raise RuntimeError(f"{op}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if A._data.ndim - tau._data.ndim != 1:
        raise RuntimeError(f"{op}: Expected tau to have one dimension less than input, but got tau.ndim equal to "
                           f"{tau._data.ndim} and input.ndim is equal to {A._data.ndim}")
    if A._dtype is not tau._dtype:
        raise RuntimeError(f"{op}: tau dtype {tau._dtype} does not match input dtype {A._dtype}")
    _check_linalg(A, "linalg.householder_product", square=False, arg="input")
    V = tril(A, -1) + _eye(m, A._dtype)[:, :n]
    Q = _const(np.eye(m, n), A._dtype)
    if A._data.ndim > 2:
        Q = Q.expand(A._data.shape)
    for i in range(k - 1, -1, -1):                 # Q <- H_i Q, the last reflector first
        v = V[..., :, i:i + 1]
        Q = Q - (tau[..., i:i + 1].unsqueeze(-1) * v) * matmul_raw(v.mT, Q)
    return Q if out is None else _out(Q, out)


attach("geqrf", geqrf)
attach("orgqr", householder_product)
