"""Weight averaging, as ``torch.optim.swa_utils``: ``AveragedModel`` (SWA's running mean or an EMA of a
model's parameters), the averaging functions, ``SWALR`` (anneal to a constant SWA learning rate) and
``update_bn`` (recompute BatchNorm statistics for the averaged weights).

The averaging arithmetic follows torch's CPU path: the default running mean updates each tensor as
``avg + (p - avg) / (n + 1)``; the multi-tensor EMA is ``avg.lerp_(p, 1 - decay)`` for floating tensors,
so averaged weights agree with torch's bit for bit given the same inputs.
"""
from __future__ import annotations

import itertools
import math
from copy import deepcopy

from .. import dtypes as _dt
from ..tensor import Tensor
from ..autograd.grad_mode import no_grad
from ..nn.modules.module import Module
from ._schedulers.base import LRScheduler, _per_group

__all__ = ["AveragedModel", "SWALR", "update_bn", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def get_ema_multi_avg_fn(decay: float = 0.999):
    """An in-place EMA over lists of tensors: ``ema = ema * decay + p * (1 - decay)``."""
    @no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        if ema_param_list and ema_param_list[0]._dtype.is_floating_point:
            for p_ema, p in zip(ema_param_list, current_param_list):
                p_ema.lerp_(p, 1 - decay)
        else:
            for p_ema, p in zip(ema_param_list, current_param_list):
                p_ema.copy_(p_ema * decay + p * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """An in-place running mean over lists of tensors: ``avg += (p - avg) / (n + 1)``."""
    @no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        if averaged_param_list and averaged_param_list[0]._dtype.is_floating_point:
            w = 1 / (num_averaged + 1)
            for p_avg, p in zip(averaged_param_list, current_param_list):
                p_avg.lerp_(p, w.item() if isinstance(w, Tensor) else w)
        else:
            for p_avg, p in zip(averaged_param_list, current_param_list):
                diff = p - p_avg
                if isinstance(num_averaged, Tensor):
                    p_avg.addcdiv_(diff, num_averaged + 1)
                else:
                    p_avg.add_(diff, alpha=1.0 / (num_averaged + 1))
    return swa_update


def get_ema_avg_fn(decay: float = 0.999):
    """A per-tensor EMA: returns ``decay * ema + (1 - decay) * p``."""
    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """A per-tensor running mean: returns ``avg + (p - avg) / (n + 1)``."""
    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A deep copy of ``model`` whose parameters (and buffers, with ``use_buffers=True``) hold an average
    of ``model``'s, updated by ``update_parameters(model)``; ``n_averaged`` counts the updates.

        >>> ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
        >>> ema.update_parameters(model)      # after each optimizer.step()
    """

    def __init__(self, model: Module, device=None, avg_fn=None, multi_avg_fn=None, use_buffers: bool = False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        from ..ops.creation import tensor
        self.register_buffer("n_averaged", tensor(0, dtype=_dt.int64))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current parameters into the average (the first call copies them)."""
        if self.use_buffers:
            self_params = itertools.chain(self.module.parameters(), self.module.buffers())
            model_params = itertools.chain(model.parameters(), model.buffers())
        else:
            self_params, model_params = self.parameters(), model.parameters()
        avg_list, cur_list = [], []
        first = int(self.n_averaged) == 0
        for p_avg, p in zip(self_params, model_params):
            p_ = p.detach()
            avg_list.append(p_avg.detach())
            cur_list.append(p_)
            if first:
                p_avg.detach().copy_(p_)
        if not first:
            if self.multi_avg_fn is not None or self.avg_fn is None:
                # torch groups tensors by dtype before calling a multi-tensor function
                groups: dict = {}
                for a, c in zip(avg_list, cur_list):
                    ga, gc = groups.setdefault(a._dtype, ([], []))
                    ga.append(a)
                    gc.append(c)
                for ga, gc in groups.values():
                    if self.multi_avg_fn is not None:
                        self.multi_avg_fn(ga, gc, self.n_averaged)
                    else:
                        avg = get_swa_avg_fn()
                        for a, c in zip(ga, gc):
                            a.copy_(avg(a, c, self.n_averaged))
            else:
                for a, c in zip(avg_list, cur_list):
                    a.copy_(self.avg_fn(a, c, self.n_averaged))
        if not self.use_buffers:
            # buffers are not averaged: keep them in sync with the source model
            with no_grad():
                for b_avg, b in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b.detach())
        with no_grad():
            self.n_averaged += 1


@no_grad()
def update_bn(loader, model: Module, device=None) -> None:
    """Recompute the BatchNorm running statistics of ``model`` with one pass over ``loader`` (cumulative
    averages: momentum None), then restore each layer's momentum and the model's train/eval mode."""
    from ..nn.modules.batchnorm import _BatchNorm
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for input in loader:  # noqa: A001
        if isinstance(input, (list, tuple)):
            input = input[0]  # noqa: A001
        if device is not None:
            input = input.to(device)  # noqa: A001
        model(input)
    for module, m in momenta.items():
        module.momentum = m
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each param group's lr from its current value to ``swa_lr`` over ``anneal_epochs`` steps
    ("cos" or "linear"), then hold it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs: int = 10, anneal_strategy: str = "cos", last_epoch: int = -1):
        for lr, group in zip(_per_group("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}")
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list:
        self._warn_outside_step()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(self.optimizer.param_groups, prev_lrs)]
