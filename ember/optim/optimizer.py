"""Optimizer base class: param groups, per-parameter state, hooks, state_dict in torch's layout.

Updates run on the parameters' NumPy buffers in place (as torch's foreach/fused paths do on their
storage), then bump each parameter's version counter so autograd's saved-tensor checks stay sound.

``state_dict()`` has torch's layout (``{"state": {int: {...}}, "param_groups": [{..., "params": [int]}]}``
with the same per-optimizer state keys and tensor dtypes), so ``ember.save(opt.state_dict())`` loads in
torch and a torch optimizer checkpoint loads here.
"""
from __future__ import annotations

import functools
import warnings
from collections import OrderedDict, defaultdict
from copy import deepcopy
from itertools import chain
from typing import Iterable

import numpy as np

from ..dtypes import float32, float64, get_default_dtype
from ..tensor import Tensor, _RemovableHandle, wrap
from ..autograd.grad_mode import no_grad, enable_grad

__all__ = ["Optimizer", "register_optimizer_step_pre_hook", "register_optimizer_step_post_hook", "required"]


class _RequiredParameter:
    """Singleton marking a hyper-parameter that every param group must give."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

_global_optimizer_pre_hooks: OrderedDict = OrderedDict()
_global_optimizer_post_hooks: OrderedDict = OrderedDict()


def _add_hook(hooks: OrderedDict, hook, prepend: bool = False) -> _RemovableHandle:
    key = object()
    hooks[key] = hook
    if prepend:
        hooks.move_to_end(key, last=False)
    return _RemovableHandle(hooks, key)


def register_optimizer_step_pre_hook(hook) -> _RemovableHandle:
    """Register a pre-step hook ``hook(optimizer, args, kwargs)`` run before every optimizer's step."""
    return _add_hook(_global_optimizer_pre_hooks, hook)


def register_optimizer_step_post_hook(hook) -> _RemovableHandle:
    """Register a post-step hook ``hook(optimizer, args, kwargs)`` run after every optimizer's step."""
    return _add_hook(_global_optimizer_post_hooks, hook)


def _to_scalar(x):
    """A hyper-parameter given as a one-element tensor becomes a NumPy scalar of its dtype.

    torch keeps such hyper-parameters as 0-dim tensors, so arithmetic on them (``lr / bias_correction``)
    runs in the tensor's dtype; NumPy scalars promote with Python floats the same way.
    """
    if isinstance(x, Tensor):
        if x.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        return x._data.reshape(())[()]
    return x


def _scalar_step(value: float = 0.0) -> Tensor:
    """torch keeps ``state['step']`` (and similar counters) as a 0-dim tensor: float32, or float64 while the
    default dtype is float64."""
    dt = float64 if get_default_dtype() is float64 else float32
    return wrap(np.array(value, dtype=dt.np), dt)


def _lerp_(a: np.ndarray, b: np.ndarray, w: float) -> None:
    """``a.lerp_(b, w)`` in place with torch's two-sided formula (exact at both ends)."""
    if w < 0.5:
        a += (b - a) * w
    else:
        t = b - a
        t *= 1 - w
        np.subtract(b, t, out=a)


def _check_options(*, reject_nan: bool = True, **options) -> None:
    """Raise torch's ``ValueError`` for the first invalid constructor option, checking in the order given.

    ``lr`` may be a one-element tensor; each of ``betas`` lies in [0, 1), ``rho`` in [0, 1], ``etas`` as
    ``0 < etaminus < 1 < etaplus``; every other option is non-negative. torch's SGD only rejects values
    below zero: ``reject_nan=False`` lets NaN through as it does.
    """
    for name, value in options.items():
        if name == "betas":
            for i in (0, 1):
                if not 0.0 <= value[i] < 1.0:
                    raise ValueError(f"Invalid beta parameter at index {i}: {value[i]}")
        elif name == "rho":
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"Invalid rho value: {value}")
        elif name == "etas":
            if not 0.0 < value[0] < 1.0 < value[1]:
                raise ValueError(f"Invalid eta values: {value[0]}, {value[1]}")
        else:
            if name == "lr" and isinstance(value, Tensor) and value.numel() != 1:
                raise ValueError("Tensor lr must be 1-element")
            if (not 0.0 <= value) if reject_nan else value < 0.0:
                what = {"lr": "learning rate", "eps": "epsilon value"}.get(name, f"{name} value")
                raise ValueError(f"Invalid {what}: {value}")


