"""Linear layers: ``Identity``, ``Linear`` and ``Bilinear`` (torch.nn's constructors, parameters, init, repr)."""
from __future__ import annotations

import math

from .module import Module
from .utils import _weight_and_bias
from .. import functional as F
from .. import init

__all__ = ["Identity", "Linear", "Bilinear"]


class Identity(Module):
    """Returns its input unchanged; accepts (and ignores) any constructor arguments."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` (out_features, in_features) and ``bias`` (out_features).

    Initialisation as torch: ``kaiming_uniform_(weight, a=sqrt(5))`` (i.e. U(-1/sqrt(in), 1/sqrt(in)))
    and bias U(-1/sqrt(in_features), 1/sqrt(in_features)).

        >>> ember.nn.Linear(3, 4)
        Linear(in_features=3, out_features=4, bias=True)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        _weight_and_bias(self, (out_features, in_features), bias, out_features, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw weight and bias with torch's default scheme."""
        init._layer_default_(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """``y = x1^T A x2 + b`` with weight (out_features, in1_features, in2_features)."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        _weight_and_bias(self, (out_features, in1_features, in2_features), bias, out_features, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """U(-1/sqrt(in1_features), 1/sqrt(in1_features)) for weight and bias, as torch."""
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class NonDynamicallyQuantizableLinear(Linear):
    """The ``out_proj`` of MultiheadAttention: a plain Linear under torch's class name (which torch
    uses to keep it out of dynamic quantization)."""
