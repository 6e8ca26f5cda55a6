"""The text torch prints for a sparse COO tensor (``ember.`` where torch shows ``torch.``)."""
from __future__ import annotations

from .. import dtypes as _dt
from .._tensor_str import _add_suffixes, _tensor_str

_INDENT = len("tensor(")


def _part(data, dt, column: int) -> str:
    # an inner tensor as torch shows it inside the sparse repr: no dtype, the size when empty
    if data.size == 0:
        return f"tensor([], size={tuple(data.shape)})"
    return "tensor(" + _tensor_str(data, dt, column + _INDENT) + ")"


def sparse_repr(t) -> str:
    d = t._data
    dt = t._dtype
    head = "tensor(indices="
    vals = " " * _INDENT + "values="
    text = (head + _part(d.indices, _dt.int64, len(head)) + ",\n" + vals + _part(d.values, dt, len(vals))
            + ",\n" + " " * _INDENT + f"size={tuple(d.shape)}")
    hidden = (_dt.get_default_dtype(), _dt.scalar_dtype(1j), _dt.int64, _dt.bool)
    return _add_suffixes(text, suffixes_of(t, [f"nnz={d.indices.shape[1]}"], hidden, "sparse_coo"), _INDENT)


def suffixes_of(t, first: list, hidden_dtypes, layout_name: str) -> list:
    """``first`` then the dtype (unless one of ``hidden_dtypes``), the layout and the autograd state."""
    suffixes = list(first)
    if t._dtype not in hidden_dtypes:
        suffixes.append(f"dtype=ember.{t._dtype.name}")
    suffixes.append(f"layout=ember.{layout_name}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name().rsplit('::', 1)[-1]}>")
    elif t._rg:
        suffixes.append("requires_grad=True")
    return suffixes
