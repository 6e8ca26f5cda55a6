"""Levelled debug output: ``EMBER_LOGS=graph,guards,recompiles,kernels,output_code,dynamic`` (comma-separated).

Read once at import and again by ``set_logs``; messages go to stderr, prefixed by their level.
"""
from __future__ import annotations

import os
import sys

LEVELS = ("graph", "guards", "recompiles", "kernels", "output_code", "dynamic")
_enabled: set = set()


def set_logs(spec: str | None = None) -> None:
    """Enable levels from a spec like "graph,recompiles" (or from ``EMBER_LOGS`` when None)."""
    spec = os.environ.get("EMBER_LOGS", "") if spec is None else spec
    _enabled.clear()
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        if part in ("all", "+all"):
            _enabled.update(LEVELS)
        elif part in LEVELS:
            _enabled.add(part)
        else:
            print(f"[ember] EMBER_LOGS: unknown level {part!r}; known: {', '.join(LEVELS)}", file=sys.stderr)


def enabled(level: str) -> bool:
    return level in _enabled


def log(level: str, message: str) -> None:
    if level in _enabled:
        print(f"[ember:{level}] {message}", file=sys.stderr)


set_logs()
