"""The unpicklers of ``ember.load``: the weights-only one (default) and the unrestricted one.

The weights-only unpickler resolves only the default allowlist (the rebuild functions, storage types,
dtypes, ``torch.Size``, ``torch.device``, ``collections.OrderedDict``, a few builtins) plus what the user
allows with :func:`add_safe_globals`, and refuses to call, build or extend anything else, as torch's
weights-only unpickler does. The unrestricted one (``weights_only=False``) maps torch's names to ember's.
"""
from __future__ import annotations

import _compat_pickle
import collections
import importlib
import operator
import pickle

from .. import dtypes as _dt
from ..tensor import Tensor, Size, device
from ._limits import _limit
from ._storage import (_STORAGE_NAME, _STORAGE_TYPES, _parameter_class, _rebuild_from_type_v2, _rebuild_parameter,
                       _rebuild_parameter_with_state, _rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3)

# torch dtype names (including aliases) that ember has
_TORCH_DTYPES = {
    "float32": _dt.float32, "float": _dt.float32, "float64": _dt.float64, "double": _dt.float64,
    "float16": _dt.float16, "half": _dt.float16, "bfloat16": _dt.bfloat16, "int8": _dt.int8,
    "int16": _dt.int16, "short": _dt.int16, "int32": _dt.int32, "int": _dt.int32, "int64": _dt.int64,
    "long": _dt.int64, "uint8": _dt.uint8, "bool": _dt.bool, "complex64": _dt.complex64, "cfloat": _dt.complex64,
    "complex128": _dt.complex128, "cdouble": _dt.complex128,
}
_UNSUPPORTED_TORCH_DTYPES = {
    "complex32", "chalf", "uint16", "uint32", "uint64",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float4_e2m1fn_x2", "qint8", "quint8", "qint32", "quint4x2", "quint2x4", "bits8", "bits16",
    "bits1x8", "bits2x4", "bits4x2", "int1", "int2", "int3", "int4", "int5", "int6", "int7", "uint1",
    "uint2", "uint3", "uint4", "uint5", "uint6", "uint7",
}
# modules whose globals are refused even if the user allowlists them (as in torch)
_BLOCKED_MODULES = ("sys", "os", "posix", "nt")


# ==================================================================================================
# The default allowlist
# ==================================================================================================

_SAFE_ENCODINGS = frozenset({"latin1", "latin-1", "iso-8859-1", "utf-8", "utf8", "ascii"})


def _encode(obj, encoding="utf-8", errors="strict"):
    """_codecs.encode, limited to the text encodings pickle uses for ``bytes`` (protocol 2)."""
    if not isinstance(obj, str) or encoding.lower() not in _SAFE_ENCODINGS:
        raise pickle.UnpicklingError(f"_codecs.encode is only allowed on str with latin1/utf-8, got {encoding!r}")
    return obj.encode(encoding, errors)


def _build_allowed_globals() -> dict:
    g = {
        "torch._utils._rebuild_tensor": _rebuild_tensor,
        "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
        "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
        "torch._utils._rebuild_parameter": _rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
        "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch.tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch.Tensor": Tensor,
        "torch._tensor.Tensor": Tensor,
        "torch.Size": Size,
        "torch.device": device,
        "collections.OrderedDict": collections.OrderedDict,
        "collections.Counter": collections.Counter,
        "_codecs.encode": _encode,
        "builtins.set": set,
        "builtins.frozenset": frozenset,
        "builtins.slice": slice,
        "builtins.complex": complex,
        "builtins.bytearray": bytearray,
        "builtins.bytes": bytes,
    }
    for name, d in _TORCH_DTYPES.items():
        g[f"torch.{name}"] = d
    for name, st in _STORAGE_TYPES.items():
        g[f"torch.{name}"] = st
        g[f"torch.cuda.{name}"] = st  # storages saved from the GPU load on the CPU
    g["torch.storage.UntypedStorage"] = _STORAGE_TYPES["UntypedStorage"]
    return g


