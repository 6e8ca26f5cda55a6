"""torch.nn.functional's dropout family: dropout, dropout1d/2d/3d, alpha_dropout, feature_alpha_dropout.

A dropout is ``input * noise`` (alpha dropout: ``input * noise + shift``) where the noise is drawn by
ember's default generator, so ``ember.manual_seed`` makes masks repeatable. The noise is a constant
tensor, so the multiply is one ember ``mul`` whose derivative (``grad * noise``) is already known and
double-differentiable. Feature ("channel") variants draw one value per ``(N, C)`` and broadcast it over
the spatial dims. In eval mode, or with ``p == 0``, the input itself is returned, as in torch.
"""
from __future__ import annotations

import sys
import warnings

import numpy as np

from ...tensor import Tensor, wrap
from ...ops.registry import dtype_name

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]

# SELU's negative saturation value -alpha * scale: alpha dropout sets dropped units to it
_ALPHA = 1.7580993408473766


def _check_p(p) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(shape, p: float, dt) -> Tensor:
    """Bernoulli(1 - p) draws (1.0 keep, 0.0 drop) from ember's default generator, as a tensor of ember
    dtype ``dt`` (drawn by the ``random_draw`` op, so a compiled function draws a fresh mask per call)."""
    from ...ops.random_ops import draw
    return draw(None, "keep", shape, dt, p)


def _noise_shape(x: Tensor, feature: bool) -> tuple:
    shp = tuple(x.shape)
    if not feature:
        return shp
    if len(shp) < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return shp[:2] + (1,) * (len(shp) - 2)


def _dropout_impl(input: Tensor, p: float, train: bool, inplace: bool, feature: bool, alpha: bool, name: str):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if feature and input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 0 or not train or input.numel() == 0:
        return input
    if not input._dtype.is_floating_point:
        raise RuntimeError(f"result type Float can't be cast to the desired output type {dtype_name(input._dtype)}")
    dt = input._dtype
    if p == 1:
        # everything dropped: torch multiplies by zero (keeping the sign of zero and NaN propagation)
        zero = wrap(np.zeros((), dt.np), dt)
        return input.mul_(zero) if inplace else input * zero
    keep = _keep_mask(_noise_shape(input, feature), p, dt)
    if not input.is_cpu:
        keep = keep.to(input.device)        # drawn with the CPU generator, then copied to the device
    if alpha:
        a = 1.0 / np.sqrt((_ALPHA * _ALPHA * p + 1.0) * (1.0 - p))
        # kept: a * x + a*alpha*p ; dropped: -a*alpha + a*alpha*p (the same affine shift, SELU-consistent)
        shift = (keep - 1.0) * float(_ALPHA * a) + float(_ALPHA * a * p)
        scale = keep * float(a)
        return input.mul_(scale).add_(shift) if inplace else input * scale + shift
    noise = keep / (1.0 - p)
    return input.mul_(noise) if inplace else input * noise


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` (training only)."""
    _check_p(p)
    return _dropout_impl(input, p, training, inplace, False, False, "dropout")


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout for SELU networks: dropped units take SELU's saturation value, then an affine map keeps
    mean and variance."""
    _check_p(p)
    return _dropout_impl(input, p, training, inplace, False, True, "alpha_dropout")


def feature_alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Alpha dropout of whole channels (one draw per ``(N, C)``)."""
    _check_p(p)
    return _dropout_impl(input, p, training, inplace, True, True, "feature_alpha_dropout")


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of a ``(N, C, L)`` or ``(C, L)`` input."""
    _check_p(p)
    nd = input.ndim
    if nd not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {nd}D input. Note that dropout1d "
                           "exists to provide channel-wise dropout on inputs with 1 spatial dimension, a channel "
                           "dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    if nd == 2:
        return _unbatched(input, p, training, inplace, "dropout1d")
    return _dropout_impl(input, p, training, inplace, True, False, "dropout1d")


def _warn_unusual_rank(name: str, nd: int, spatial: int) -> None:
    """torch's deprecation warning for a channel-wise dropout given neither ``spatial + 1`` nor
    ``spatial + 2`` dimensions."""
    if nd not in (spatial + 1, spatial + 2):
        warnings.warn(f"{name}: Received a {nd}-D input to {name}, which is deprecated and will result in an "
                      "error in a future release. To retain the behavior and silence this warning, please use "
                      f"dropout instead. Note that {name} exists to provide channel-wise dropout on inputs with "
                      f"{spatial} spatial dimensions, a channel dimension, and an optional batch dimension (i.e. "
                      f"{spatial + 1}D or {spatial + 2}D inputs).", stacklevel=3)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of a ``(N, C, H, W)`` input (a 3-D input is taken as ``(N, C, L)``, as torch does)."""
    _check_p(p)
    nd = input.ndim
    _warn_unusual_rank("dropout2d", nd, 2)
    if nd == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a batch "
                      "dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please "
                      "switch to using dropout1d instead.", stacklevel=2)
    return _dropout_impl(input, p, training, inplace, True, False, "dropout2d")


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of a ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input."""
    _check_p(p)
    nd = input.ndim
    _warn_unusual_rank("dropout3d", nd, 3)
    if nd != 5:
        return _unbatched(input, p, training, inplace, "dropout3d")
    return _dropout_impl(input, p, training, inplace, True, False, "dropout3d")


def _unbatched(input, p, training, inplace, name):
    """Channel dropout of an input without batch dim: run on a batch-of-one view."""
    r = _dropout_impl(input.unsqueeze(0), p, training, inplace, True, False, name)
    # in place, the write went through the view into ``input`` itself
    return input if inplace else r.squeeze(0)


# ---- top-level forms (torch.dropout(input, p, train), torch.dropout_, ...) -------------------------------

def _top(name, feature, alpha, inplace):
    def f(input, p, train):
        _check_p(p)
        return _dropout_impl(input, p, train, inplace, feature, alpha, name)
    f.__name__ = name
    f.__doc__ = f"``torch.{name}(input, p, train)``."
    return f


_pkg = sys.modules["ember"]
for _n, _feat, _alpha, _inpl in (("dropout", False, False, False), ("dropout_", False, False, True),
                                 ("feature_dropout", True, False, False), ("feature_dropout_", True, False, True),
                                 ("alpha_dropout", False, True, False), ("alpha_dropout_", False, True, True),
                                 ("feature_alpha_dropout", True, True, False),
                                 ("feature_alpha_dropout_", True, True, True)):
    if not hasattr(_pkg, _n):
        setattr(_pkg, _n, _top(_n, _feat, _alpha, _inpl))
