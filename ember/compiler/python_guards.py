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

import operator
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
    if objects and not isinstance(v, _NOT_PLAIN) and not isinstance(v, _not_objects()):
        fields = getattr(v, "__dict__", None)
        if type(fields) is dict and len(fields) <= 4 * _MAX_ITEMS:
            return (t, tuple((k, x) for k, x in fields.items() if type(x) in _ATOMS))
    return _SKIP


_NOT_OBJECTS: list = []


def _not_objects() -> tuple:
    """Types whose instances are never snapshotted as plain objects (containers, tensors, modules)."""
    if not _NOT_OBJECTS:
        from ..tensor import Tensor
        from ..nn.modules.module import Module
        _NOT_OBJECTS.append((dict, set, frozenset, list, tuple, Tensor, Module))
    return _NOT_OBJECTS[0]


# ---- modules --------------------------------------------------------------------------------------
_INTERNAL: set = set()      # the attributes every Module has (parameters, hooks, training): not guarded


def module_keys(module) -> tuple:
    """(attribute names whose values are compared as they are, names compared through a snapshot)."""
    if not _INTERNAL:
        from ..nn.modules.module import Module
        _INTERNAL.update(vars(Module()))
    atoms, others = [], []
    for k, v in vars(module).items():
        if k in _INTERNAL:
            continue
        if type(v) in _ATOMS:
            atoms.append(k)
        elif _snap(v, True) is not _SKIP:
            others.append(k)
    return tuple(atoms), tuple(others)


def _module_values(module, keys) -> tuple:
    d = vars(module)
    atoms, others = keys
    return tuple(map(d.get, atoms)) + tuple(_snap(d.get(k, _SKIP), True) for k in others)


def modules_guard(seen) -> tuple:
    """One guard over ``seen`` (from ``module_state``): the values the modules' attributes had when
    they were called. Checked before every replay, so it reads each module's ``__dict__`` through one
    ``itemgetter`` of its number/string attributes (a few microseconds for a model of 50 modules)."""
    plain, snapped, expect_plain, expect_snapped = [], [], [], []
    for ref, (atoms, others), values in seen:
        module = ref()
        if module is None or not (atoms or others):
            continue
        d = vars(module)
        if atoms:
            plain.append((d, operator.itemgetter(*atoms)))
            expect_plain.append(values[0] if len(atoms) == 1 else tuple(values[:len(atoms)]))
        for k, v in zip(others, values[len(atoms):]):
            snapped.append((d, k))
            expect_snapped.append(v)

    def now(plain=plain, snapped=snapped):
        try:
            return (tuple([g(d) for d, g in plain]),
                    tuple([_snap(d.get(k, _SKIP), True) for d, k in snapped]))
        except KeyError:                        # an attribute was deleted: not as traced
            return None
    return (f"the plain attributes of the {len(seen)} module(s) called are as traced", now,
            (tuple(expect_plain), tuple(expect_snapped)))


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
