"""Optimizer base class: param groups, per-parameter state, state_dict in torch's layout.

Updates run on the parameters' NumPy buffers in place (as torch's foreach/fused paths do on their
storage), then bump each parameter's version counter so autograd's saved-tensor checks stay sound.
"""
from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any, Iterable

from ..tensor import Tensor, _RemovableHandle, wrap
from ..autograd.grad_mode import no_grad


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    """Base class: holds ``param_groups`` (list of dicts) and ``state`` (param -> dict)."""

    def __init__(self, params: Iterable, defaults: dict):
        self.defaults = defaults
        self.state: dict = defaultdict(dict)
        self.param_groups: list = []
        self._step_pre_hooks: dict = {}
        self._step_post_hooks: dict = {}
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}")
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for g in param_groups:
            self.add_param_group(g)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += "\n"
            s += f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        s += ")"
        return s

    def add_param_group(self, param_group: dict) -> None:
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + type(p).__name__)
            if p.grad_fn is not None:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        params = param_group["params"]
        if len(params) != len({id(p) for p in params}):
            import warnings
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error", stacklevel=3)
        seen = set()
        for g in self.param_groups:
            seen.update(id(p) for p in g["params"])
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        if p.grad.grad_fn is not None:
                            p.grad = p.grad.detach()
                        p.grad._data[...] = 0
                        p.grad._bump()

    # ---- state dict (torch's layout: params become integer ids) ------------------------------------
    def state_dict(self) -> dict:
        mapping: dict = {}
        start = 0

        def pack(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed
        groups = [pack(g) for g in self.param_groups]
        state = {mapping[id(k)]: v for k, v in self.state.items() if id(k) in mapping}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = copy.deepcopy(state_dict)
        groups = self.param_groups
        saved_groups = state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = {}
        for g, s in zip(groups, saved_groups):
            for old, p in zip(s["params"], g["params"]):
                id_map[old] = p
        state: dict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                state[p] = {key: (val.to(p.dtype) if isinstance(val, Tensor) and key != "step" and val.is_floating_point() else val)
                            for key, val in v.items()}
            else:
                state[k] = v
        self.state = state
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s = dict(s)
            s["params"] = g["params"]
            new_groups.append(s)
        self.param_groups = new_groups

    # ---- hooks -------------------------------------------------------------------------------------
    def register_step_pre_hook(self, hook):
        k = object()
        self._step_pre_hooks[k] = hook
        return _RemovableHandle(self._step_pre_hooks, k)

    def register_step_post_hook(self, hook):
        k = object()
        self._step_post_hooks[k] = hook
        return _RemovableHandle(self._step_post_hooks, k)

    def _run_closure(self, closure):
        if closure is None:
            return None
        from ..autograd.grad_mode import enable_grad
        with enable_grad():
            return closure()

    def step(self, closure=None):
        """Run one update. Subclasses implement ``_step_group(group)``."""
        for h in list(self._step_pre_hooks.values()):
            h(self, (), {})
        loss = self._run_closure(closure)
        with no_grad():
            for group in self.param_groups:
                self._step_group(group)
        for h in list(self._step_post_hooks.values()):
            h(self, (), {})
        return loss

    def _step_group(self, group: dict) -> None:
        raise NotImplementedError

    @staticmethod
    def _grad_array(p: Tensor, maximize: bool):
        g = p.grad._data
        return -g if maximize else g


def _scalar_step(value: float = 0.0) -> Tensor:
    """torch keeps ``state['step']`` as a float32 0-dim tensor."""
    import numpy as np
    return wrap(np.array(value, dtype=np.float32))
