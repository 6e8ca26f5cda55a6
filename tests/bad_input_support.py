"""Shared pieces of the bad-input table (``test_bad_input.py``): inputs built the same way in torch and
ember, the row registry ``R``/``ROWS`` that the ``bad_input_rows_*`` modules fill, and the harness that
compares one row's outcome in both libraries."""
from __future__ import annotations

import math
import warnings

import numpy as np
import torch

import ember
from oracle import Case, _flatten, _to_np, compare

nan, inf = math.nan, math.inf


class Corrupted(AssertionError):
    """An in-place call raised but changed its tensor first."""


# ---- inputs, built the same way in both libraries --------------------------------------------------------

def A(m):
    """float32 (3, 4): 0..11."""
    return m.arange(12.).reshape(3, 4)


def I(m):  # noqa: E743 - an int64 matrix
    """int64 (3, 4): 0..11."""
    return m.arange(12).reshape(3, 4)


def B(m):
    """bool (3, 4)."""
    return A(m) > 5


def V(m):
    return m.tensor([1., -2., 3.])


def N(m):
    """float32 with NaN, +-inf, zero and negatives."""
    return m.tensor([0., nan, inf, -inf, -1., 2.])


def E(m):
    return m.ones(0)


def E2(m):
    return m.ones(0, 4)


def S(m):
    """a 0-dim float tensor."""
    return m.tensor(2.5)


def meta(t):
    """shape and dtype only: for random results."""
    return [(tuple(x.shape), str(x.dtype).split(".")[-1]) for x in _flatten(t)]


def inplace(make, op):
    """``op(m, x)`` on ``x = make(m)``; if it raises, ``x`` must hold what it held before (checked for ember)."""
    def run(m):
        x = make(m)
        before = _to_np(x).copy() if m is ember else None
        try:
            return op(m, x)
        except Exception as exc:
            if before is not None:
                after = _to_np(x)
                if after.shape != before.shape or not np.array_equal(after, before, equal_nan=after.dtype.kind == "f"):
                    raise Corrupted(f"the failing call changed its tensor: {before} -> {after}") from exc
            raise
    return run


# ---- the table ------------------------------------------------------------------------------------------

ROWS: dict = {}


def R(name, fn):
    assert name not in ROWS, f"duplicate row {name}"
    ROWS[name] = fn


# ---- the harness ----------------------------------------------------------------------------------------

def _builtin_base(cls):
    for c in cls.__mro__:
        if c.__module__ == "builtins":
            return c
    return Exception


def _norm(x):
    """Make a result comparable across libraries: dtypes and sizes become plain values."""
    if isinstance(x, (torch.dtype, ember.dtype)):
        return "dtype:" + str(x).split(".")[-1]
    if isinstance(x, (torch.Tensor, ember.Tensor)):
        return x
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, (tuple, list)):
        return [_norm(v) for v in x]
    if isinstance(x, (ember.nn.Module, torch.nn.Module)):
        return "module:" + type(x).__name__
    return x


def _call(fn, m):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return True, _norm(fn(m))
        except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
            return False, exc


def _differs(name, fn):
    """None when ember answers as torch does, else a one-line description of the difference."""
    t_ok, t = _call(fn, torch)
    e_ok, e = _call(fn, ember)
    if not t_ok and not e_ok:
        if isinstance(e, Corrupted):
            return str(e)
        want = _builtin_base(type(t))
        if not isinstance(e, want):
            return f"ember raised {type(e).__name__}({str(e)[:120]}), torch {type(t).__name__}({str(t)[:120]})"
        if type(t).__module__ != "builtins":
            names = {c.__name__.lstrip("_") for c in type(e).__mro__}
            if type(t).__name__.lstrip("_") not in names:
                return f"ember raised {type(e).__name__}, torch {type(t).__name__}"
        if not str(e).strip():
            return f"ember raised {type(e).__name__} with an empty message"
        return None
    if not t_ok:
        return f"ember returned {_short(e)}, torch raised {type(t).__name__}({str(t)[:120]})"
    if not e_ok:
        return f"ember raised {type(e).__name__}({str(e)[:120]}), torch returned {_short(t)}"
    try:
        compare(e, t, Case(name, fn=None), "result")
    except AssertionError as exc:
        return " ".join(str(exc).split())[:300]
    return None


def _short(x):
    return " ".join(repr(x).split())[:120]


def run_table():
    return {name: _differs(name, fn) for name, fn in ROWS.items()}

