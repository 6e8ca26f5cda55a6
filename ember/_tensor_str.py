"""Tensor.__repr__ in torch's format: ``tensor([1.5000, 2.0000], requires_grad=True)``."""
from __future__ import annotations

import numpy as np

from . import dtypes as _dt

_PRINT = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    if profile == "default":
        _PRINT.update(precision=4, threshold=1000, edgeitems=3, linewidth=80)
    elif profile == "short":
        _PRINT.update(precision=2, threshold=1000, edgeitems=2, linewidth=80)
    elif profile == "full":
        _PRINT.update(precision=4, threshold=float("inf"), edgeitems=3, linewidth=80)
    for k, v in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if v is not None:
            _PRINT[k] = v
    _PRINT["sci_mode"] = sci_mode


class _Formatter:
    def __init__(self, arr: np.ndarray, floating: bool):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        prec = _PRINT["precision"]
        vals = arr.reshape(-1)
        if not floating:
            self.max_width = max((len(str(v)) for v in vals.tolist()), default=1)
            return
        finite = vals[np.isfinite(vals)]
        nonzero = np.abs(finite[finite != 0])
        if finite.size:
            self.int_mode = bool(np.all(finite == np.ceil(finite)))
        if self.int_mode:
            if nonzero.size and (nonzero.max() / nonzero.min() > 1000.0 or nonzero.max() > 1e8):
                self.sci_mode = True
                self.int_mode = False
        elif nonzero.size:
            if nonzero.max() / nonzero.min() > 1000.0 or nonzero.max() > 1e8 or nonzero.min() < 1e-4:
                self.sci_mode = True
        if _PRINT["sci_mode"] is not None:
            self.sci_mode = _PRINT["sci_mode"]
        self.prec = prec
        self.max_width = max((len(self._fmt(v)) for v in vals.tolist()), default=1)

    def _fmt(self, v):
        if not self.floating:
            return str(v)
        if v != v or v in (float("inf"), float("-inf")):
            return {"nan": "nan", "inf": "inf", "-inf": "-inf"}[str(v)]
        if self.sci_mode:
            return f"{v:.{self.prec}e}"
        if self.int_mode:
            return f"{v:.0f}."
        return f"{v:.{self.prec}f}"

    def format(self, v):
        return self._fmt(v).rjust(self.max_width)


def _summarize(arr, edge):
    if arr.ndim == 0:
        return arr
    if arr.shape[0] > 2 * edge:
        arr = np.concatenate([arr[:edge], arr[-edge:]])
    return np.stack([_summarize(a, edge) for a in arr]) if arr.ndim > 1 else arr


def _fmt_array(arr, fmt, indent, summarize, edge):
    if arr.ndim == 0:
        return fmt.format(arr.item())
    if arr.ndim == 1:
        items = [fmt.format(v) for v in arr.tolist()]
        if summarize and len(items) > 2 * edge:
            items = items[:edge] + ["..."] + items[-edge:]
        lines = []
        line = ""
        width = _PRINT["linewidth"] - indent
        for it in items:
            piece = it + ", "
            if line and len(line) + len(piece.rstrip()) > width:
                lines.append(line.rstrip())
                line = ""
            line += piece
        lines.append(line[:-2])
        return "[" + ("\n" + " " * (indent + 1)).join(lines) + "]"
    rows = list(range(arr.shape[0]))
    if summarize and len(rows) > 2 * edge:
        rows = rows[:edge] + [None] + rows[-edge:]
    parts = [("..." if r is None else _fmt_array(arr[r], fmt, indent + 1, summarize, edge)) for r in rows]
    sep = "," + "\n" * (arr.ndim - 1) + " " * (indent + 1)
    return "[" + sep.join(parts) + "]"


def tensor_repr(t) -> str:
    data = t._data
    dt = t._dtype
    if dt in (_dt.bfloat16, _dt.float16):
        data = data.astype(np.float32)
    suffixes = []
    summarize = data.size > _PRINT["threshold"]
    edge = _PRINT["edgeitems"]
    if data.size == 0:
        body = "[]"
        if data.ndim != 1:
            suffixes.append(f"size=({', '.join(map(str, data.shape))}{',' if data.ndim == 1 else ''})")
    else:
        src = _summarize(data, edge) if summarize else data
        fmt = _Formatter(src, dt.is_floating_point)
        if dt is _dt.bool:
            fmt.format = lambda v: str(bool(v))
        body = _fmt_array(data, fmt, len("tensor("), summarize, edge)
    if dt not in (_dt.get_default_dtype(), _dt.int64, _dt.bool) or (data.size == 0 and dt is not _dt.get_default_dtype() and dt is not _dt.int64) :
        if not (data.size == 0 and dt is _dt.bool):
            suffixes.append(f"dtype=ember.{dt.name}")
        elif dt is _dt.bool:
            suffixes.append(f"dtype=ember.{dt.name}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t._rg:
        suffixes.append("requires_grad=True")
    inner = body
    if suffixes:
        inner += ", " + ", ".join(suffixes)
    return f"tensor({inner})"
