"""``linalg.tensorinv`` and ``linalg.tensorsolve``: the matrix inverse and solve on a tensor read as a
matrix (its leading dims as rows, the rest as columns), written with ember's reshape, permute, ``inv``
and ``solve``, so autograd and autocast follow those ops."""
from __future__ import annotations

import math

from ..tensor import Tensor
from .linalg_solvers import inv, solve

__all__ = ["tensorinv", "tensorsolve"]


def _need(t, name, arg, pos):
    if not isinstance(t, Tensor):
        raise TypeError(f"linalg_{name}(): argument '{arg}' (position {pos}) must be Tensor, not {type(t).__name__}")


def tensorinv(A, ind=2, *, out=None):
    """The tensor ``X`` with ``tensordot(X, A, ind)`` the identity: ``inv`` of ``A`` read as a
    ``prod(shape[:ind]) x prod(shape[ind:])`` matrix, shaped ``shape[ind:] + shape[:ind]``."""
    _need(A, "tensorinv", "input", 1)
    if isinstance(ind, bool) or not isinstance(ind, int):
        raise TypeError(f"linalg_tensorinv(): argument 'ind' must be int, not {type(ind).__name__}")
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = math.prod(A.shape[:ind]), math.prod(A.shape[ind:])
    if rows != cols:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows}")
    r = inv(A.reshape(rows, cols)).reshape(*A.shape[ind:], *A.shape[:ind])
    if out is not None:
        from .elementwise import _out
        return _out(r, out)
    return r


def tensorsolve(A, B, dims=None, *, out=None):
    """The tensor ``X`` with ``tensordot(A, X, X.ndim) == B``: ``dims`` of ``A`` are moved to the end
    first; ``A`` is read as a ``B.numel() x rest`` matrix."""
    _need(A, "tensorsolve", "input", 1)
    _need(B, "tensorsolve", "other", 2)
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        keep = [d for d in range(A.ndim) if d not in dims]
        A = A.permute(*keep, *dims)
    rest = A.shape[B.ndim:]
    rows, cols = B.numel(), math.prod(rest)          # (torch compares with B's size, whatever A's leading dims)
    if rows != cols:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {cols} != {rows}")
    r = solve(A.reshape(rows, cols), B.reshape(rows)).reshape(*rest)
    if out is not None:
        from .elementwise import _out
        return _out(r, out)
    return r