_ALLOWED = _build_allowed_globals()


def _sparse_rebuild():
    from ..sparse._coo import _rebuild_sparse_tensor
    return _rebuild_sparse_tensor


def _get_layout(name):
    """torch.serialization._get_layout: the layout object a checkpoint names ("torch.sparse_coo")."""
    from .._layout import layout
    if name not in ("torch.strided", "torch.sparse_coo", "torch.sparse_csr", "torch.sparse_csc"):
        raise pickle.UnpicklingError(f"the checkpoint uses layout {name}; ember has torch.strided, "
                                     "torch.sparse_coo, torch.sparse_csr and torch.sparse_csc")
    return layout(name[6:])


def _layout_of(name):
    return lambda: _get_layout("torch." + name)


_LAZY_ALLOWED = {"torch.nn.parameter.Parameter": _parameter_class, "torch.nn.Parameter": _parameter_class,
                 "torch._utils._rebuild_sparse_tensor": _sparse_rebuild,
                 "torch.serialization._get_layout": lambda: _get_layout,
                 "torch.sparse_coo": _layout_of("sparse_coo"), "torch.strided": _layout_of("strided"),
                 "torch.sparse_csr": _layout_of("sparse_csr"), "torch.sparse_csc": _layout_of("sparse_csc")}


def _lookup_default(full: str):
    """The ember object for an allowlisted torch/builtin global name, or None."""
    obj = _ALLOWED.get(full)
    if obj is None and full in _LAZY_ALLOWED:
        obj = _LAZY_ALLOWED[full]()
    return obj


def _refuse_unsupported_torch(module: str, name: str) -> None:
    """Name the torch dtypes/storages ember cannot represent instead of a generic refusal."""
    if module in ("torch", "torch.cuda"):
        if name in _UNSUPPORTED_TORCH_DTYPES:
            raise pickle.UnpicklingError(f"the checkpoint uses torch.{name}, a dtype ember does not support")
        if name.endswith("Storage"):
            raise pickle.UnpicklingError(
                f"the checkpoint uses {module}.{name}, whose dtype ember does not support (ember has "
                f"{', '.join(d.name for d in _STORAGE_NAME)})")


# ==================================================================================================
# Safe globals (the user's allowlist for weights_only=True)
# ==================================================================================================

_user_safe_globals: set = set()


def add_safe_globals(safe_globals: list) -> None:
    """Allow these classes/functions when loading with ``weights_only=True``.

    Entries are objects (matched by ``f"{obj.__module__}.{obj.__qualname__}"``) or
    ``(obj, "module.name")`` pairs to allow ``obj`` under another name. A global named
    ``torch.X.Y`` in a checkpoint also matches an allowed ``ember.X.Y``.
    """
    global _user_safe_globals
    for g in safe_globals:
        _global_key(g)  # validate early
    _user_safe_globals = _user_safe_globals | set(safe_globals)


def get_safe_globals() -> list:
    """The user's allowlist (see :func:`add_safe_globals`)."""
    return list(_user_safe_globals)


def clear_safe_globals() -> None:
    """Empty the user's allowlist."""
    global _user_safe_globals
    _user_safe_globals = set()


def _remove_safe_globals(globals_to_remove: list) -> None:
    global _user_safe_globals
    _user_safe_globals = _user_safe_globals - set(globals_to_remove)


class safe_globals:
    """Context manager that allows ``safe_globals`` for ``weights_only`` loads inside its block."""

    def __init__(self, safe_globals: list):  # noqa: F811 - mirrors torch's parameter name
        self.safe_globals = list(safe_globals)

    def __enter__(self):
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc):
        _remove_safe_globals(self.safe_globals)
        return False


def _global_key(g):
    if isinstance(g, tuple):
        if len(g) != 2:
            raise ValueError("Expected tuple of length 2 (global, str of callable full path), but got tuple of "
                             f"length: {len(g)}")
        if type(g[1]) is not str:
            raise TypeError(f"Expected second item in tuple to be str of callable full path, but got: {type(g[1])}")
        return g[1], g[0]
    return f"{g.__module__}.{g.__qualname__}", g


