"""Learning-rate schedulers with torch.optim.lr_scheduler's API, semantics and state_dict layout.

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
import math
import types
import warnings
import weakref
from bisect import bisect_right
from collections import Counter

from ..tensor import Tensor
from .optimizer import Optimizer

__all__ = ["LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR",
           "SequentialLR", "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR",
           "CosineAnnealingWarmRestarts", "OneCycleLR", "PolynomialLR", "LRScheduler"]

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


def _lambdas(optimizer, lr_lambda) -> list:
    if not isinstance(lr_lambda, (list, tuple)):
        return [lr_lambda] * len(optimizer.param_groups)
    if len(lr_lambda) != len(optimizer.param_groups):
        raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
    return list(lr_lambda)


class _LambdaState:
    """state_dict support for schedulers holding user functions: only callable objects' ``__dict__`` is saved."""

    def state_dict(self) -> dict:
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                            for fn in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        lr_lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        state_dict["lr_lambdas"] = lr_lambdas
        for fn, saved in zip(self.lr_lambdas, lr_lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


class LambdaLR(_LambdaState, LRScheduler):
    """lr = initial_lr * lr_lambda(epoch) (one function, or one per param group)."""

    def __init__(self, optimizer: Optimizer, lr_lambda, last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaState, LRScheduler):
    """lr *= lr_lambda(epoch) at every step after the first."""

    def __init__(self, optimizer: Optimizer, lr_lambda, last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        if self._is_initial:
            return self._current()
        return [g["lr"] * fn(self.last_epoch) for fn, g in zip(self.lr_lambdas, self.optimizer.param_groups)]


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each milestone epoch (repeated milestones multiply repeatedly)."""

    def __init__(self, optimizer: Optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        if self.last_epoch not in self.milestones:
            return self._current()
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [g["lr"] * factor for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list:
        ms = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(ms, self.last_epoch) for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """Scale the lr by ``factor`` until epoch ``total_iters``, then restore it."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return self._current()
        return [g["lr"] * (1.0 / self.factor) for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list:
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the lr linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` epochs."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        span = self.end_factor - self.start_factor
        ratio = 1.0 + span / (self.total_iters * self.start_factor + (self.last_epoch - 1) * span)
        return [g["lr"] * ratio for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list:
        return [base * (self.start_factor + (self.end_factor - self.start_factor)
                        * min(self.total_iters, self.last_epoch) / self.total_iters) for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        if self._is_initial:
            return self._current()
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list:
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


def _check_children(owner: str, optimizer, schedulers) -> None:
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"{owner} at index {i} should have `optimizer` as its attribute.")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(f"{owner} does not support `ReduceLROnPlateau` scheduler as it requires additional "
                             "kwargs to be specified when calling `step`, but got one at index "
                             f"{i} in the given schedulers sequence.")
        if optimizer != s.optimizer:
            raise ValueError(f"{owner} expects all schedulers to belong to the same optimizer, but got scheduler "
                             f"{s.__class__.__name__} at index {i} has {s.optimizer}, which is different from "
                             f"{optimizer.__class__.__name__}.")


class _ContainerState:
    """state_dict support for schedulers made of other schedulers (saved as their state dicts)."""

    def state_dict(self) -> dict:
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        children = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        state_dict["_schedulers"] = children
        for s, saved in zip(self._schedulers, children):
            s.load_state_dict(saved)


class SequentialLR(_ContainerState, LRScheduler):
    """Run ``schedulers[i]`` between ``milestones[i-1]`` and ``milestones[i]``; each restarts at its milestone."""

    def __init__(self, optimizer: Optimizer, schedulers: list, milestones: list, last_epoch: int = -1) -> None:
        if len(schedulers) < 1:
            raise ValueError(f"{self.__class__.__name__} expects at least one scheduler, but got no scheduler.")
        _check_children(self.__class__.__name__, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                             f"number of milestones to be equal to {len(milestones)}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # undo the initial steps the children took when they were built, then start the first one afresh
        for group in self.optimizer.param_groups:
            _set_group_value(group, "lr", group["initial_lr"])
        self.recursive_undo()
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    def recursive_undo(self, sched=None) -> None:
        """Step back ``last_epoch`` of every (nested) child scheduler by one."""
        s = self if sched is None else sched
        if hasattr(s, "_schedulers"):
            for child in s._schedulers:
                self.recursive_undo(child)
        elif hasattr(s, "last_epoch"):
            s.last_epoch -= 1

    def step(self) -> None:
        """Advance one epoch with the scheduler whose interval contains it."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched._update_lr(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()


class PolynomialLR(LRScheduler):
    """Decay the lr as ``(1 - epoch / total_iters) ** power`` until ``total_iters``."""

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        factor = ((1.0 - self.last_epoch / self.total_iters)
                  / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [g["lr"] * factor for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list:
        return [base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the initial lr down to ``eta_min`` over ``T_max`` epochs (SGDR without restarts)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._current()
        if self._step_count == 1 and e > 0:
            return [lo + (base - lo) * (1 + math.cos(e * math.pi / T)) / 2 for base in self.base_lrs]
        if (e - 1 - T) % (2 * T) == 0:
            return [g["lr"] + (base - lo) * (1 - math.cos(math.pi / T)) / 2
                    for base, g in zip(self.base_lrs, self.optimizer.param_groups)]
        ratio = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T))
        return [ratio * (g["lr"] - lo) + lo for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list:
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class ChainedScheduler(_ContainerState, LRScheduler):
    """Step several schedulers (acting on one optimizer) together, in order."""

    def __init__(self, schedulers, optimizer: Optimizer | None = None) -> None:
        if len(schedulers) < 1:
            raise ValueError(f"{self.__class__.__name__} expects at least one scheduler to be chained, but got no "
                             "scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _check_children(self.__class__.__name__, optimizer, schedulers)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = _group_values(self._schedulers[-1].optimizer, "lr")

    def step(self) -> None:
        """Step every chained scheduler once."""
        for s in self._schedulers:
            s.step()
        self._last_lr = _group_values(self._schedulers[-1].optimizer, "lr")


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` when a metric has not improved for ``patience`` epochs."""

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0, min_lr=0,
                 eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _group_values(self.optimizer, "lr")
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None) -> None:
        """Record this epoch's metric and reduce the lr after ``patience`` epochs without improvement."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0            # bad epochs during cooldown don't count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr(epoch)
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _group_values(self.optimizer, "lr")

    def _reduce_lr(self, epoch) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(groups)}) differs from when "
                    f"`ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), usually due to a new param group "
                    "being added to the optimizer. Please modify the `min_lrs` field to match the length of the "
                    "`optimizer` param groups.")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for i, group in enumerate(groups):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, self.min_lrs[i])
            if old_lr - new_lr > self.eps:
                _set_group_value(group, "lr", new_lr)

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a, best) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min" and self.threshold_mode == "abs":
            return a < best - self.threshold
        if self.mode == "max" and self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode) -> None:
        if mode not in {"min", "max"}:
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in {"rel", "abs"}:
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._init_is_better(mode=self.mode, threshold=self.threshold, threshold_mode=self.threshold_mode)


