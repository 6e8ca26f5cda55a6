"""ember.backends.opt_einsum: the contraction-order switches of ``einsum`` (stored).

``is_available()`` reports, as in torch, whether the ``opt_einsum`` package is installed; ember's einsum
orders contractions itself, so ``enabled`` and ``strategy`` are accepted and stored."""
from __future__ import annotations

import importlib
import importlib.util

from . import _checked_module

_AVAILABLE = importlib.util.find_spec("opt_einsum") is not None

enabled = _AVAILABLE
strategy = "auto" if _AVAILABLE else None


def is_available() -> bool:
    """Whether the opt_einsum package is installed."""
    return _AVAILABLE


def get_opt_einsum():
    """The opt_einsum module if installed, else None."""
    return importlib.import_module("opt_einsum") if _AVAILABLE else None


_checked_module(__name__, ("enabled",))