def _user_allowed_globals() -> dict:
    return dict(_global_key(g) for g in _user_safe_globals)


# ==================================================================================================
# Unpicklers
# ==================================================================================================

def _fix_py2_name(module: str, name: str) -> tuple[str, str]:
    # protocol-2 pickles name builtins "__builtin__" (what the stdlib unpickler's fix_imports maps)
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


# torch's C namespaces that pickles name (``F.gelu`` is ``torch._C._nn.gelu``) -> the public module ember mirrors
_TORCH_MODULE_ALIASES = {"torch._C._nn": "torch.nn.functional", "torch._C._fft": "torch.fft",
                         "torch._C._linalg": "torch.linalg", "torch._C._special": "torch.special"}
# ``torch.tanh`` pickles as ``getattr(torch._C._VariableFunctionsClass, "tanh")``: the class stands for ``torch``
_TORCH_FUNCTION_NAMESPACES = frozenset({"torch._C._VariableFunctionsClass", "torch._C._VariableFunctions"})


def _torch_alias(module: str) -> str:
    return _TORCH_MODULE_ALIASES.get(module, module)


def _decode(v):
    return v.decode("ascii") if isinstance(v, (bytes, bytearray)) else v


class _OpcodeTable(dict):
    """The unpickler's opcode dispatch table: an opcode it lacks is an UnpicklingError (as in torch's
    weights-only unpickler and the C unpickler), not the Python unpickler's KeyError."""

    def __missing__(self, op):
        raise pickle.UnpicklingError(f"Unsupported operand {op}")


def _index(v):
    try:
        return operator.index(v)
    except Exception:
        return None


def _call_allocation(func, args: tuple) -> int:
    """A lower bound on the bytes calling allowed global ``func`` on ``args`` allocates beyond the
    objects the pickle itself holds: ``bytearray(n)``/``bytes(n)`` make n bytes, ``Tensor(*sizes)``
    an uninitialized tensor, and the builtins that iterate an argument materialize a tensor's elements
    (a zero-stride view of one element can claim any size)."""
    if (func is bytes or func is bytearray) and len(args) == 1:
        n = _index(args[0])
        if n is not None:
            return n
    if func is Tensor and args and (len(args) > 1 or isinstance(args[0], int)):
        sizes = [_index(a) for a in args]
        if all(n is not None and n >= 0 for n in sizes):
            total = _dt.get_default_dtype().itemsize
            for n in sizes:
                total *= n
            return total
    if any(func is f for f in _ITERATING_GLOBALS):
        return sum(a._data.size * a._dtype.itemsize for a in args if isinstance(a, Tensor))
    return 0


_ITERATING_GLOBALS = (bytes, bytearray, set, frozenset, collections.Counter, collections.OrderedDict, Size, Tensor)


