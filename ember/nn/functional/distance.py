"""torch.nn.functional's distances: cosine_similarity, pairwise_distance, pdist, and ``ember.cdist``.

``cdist`` is one op. Its kernel computes p-norm distances between the rows of two batched matrices
(chunked, so the ``(B, P, R, M)`` difference tensor is never built whole); for p = 2 on larger inputs it
uses the matmul expansion ``|a|^2 + |b|^2 - 2 a.b`` as torch does by default. Its derivative is written in
ember ops (matmuls for p = 2, the broadcast difference otherwise), with zero gradient where a distance
is zero, as in torch. ``pdist`` reads the upper triangle of ``cdist(x, x)``.
"""
from __future__ import annotations

import sys

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor
from ...ops.registry import register, apply, dtype_name, node_class, rename
from ...ops._reduce_util import numpy_names
from ._autocast_fp32 import autocast_fp32

__all__ = ["cosine_similarity", "pairwise_distance", "pdist"]   # cdist lives at ember.cdist, as in torch

_CHUNK = 1 << 22     # elements of the broadcast difference computed at once


def _ember():
    import ember
    return ember


# ---- cdist op ---------------------------------------------------------------------------------------------

def _cdist_direct(a, b, p):
    bsz, pn, m = a.shape
    rn = b.shape[1]
    out = np.empty((bsz, pn, rn), a.dtype)
    step = max(1, _CHUNK // max(1, rn * m * bsz))
    for s in range(0, pn, step):
        d = np.abs(a[:, s:s + step, None, :] - b[:, None, :, :])
        if p == 0:
            r = np.count_nonzero(d, axis=-1).astype(a.dtype)
        elif p == 1:
            r = d.sum(-1)
        elif p == 2:
            r = np.sqrt(np.square(d, out=d).sum(-1))
        elif p == np.inf:
            r = d.max(-1) if m else np.zeros(d.shape[:-1], a.dtype)
        else:
            r = np.power(np.power(d, p, out=d).sum(-1), 1.0 / p)
        out[:, s:s + step] = r
    return out


def _cdist_kernel(a, b, p, mm=False):
    if mm:
        # torch's matmul form: |a|^2 - 2 a.b + |b|^2, clamped at 1e-30 before the square root
        an = np.square(a).sum(-1)[:, :, None]
        bn = np.square(b).sum(-1)[:, None, :]
        d2 = an - 2.0 * np.matmul(a, b.swapaxes(-1, -2)) + bn
        return np.sqrt(np.maximum(d2, a.dtype.type(1e-30)))
    return _cdist_direct(a, b, p)


def _cdist_backward(ctx, g):
    x1, x2 = ctx.inputs
    d = ctx.output
    p = ctx.attrs["p"]
    e = _ember()
    need1, need2 = ctx.edges[0] is not None, ctx.edges[1] is not None
    if p == 0:
        return (e.zeros_like(x1) if need1 else None), (e.zeros_like(x2) if need2 else None)
    if p == 2:
        # zero (or matmul-clamped, ~1e-15) distances get no gradient: the direction is undefined there
        ok = d > 1e-15
        w = e.where(ok, g / e.where(ok, d, 1.0), 0.0)
        g1 = x1 * w.sum(-1, keepdim=True) - e.matmul(w, x2) if need1 else None
        g2 = x2 * w.sum(-2).unsqueeze(-1) - e.matmul(w.transpose(-1, -2), x1) if need2 else None
        return g1, g2
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)             # (B, P, R, M)
    gg = g.unsqueeze(-1)
    if p == 1:
        gd = gg * diff.sign()
    elif p == float("inf"):
        gd = gg * diff.sign() * (diff.abs() == d.unsqueeze(-1))
    else:
        dd = d.unsqueeze(-1)
        safe = e.where(dd > 0, dd, 1.0)
        gd = e.where(dd > 0, gg * diff.sign() * diff.abs().pow(p - 1) / safe.pow(p - 1), 0.0)
    return (gd.sum(-2) if need1 else None), (-gd.sum(-3) if need2 else None)


