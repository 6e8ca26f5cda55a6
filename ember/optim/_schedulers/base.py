"""The scheduler base class ``LRScheduler`` and the helpers every scheduler uses on param-group values.

Every scheduler keeps ``last_epoch``, ``base_lrs`` (the groups' ``initial_lr``) and ``_last_lr``
(``get_last_lr()``). Calling ``step()`` advances ``last_epoch`` and writes new ``lr`` values into the
optimizer's param groups. Most schedulers use torch's *chainable* form (the new lr is computed from the
group's current lr), so several schedulers can act on one optimizer; passing an explicit epoch to
``step(epoch)`` switches to the closed form where one exists (deprecated in torch, with its warning).

``state_dict()`` is the scheduler's ``__dict__`` minus the optimizer (lambdas are stored only if they
are callable objects, as their ``__dict__``), exactly as torch lays it out.
"""
from __future__ import annotations

import functools
import warnings
import weakref

from ...tensor import Tensor
from ..optimizer import Optimizer

_EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where possible. "
    "Please use `scheduler.step()` to step the scheduler. During the deprecation, if epoch is different from "
    "None, the closed form is used instead of the new chainable form, where available. Please open an issue "
    "if you are unable to replicate your use case: https://github.com/pytorch/pytorch/issues/new/choose.")


# ---- helpers on param-group values (an lr may be a float or a 1-element tensor) ---------------------
def _copy_value(v):
    return v.clone() if isinstance(v, Tensor) else v


def _group_values(optimizer: Optimizer, key: str) -> list:
    """The ``key`` value of every param group (tensors cloned so later in-place fills don't alias)."""
    return [_copy_value(g[key]) for g in optimizer.param_groups]


def _set_group_value(group: dict, key: str, value) -> None:
    """Write ``value`` into ``group[key]``: in place if the group holds a tensor, else by assignment."""
    if isinstance(group[key], Tensor):
        group[key].fill_(float(value))
    else:
        group[key] = value


def _per_group(name: str, optimizer: Optimizer, value) -> list:
    """Broadcast a scalar option to one value per param group, or check a per-group list's length."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. {name} has "
                             f"{len(value)} values, param_groups has {len(optimizer.param_groups)}.")
        return [_copy_value(v) for v in value]
    return [_copy_value(value) for _ in optimizer.param_groups]


class _ListState:
    """state_dict support for a scheduler with a list attribute ``_list_attr`` that is not saved as it is:
    each item is saved as ``_save_item(item)`` and restored by ``_load_item(item, saved)``."""

    _list_attr = ""

    def state_dict(self) -> dict:
        key = self._list_attr
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", key)}
        sd[key] = [self._save_item(x) for x in getattr(self, key)]
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        key = self._list_attr
        saved = state_dict.pop(key)
        self.__dict__.update(state_dict)
        state_dict[key] = saved
        for x, item in zip(getattr(self, key), saved):
            self._load_item(x, item)


def _track_optimizer_step(optimizer: Optimizer) -> None:
    """Wrap the optimizer instance's ``step`` to record that it ran (for the call-order warning)."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    func = optimizer.step.__func__
    opt_ref = weakref.ref(optimizer)

    @functools.wraps(func)
    def step(*args, **kwargs):
        opt = opt_ref()
        opt._opt_called = True
        return func.__get__(opt, opt.__class__)(*args, **kwargs)
    step._wrapped_by_lr_sched = True
    optimizer.step = step


class LRScheduler:
    """Base class: adjusts the ``lr`` of an optimizer's param groups once per ``step()``.

    Subclasses implement ``get_lr()`` (the chainable form) and optionally ``_get_closed_form_lr()``.
    """

    _get_lr_called_within_step: bool = False
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _copy_value(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming scheduler with "
                        "last_epoch >= 0.\nThis typically happens when:\n1. You're trying to resume training from a "
                        "checkpoint but haven't properly loaded the optimizer state\n2. You're using last_epoch >= 0 "
                        "for a fresh training run (not recommended)")
        self.base_lrs: list = _group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _track_optimizer_step(optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        """Set the lrs for ``last_epoch + 1`` right at construction (torch's initial step)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict:
        """Everything in ``__dict__`` except the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the attributes saved by ``state_dict``."""
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list:
        """The learning rates the last ``step()`` set, one per param group."""
        return self._last_lr

    def get_lr(self) -> list:
        """The learning rates for ``self.last_epoch`` (chainable form)."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_lr()")

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or jump to ``epoch``, deprecated) and write the new lrs into the optimizer."""
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn(
                    "Seems like `optimizer.step()` has been overridden after learning rate scheduler initialization. "
                    "Please, make sure to call `optimizer.step()` before `lr_scheduler.step()`. See more details at "
                    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate", UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(
                    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, you "
                    "should call them in the opposite order: `optimizer.step()` before `lr_scheduler.step()`.  Failure "
                    "to do this will result in PyTorch skipping the first value of the learning rate schedule. See "
                    "more details at https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                    UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(_EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        groups = self.optimizer.param_groups
        if len(values) != len(groups):
            raise ValueError(f"{type(self).__name__}.get_lr() returned {len(values)} values for {len(groups)} "
                             "param groups")
        for group, lr in zip(groups, values):
            _set_group_value(group, "lr", lr)
        self._last_lr = _group_values(self.optimizer, "lr")

    def _warn_outside_step(self) -> None:
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=3)

    def _current(self) -> list:
        return _group_values(self.optimizer, "lr")


class _LRScheduler(LRScheduler):
    """Deprecated alias of :class:`LRScheduler` kept for old code."""
