"""nn.Module: attribute-registered parameters, buffers and submodules, with torch's behaviour.

State lives in three ordered dicts (``_parameters``, ``_buffers``, ``_modules``) filled by
``__setattr__``; ``state_dict`` keys, ``__repr__`` text and hook order follow torch so that a model
definition and its checkpoints move between the two libraries unchanged.
"""
from __future__ import annotations

import itertools
import warnings
from collections import OrderedDict, namedtuple
from typing import Iterator

from ...tensor import Tensor, _RemovableHandle
from ..parameter import Parameter, Buffer, is_lazy
from ... import dtypes as _dt
from ...autograd import grad_mode as _gm


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns (torch's class of the same name and path)."""

    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


_global_forward_pre_hooks: dict = OrderedDict()
_global_forward_hooks: dict = OrderedDict()


def _addindent(s: str, n: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(" " * n + line for line in lines)


class Module:
    """Base class for all neural-network modules (subclass it and define ``forward``)."""

    training: bool
    _version: int = 1
    call_super_init: bool = False
    dump_patches: bool = False

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() takes no arguments, got {args} {kwargs}")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = {}
        d["_forward_hooks_always_called"] = {}
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = {}
        d["_backward_hooks"] = OrderedDict()
        d["_backward_pre_hooks"] = OrderedDict()
        d["_state_dict_hooks"] = OrderedDict()
        d["_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_post_hooks"] = OrderedDict()

    forward = None  # subclasses define it

    # ---- registration -----------------------------------------------------------------------
    def _check_new_name(self, kind: str, store: str, name) -> None:
        """torch's checks of a buffer's or parameter's name (``kind``) before it enters ``store``."""
        if store not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in self.__dict__[store]:
            raise KeyError(f"attribute '{name}' already exists")

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        self._check_new_name("buffer", "_buffers", name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (torch Tensor or None required)")
        if isinstance(tensor, Buffer):
            persistent = tensor.persistent
            tensor = Tensor.detach(tensor) if not tensor._rg else tensor
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        self._check_new_name("parameter", "_parameters", name)
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' (torch.nn.Parameter or None required)")
        if param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                             "created explicitly. To express '{name}' as a function of another Tensor, compute "
                             "the value in the forward() method.")
        self._parameters[name] = param

    def add_module(self, name: str, module: "Module | None") -> None:
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {type(name).__name__}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            for store in (d, self._buffers, self._modules, self._non_persistent_buffers_set):
                if name in store:
                    if store is d:
                        del d[name]
                    elif isinstance(store, set):
                        store.discard(name)
                    else:
                        del store[name]
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = d.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                for store in (d, self._parameters, self._buffers):
                    if name in store:
                        del store[name]
                self._non_persistent_buffers_set.discard(name)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                    "(torch.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = d.get("_buffers")
                if isinstance(value, Buffer) or (buffers is not None and name in buffers):
                    if value is not None and not isinstance(value, Tensor):
                        raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                        "(torch.nn.Buffer, torch.Tensor or None expected)")
                    if isinstance(value, Buffer):
                        persistent = value.persistent
                    else:
                        persistent = name not in self._non_persistent_buffers_set
                    if isinstance(value, Buffer) and name in d:
                        del d[name]
                    self.register_buffer(name, value, persistent)
                else:
                    object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        d = self.__dict__
        if "_parameters" in d:
            p = d["_parameters"]
            if name in p:
                return p[name]
        if "_buffers" in d:
            b = d["_buffers"]
            if name in b:
                return b[name]
        if "_modules" in d:
            m = d["_modules"]
            if name in m:
                return m[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self)) + list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __getstate__(self):
        return self.__dict__.copy()

    # ---- calling ----------------------------------------------------------------------------
    def _call_impl(self, *args, **kwargs):
        if not (self._forward_hooks or self._forward_pre_hooks or _global_forward_hooks or _global_forward_pre_hooks
                or self._backward_hooks or self.__dict__.get("_backward_pre_hooks")):
            return self.forward(*args, **kwargs)
        for hid, hook in itertools.chain(_global_forward_pre_hooks.items(), list(self._forward_pre_hooks.items())):
            if hid in self._forward_pre_hooks_with_kwargs:
                r = hook(self, args, kwargs)
                if r is not None:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError(f"forward pre-hook must return None or a tuple of (new_args, new_kwargs), but got {r}.")
                    args, kwargs = r
            else:
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        bw_hook = None
        if (self._backward_hooks or self.__dict__.get("_backward_pre_hooks")) and _gm.is_grad_enabled():
            bw_hook = _BackwardHook(self)
            args = bw_hook.setup_input_hook(args)
        result = self.forward(*args, **kwargs)
        for hid, hook in itertools.chain(_global_forward_hooks.items(), list(self._forward_hooks.items())):
            if hid in self._forward_hooks_with_kwargs:
                r = hook(self, args, kwargs, result)
            else:
                r = hook(self, args, result)
            if r is not None:
                result = r
        if bw_hook is not None:
            result = bw_hook.setup_output_hook(result)
        return result

    def __call__(self, *args, **kwargs):
        return self._call_impl(*args, **kwargs)

    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False):
        return _register(self._forward_pre_hooks, hook, prepend,
                         self._forward_pre_hooks_with_kwargs if with_kwargs else None)

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False, always_call: bool = False):
        return _register(self._forward_hooks, hook, prepend,
                         self._forward_hooks_with_kwargs if with_kwargs else None)

    def register_full_backward_hook(self, hook, prepend: bool = False):
        """``hook(module, grad_input, grad_output) -> tuple | None``, called once the gradients with
        respect to the module's positional tensor inputs are computed (grad_input has one entry per
        positional argument, None where no gradient); a returned tuple replaces grad_input."""
        return _register(self._backward_hooks, hook, prepend, None)

    def register_backward_hook(self, hook):
        """Deprecated in torch; ember gives it the semantics of ``register_full_backward_hook``."""
        return _register(self._backward_hooks, hook, False, None)

    def register_full_backward_pre_hook(self, hook, prepend: bool = False):
        """``hook(module, grad_output) -> tuple | None``, called when the gradients with respect to the
        module's outputs are computed; a returned tuple replaces grad_output."""
        if "_backward_pre_hooks" not in self.__dict__:
            self.__dict__["_backward_pre_hooks"] = OrderedDict()
        return _register(self._backward_pre_hooks, hook, prepend, None)

    def register_state_dict_pre_hook(self, hook):
        return _register(self._state_dict_pre_hooks, hook, False, None)

    def register_load_state_dict_post_hook(self, hook):
        return _register(self._load_state_dict_post_hooks, hook, False, None)

    def register_load_state_dict_pre_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs)`` runs before this module loads its entries (it may edit ``state_dict`` in place)."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(self, hook, with_module: bool = False):
        if with_module:
            module = self
            inner = hook

            def hook(*args):
                return inner(module, *args)
        return _register(self._load_state_dict_pre_hooks, hook, False, None)

    def register_state_dict_post_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata)`` runs after this module's entries (and its
        children's) are added to ``state_dict``."""
        return _register(self._state_dict_hooks, hook, False, None)

    _register_state_dict_hook = register_state_dict_post_hook

    # ---- traversal ----------------------------------------------------------------------------
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True):
        if memo is None:
            memo = set()
        if id(self) in memo and remove_duplicate:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def get_submodule(self, target: str) -> "Module":
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def get_parameter(self, target: str) -> Parameter:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        p = getattr(mod, name)
        if not isinstance(p, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return p

    def get_buffer(self, target: str) -> Tensor:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return mod._buffers[name]

    # ---- modes and conversion --------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if set_to_none:
                p.grad = None     # even when None already (see Optimizer.zero_grad: one trace serves all steps)
            elif p.grad is not None:
                if p.grad.grad_fn is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                p.grad.zero_()

    def apply(self, fn) -> "Module":
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn, recurse: bool = True) -> "Module":
        """Replace every parameter's and buffer's data by ``fn(tensor)`` (keeping Parameter identity)."""
        if recurse:
            for m in self.children():
                m._apply(fn)
        from ...autograd.grad_mode import no_grad
        for key, p in self._parameters.items():
            if p is None:
                continue
            with no_grad():
                new = fn(p)
            if new is not p:
                p._data = new._data
                p._dtype = new._dtype
                p._vc = None
            if p.grad is not None:
                with no_grad():
                    g = fn(p.grad)
                p.grad = g
        for key, b in self._buffers.items():
            if b is not None:
                self._buffers[key] = fn(b)
        return self

    def to(self, *args, **kwargs) -> "Module":
        dtype = kwargs.get("dtype")
        device = kwargs.get("device")
        for a in args:
            if isinstance(a, _dt.dtype):
                dtype = a
            elif isinstance(a, Tensor):
                dtype = a._dtype
            elif a is not None:
                device = a
        if device is not None:
            from ...tensor import _check_device
            device = _check_device(device)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired dtype={dtype}")
        fmt = kwargs.get("memory_format")
        if dtype is None and device is None and fmt is None:
            return self
        non_blocking = kwargs.get("non_blocking", False)

        def move(t):
            if device is not None:
                t = t.to(device, non_blocking=non_blocking)
            if fmt is not None and t.dim() in (4, 5):     # (as torch: the 4-D/5-D weights take the format)
                t = t.contiguous(memory_format=fmt)
            return t.to(dtype) if dtype is not None and t.is_floating_point() else t
        return self._apply(move)

    def cpu(self) -> "Module":
        return self.to("cpu")

    def to_empty(self, *, device, recurse: bool = True) -> "Module":
        """Parameters and buffers replaced by uninitialised tensors on ``device`` (a model built on meta)."""
        from ...ops.creation import empty_like
        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def opencl(self, device=None) -> "Module":
        """Move every parameter and buffer to the OpenCL device ``device`` (an index; default 0)."""
        return self.to(f"opencl:{device or 0}")

    def cuda(self, device=None) -> "Module":
        raise RuntimeError("ember has no CUDA device: use the 'cpu' device")

    def type(self, dst_type) -> "Module":
        return self._apply(lambda t: t.to(dst_type))

    def float(self) -> "Module":
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self) -> "Module":
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self) -> "Module":
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self) -> "Module":
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    def share_memory(self) -> "Module":
        return self

    def compile(self, *args, **kwargs) -> None:
        """Compile this module's forward in place (``ember.compile``) — available once the compiler lands."""
        try:
            from ... import compile as _compile
        except ImportError:
            raise NotImplementedError("Module.compile: ember.compile is not available yet") from None
        self.__dict__["_compiled_call_impl"] = _compile(self._call_impl, *args, **kwargs)

    # ---- state dict ---------------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        extra = type(self).get_extra_state
        if extra is not Module.get_extra_state:
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        if args:
            destination = args[0] if len(args) > 0 else destination
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self.__dict__.get("_state_dict_hooks", {}).values():
            r = hook(self, destination, prefix, local_metadata)
            if r is not None:
                destination = r
        return destination

    def get_extra_state(self):
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state):
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called.")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        from ...autograd.grad_mode import no_grad
        for hook in self.__dict__.get("_load_state_dict_pre_hooks", {}).values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent_buffers = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent_buffers.items()) if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key in state_dict:
                input_param = state_dict[key]
                if not isinstance(input_param, Tensor):
                    error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or '
                                      f"Tensor-like object from checkpoint but received {type(input_param)}")
                    continue
                if is_lazy(param):
                    continue        # lazy into lazy: nothing to copy (lazy modules, nn/modules/lazy.py)
                if tuple(input_param.shape) != tuple(param.shape):
                    error_msgs.append(f"size mismatch for {key}: copying a param with shape {input_param.shape} "
                                      f"from checkpoint, the shape in current model is {param.shape}.")
                    continue
                try:
                    with no_grad():
                        if assign:
                            if isinstance(param, Parameter):
                                new = Parameter(input_param if not isinstance(input_param, Parameter) else input_param.detach(),
                                                requires_grad=param.requires_grad)
                                setattr(self, name, new)
                            else:
                                setattr(self, name, input_param)
                        else:
                            param.copy_(input_param)
                except Exception as ex:
                    error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model '
                                      f"are {param.shape} and whose dimensions in the checkpoint are "
                                      f"{input_param.shape}, an exception occurred : {ex.args}.")
            elif strict:
                missing_keys.append(key)
        extra_key = prefix + "_extra_state"
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix) and key != extra_key:
                    input_name = key[len(prefix):].split(".", 1)
                    if len(input_name) > 1:
                        if input_name[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)

        def load(module, prefix=""):
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            module._load_from_state_dict(state_dict, prefix, local_metadata, True, missing, unexpected, errors, assign)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")
            incompatible = _IncompatibleKeys(missing, unexpected)
            for hook in module._load_state_dict_post_hooks.values():
                hook(module, incompatible)
        load(self)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(self.__class__.__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # ---- repr ---------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def _get_name(self) -> str:
        return self.__class__.__name__

    def __repr__(self) -> str:
        extra_lines = []
        extra = self.extra_repr()
        if extra:
            extra_lines = extra.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


class _BackwardHook:
    """Module backward hooks for one call: identity autograd Functions wrap the positional tensor inputs
    and the (top-level) tensor outputs. The outputs' identity sees grad_output first (and runs the
    pre-hooks); the inputs' identity then sees grad_input and runs the full backward hooks."""

    def __init__(self, module):
        self.module = module
        self.n_inputs = 0
        self.input_idx = None        # positions of the tensor inputs, None when none needs a gradient
        self.grad_outputs = None

    def _pack(self, idx, grads, n):
        out = [None] * n
        for i, g in zip(idx, grads):
            out[i] = g
        return tuple(out)

    def _identity(self, values, idx, on_backward):
        from ...autograd.function import Function

        class BackwardHookFunction(Function):
            @staticmethod
            def forward(ctx, *ts):
                ctx.mark_non_differentiable(*[t for t in ts if not t.requires_grad])
                ctx.set_materialize_grads(False)
                return ts

            @staticmethod
            def backward(ctx, *grads):
                return on_backward(grads)

        new = BackwardHookFunction.apply(*[values[i] for i in idx])
        values = list(values)
        for i, t in zip(idx, new):
            values[i] = t
        return values

    def setup_input_hook(self, args):
        self.n_inputs = len(args)
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not any(args[i].requires_grad for i in idx):
            return args
        self.input_idx = idx

        def on_input_grads(grads):
            grad_inputs = self._pack(idx, grads, self.n_inputs)
            for hook in list(self.module._backward_hooks.values()):
                res = hook(self.module, grad_inputs, self.grad_outputs)
                if res is None:
                    continue
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                if len(res) != len(grad_inputs):
                    raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(res)}, "
                                       f"but expected {len(grad_inputs)}")
                grad_inputs = res
            return tuple(grad_inputs[i] for i in idx)

        return tuple(self._identity(args, idx, on_input_grads))

    def setup_output_hook(self, result):
        single = not isinstance(result, tuple)
        outs = (result,) if single else result
        idx = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not idx:
            return result

        def on_output_grads(grads):
            grad_outputs = self._pack(idx, grads, len(outs))
            for hook in list(self.module.__dict__.get("_backward_pre_hooks", {}).values()):
                res = hook(self.module, grad_outputs)
                if res is None:
                    continue
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                if len(res) != len(grad_outputs):
                    raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got "
                                       f"{len(res)}, but expected {len(grad_outputs)}")
                grad_outputs = res
            self.grad_outputs = grad_outputs
            if self.input_idx is None:
                # no input needs a gradient: the hooks fire now, with grad_input all None
                if self.module._backward_hooks:
                    warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                                  "outputs since no inputs require gradients. See https://docs.pytorch.org/docs/main/"
                                  "generated/torch.nn.Module.html#torch.nn.Module.register_full_backward_hook for "
                                  "more details.", stacklevel=2)
                none = (None,) * self.n_inputs
                for hook in list(self.module._backward_hooks.values()):
                    res = hook(self.module, none, grad_outputs)
                    if res is not None and not all(r is None for r in res):
                        raise RuntimeError("Backward hook for Modules where no input requires gradient should "
                                           "always return None or None for all gradients.")
            return tuple(grad_outputs[i] for i in idx)

        outs = self._identity(outs, idx, on_output_grads)
        return outs[0] if single else tuple(outs)


def _register(store, hook, prepend, kw_store):
    key = object()
    store[key] = hook
    if prepend:
        store.move_to_end(key, last=False)
    if kw_store is not None:
        kw_store[key] = True
    return _HookHandle(store, key, kw_store)


class _HookHandle(_RemovableHandle):
    __slots__ = ("_extra",)

    def __init__(self, d, k, extra=None):
        super().__init__(d, k)
        self._extra = extra

    def remove(self):
        super().remove()
        if self._extra is not None:
            self._extra.pop(self._k, None)


def register_module_forward_pre_hook(hook):
    return _register(_global_forward_pre_hooks, hook, False, None)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    return _register(_global_forward_hooks, hook, False, None)


def _typename(value) -> str:
    """torch.typename: a tensor's type string (``ember.FloatTensor``), else the class name."""
    from ...tensor import Tensor
    return value.type() if isinstance(value, Tensor) else type(value).__name__
