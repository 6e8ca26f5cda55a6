"""Gradient clipping: clip_grad_norm_, clip_grad_value_, get_total_norm, clip_grads_with_norm_.

Eagerly on the CPU the work runs on the gradients' NumPy buffers in place (no autograd), as torch runs it
under no_grad; on a device, or while ember.compile captures, it runs as ember ops (``_total_norm_ops``,
``_scale_ops``), so the norm stays on the device and a compiled replay repeats the clipping.
Norms are computed per tensor and then combined as the norm of those norms, exactly as torch does
(which matters for the 0-"norm", a count of non-zero per-tensor norms).
"""
from __future__ import annotations

import types
import warnings

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap
from ...autograd.grad_mode import no_grad

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _as_list(tensors) -> list:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _vector_norm(a: np.ndarray, p: float) -> np.floating:
    """torch.linalg.vector_norm of a flat array, computed in ``a``'s dtype (half types in float32)."""
    if a.dtype.itemsize < 4:
        a = a.astype(np.float32)
    if p == 2.0:
        x = a.ravel()
        return np.sqrt(np.dot(x, x)) if x.size else a.dtype.type(0)
    if p == 1.0:
        return np.abs(a).sum(dtype=a.dtype)
    if p == np.inf or p == -np.inf:
        if a.size == 0:
            kind = "infinity" if p > 0 else "-infinity"
            raise RuntimeError(f"linalg.vector_norm cannot compute the {kind} norm on an empty tensor because the "
                               "operation does not have an identity")
        return np.abs(a).max() if p > 0 else np.abs(a).min()
    if p == 0.0:
        return a.dtype.type(np.count_nonzero(a))
    return (np.abs(a) ** p).sum(dtype=a.dtype) ** a.dtype.type(1.0 / p)


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` together (the norm of their per-tensor norms).

    Returns a 0-dim tensor in the tensors' promoted dtype (``tensor(0.)`` for no tensors).
    """
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return wrap(np.array(0.0, dtype=_dt.get_default_dtype().np))
    norms = []
    dtype = None
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"get_total_norm: expected Tensors, but got {type(t).__name__}")
        if not t._dtype.is_floating_point:
            raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                               f"{_dt_name(t._dtype)}")
    if _capturing() or _on_device(tensors[0]):
        return _total_norm_ops(tensors, norm_type, error_if_nonfinite)
    for t in tensors:
        # each per-tensor norm is a tensor of that tensor's dtype in torch: round it the same way
        norms.append(t._dtype.np.type(_vector_norm(t._data, norm_type)))
        dtype = t._dtype if dtype is None else _dt.promote_types(dtype, t._dtype)
    stacked = np.array(norms, dtype=dtype.np)
    total = np.asarray(_vector_norm(stacked, norm_type)).astype(dtype.np)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(_NONFINITE.format(norm_type))
    return wrap(np.array(total, dtype=dtype.np), dtype)


_NONFINITE = ("The total norm of order {} for gradients from `parameters` is non-finite, so it cannot be "
              "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
              "`error_if_nonfinite=False`")


def _capturing() -> bool:
    """ember.compile is recording: the clipping runs as ember ops, which a compiled replay repeats;
    eagerly it works on the NumPy buffers."""
    from ...compiler.user_api import is_compiling
    return is_compiling()


def _on_device(t: Tensor) -> bool:
    """``t`` lives on an accelerator: the work runs as ember ops there (no read-back of the norm)."""
    from ...devices.dispatch import is_device_array
    return is_device_array(t._data)


def _total_norm_ops(tensors, norm_type, error_if_nonfinite) -> Tensor:
    """``get_total_norm`` as ember ops: a 0-dim tensor on the tensors' device (as torch's on cuda/mps),
    recorded by ember.compile while capturing; only ``error_if_nonfinite`` reads it back."""
    from ...linalg import vector_norm
    from ...ops.shape_join import stack
    dev = tensors[0].device
    for t in tensors:
        if t.device != dev:
            raise RuntimeError(f"get_total_norm: Expected all tensors to be on the same device, but found at least "
                               f"two devices, {dev} and {t.device}!")
    with no_grad():
        norms = [vector_norm(t, norm_type) for t in tensors]       # each in its tensor's dtype, as torch
        dtype = norms[0]._dtype
        for n in norms[1:]:
            dtype = _dt.promote_types(dtype, n._dtype)
        total = vector_norm(stack([n.to(dtype) for n in norms]), norm_type)
    if error_if_nonfinite and not bool(total.isfinite()):          # (a guarded read while captured)
        raise RuntimeError(_NONFINITE.format(norm_type))
    return total


def _dt_name(d) -> str:
    return {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "int16": "Short",
            "int8": "Char", "uint8": "Byte", "bool": "Bool"}.get(d.name, d.name)


def clip_grads_with_norm_(parameters, max_norm: float, total_norm, foreach=None) -> None:
    """Scale the gradients of ``parameters`` by ``min(1, max_norm / (total_norm + 1e-6))`` in place."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    max_norm = float(max_norm)
    if len(grads) == 0:
        return
    if _on_device(grads[0]) or (isinstance(total_norm, Tensor) and _capturing()):
        _scale_ops(grads, max_norm, total_norm)
        return
    if isinstance(total_norm, Tensor):
        tn = total_norm._data.reshape(())[()]
    else:
        tn = np.float32(total_norm) if isinstance(total_norm, float) else total_norm
    # computed as torch does on a 0-dim tensor: in total_norm's dtype, NaN propagating through the clamp
    coef = np.minimum(max_norm / (tn + 1e-6), 1.0)
    for g in grads:
        d = g._data
        d *= coef.astype(d.dtype) if d.dtype.itemsize < 4 else coef
        g._bump()


def _scale_ops(grads, max_norm: float, total_norm) -> None:
    """The scaling as ember in-place ops (on a device: ``coef`` stays there, no read-back; while capturing:
    recorded by ember.compile)."""
    with no_grad():
        if not isinstance(total_norm, Tensor):
            total_norm = wrap(np.array(total_norm, dtype=np.float32)).to(grads[0].device)
        coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype) if g._dtype.np.itemsize < 4 else coef)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None) -> Tensor:
    """Clip the gradients of ``parameters`` in place so that their total ``norm_type``-norm is at most
    ``max_norm``; returns the total norm measured before clipping (a 0-dim tensor)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if is_generator and len(parameters) == 0:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=3)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    """Deprecated alias of :func:`clip_grad_norm_` (warns with FutureWarning, as torch)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp the gradients of ``parameters`` in place to ``[-clip_value, clip_value]``."""
    clip_value = float(clip_value)
    for p in _as_list(parameters):
        g = p.grad
        if g is not None:
            with no_grad():     # an in-place op (not a write to the array), so ember.compile records it
                g.clamp_(-clip_value, clip_value)