class _WeightsOnlyUnpickler(pickle._Unpickler):
    """The stdlib's Python unpickler with torch's weights-only restrictions.

    Globals resolve only through the allowlist; REDUCE/NEWOBJ may only call allowlisted globals,
    BUILD only touches tensors, OrderedDicts and allowlisted classes, and APPEND/SETITEM only extend
    lists and dicts, so a checkpoint can never reach code the allowlist does not name.
    """

    dispatch = _OpcodeTable(pickle._Unpickler.dispatch)

    def __init__(self, file, loader, **kwargs):
        super().__init__(file, **kwargs)
        self._loader = loader
        self._user = _user_allowed_globals()
        self._allowed_ids: dict[int, object] = {}
        self._names: dict[int, str] = {}

    def find_class(self, module, name):
        module, name = _fix_py2_name(module, name)
        module = _torch_alias(module)
        full = f"{module}.{name}"
        if module.split(".")[0] in _BLOCKED_MODULES:
            raise pickle.UnpicklingError(f"Unsupported global: GLOBAL {full} whose module {module} is blocked "
                                         "(never allowed, even with add_safe_globals).")
        obj = _lookup_default(full)
        if obj is None:
            obj = self._user.get(full)
            if obj is None and (module == "torch" or module.startswith("torch.")):
                obj = self._user.get("ember" + full[5:])  # a torch class the user allowed as its ember twin
        if obj is None:
            _refuse_unsupported_torch(module, name)
            shown = full[len("builtins."):] if full.startswith("builtins.") else full
            raise pickle.UnpicklingError(
                f"Unsupported global: GLOBAL {shown} was not an allowed global by default. Please use "
                f"`ember.serialization.add_safe_globals([{shown}])` or the "
                f"`ember.serialization.safe_globals([{shown}])` context manager to allowlist this global "
                "if you trust this class/function.")
        self._allowed_ids[id(obj)] = obj
        self._names.setdefault(id(obj), full)
        return obj

    def persistent_load(self, pid):
        return self._loader.storage(pid)

    def _is_allowed(self, obj) -> bool:
        return id(obj) in self._allowed_ids

    def _check_allocation(self, func, args) -> None:
        """Refuse a call of an allowed global that would allocate more than ``MAX_CALL_ALLOCATION``."""
        if not isinstance(args, tuple):
            return  # not a call pickle would make (REDUCE/NEWOBJ raise on it themselves)
        cost = _call_allocation(func, args)
        bound = _limit("MAX_CALL_ALLOCATION")
        if cost > bound:
            name = self._names.get(id(func), repr(func))
            shown = ", ".join(str(a) if type(a) is int else f"<{type(a).__name__}>" for a in args)
            raise pickle.UnpicklingError(
                f"{name}({shown}) would allocate {cost} bytes, more than the {bound} bytes "
                "(ember.serialization.MAX_CALL_ALLOCATION) one call of an allowed global may allocate")

    def load_reduce(self):
        func = self.stack[-2]
        if not self._is_allowed(func):
            raise pickle.UnpicklingError(f"Trying to call reduce for unrecognized function {func!r}")
        self._check_allocation(func, self.stack[-1])
        pickle._Unpickler.load_reduce(self)
    dispatch[pickle.REDUCE[0]] = load_reduce

    def _check_new(self, cls, args):
        """NEWOBJ / NEWOBJ_EX: ``cls`` must be allowlisted and ``cls(*args)`` within the allocation bounds."""
        if not self._is_allowed(cls):
            raise pickle.UnpicklingError(
                f"Can only create new object for classes allowlisted via `add_safe_globals` but got {cls!r}")
        self._check_allocation(cls, args)

    def load_newobj(self):
        self._check_new(self.stack[-2], self.stack[-1])
        pickle._Unpickler.load_newobj(self)
    dispatch[pickle.NEWOBJ[0]] = load_newobj

    def load_newobj_ex(self):
        self._check_new(self.stack[-3], self.stack[-2])
        pickle._Unpickler.load_newobj_ex(self)
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

    def load_obj(self):
        cls = self.stack[0] if self.stack else None  # OBJ calls the first item after MARK
        if not self._is_allowed(cls):
            raise pickle.UnpicklingError(f"Trying to instantiate unrecognized class {cls!r}")
        pickle._Unpickler.load_obj(self)
    dispatch[pickle.OBJ[0]] = load_obj

    def _instantiate(self, klass, args):  # INST and OBJ
        self._check_allocation(klass, tuple(args))
        pickle._Unpickler._instantiate(self, klass, args)

    def load_build(self):
        inst = self.stack[-2]
        t = type(inst)
        if not (isinstance(inst, Tensor) or t is collections.OrderedDict or t is collections.Counter
                or self._is_allowed(t)):
            raise pickle.UnpicklingError(
                f"Can only build Tensor, Parameter, OrderedDict or types allowlisted via `add_safe_globals`, but got {t}")
        pickle._Unpickler.load_build(self)
    dispatch[pickle.BUILD[0]] = load_build

    def _check_list(self, target, op):
        if not (type(target) is list or (isinstance(target, list) and self._is_allowed(type(target)))):
            raise pickle.UnpicklingError(f"Can only {op} to lists, but got {type(target)}")

    def load_append(self):
        self._check_list(self.stack[-2], "append")
        pickle._Unpickler.load_append(self)
    dispatch[pickle.APPEND[0]] = load_append

    def load_appends(self):
        self._check_list(self.metastack[-1][-1], "extend")
        pickle._Unpickler.load_appends(self)
    dispatch[pickle.APPENDS[0]] = load_appends

    def _check_dict(self, target, op):
        t = type(target)
        if not (t in (dict, collections.OrderedDict, collections.Counter)
                or (isinstance(target, dict) and self._is_allowed(t))):
            raise pickle.UnpicklingError(
                f"Can only {op} for dict, collections.OrderedDict, collections.Counter, but got {t}")

    def load_setitem(self):
        self._check_dict(self.stack[-3], "SETITEM")
        pickle._Unpickler.load_setitem(self)
    dispatch[pickle.SETITEM[0]] = load_setitem

    def load_setitems(self):
        self._check_dict(self.metastack[-1][-1], "SETITEMS")
        pickle._Unpickler.load_setitems(self)
    dispatch[pickle.SETITEMS[0]] = load_setitems

    def load_additems(self):
        if type(self.metastack[-1][-1]) is not set:
            raise pickle.UnpicklingError(f"Can only ADDITEMS to sets, but got {type(self.metastack[-1][-1])}")
        pickle._Unpickler.load_additems(self)
    dispatch[pickle.ADDITEMS[0]] = load_additems

    def _refuse(self):
        raise pickle.UnpicklingError("Unsupported operand: extension codes and text persistent ids are not "
                                     "allowed in weights_only checkpoints")
    for _op in (pickle.EXT1, pickle.EXT2, pickle.EXT4, pickle.PERSID):
        dispatch[_op[0]] = _refuse
    del _op


