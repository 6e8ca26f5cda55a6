"""``ember.nn.utils.prune``: magnitude / random / structured pruning with torch.nn.utils.prune's API.

Pruning ``module.<name>`` moves the parameter to ``<name>_orig``, adds a ``<name>_mask`` buffer, and a
forward pre-hook recomputes ``module.<name> = <name>_orig * <name>_mask`` before every call. Pruning the
same tensor again prunes only the entries (or channels) still unpruned and multiplies the masks.
``remove`` makes the pruning permanent (the product becomes the parameter again).

Here: ``identity``, ``random_unstructured``, ``l1_unstructured``, ``random_structured``,
``ln_structured``, ``global_unstructured``, ``custom_from_mask``, ``remove``, ``is_pruned`` and the
method classes behind them. ``amount`` is a fraction in [0, 1] or a count.
"""
from __future__ import annotations

import numbers

__all__ = ["BasePruningMethod", "Identity", "RandomUnstructured", "L1Unstructured", "RandomStructured",
           "LnStructured", "CustomFromMask", "identity", "random_unstructured", "l1_unstructured",
           "random_structured", "ln_structured", "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


def _check_amount(amount) -> None:
    if isinstance(amount, bool) or not isinstance(amount, numbers.Real) or amount < 0 or (
            not isinstance(amount, numbers.Integral) and amount > 1):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _count(amount, n: int) -> int:
    """How many of ``n`` entries ``amount`` (fraction or count) prunes; torch's checks and rounding."""
    _check_amount(amount)
    if isinstance(amount, numbers.Integral):
        if amount > n:
            raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={n}")
        return int(amount)
    return round(amount * n)


class BasePruningMethod:
    """A pruning method: ``compute_mask(t, default_mask)`` says which entries of ``t`` stay (1) or go (0)."""

    PRUNING_TYPE = "unstructured"
    _tensor_name: str

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @property
    def name(self) -> str:
        """The pruned tensor's name (the attribute the shared hook-removal helper matches on)."""
        return self._tensor_name

    def compute_mask(self, t, default_mask):
        raise NotImplementedError(f"{type(self).__name__} does not define compute_mask")

    def apply_mask(self, module):
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return mask.to(dtype=orig.dtype) * orig

    def _combined_mask(self, t, mask):
        """This method's mask restricted to what ``mask`` (an earlier pruning) left, times ``mask``."""
        new = mask.clone()
        if self.PRUNING_TYPE == "unstructured":
            keep = mask == 1
            new[keep] = self.compute_mask(t[keep], default_mask=mask[keep]).to(dtype=new.dtype)
            return new
        dim = self.dim if self.dim >= 0 else t.dim() + self.dim
        others = tuple(d for d in range(t.dim()) if d != dim)
        alive = (mask != 0).sum(dim=others) != 0 if others else mask != 0   # channels with something left
        idx = alive.nonzero().flatten()
        sub_t, sub_mask = t.index_select(dim, idx), mask.index_select(dim, idx)
        new.index_copy_(dim, idx, self.compute_mask(sub_t, default_mask=sub_mask).to(dtype=new.dtype))
        return new

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        from ...ops.creation import ones_like
        old = None
        for k, hook in list(module._forward_pre_hooks.items()):
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
                old = (k, hook)
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old is None:
            orig = getattr(module, name)
            if importance_scores is not None and tuple(importance_scores.shape) != tuple(orig.shape):
                raise ValueError(f"importance_scores should have the same shape as parameter {name} of {module}")
            default_mask = ones_like(orig)
        else:
            orig = getattr(module, name + "_orig")
            default_mask = getattr(module, name + "_mask").detach().clone()
        scores = importance_scores if importance_scores is not None else orig
        mask = method._combined_mask(scores.detach(), default_mask)     # may raise: the module is untouched
        if old is None:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
        if name + "_mask" in module._buffers:
            module._buffers[name + "_mask"] = mask
        else:
            module.register_buffer(name + "_mask", mask)
        setattr(module, name, method.apply_mask(module))
        if old is None:
            module.register_forward_pre_hook(method)
        else:
            module._forward_pre_hooks[old[0]] = method
        return method

    def remove(self, module):
        from ..parameter import Parameter
        weight = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        orig.data = weight.data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig if isinstance(orig, Parameter) else Parameter(weight.detach()))


