"""NumPy's floating-point warnings from ember's kernels never reach the user, as torch returns inf/nan
silently (``ember.log(ember.zeros(1))`` is ``-inf`` without a word).

NumPy reports a float error (divide by zero, overflow, invalid value, underflow) as a ``RuntimeWarning``
attributed to the Python frame that called the ufunc: for ember's kernels, a module under ``ember.``.
One ``warnings`` filter ignores exactly those (the category, NumPy's message text and ember's modules),
so the user's own NumPy code and ember's other warnings are untouched, and so is ``np.seterr``.

A filter only works while no earlier one matches first: a user's ``warnings.simplefilter("always")``
or ``"error"`` (pytest's ``-W error``, ``catch_warnings``) goes to the front of the list. ``apply``
checks that ember's filter is still the first (one list lookup and an identity test, much cheaper than
an ``np.errstate`` per op, which costs about a quarter of a small op) and puts it back in front when it
is not (:func:`reinstate`), inside whatever ``catch_warnings`` block is current.

Kernels that reach ufuncs through NumPy's Python wrappers (``np.prod``, ``np.mean`` run in NumPy's own
frames) quiet themselves with :func:`quiet` (``np.errstate``) or call the ufunc method directly.
"""
from __future__ import annotations

import warnings

import numpy as np

# NumPy's messages for the four floating-point errors ("divide by zero encountered in log", ...)
_MESSAGE = r"(divide by zero|overflow|underflow|invalid value) encountered"
_MODULE = r"ember(\..*)?$"


def _install():
    warnings.filterwarnings("ignore", message=_MESSAGE, category=RuntimeWarning, module=_MODULE)
    return warnings.filters[0]


FILTER = [_install()]  # the installed filter entry (a list, so apply reads the current one)


def reinstate() -> None:
    """Put ember's filter back in front of ``warnings.filters`` (after a user's filter displaced it)."""
    FILTER[0] = _install()


def ensure() -> None:
    """:func:`reinstate` if ember's filter is not in front (what ``apply`` checks inline)."""
    filters = warnings.filters
    if not filters or filters[0] is not FILTER[0]:
        reinstate()


def quiet():
    """``np.errstate(all="ignore")``: for kernels whose ufuncs run inside NumPy's Python wrappers."""
    return np.errstate(all="ignore")


__all__ = ["FILTER", "reinstate", "ensure", "quiet"]
