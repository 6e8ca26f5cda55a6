"""Padding layers: constant / zero / reflection / replication / circular padding in 1, 2 and 3 dims."""
from __future__ import annotations

from .module import Module
from .. import functional as F
from .utils import _ntuple

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d"]


class _ConstantPadNd(Module):
    n = 1          # padded dims: ``padding`` is an int or a ``2 * n``-tuple (last dim first: left, right, ...)

    def __init__(self, padding, value: float) -> None:
        super().__init__()
        self.padding = _ntuple(2 * self.n)(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with ``value``: ``padding`` is an int or (left, right)."""
    n = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with ``value``: an int or (left, right, top, bottom)."""
    n = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with ``value``: an int or a 6-tuple."""
    n = 3


class _ZeroPad:
    """Constant padding with zeros (mixed in before a ``ConstantPadNd``, as torch's subclasses)."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPad, ConstantPad1d):
    """Pad the last dim with zeros."""


class ZeroPad2d(_ZeroPad, ConstantPad2d):
    """Pad the last two dims with zeros.

        >>> ember.nn.ZeroPad2d(1)
        ZeroPad2d((1, 1, 1, 1))
    """


class ZeroPad3d(_ZeroPad, ConstantPad3d):
    """Pad the last three dims with zeros."""


class _ModePadNd(Module):
    mode = ""
    n = 1

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _ntuple(2 * self.n)(padding)

    def forward(self, input):
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


_HOW = {"reflect": "with their reflection (the edge is not repeated)", "replicate": "by repeating their edge values",
        "circular": "by wrapping around"}


def _mode_pad(name: str, mode: str, n: int) -> type:
    """The padding module ``name``: ``F.pad(input, padding, mode)`` over the last ``n`` dims."""
    doc = f"Pad the last {n} dim{'s' if n > 1 else ''} {_HOW[mode]}: ``padding`` is an int or a {2 * n}-tuple."
    return type(name, (_ModePadNd,), {"mode": mode, "n": n, "__doc__": doc, "__module__": __name__})


ReflectionPad1d = _mode_pad("ReflectionPad1d", "reflect", 1)
ReflectionPad2d = _mode_pad("ReflectionPad2d", "reflect", 2)
ReflectionPad3d = _mode_pad("ReflectionPad3d", "reflect", 3)
ReplicationPad1d = _mode_pad("ReplicationPad1d", "replicate", 1)
ReplicationPad2d = _mode_pad("ReplicationPad2d", "replicate", 2)
ReplicationPad3d = _mode_pad("ReplicationPad3d", "replicate", 3)
CircularPad1d = _mode_pad("CircularPad1d", "circular", 1)
CircularPad2d = _mode_pad("CircularPad2d", "circular", 2)
CircularPad3d = _mode_pad("CircularPad3d", "circular", 3)
