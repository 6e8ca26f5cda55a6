"""Tensor.__repr__ in torch's format: ``tensor([1.5000, 2.0000], requires_grad=True)``.

The rules follow torch's printer: one formatter per tensor decides, from the nonzero finite values,
between integer mode (``1.``), fixed point with ``precision`` digits, and scientific notation (when the
ratio of the largest to the smallest magnitude exceeds 1000, the largest exceeds 1e8 or the smallest
is below 1e-4); every element is right-aligned to the widest. Tensors with more than ``threshold``
elements are summarised with ``...`` keeping ``edgeitems`` items at each edge; rows wrap at
``linewidth``. Suffixes (dtype, size of empty tensors, grad_fn / requires_grad) follow torch.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from . import dtypes as _dt


class _PrintOptions:
    precision = 4
    threshold = 1000
    edgeitems = 3
    linewidth = 80
    sci_mode = None


PRINT_OPTS = _PrintOptions()


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """Set how tensors print (torch.set_printoptions): ``profile`` is "default", "short" or "full";
    ``sci_mode`` True/False forces scientific notation on/off, None chooses automatically."""
    if profile is not None:
        if profile == "default":
            PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 4, 1000, 3, 80
        elif profile == "short":
            PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 2, 1000, 2, 80
        elif profile == "full":
            PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = (
                4, math.inf, 3, 80)
        else:
            raise ValueError(f"set_printoptions: profile must be 'default', 'short' or 'full', got {profile!r}")
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict:
    """The current print options as a dict."""
    return {k: getattr(PRINT_OPTS, k) for k in ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")}


@contextlib.contextmanager
def printoptions(**kwargs):
    """Context manager that sets print options temporarily."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    """Chooses the number format and column width for all elements of one tensor."""

    def __init__(self, arr: np.ndarray, floating: bool):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        vals = arr.reshape(-1)
        prec = PRINT_OPTS.precision
        if not floating:
            for v in vals.tolist():
                self.max_width = max(self.max_width, len(str(v)))
        else:
            v64 = vals.astype(np.float64)
            nz = v64[np.isfinite(v64) & (v64 != 0)]
            if nz.size:
                absv = np.abs(nz)
                lo, hi = float(absv.min()), float(absv.max())
                self.int_mode = bool(np.all(nz == np.ceil(nz)))
                if PRINT_OPTS.sci_mode is None:
                    self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
                else:
                    self.sci_mode = bool(PRINT_OPTS.sci_mode)
                items = nz.tolist()
                if self.sci_mode:
                    self.max_width = max(len(f"{v:.{prec}e}") for v in items)
                elif self.int_mode:
                    # integer-valued floats print as "3." (one extra character for the point)
                    self.max_width = max(len(f"{v:.0f}") + 1 for v in items)
                else:
                    self.max_width = max(len(f"{v:.{prec}f}") for v in items)

    def width(self) -> int:
        return self.max_width

    def format(self, value) -> str:
        if self.floating:
            prec = PRINT_OPTS.precision
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{prec}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{prec}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


def _summarized(a: np.ndarray) -> np.ndarray:
    """The elements that will be shown when summarising (edge items of every dimension)."""
    e = PRINT_OPTS.edgeitems
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        return np.concatenate([a[:e], a[-e:]]) if a.shape[0] > 2 * e else a
    if not e:
        return np.empty((0,) * a.ndim, dtype=a.dtype)
    rows = list(range(e)) + list(range(a.shape[0] - e, a.shape[0])) if a.shape[0] > 2 * e else range(a.shape[0])
    return np.stack([_summarized(a[i]) for i in rows])


class _ComplexFormatter:
    """torch's complex printing: the real parts and the imaginary parts each get their own formatter;
    an element prints as ``real`` followed by the signed ``imag`` and ``j``."""

    def __init__(self, arr: np.ndarray):
        self.re = _Formatter(arr.real, True)
        self.im = _Formatter(arr.imag, True)

    def width(self) -> int:
        return self.re.width() + self.im.width() + 1   # the imaginary part's formatter and the "j"

    def format(self, value) -> str:
        imag = (self.im.format(value.imag) + "j").lstrip()
        return self.re.format(value.real) + ("" if imag[0] in "+-" else "+") + imag


def _vector_str(a, indent, summarize, fmt) -> str:
    e = PRINT_OPTS.edgeitems
    element_length = fmt.width() + 2
    per_line = max(1, int(math.floor((PRINT_OPTS.linewidth - indent) / element_length)))
    if summarize and not e:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * e:
        data = [fmt.format(v) for v in a[:e].tolist()] + [" ..."] + [fmt.format(v) for v in a[-e:].tolist()]
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str_with_formatter(a, indent, summarize, fmt) -> str:
    dim = a.ndim
    if dim == 0:
        return fmt.format(a.item())
    if dim == 1:
        return _vector_str(a, indent, summarize, fmt)
    e = PRINT_OPTS.edgeitems
    if summarize and a.shape[0] > 2 * e:
        slices = ([_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt) for i in range(e)] + ["..."]
                  + [_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt)
                     for i in range(a.shape[0] - e, a.shape[0])])
    else:
        slices = [_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (dim - 1) + " " * (indent + 1)).join(slices) + "]"


def _tensor_str(data: np.ndarray, dt, indent: int) -> str:
    if data.size == 0:
        return "[]"
    summarize = data.size > PRINT_OPTS.threshold
    if dt is _dt.float16 or dt is _dt.bfloat16:
        data = data.astype(np.float32)
    shown = _summarized(data) if summarize else data
    fmt = _ComplexFormatter(shown) if dt.is_complex else _Formatter(shown, dt.is_floating_point)
    return _tensor_str_with_formatter(data, indent, summarize, fmt)


def _add_suffixes(tensor_str, suffixes, indent) -> str:
    parts = [tensor_str]
    last_line_len = len(tensor_str) - tensor_str.rfind("\n") + 1
    for suffix in suffixes:
        n = len(suffix)
        if last_line_len + n + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + n
        else:
            parts.append(", " + suffix)
            last_line_len += n + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t, tensor_contents=None) -> str:
    """The text torch prints for tensor ``t`` (with ``ember.`` where torch shows ``torch.``)."""
    from .tensor import Tensor
    cls = type(t)
    plain = cls is Tensor or getattr(t, "_is_param", False) or cls.__name__ == "Parameter"
    prefix = "tensor(" if plain else f"{cls.__name__}("
    indent = len(prefix)
    dt = t._dtype
    suffixes = []
    if t.is_meta:       # no values: torch prints "..." and the size
        suffixes += ["device='meta'", "size=" + str(tuple(t._data.shape))]
        if dt is not _dt.get_default_dtype():
            suffixes.append(f"dtype=ember.{dt.name}")
        tensor_str = "..."
        if t.grad_fn is not None:
            suffixes.append(f"grad_fn=<{t.grad_fn.name().rsplit('::', 1)[-1]}>")
        elif t._rg:
            suffixes.append("requires_grad=True")
        return _add_suffixes(prefix + tensor_str, suffixes, indent)
    data = t._host()
    if not t.is_cpu:
        suffixes.append(f"device='{t.device}'")
    has_default_dtype = dt in (_dt.get_default_dtype(), _dt.scalar_dtype(1j), _dt.int64, _dt.bool)
    if data.size == 0:
        if data.ndim != 1:
            suffixes.append("size=" + str(tuple(data.shape)))
        if dt is not _dt.get_default_dtype():
            suffixes.append(f"dtype=ember.{dt.name}")
        tensor_str = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append("size=" + str(tuple(data.shape)))
        if not has_default_dtype:
            suffixes.append(f"dtype=ember.{dt.name}")
        tensor_str = _tensor_str(data, dt, indent)
    if tensor_contents is not None:
        tensor_str = tensor_contents
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name().rsplit('::', 1)[-1]}>")
    elif t._rg:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + tensor_str, suffixes, indent)
