"""``nn.FractionalMaxPool2d`` / ``nn.FractionalMaxPool3d``: fractional max pooling layers (the functions are
``ember.nn.functional.fractional_max_pool2d/3d``). ``_random_samples`` fixes the windows, as in torch."""
from __future__ import annotations

from .module import Module
from .. import functional as F

__all__ = ["FractionalMaxPool2d", "FractionalMaxPool3d"]


class _FractionalMaxPoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples=None) -> None:
        super().__init__()
        nd = self._nd
        self.kernel_size = kernel_size if isinstance(kernel_size, (tuple, list)) else (kernel_size,) * nd
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = (output_size if output_size is None or isinstance(output_size, (tuple, list))
                            else (output_size,) * nd)
        self.output_ratio = (output_ratio if output_ratio is None or isinstance(output_ratio, (tuple, list))
                             else (output_ratio,) * nd)
        name = type(self).__name__
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        fn = F.fractional_max_pool2d if self._nd == 2 else F.fractional_max_pool3d
        return fn(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                  _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """2-d fractional max pooling (windows at random fractional strides)."""
    _nd = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3-d fractional max pooling (windows at random fractional strides)."""
    _nd = 3