def _set_momentum(group: dict, use_beta1: bool, value) -> None:
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


class CyclicLR(LRScheduler):
    """Cycle the lr between ``base_lr`` and ``max_lr`` (triangular, triangular2, exp_range or a custom
    ``scale_fn``), cycling the momentum (or Adam's beta1) inversely; step it after every batch."""

    def __init__(self, optimizer: Optimizer, base_lr, max_lr, step_size_up: int = 2000, step_size_down=None,
                 mode: str = "triangular", gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum=0.8, max_momentum=0.9, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _set_group_value(group, "lr", lr)
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ["triangular", "triangular2", "exp_range"] and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in self.optimizer.defaults
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for m_mom, b_mom, group in zip(self.max_momentums, self.base_momentums, optimizer.param_groups):
                    _set_momentum(group, self.use_beta1, m_mom)
                    group["max_momentum"] = m_mom
                    group["base_momentum"] = b_mom
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref = _triangular
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = _triangular2
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref = functools.partial(_exp_range, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x) -> float:
        """The amplitude scale for cycle (or iteration) ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    def get_lr(self) -> list:
        self._warn_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        arg = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = []
        for base_lr, max_lr in zip(self.base_lrs, self.max_lrs):
            base_height = (max_lr - base_lr) * scale_factor
            lrs.append(base_lr + base_height * self.scale_fn(arg))
        if self.cycle_momentum:
            moms = []
            for base_m, max_m in zip(self.base_momentums, self.max_momentums):
                base_height = (max_m - base_m) * scale_factor
                moms.append(max_m - base_height * self.scale_fn(arg))
            for group, m in zip(self.optimizer.param_groups, moms):
                _set_momentum(group, self.use_beta1, m)
        return lrs

    def state_dict(self) -> dict:
        sd = super().state_dict()
        sd.pop("_scale_fn_ref", None)
        fn = sd.pop("_scale_fn_custom")
        sd["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            sd["_scale_fn_custom"] = fn.__dict__.copy()
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        fn = state_dict.pop("_scale_fn_custom")
        super().load_state_dict(state_dict)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()


def _triangular(x) -> float:
    return 1.0


def _triangular2(x) -> float:
    return 1 / (2.0 ** (x - 1))


def _exp_range(gamma, x) -> float:
    return gamma ** x


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing with warm restarts (SGDR): period ``T_0``, multiplied by ``T_mult`` after each restart.

    ``step(epoch)`` accepts fractional epochs (e.g. ``epoch + batch / n_batches``).
    """

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base in self.base_lrs]

    def step(self, epoch=None) -> None:
        """Advance one epoch, or set the (possibly fractional) ``epoch``."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._get_lr_called_within_step = True
        try:
            values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            _set_group_value(group, "lr", lr)
        self._last_lr = _group_values(self.optimizer, "lr")


class OneCycleLR(LRScheduler):
    """The 1cycle policy: warm up from ``max_lr / div_factor`` to ``max_lr``, then anneal to
    ``initial_lr / final_div_factor`` (optionally in three phases), cycling momentum (or Adam's beta1)
    inversely; step it after every batch."""

    def __init__(self, optimizer: Optimizer, max_lr, total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")

        def phase(end_step, start_lr, end_lr, start_m, end_m):
            return {"end_step": end_step, "start_lr": start_lr, "end_lr": end_lr, "start_momentum": start_m,
                    "end_momentum": end_m}
        if three_phase:
            self._schedule_phases = [
                phase(float(pct_start * self.total_steps) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                phase(float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr", "base_momentum",
                      "max_momentum"),
                phase(self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._schedule_phases = [
                phase(float(pct_start * self.total_steps) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                phase(self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _per_group("max_lr", self.optimizer, max_lr)
        if last_epoch == -1:
            for lr, group in zip(max_lrs, self.optimizer.param_groups):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if self.cycle_momentum:
            if "momentum" not in self.optimizer.defaults and "betas" not in self.optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in self.optimizer.defaults
            max_moms = _per_group("max_momentum", optimizer, max_momentum)
            base_moms = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for m_mom, b_mom, group in zip(max_moms, base_moms, optimizer.param_groups):
                    _set_momentum(group, self.use_beta1, m_mom)
                    group["max_momentum"] = m_mom
                    group["base_momentum"] = b_mom
        super().__init__(optimizer, last_epoch)

    def _anneal_func(self, start, end, pct):
        kind = getattr(self, "_anneal_func_type", None)
        if kind is None:                       # schedulers pickled by old versions kept the function itself
            return self.anneal_func(start, end, pct)
        if kind == "cos":
            return self._annealing_cos(start, end, pct)
        if kind == "linear":
            return self._annealing_linear(start, end, pct)
        raise ValueError(f"Unknown _anneal_func_type: {kind}")

    @staticmethod
    def _annealing_cos(start, end, pct):
        """Cosine from ``start`` (pct=0) to ``end`` (pct=1)."""
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)

    @staticmethod
    def _annealing_linear(start, end, pct):
        """Straight line from ``start`` (pct=0) to ``end`` (pct=1)."""
        return (end - start) * pct + start

    def get_lr(self) -> list:
        self._warn_outside_step()
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(f"Tried to step {step_num} times. The specified number of total steps is "
                             f"{self.total_steps}")
        lrs = []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, ph in enumerate(self._schedule_phases):
                end_step = ph["end_step"]
                if step_num <= end_step or i == last:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = self._anneal_func(group[ph["start_lr"]], group[ph["end_lr"]], pct)
                    if self.cycle_momentum:
                        mom = self._anneal_func(group[ph["start_momentum"]], group[ph["end_momentum"]], pct)
                    break
                start_step = ph["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                _set_momentum(group, self.use_beta1, mom)
        return lrs
