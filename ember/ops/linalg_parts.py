"""Parts of matrices: the triangular parts (``tril``/``triu`` and their in-place forms), ``trace`` and
``linalg.diagonal``."""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from .registry import register, apply, attach, node_class, rename
from ._util import int_arg
from .linalg import _not_impl, _out


# ---- triangular parts, trace, cross ---------------------------------------------------------------------

_MASKS: dict = {}


def _triangle(x, k, lower):
    """``np.tril`` / ``np.triu``: ``x`` where the (cached, read-only) mask of the last two dims keeps it,
    else 0. NumPy's functions rebuild the mask through several Python helpers on every call."""
    n, m = x.shape[-2:]
    key = (n, m, k, lower)
    mask = _MASKS.get(key)
    if mask is None:
        if len(_MASKS) > 256:
            _MASKS.clear()
        mask = np.tri(n, m, k if lower else k - 1, dtype=bool)
        if not lower:
            mask = ~mask
        mask.flags.writeable = False
        _MASKS[key] = mask
    return np.where(mask, x, np.zeros((), x.dtype))


TRIL = register("tril", lambda x, k: _triangle(x, k, True), lambda ctx, g: (apply(TRIL, (g,), ctx.attrs),))
TRIU = register("triu", lambda x, k: _triangle(x, k, False), lambda ctx, g: (apply(TRIU, (g,), ctx.attrs),))
_TRACE = node_class("TraceBackward0")


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


def linalg_diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """``torch.linalg.diagonal``: the diagonal of the last two dims by default."""
    from .shape import diagonal
    return diagonal(A, offset, dim1, dim2)


for _n, _f in [("tril", tril), ("triu", triu), ("trace", trace)]:
    attach(_n, _f)
attach("tril_", tril_, function=False)
attach("triu_", triu_, function=False)
