"""The bounds on what a checkpoint can make ember allocate, read where the user sets them.

``MAX_INFLATE_RATIO``, ``INFLATE_ALLOWANCE`` and ``MAX_CALL_ALLOCATION`` are attributes of the package
``ember.serialization`` (documented as settable there); the reader and the unpickler look them up through
:func:`_limit` at call time, so a value set on the package applies to the next load.
"""
from __future__ import annotations

import pickle
import sys


def _limit(name: str) -> int:
    """The current value of limit ``name`` (``MAX_INFLATE_RATIO`` ...): read from ``ember.serialization`` at
    call time, so a value the user sets there applies to the next load."""
    return getattr(sys.modules["ember.serialization"], name)


class _CheckpointLimitError(pickle.UnpicklingError):
    """A zip member whose declared sizes are out of bounds: refused before anything is inflated.

    Raised as is (not as a weights-only failure): loading with ``weights_only=False`` would not help.
    """