class Identity(BasePruningMethod):
    """Prune nothing (the mask is all ones)."""

    def compute_mask(self, t, default_mask):
        return default_mask


class _Unstructured(BasePruningMethod):
    """Prune the ``amount`` entries that rank lowest by ``_rank(t)``."""

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def _rank(self, t):
        raise NotImplementedError

    def compute_mask(self, t, default_mask):
        from ... import topk
        k = _count(self.amount, t.numel())
        mask = default_mask.clone()
        if k:
            idx = topk(self._rank(t).flatten(), k, largest=False).indices
            mask.view(-1)[idx] = 0
        return mask


class RandomUnstructured(_Unstructured):
    """Prune ``amount`` entries chosen uniformly at random."""

    def _rank(self, t):
        from ... import rand_like
        return rand_like(t.float())


class L1Unstructured(_Unstructured):
    """Prune the ``amount`` entries of smallest absolute value (of ``importance_scores`` if given)."""

    def _rank(self, t):
        return t.abs()


class _Structured(BasePruningMethod):
    PRUNING_TYPE = "structured"

    def _channel_mask(self, t, default_mask, keep):
        """``default_mask`` with every channel along ``dim`` outside ``keep`` (indices) zeroed."""
        from ...ops.creation import zeros_like
        mask = zeros_like(default_mask)
        sel = [slice(None)] * t.dim()
        sel[self.dim] = keep
        mask[tuple(sel)] = 1
        return mask * default_mask


class RandomStructured(_Structured):
    """Prune ``amount`` whole channels along ``dim``, chosen at random."""

    def __init__(self, amount, dim: int = -1):
        self.amount, self.dim = amount, dim

    def compute_mask(self, t, default_mask):
        from ... import rand, topk
        n = t.shape[self.dim]
        k = _count(self.amount, n)
        keep = topk(rand(n), n - k).indices
        return self._channel_mask(t, default_mask, keep)


class LnStructured(_Structured):
    """Prune the ``amount`` channels along ``dim`` with the smallest L-``n`` norm."""

    def __init__(self, amount, n, dim: int = -1):
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask(self, t, default_mask):
        from ... import topk
        from ...linalg import vector_norm
        dim = self.dim if self.dim >= 0 else t.dim() + self.dim
        n_ch = t.shape[dim]
        k = _count(self.amount, n_ch)
        others = tuple(d for d in range(t.dim()) if d != dim)
        order = {"fro": 2}.get(self.n, self.n)
        norms = vector_norm(t, ord=order, dim=others) if others else t.abs()
        keep = topk(norms, n_ch - k).indices
        self.dim = dim
        return self._channel_mask(t, default_mask, keep)


class CustomFromMask(BasePruningMethod):
    """Prune where a given ``mask`` is zero."""

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    def _combined_mask(self, t, mask):
        return self.compute_mask(t, mask)


def identity(module, name):
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune across several ``(module, name)`` pairs at once: ``pruning_method`` (an unstructured method
    class) decides on all their entries pooled together."""
    from ... import cat
    from ...ops.creation import ones_like
    parameters = list(parameters)
    importance_scores = importance_scores or {}
    scores, masks = [], []
    for module, name in parameters:
        t = importance_scores.get((module, name), getattr(module, name))
        scores.append(t.detach().flatten())
        mask = getattr(module, name + "_mask", None)
        masks.append((mask if mask is not None else ones_like(t)).detach().flatten())
    method = pruning_method(**kwargs)
    method._tensor_name = "global"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")
    final = method._combined_mask(cat(scores), cat(masks))
    start = 0
    for module, name in parameters:
        p = getattr(module, name)
        custom_from_mask(module, name, final[start:start + p.numel()].view_as(p))
        start += p.numel()


def remove(module, name):
    """Make the pruning of ``module.<name>`` permanent and drop the hook, ``_orig`` and ``_mask``."""
    from .weight_norm import _remove_reparametrization
    return _remove_reparametrization(module, name, BasePruningMethod, "Pruning")


def is_pruned(module) -> bool:
    """Whether any submodule of ``module`` carries a pruning hook."""
    return any(isinstance(h, BasePruningMethod) for m in module.modules() for h in m._forward_pre_hooks.values())
