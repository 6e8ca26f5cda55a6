"""``GradScaler``: dynamic loss scaling for low-precision training, with torch's update rule.

``scale(loss)`` multiplies the loss by the current scale (2**16 to start); ``step(optimizer)`` divides
the gradients by it and runs ``optimizer.step()`` only when they are all finite; ``update()`` halves the
scale after a skipped step and doubles it after ``growth_interval`` clean steps in a row.

As in torch, the default device is "cuda": ember has no CUDA, so ``GradScaler()`` warns and disables
itself (every method becomes a pass-through). Use ``GradScaler("cpu")`` for a working scaler.
"""
from __future__ import annotations

import collections.abc
import warnings
from collections import defaultdict
from enum import Enum

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from ..autograd.grad_mode import no_grad

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state() -> dict:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """Scale the loss so small low-precision gradients do not underflow, and skip steps whose
    gradients overflowed.

        >>> scaler = ember.amp.GradScaler("cpu")
        >>> scaler.scale(loss).backward()
        >>> scaler.step(optimizer)      # skipped when a gradient is inf/NaN
        >>> scaler.update()

    Args:
        device: "cuda" (torch's default; disabled with a warning, ember has no CUDA) or "cpu".
        init_scale: the initial scale factor (2**16).
        growth_factor: multiplies the scale after ``growth_interval`` steps without inf/NaN (> 1).
        backoff_factor: multiplies the scale after a step with inf/NaN gradients (< 1).
        growth_interval: number of consecutive clean steps before the scale grows.
        enabled: False makes every method a pass-through (``step`` just calls ``optimizer.step()``).
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        self._enabled = enabled
        if self._device == "cuda" and enabled:
            warnings.warn("ember.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale: Tensor | None = None            # float32 0-dim tensor, made at the first scale()
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker: int | None = None
            self._per_optimizer_states = defaultdict(_fresh_state)

    # ---- scaling ---------------------------------------------------------------------------------

    def _lazy_init(self) -> None:
        from ..ops.creation import full
        self._scale = full((), self._init_scale, dtype=_dt.float32)
        self._growth_tracker = self._init_growth_tracker

    def _check_scale_growth_tracker(self, funcname: str) -> None:
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)

    def scale(self, outputs):
        """Multiply a tensor (or a nested list/tuple/iterable of tensors) by the scale factor.

        Returns ``outputs`` unchanged when the scaler is disabled."""
        if not self._enabled:
            return outputs
        return self._apply_scale(outputs)

    def _apply_scale(self, val):
        if isinstance(val, Tensor):
            if self._scale is None:
                self._lazy_init()
            return val * self._scale
        if isinstance(val, collections.abc.Iterable):
            it = map(self._apply_scale, val)
            return type(val)(it) if isinstance(val, (list, tuple)) else it
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    # ---- unscaling and stepping ------------------------------------------------------------------

    def _unscale_grads_(self, optimizer, inv_scale: Tensor, allow_fp16: bool) -> dict:
        found = 0.0
        on_device = []            # device gradients' "all finite" flags, read back once at the end
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    g = param.grad
                    if g is None:
                        continue
                    if not allow_fp16 and g._dtype is _dt.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    if type(g._data) is not np.ndarray:
                        on_device.append(g.isfinite().all())
                    elif not np.isfinite(g._data).all():
                        found = 1.0
                    # torch unscales every gradient, also when some are not finite
                    g.mul_(inv_scale)
            if on_device:
                from ..ops.shape_join import stack
                if not bool(stack(on_device).all().item()):
                    found = 1.0
        from ..ops.creation import full
        return {"cpu": full((), found, dtype=_dt.float32)}

    def unscale_(self, optimizer) -> None:
        """Divide the optimizer's gradients by the scale factor (once per step), recording whether any
        is inf/NaN. Call it before clipping gradients; ``step`` calls it when you did not."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        st = self._per_optimizer_states[id(optimizer)]
        if st["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        from ..ops.creation import full
        # the reciprocal is taken in double precision, then rounded to float32 (as torch)
        inv = full((), float(np.float32(1.0 / float(self._scale.item()))), dtype=_dt.float32)
        st["found_inf_per_device"] = self._unscale_grads_(optimizer, inv, False)
        st["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscale the gradients (unless ``unscale_`` already did) and run ``optimizer.step(*args,
        **kwargs)`` if they are all finite; otherwise skip it. Returns what ``optimizer.step`` returned
        (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        st = self._per_optimizer_states[id(optimizer)]
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(st["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not sum(v.item() for v in st["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        st["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None) -> None:
        """Update the scale: multiply by ``backoff_factor`` if any step since the last update saw inf/NaN
        gradients, by ``growth_factor`` after ``growth_interval`` clean updates in a row; or set it to
        ``new_scale`` (a float or a one-element float tensor)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                self._scale.fill_(new_scale)
            else:
                reason = ("new_scale should be a float or a 1-element float32 ember.Tensor "
                          "with requires_grad=False.")
                if not isinstance(new_scale, Tensor) or new_scale.device.type != self._device:
                    raise AssertionError(reason)
                if new_scale.numel() != 1:
                    raise AssertionError(reason)
                if new_scale.requires_grad is True:
                    raise AssertionError(reason)
                self._scale.copy_(new_scale.reshape(()))
        else:
            found = [f for s in self._per_optimizer_states.values() for f in s["found_inf_per_device"].values()]
            if len(found) == 0:
                raise AssertionError("No inf checks were recorded prior to update.")
            self._update_scale(sum(f.item() for f in found) > 0)
        self._per_optimizer_states = defaultdict(_fresh_state)

    def _update_scale(self, found_inf: bool) -> None:
        # torch's _amp_update_scale_, with the scale kept in float32
        scale = np.float32(self._scale.item())
        if found_inf:
            scale = np.float32(scale * np.float32(self._backoff_factor))
            self._growth_tracker = 0
        else:
            grown = self._growth_tracker + 1
            if grown == self._growth_interval:
                new = np.float32(scale * np.float32(self._growth_factor))
                if np.isfinite(new):          # never grow the scale to inf
                    scale = new
                grown = 0
            self._growth_tracker = grown
        self._scale.fill_(float(scale))

    # ---- accessors -------------------------------------------------------------------------------

    def get_scale(self) -> float:
        """The current scale as a Python float (1.0 when disabled)."""
        if self._enabled:
            return self._init_scale if self._scale is None else float(self._scale.item())
        return 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if self._enabled:
            return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker)
        return 0

    def is_enabled(self) -> bool:
        """Whether this scaler scales (False for a disabled or CUDA scaler in ember)."""
        return self._enabled

    def state_dict(self) -> dict:
        """``{"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}``, or an
        empty dict when disabled."""
        if self._enabled:
            return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                    "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                    "_growth_tracker": self._get_growth_tracker()}
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the state saved by ``state_dict`` (a no-op when disabled)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker = int(state_dict["_growth_tracker"])

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError("A GradScaler instance may only be pickled at the beginning of an iteration, "
                                     "or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
            state["_per_optimizer_states"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self._enabled:
            self._per_optimizer_states = defaultdict(_fresh_state)



class _DeprecatedDeviceGradScaler(GradScaler):
    """torch's deprecated per-device spellings (``torch.cpu.amp.GradScaler``, ``torch.cuda.amp.GradScaler``):
    ``GradScaler(device, args...)`` for the class's ``_DEVICE``, with torch's FutureWarning."""

    _DEVICE = "cpu"

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        d = self._DEVICE
        warnings.warn(f"`ember.{d}.amp.GradScaler(args...)` is deprecated. Please use "
                      f"`ember.amp.GradScaler('{d}', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__(d, init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