def _check_fused(fused, foreach, differentiable) -> None:
    """torch's checks on ``fused=True`` (which ember accepts and runs on its one CPU path)."""
    if fused:
        if differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def _hook_step(func):
    """Wrap a class's ``step`` so the global and per-instance step hooks run around it (once per call)."""
    @functools.wraps(func)
    def step(*args, **kwargs):
        self = args[0]
        for pre in chain(tuple(_global_optimizer_pre_hooks.values()), tuple(self._optimizer_step_pre_hooks.values())):
            result = pre(self, args, kwargs)
            if result is not None:
                if isinstance(result, tuple) and len(result) == 2:
                    args, kwargs = result
                else:
                    raise RuntimeError(f"{func} must return None or a tuple of (new_args, new_kwargs), but got {result}.")
        out = func(*args, **kwargs)
        self._optimizer_step_code()
        for post in chain(tuple(self._optimizer_step_post_hooks.values()), tuple(_global_optimizer_post_hooks.values())):
            post(self, args, kwargs)
        return out
    step.hooked = True
    return step


# set by ember.compiler while capturing: hook(optimizer, group) -> True when it did the update itself
CAPTURE_STEP = [None]
# set once device tensors exist (ember.devices.dispatch.activate): hook(optimizer, group) -> True when it
# updated the group with device kernels (ember.compiler.cl_optim)
DEVICE_STEP = [None]


