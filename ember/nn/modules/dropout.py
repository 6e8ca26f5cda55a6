"""Dropout layers (torch.nn's): Dropout, Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout.

Each is active only in training mode (``module.train()``); in eval mode it returns its input. Masks are
drawn from ember's default generator, so ``ember.manual_seed`` makes them repeatable.
"""
from __future__ import annotations

from ...tensor import Tensor
from .module import Module
from .. import functional as F

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class _DropoutNd(Module):
    __constants__ = ["p", "inplace"]

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    _FN = "dropout"        # the functional form in ember.nn.functional
    _INPLACE = True        # whether it takes ``inplace`` (torch's alpha dropouts ignore the module's)

    def forward(self, input: Tensor) -> Tensor:
        fn = getattr(F, self._FN)
        if self._INPLACE:
            return fn(input, self.p, self.training, self.inplace)
        return fn(input, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zeroes each element with probability ``p`` and scales the others by ``1 / (1 - p)``."""


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, L)`` / ``(C, L)`` inputs."""

    _FN = "dropout1d"


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, H, W)`` inputs."""

    _FN = "dropout2d"


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, D, H, W)`` / ``(C, D, H, W)`` inputs."""

    _FN = "dropout3d"


class AlphaDropout(_DropoutNd):
    """Dropout that keeps SELU's self-normalizing mean and variance."""

    _FN = "alpha_dropout"
    _INPLACE = False


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels."""

    _FN = "feature_alpha_dropout"
    _INPLACE = False
