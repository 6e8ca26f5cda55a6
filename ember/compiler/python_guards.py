"""Guards on the plain Python values a traced function may have read: the attributes of the modules it
called (``self.temperature``, ``self.use_cache``, ``dropout.p``, a config object's fields) and the
globals and closure variables of the compiled function (``SCALE``, ``state["k"]``).

A replay runs the recorded ops, not the Python, so such a value is baked into the program as a constant
or a branch taken. torch's tracer guards exactly the values the bytecode read; ember cannot see the
reads, so it guards every value of these kinds that is cheap to compare: numbers, strings, None and
small tuples/lists/dicts of those (and, for a module's attribute, the number/string fields of a plain
object such as a config). A value that differs at a later call makes that call retrace. Objects that
change on every call (optimizers, loggers) are not looked into, so they never force retraces.
"""
from __future__ import annotations

import types
import weakref

_ATOMS = frozenset((bool, int, float, complex, str, bytes, type(None)))
_MAX_ITEMS = 64
_SKIP = object()
_NOT_PLAIN = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType)


def _snap(v, objects: bool):
    """A comparable copy of ``v``, or ``_SKIP`` when it is not a value this module guards."""
    t = type(v)
    if t in _ATOMS:
        return v
    if (t is tuple or t is list) and len(v) <= _MAX_ITEMS:
        if all(type(x) in _ATOMS for x in v):
            return (t, tuple(v))
        return _SKIP
    if t is dict and len(v) <= _MAX_ITEMS:
        if all(type(k) in _ATOMS and type(x) in _ATOMS for k, x in v.items()):
            return (dict, tuple(v.items()))
        return _SKIP
    if objects and not isinstance(v, _NOT_PLAIN) and not _is_module_or_tensor(v):
        fields = getattr(v, "__dict__", None)
        if type(fields) is dict and len(fields) <= 4 * _MAX_ITEMS:
            return (t, tuple((k, x) for k, x in fields.items() if type(x) in _ATOMS))
    return _SKIP


def _is_module_or_tensor(v) -> bool:
    from ..tensor import Tensor
    from ..nn.modules.module import Module
    return isinstance(v, (Tensor, Module))


# ---- modules --------------------------------------------------------------------------------------
def module_keys(module) -> tuple:
    """The attribute names of ``module`` whose values are guarded ("training" has its own guard)."""
    return tuple(k for k, v in vars(module).items() if k != "training" and _snap(v, True) is not _SKIP)


def _module_values(module, keys) -> tuple:
    d = vars(module)
    return tuple(_snap(d.get(k, _SKIP), True) for k in keys)


def modules_guard(seen) -> tuple:
    """One guard over ``seen``: (weakref to a module, its guarded keys, their values when it was called)."""
    refs = [r for r, _, _ in seen]
    keys = [k for _, k, _ in seen]
    values = tuple(v for _, _, v in seen)

    def now(refs=refs, keys=keys):
        return tuple(None if r() is None else _module_values(r(), k) for r, k in zip(refs, keys))
    return (f"the plain attributes of the {len(refs)} module(s) called are as traced", now, values)


def module_state(module) -> tuple:
    """(weakref, keys, values) of ``module`` as it is called (see ``modules_guard``)."""
    keys = module_keys(module)
    return (weakref.ref(module), keys, _module_values(module, keys))


# ---- the compiled function's globals and closure --------------------------------------------------
def _names(code, out: set) -> set:
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _names(c, out)
    return out


def function_guard(fn):
    """A guard ``(description, now, seen)`` on the globals the code of ``fn`` names and on its closure
    variables, or None when there is nothing to guard."""
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    g = getattr(fn, "__globals__", {})
    globals_ = tuple(n for n in sorted(_names(code, set())) if n in g and _snap(g[n], False) is not _SKIP)
    cells = tuple(zip(code.co_freevars, fn.__closure__ or ()))
    closure = []
    for name, cell in cells:
        try:
            if _snap(cell.cell_contents, False) is not _SKIP:
                closure.append((name, cell))
        except ValueError:                      # an empty cell
            pass
    if not globals_ and not closure:
        return None

    def now(g=g, names=globals_, cells=tuple(closure)):
        return (tuple(_snap(g.get(n, _SKIP), False) for n in names),
                tuple(_snap(c.cell_contents, False) for _, c in cells))
    what = ", ".join(list(globals_) + [n for n, _ in closure])
    return (f"the globals and closure variables of {fn.__qualname__} ({what}) are as traced", now, now())