class Optimizer:
    """Base class of all optimizers: ``param_groups`` (list of dicts) and ``state`` (param -> dict).

    Subclasses either fill in the shared per-parameter loop (``_step_group``, run by the base ``step``
    for every group under ``no_grad``, after the closure with grad enabled) with ``_group_options``,
    ``_init_state`` and ``_update``, or override ``step`` entirely.
    """

    #: state entries torch keeps as 0-dim tensors, which older checkpoints stored as Python numbers
    _scalar_state: tuple = ("step",)
    #: options that param groups of older checkpoints may lack (and ``defaults`` too), with torch's fill-in
    _group_fallbacks: dict = {}

    def __init__(self, params: Iterable, defaults: dict):
        self.defaults = defaults
        self._optimizer_step_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_post_hooks: OrderedDict = OrderedDict()
        self._patch_step_function()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {_typename(params)}")
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for g in param_groups:
            self.add_param_group(g)

    # ---- pickling / repr ----------------------------------------------------------------------------
    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks", "_optimizer_state_dict_pre_hooks",
                     "_optimizer_state_dict_post_hooks", "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            if name not in self.__dict__:
                self.__dict__[name] = OrderedDict()
        self._patch_step_function()
        self.defaults.setdefault("differentiable", False)
        # older checkpoints may lack newer options and keep 'step' as a number: fill in as torch does
        for group in self.param_groups:
            for k, v in self.defaults.items():
                if k != "params" and v is not required:
                    group.setdefault(k, v)
            for k, v in self._group_fallbacks.items():
                group.setdefault(k, v)
            for p in group["params"]:
                st = self.state.get(p)
                if st:
                    for k in self._scalar_state:
                        if k in st and not isinstance(st[k], Tensor):
                            st[k] = _scalar_step(float(st[k]))

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

    # ---- param groups -------------------------------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (with optional per-group options) to ``param_groups``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        # named parameters: (name, tensor) pairs as given by module.named_parameters()
        names, tensors = [], []
        for p in param_group["params"]:
            if isinstance(p, tuple):
                names.append(p[0])
                tensors.append(p[1])
            else:
                tensors.append(p)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names
        for p in tensors:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(p))
            if not self.defaults.get("differentiable", None) and not (p.grad_fn is None or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        if len(tensors) != len({id(p) for p in tensors}):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = set()
        for g in self.param_groups:
            seen.update(id(p) for p in g["params"])
            if ("param_names" in param_group) != ("param_names" in g):
                txt = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {txt} to the optimizer")
        if any(id(p) in seen for p in tensors):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized tensors: to None (default) or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    # assigned even when it is None already: a capture (ember.compile) then records that
                    # the function clears the gradient, so the first step's trace serves the later steps
                    p.grad = None
                    continue
                g = p.grad
                if g is not None:
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g._rg = False
                    g._data[...] = 0
                    g._bump()

    # ---- state dict (torch's layout: params become integer ids) ------------------------------------
    def state_dict(self) -> dict:
        """The optimizer state as ``{"state": {id: {...}}, "param_groups": [...]}`` (torch's layout).

        The state tensors are the live ones (not copies), as in torch.
        """
        for hook in tuple(self._optimizer_state_dict_pre_hooks.values()):
            hook(self)
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
        state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        sd = {"state": state, "param_groups": groups}
        for hook in tuple(self._optimizer_state_dict_post_hooks.values()):
            res = hook(self, sd)
            if res is not None:
                sd = res
        return sd

    @staticmethod
    def _process_value_according_to_param_policy(param, value, param_id, param_groups, key=None):
        # floating state follows the parameter's dtype; 'step' keeps its own (float32) dtype
        if key == "step":
            return value
        if value.device != param.device:
            # state follows its parameter's device, as torch (a checkpoint loaded with map_location="cpu"
            # into an optimizer of device parameters)
            dt = param._dtype if param.is_floating_point() else value._dtype
            return value.detach().to(param.device, dt)
        if param.is_floating_point() and value._dtype is not param._dtype and type(value._data) is not np.ndarray:
            return value.detach().to(param._dtype)
        if param.is_floating_point() and value._dtype is not param._dtype:
            return wrap(value._data.astype(param._dtype.np), param._dtype)
        if type(value._data) is np.ndarray and not value._data.flags.writeable:
            # updates write into state tensors in place: give read-only (e.g. memory-mapped) data its own copy
            return wrap(value._data.copy(), value._dtype)
        return value

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state dict made by ``state_dict()`` here or by torch (parameters matched by position)."""
        state_dict = state_dict.copy()
        for hook in tuple(self._optimizer_load_state_dict_pre_hooks.values()):
            res = hook(self, state_dict)
            if res is not None:
                state_dict = res
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        raw_groups = state_dict["param_groups"]

        def cast(param, value, param_id, key=None):
            if isinstance(value, Tensor):
                return self._process_value_according_to_param_policy(param, value, param_id, raw_groups, key)
            if isinstance(value, dict):
                return {k: cast(param, v, param_id, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v, param_id) for v in value)
            return value

        state: defaultdict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                state[p] = cast(p, v, k)
            else:
                state[k] = v
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                s["param_names"] = g["param_names"]
            new_groups.append(s)
        self.__setstate__({"state": state, "param_groups": new_groups})
        for hook in tuple(self._optimizer_load_state_dict_post_hooks.values()):
            hook(self)

    # ---- hooks -------------------------------------------------------------------------------------
    def _patch_step_function(self) -> None:
        self._zero_grad_profile_name = f"Optimizer.zero_grad#{self.__class__.__name__}.zero_grad"
        cls = type(self)
        if not getattr(cls.step, "hooked", False):
            cls.step = _hook_step(cls.step)

    def _optimizer_step_code(self) -> None:
        """Entry point for profilers: runs after every ``step`` (empty, as in torch)."""

    def register_step_pre_hook(self, hook) -> _RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs before ``step``; it may return new ``(args, kwargs)``."""
        return _add_hook(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook) -> _RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs after ``step``."""
        return _add_hook(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook, prepend: bool = False) -> _RemovableHandle:
        """``hook(optimizer)`` runs before ``state_dict`` builds the dict."""
        return _add_hook(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend: bool = False) -> _RemovableHandle:
        """``hook(optimizer, state_dict)`` runs on the result of ``state_dict``; it may return a new dict."""
        return _add_hook(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend: bool = False) -> _RemovableHandle:
        """``hook(optimizer, state_dict)`` runs before ``load_state_dict``; it may return a new dict."""
        return _add_hook(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend: bool = False) -> _RemovableHandle:
        """``hook(optimizer)`` runs after ``load_state_dict``."""
        return _add_hook(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # ---- stepping ----------------------------------------------------------------------------------
    def step(self, closure=None):
        """Run one update (re-evaluating the model with ``closure`` first if given); returns its loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                self._check_group(group)
                # while ember.compile captures, supported optimizers update through ember ops
                if CAPTURE_STEP[0] is not None and CAPTURE_STEP[0](self, group):
                    continue
                if DEVICE_STEP[0] is not None and DEVICE_STEP[0](self, group):
                    continue
                self._step_group(group)
        return loss

    #: the loop gives each parameter its state on first use (``state['step']``, then ``_init_state``) and
    #: advances ``state['step']`` before every update; SGD, whose only state is a momentum buffer it seeds
    #: itself, turns this off
    _step_counter = True

    def _step_group(self, group: dict) -> None:
        """torch's single-tensor update of one param group, for every parameter that has a gradient.

        The gradient is negated under ``maximize``; ``state['step']`` is created (a 0-dim float32 tensor,
        the rest of the state by ``_init_state``) on first use and advanced; weight decay, for optimizers
        with that option, is L2 (``grad + wd * param``) or, with ``decoupled_weight_decay``, shrinks the
        parameter by ``1 - lr * wd``. Then ``_update`` changes the parameter's buffer in place and its
        version counter is bumped.
        """
        opts = self._group_options(group)
        defaults = self.defaults
        lr = _to_scalar(group["lr"])
        wd = group.get("weight_decay", 0) if "weight_decay" in defaults else 0
        decoupled = "decoupled_weight_decay" in defaults and group.get("decoupled_weight_decay", False)
        maximize = group["maximize"]
        counts = self._step_counter
        state = self.state
        update = self._update
        st = step = None
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            d = p._data
            g = grad._data
            if type(d) is not np.ndarray:
                self._step_on_host(p, group)
                continue
            if maximize:
                g = -g
            if counts:
                st = state[p]
                if not st:
                    self._start_state(p, group)
                step_arr = st["step"]._data
                step_arr += 1
                step = float(step_arr)
            if wd != 0:
                if decoupled:
                    d *= 1 - lr * wd
                else:
                    g = g + d * wd                  # grad.add(param, alpha=wd)
            update(p, d, g, st, step, opts)
            p._bump()

    def _step_on_host(self, p: Tensor, group: dict) -> None:
        """The update of a parameter on a device, run on host copies (a counted CPU fallback, see
        ``ember.opencl.fallback_counts()``): parameter, gradient and device state are copied to the host,
        updated by the same code as on the CPU, and copied back. The state stays on the device."""
        from ..devices import opencl
        from ..devices.dispatch import to_device
        dev = p.device
        opencl.record_fallback(f"{type(self).__name__}.step", "optimizer updates have no device kernels yet",
                               device=dev)
        st = self.state[p]
        on_dev = [k for k, v in st.items() if isinstance(v, Tensor) and not v.is_cpu]
        for k in on_dev:
            st[k] = to_device(st[k], "cpu")
        host_p = Tensor.__new__(Tensor)
        host_p._data, host_p._dtype = opencl.to_numpy(p._data), p._dtype
        host_p.grad = to_device(p.grad, "cpu")
        self.state[host_p] = st
        try:
            self._step_group(dict(group, params=[host_p]))
        finally:
            del self.state[host_p]
        opencl.copy_(p._data, opencl.from_numpy(host_p._data, dev.index))
        for k, v in st.items():
            if isinstance(v, Tensor) and v.is_cpu and (k in on_dev or v.dim() > 0):
                st[k] = to_device(v, dev)
        self.state[p] = st

    def _start_state(self, p: Tensor, group: dict) -> dict:
        """A parameter's first state: ``step`` (0), then what ``_init_state`` adds (torch's key order)."""
        st = self.state[p]
        st["step"] = _scalar_step(0.0)
        self._init_state(p, st, group)
        return st

    def _group_options(self, group: dict):
        """The group's options ``_update`` needs, read once per group (as scalars, in a tuple)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _group_options, _init_state and _update "
                                  "(or override step())")

    def _init_state(self, p: Tensor, st: dict, group: dict) -> None:
        """Add the optimizer's state for ``p`` to ``st`` (which already holds ``step``)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _init_state")

    def _update(self, p: Tensor, d: np.ndarray, g: np.ndarray, st: dict, step: float, opts) -> None:
        """Update the parameter buffer ``d`` in place from the gradient ``g`` (maximize and weight decay
        applied; ``g`` may be the gradient's own buffer, so never written) and the state ``st``, which is
        at ``step`` (``st``/``step`` are None without a step counter)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _update")

    def _check_group(self, group: dict) -> None:
        """Reject the options ember does not implement (torch's GPU-only and autograd-through-step paths)."""
        if group.get("capturable"):
            raise AssertionError("If capturable=True, params and state_steps must be on supported devices: "
                                 "['cuda', 'xpu', 'hpu', 'privateuseone', 'xla'].")
        if group.get("differentiable"):
            raise RuntimeError(f"{type(self).__name__}: differentiable=True (autograd through the optimizer step) "
                               "is not supported by ember; use differentiable=False")

    @staticmethod
    def _zeros_state(p: Tensor) -> Tensor:
        """A zero tensor shaped and typed like ``p`` (torch.zeros_like(p, memory_format=preserve_format))."""
        return wrap(np.zeros_like(p._data), p._dtype)


def _typename(o) -> str:
    if isinstance(o, Tensor):
        return "ember.Tensor" if type(o) is Tensor else f"{type(o).__module__}.{type(o).__qualname__}"
    module = type(o).__module__
    name = type(o).__qualname__
    return name if module in ("builtins", None) else f"{module}.{name}"