def _unrestricted_unpickler(base):
    """An unpickler on ``base`` (any pickle module's Unpickler) that maps torch names to ember's."""

    class _CheckpointUnpickler(base):
        def __init__(self, file, loader, **kwargs):
            super().__init__(file, **kwargs)
            self._loader = loader

        def find_class(self, module, name):
            module, name = _fix_py2_name(module, name)
            module = _torch_alias(module)
            full = f"{module}.{name}"
            obj = _lookup_default(full)
            if obj is not None:
                return obj
            if full in _TORCH_FUNCTION_NAMESPACES:
                return importlib.import_module("ember")
            if module == "torch" or module.startswith("torch."):
                _refuse_unsupported_torch(module, name)
                try:  # torch.nn.modules.linear.Linear -> ember.nn.modules.linear.Linear
                    obj = importlib.import_module("ember" + module[5:])
                    for part in name.split("."):
                        obj = getattr(obj, part)
                    return obj
                except (ImportError, AttributeError):
                    raise pickle.UnpicklingError(
                        f"the checkpoint refers to {full}, a torch object ember has no equivalent for") from None
            return super().find_class(module, name)

        def persistent_load(self, pid):
            return self._loader.storage(pid)

    return _CheckpointUnpickler


def _weights_only_message(message: str) -> str:
    unsafe = ("Re-running `ember.load` with `weights_only` set to `False` will likely succeed, but it can result "
              "in arbitrary code execution. Do it only if you got the file from a trusted source.")
    if "was not an allowed global by default" in message:
        return ("Weights only load failed. This file can still be loaded, to do so you have two options, do those "
                f"steps only if you trust the source of the checkpoint. \n\t(1) {unsafe}\n\t(2) Alternatively, to "
                "load with `weights_only=True` please check the recommended steps in the following error message."
                "\n\tWeightsUnpickler error: " + message)
    return f"Weights only load failed. {unsafe}\nWeightsUnpickler error: {message}"