CDIST = register("cdist", _cdist_kernel, _cdist_backward, save="io")
_CDIST, _NORM1 = node_class("CdistBackward0"), node_class("NormBackward1")

_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


@autocast_fp32
def cdist(x1, x2, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """p-norm distance between each row of ``x1`` (``(*, P, M)``) and each row of ``x2`` (``(*, R, M)``):
    a ``(*, P, R)`` tensor; batch dims broadcast."""
    e = _ember()
    if compute_mode not in _MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if x1.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    for t, nm in ((x1, "X1"), (x2, "X2")):
        if not t._dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {nm} got: {dtype_name(t._dtype)}")
    if x1._dtype is not x2._dtype:
        raise RuntimeError(f"expected scalar type {dtype_name(x1._dtype)} but found {dtype_name(x2._dtype)}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    batch = tuple(np.broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2])))
    pn, rn, m = x1.shape[-2], x2.shape[-2], x1.shape[-1]
    bsz = int(np.prod(batch)) if batch else 1
    a = x1.expand(batch + (pn, m)).reshape(bsz, pn, m)
    b = x2.expand(batch + (rn, m)).reshape(bsz, rn, m)
    mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or
                     (compute_mode == "use_mm_for_euclid_dist_if_necessary" and (pn > 25 or rn > 25)))
    out = apply(CDIST, (a, b), {"p": float(p), "mm": mm})
    return rename(out.reshape(batch + (pn, rn)), _CDIST)      # torch's cdist op is batched: no view


def pdist(input, p: float = 2) -> Tensor:
    """Distances between all pairs of rows ``i < j`` of a 2-D ``input`` (row-major upper triangle)."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    e = _ember()
    n = input.shape[0]
    full = cdist(input.unsqueeze(0), input.unsqueeze(0), p, "donot_use_mm_for_euclid_dist")[0]
    iu = e.triu_indices(n, n, 1)
    return full[iu[0], iu[1]]


# ---- cosine similarity / pairwise distance ---------------------------------------------------------------

def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8, *, axis=None) -> Tensor:
    """``sum(x1 * x2, dim) / (max(||x1||, eps) * max(||x2||, eps))`` over broadcast inputs (each input is
    divided by its clamped norm first, as torch does, keeping the result in [-1, 1])."""
    if axis is not None:
        dim = numpy_names("cosine_similarity", dim, False, axis, None, 1)[0]
    e = _ember()
    dt = _dt.result_type(x1, x2)
    if not dt.is_floating_point:
        raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is {dtype_name(dt)}")
    a, b = e.broadcast_tensors(x1.to(dt), x2.to(dt))
    n1 = e.linalg.vector_norm(a, 2, dim, keepdim=True)
    n2 = e.linalg.vector_norm(b, 2, dim, keepdim=True)
    # torch clamps the norms in place under no_grad: the clamped value is used, the gradient is the norm's
    n1 = n1 + (n1.clamp_min(eps) - n1).detach()
    n2 = n2 + (n2.clamp_min(eps) - n2).detach()
    return ((a / n1) * (b / n2)).sum(dim)


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dim of the broadcast inputs."""
    e = _ember()
    nd = max(x1.ndim, x2.ndim)
    diff = x1 - x2 + eps
    # torch runs its legacy norm(p, dim) overload here
    if nd == 0:
        return rename(e.linalg.vector_norm(diff, p, None, keepdim=keepdim), _NORM1)
    return rename(e.linalg.vector_norm(diff, p, nd - 1, keepdim=keepdim), _NORM1)


_pkg = sys.modules["ember"]
for _n, _f in (("cdist", cdist), ("pdist", pdist), ("cosine_similarity", cosine_similarity),
               ("pairwise_distance", pairwise_distance)):
    if not hasattr(_pkg, _n):
        setattr(_pkg, _n, _f)
