"""What the generator knows about values: the dtypes and sizes it draws from, :class:`V` (a named value's
shape, dtype, magnitude, exactness, aliasing) and the shape and index-text helpers."""
from __future__ import annotations

import math

import numpy as np

FLOATS = ("float32", "float64")
INTS = ("int64", "int32")
_SIZES = [0] * 2 + [1] * 8 + [2] * 8 + [3] * 10 + [4] * 6 + [5] * 6 + [6] * 3 + [7] * 4 + [8] * 3 + [9] * 3 \
    + [15] * 2 + [16] * 2 + [17] * 3 + [31] + [33] * 2
MAX_NUMEL = 2048
_DYADIC = ("0.5", "2.0", "1.5", "-3.0", "0.25", "-1.0")


class V:
    """What the generator knows about a named value."""
    __slots__ = ("name", "shape", "dtype", "rg", "mag", "exact", "acc", "root", "saves", "consumed", "overlap",
                 "is_input", "prec")

    def __init__(self, name, shape, dtype, rg, mag, exact, acc, root, saves, overlap, is_input):
        self.name, self.shape, self.dtype, self.rg, self.mag = name, tuple(shape), dtype, rg, mag
        self.exact, self.acc, self.root, self.saves, self.overlap = exact, acc, root, saves, overlap
        self.is_input = is_input
        self.consumed = False
        self.prec = "float32" if dtype == "float32" else "float64"   # the roughest rounding in its history

    @property
    def isfloat(self):
        return self.dtype in FLOATS

    @property
    def isint(self):
        return self.dtype in INTS

    @property
    def numel(self):
        return math.prod(self.shape)


def _dt(t) -> str:
    return str(t.dtype).replace("ember.", "")


def _mag(t) -> float:
    a = t.detach().numpy()
    if a.size == 0 or a.dtype == np.bool_:
        return 1.0
    a = np.abs(a.astype(np.float64))
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else 1.0


def _idx(d, text):
    """Index text selecting ``text`` in dimension ``d``: ``[:, :, text]``."""
    return "[" + ", ".join([":"] * d + [text]) + "]"


def _tup(xs):
    xs = tuple(xs)
    return f"({xs[0]},)" if len(xs) == 1 else "(" + ", ".join(map(str, xs)) + ")"


def _bshape(s, t):
    """The broadcast shape of s and t (None when they do not broadcast)."""
    n = max(len(s), len(t))
    s, t = (1,) * (n - len(s)) + tuple(s), (1,) * (n - len(t)) + tuple(t)
    out = []
    for a, b in zip(s, t):
        if a != b and a != 1 and b != 1:
            return None
        out.append(b if a == 1 else a)
    return tuple(out)


def _broadcasts(s, t):
    return _bshape(s, t) is not None
