"""The plan cache: a captured program maps straight to its compiled plan, so a warm process skips the
pipeline (decompose, schedule, render) and goes from the trace to the cached library.

What is kept: ``native.build_runner``'s result before it runs -- the forward and backward
``native.Compiled`` parts (primitive graphs, schedules, memory plans, entry names) and the C source --
pickled into ``<cache>/kernels/plans/<name>-<key>.plan``. A hit rebuilds the ``NativeRunner`` from
them; its first replay then finds the library in the kernel cache by its source, as any build does
(``build.py`` checks that entry as always).

The key is a sha256 over everything the plan is a function of:

- the program: every value (kind, shape, dtype, requires_grad, the argument path, a constant's bytes)
  and every instruction (op name, inputs, attributes, outputs, phase, source line) of the forward and
  its ahead-of-time backward, encoded by :func:`fingerprint`. An attribute of a type it does not know
  makes the program uncacheable (never a guess); so does an op ember does not define (a custom op's
  kernel is user code, which no key here can follow);
- the code generation options (``render_c.Options`` after ``autotune.learned_defaults``), every
  ``EMBER_*`` setting but the cache directory and logs, the thread count, the BLAS the C calls;
- ember itself: its version and the size and modification time of every ``.py`` file in the package
  (any edit of ember makes a new key), Python's and NumPy's versions, and the host CPU.

Safety: entries are written to a private temporary file and moved into place (a reader never sees half
an entry), carry a sha256 of their payload checked before loading, and are read only from the
kernel cache's trusted directory under its rules (``cache.py``: owned by this user, writable by no
one else). The payload is unpickled by an unpickler that resolves only ember's classes, NumPy's array
and dtype reconstructors and builtin types, and refers to the new trace's values, nodes and ops by
position instead of holding them. A corrupt, foreign or unreadable entry is a miss: the pipeline runs
and the entry is written anew. ``mode="max-autotune"``, symbolic-size and device programs do not use
the plan cache.

``STATS``: ``hits``, ``misses``, ``stores``, ``uncacheable`` (programs it cannot key), ``rejected``
(entries found but not used); ``EMBER_LOGS=kernels`` says which, and why.
"""
from __future__ import annotations

import hashlib
import io
import os
import pickle
import sys
import threading

import numpy as np

from . import logs
from .ir import AttrRef, Graph, OpNode, Program, ReadNode, SetGradNode, Value, WriteNode, flat_values

SCHEMA = 1
_MAGIC = b"EMBERPLAN1\n"
STATS = {"hits": 0, "misses": 0, "stores": 0, "uncacheable": 0, "rejected": 0}
_UNSET_ENV = ("EMBER_CACHE_DIR", "EMBER_LOGS", "EMBER_BUILD_JOBS")   # settings that change no plan
_PROGRAM_ATTRS = frozenset({          # what a Program may carry (others make it uncacheable)
    "values", "graphs", "outputs", "args", "lifted", "consts", "break_reasons", "backward", "grad_outputs",
    "grad_targets", "grad_outputs_of", "fwd_refs", "output_aliases", "output_detached", "device", "sym",
    "extra_guards", "grad_rebinds"})
# read from the new trace at run time (guards, .grad rebinding, messages), never by the pipeline
_RUNTIME_ONLY = ("extra_guards", "grad_rebinds", "break_reasons", "backward", "device", "sym")


class Uncacheable(Exception):
    """The program holds something the key cannot describe."""


# ---- the key -----------------------------------------------------------------------------------------------

_EMBER_DIGEST: list = []


def _ember_digest() -> str:
    """ember's version and the size and mtime of each of its source files (once per process)."""
    if not _EMBER_DIGEST:
        import ember
        root = os.path.dirname(os.path.abspath(ember.__file__))
        h = hashlib.sha256(f"{getattr(ember, '__version__', '?')}|{sys.version}|{np.__version__}".encode())
        parts: list = []
        _walk_sources(root, "", parts)
        h.update("".join(parts).encode())
        _EMBER_DIGEST.append(h.hexdigest())
    return _EMBER_DIGEST[0]


def _walk_sources(path: str, rel: str, out: list) -> None:
    """``relpath:size:mtime_ns;`` of every ``.py`` file under ``path``, in sorted order (one scandir per
    folder: this runs in every process that loads a plan)."""
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        return
    subdirs = []
    for e in entries:
        name = e.name
        try:
            if e.is_dir(follow_symlinks=True):
                subdirs.append(e)
            elif name.endswith(".py"):
                st = e.stat()
                out.append(f"{rel}{name}:{st.st_size}:{st.st_mtime_ns};")
        except OSError:
            continue
    for e in subdirs:
        _walk_sources(e.path, f"{rel}{e.name}/", out)


def _array_token(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    return f"nd({a.dtype.str},{a.shape},{hashlib.sha256(a.view(np.uint8).reshape(-1)).hexdigest()[:32]})"


_SCALARS = frozenset({type(None), bool, int, str, float, complex})
_VALUE_FIELDS = 6                      # Value's dataclass fields (more in its __dict__: extra attributes)
_OPNODE_FIELDS = 7


class _Encoder:
    """Writes a program as tokens (joined with NUL, which no token holds) that differ whenever the
    pipeline could produce another plan."""

    def __init__(self):
        self.out: list = []
        self.ops: dict = {}            # op name -> OpDef
        self.checked: set = set()      # ids of the OpDefs checked

    def op(self, opdef):
        self.out.append(opdef.name)
        if id(opdef) in self.checked:
            return
        from ..ops.registry import OpDef, REGISTRY
        kernel = getattr(opdef, "kernel", None)
        mod = getattr(kernel, "__module__", None) or ""
        ours = mod.startswith("ember.") or isinstance(kernel, np.ufunc)     # (neg, abs: NumPy's ufuncs)
        if type(opdef) is not OpDef or REGISTRY.get(opdef.name) is not opdef or not ours:
            raise Uncacheable(f"op {opdef.name} is not one of ember's own (a custom op's code is the user's)")
        if self.ops.setdefault(opdef.name, opdef) is not opdef:
            raise Uncacheable(f"two ops are named {opdef.name}")
        self.checked.add(id(opdef))

    def enc(self, x):
        out = self.out
        t = type(x)
        if t in _SCALARS:
            out.append(repr(x))
        elif t is Value:
            out.append(f"%{x.id}")
        elif t is tuple or t is list:
            out.append("(" if t is tuple else "[")
            for i in x:
                self.enc(i)
            out.append(")")
        elif t is dict:
            out.append("{")
            for k, v in x.items():
                self.enc(k)
                self.enc(v)
            out.append("}")
        else:
            self.other(x, t)

    def other(self, x, t):
        out = self.out
        if t is AttrRef:
            out.append(f"ref%{x.value.id}")
        elif isinstance(x, np.ndarray):
            out.append(_array_token(x))
        elif isinstance(x, np.generic):
            out.append(f"{x.dtype.str}:{x!r}")
        elif isinstance(x, np.dtype):
            out.append(f"dt:{x.str}")
        elif t is slice:
            out.append("slice")
            self.enc((x.start, x.stop, x.step))
        elif x is Ellipsis:
            out.append("...")
        elif isinstance(x, tuple):          # ember.Size, named tuples
            out.append(f"{t.__module__}.{t.__qualname__}")
            self.enc(tuple(x))
        elif t.__name__ == "dtype" and t.__module__ == "ember.dtypes":
            out.append(f"edt:{x.name}")
        elif t.__name__ == "device" and t.__module__.startswith("ember"):
            out.append(f"dev:{x!r}")
        elif isinstance(x, type) and (x.__module__ in ("builtins", "numpy") or x.__module__.startswith("ember.")):
            out.append(f"type:{x.__module__}.{x.__qualname__}")      # (float as a dtype, exception classes)
        elif t.__name__ == "Tensor" and t.__module__ == "ember.tensor":
            self.enc(x._dtype)
            out.append(_array_token(np.asarray(x._data)))
        else:
            raise Uncacheable(f"a value of type {t.__module__}.{t.__qualname__} in the program")

    def value(self, v: Value):
        kind = v.kind
        self.out.append(f"V{v.id}:{kind}:{v.shape}:{v.requires_grad}:{v.dtype.name}")
        if kind == "const":
            self.out.append(_array_token(np.asarray(v.ref)))
        elif kind == "arg" or kind == "fwd":
            self.enc(v.ref)                # the argument path / the forward value id
        elif kind not in ("lifted", "node", "grad_in"):
            raise Uncacheable(f"a value of kind {kind}")
        d = v.__dict__
        if len(d) > _VALUE_FIELDS:
            self.enc({k: a for k, a in d.items() if k not in ("id", "kind", "shape", "dtype", "ref",
                                                              "requires_grad")})

    def node(self, n):
        t = type(n)
        out = self.out
        if t is OpNode:
            out.append("\nOp")
            self.op(n.op)
            self.enc(n.inputs)
            self.enc(n.attrs)
            out.append(" ".join([f"%{o.id}" for o in n.outputs]))
            out.append(n.where)
            out.append(n.phase)
            out.append(repr(n.grad_enabled))
            d = n.__dict__
            if len(d) > _OPNODE_FIELDS:
                self.enc({k: a for k, a in d.items() if k not in ("op", "inputs", "attrs", "outputs", "where",
                                                                  "phase", "grad_enabled")})
            return
        out.append(f"\n{t.__name__}")
        for k, a in vars(n).items():
            out.append(k)
            if k == "op":
                self.op(a)
            else:
                self.enc(a)

    def program(self, p: Program, tag: str):
        names = set(vars(p))
        if not names <= _PROGRAM_ATTRS:
            raise Uncacheable(f"the program carries {sorted(names - _PROGRAM_ATTRS)}")
        if getattr(p, "device", None) is not None or getattr(p, "sym", None) is not None:
            raise Uncacheable("a device or symbolic-size program")
        self.out.append(f"\n== {tag}")
        for i, v in enumerate(p.values):
            if v.id != i:
                raise Uncacheable("value ids are not their positions")
            self.value(v)
        for gi, g in enumerate(p.graphs):
            self.out.append(f"\n-- graph {gi}")
            for n in g.nodes:
                self.node(n)
            if g.ended_by is not None:
                self.node(g.ended_by)
        for k in sorted(names):
            if k in ("values", "graphs") or k in _RUNTIME_ONLY:
                continue
            self.out.append(f"\n{k}=")
            if k == "outputs":          # (the pipeline reads which values are outputs, in order)
                self.enc(flat_values(p.outputs))
            else:
                self.enc(getattr(p, k))


def fingerprint(program: Program) -> str:
    """The program (and its backward) as text; raises :class:`Uncacheable`."""
    e = _Encoder()
    e.program(program, "forward")
    if program.backward is not None:
        e.program(program.backward, "backward")
    return "\0".join(e.out)


def plan_key(program: Program, options, name: str) -> str:
    """The cache key of ``program``'s plan under ``options`` (raises :class:`Uncacheable`)."""
    from .build import _host_fingerprint
    from .blas import find_blas
    from .. import get_num_threads
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("EMBER_") and k not in _UNSET_ENV)
    blas = find_blas() if options.blas_available else None      # (its prelude is in the source)
    h = hashlib.sha256()
    for part in (f"schema {SCHEMA}", _ember_digest(), _host_fingerprint(), repr(env),
                 repr(None if blas is None else (blas.lib_path, blas.version, blas.prelude)),
                 repr(sorted(vars(options).items())), f"threads {get_num_threads()}", f"name {name}"):
        h.update(part.encode())
        h.update(b"\0")
    h.update(fingerprint(program).encode())
    return h.hexdigest()


# ---- pickling with references into the trace ---------------------------------------------------------

def _objects(program: Program) -> dict:
    """id(object) -> its position in ``program`` (values, graphs, nodes, ops), for the pickler."""
    found = {}
    progs = [program] + ([program.backward] if program.backward is not None else [])
    for pi, q in enumerate(progs):
        found[id(q)] = ("P", pi)
        for v in q.values:
            found[id(v)] = ("V", pi, v.id)
        for gi, g in enumerate(q.graphs):
            found[id(g)] = ("G", pi, gi)
            for ni, n in enumerate(g.nodes):
                found[id(n)] = ("N", pi, gi, ni)
                if type(n) is OpNode:
                    found[id(n.op)] = ("OP", n.op.name)
            if g.ended_by is not None:
                found[id(g.ended_by)] = ("R", pi, gi)
    return found


_LOADING = threading.local()
_TRACE_TYPES = (Value, Graph, OpNode, WriteNode, SetGradNode, ReadNode, Program)


def _ref(pid):
    """Unpickling: the object at ``pid`` in the program being loaded for."""
    progs, ops = _LOADING.ctx
    kind = pid[0]
    if kind == "OP":
        return ops[pid[1]]
    q = progs[pid[1]]
    if kind == "P":
        return q
    if kind == "V":
        return q.values[pid[2]]
    if kind == "G":
        return q.graphs[pid[2]]
    if kind == "N":
        return q.graphs[pid[2]].nodes[pid[3]]
    if kind == "R":
        return q.graphs[pid[2]].ended_by
    raise pickle.UnpicklingError(f"unknown reference {pid!r}")


class _Pickler(pickle.Pickler):
    def __init__(self, f, found):
        super().__init__(f, protocol=5)
        self.found = found

    def reducer_override(self, obj):
        pid = self.found.get(id(obj))
        if pid is not None:
            return _ref, (pid,)
        t = type(obj)
        if t in _TRACE_TYPES or (t.__name__ == "Tensor" and t.__module__ == "ember.tensor"):
            raise Uncacheable(f"the plan holds a {t.__name__} that is not part of the program")
        return NotImplemented


# the callables and constants (other than classes) a plan may name: NumPy's array and scalar
# reconstructors, ember's dtype lookup, and two builtin constants
_ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
            ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
            ("ember.dtypes", "_dtype_by_name"), ("builtins", "Ellipsis"), ("builtins", "NotImplemented")}


class _Unpickler(pickle.Unpickler):
    """Resolves ember's, NumPy's and builtin classes and the few callables in ``_ALLOWED`` only."""

    def find_class(self, module, name):
        if (module, name) == (__name__, "_ref"):
            return _ref
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        top = module.split(".")[0]
        if top in ("ember", "numpy", "builtins"):
            obj = super().find_class(module, name)
            if isinstance(obj, type):
                return obj
        raise pickle.UnpicklingError(f"a plan may not refer to {module}.{name}")


# ---- the files ---------------------------------------------------------------------------------------------

def _plans_dir():
    """The trusted plan directory (created 0700), or None when the kernel cache is not trusted."""
    from .cache import _kernels_dir, _mkdir_private, _why_untrusted
    kernels, why = _kernels_dir()
    if kernels is None:
        return None
    d = os.path.join(kernels, "plans")
    try:
        _mkdir_private(d)
        if _why_untrusted(d, "the plan directory", directory=True):
            return None
    except OSError:
        return None
    return d


def _path(d: str, key: str, name: str) -> str:
    from .build import _safe_name
    return os.path.join(d, f"{_safe_name(name)[:40]}-{key[:32]}.plan")


def load(program: Program, key: str, name: str):
    """``(parts, source, uses_blas)`` for ``program`` from the cache, or None (a miss)."""
    d = _plans_dir()
    if d is None:
        return None
    path = _path(d, key, name)
    from .cache import _why_untrusted
    try:
        why = _why_untrusted(path, "the plan", directory=False)
        if why is None:
            with open(path, "rb") as f:
                data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        why = f"unreadable: {e}"
    if why is None:
        why, plan = _decode(data, key, program)
        if why is None:
            return plan
    STATS["rejected"] += 1
    logs.log("kernels", f"ember.compile({name}): plan cache entry {path} not used: {why}")
    return None


def _decode(data: bytes, key: str, program: Program):
    head = len(_MAGIC) + 64 + 1 + 64 + 1
    if not data.startswith(_MAGIC) or len(data) < head:
        return "not a plan file", None
    if data[len(_MAGIC):len(_MAGIC) + 64].decode("ascii", "replace") != key:
        return "written for another key", None
    payload = data[head:]
    if hashlib.sha256(payload).hexdigest() != data[len(_MAGIC) + 65:head - 1].decode("ascii", "replace"):
        return "checksum differs (truncated or corrupt)", None
    progs = [program] + ([program.backward] if program.backward is not None else [])
    ops = {n.op.name: n.op for q in progs for g in q.graphs for n in g.nodes if type(n) is OpNode}
    _LOADING.ctx = (progs, ops)
    try:
        plan = _Unpickler(io.BytesIO(payload)).load()
    except Exception as e:          # any damage the checksum missed, a class that moved, a bad reference
        return f"cannot be read ({type(e).__name__}: {e})", None
    finally:
        _LOADING.ctx = None
    from .native import Compiled
    if (type(plan) is not tuple or len(plan) != 3 or type(plan[1]) is not str or not plan[0]
            or not all(isinstance(c, Compiled) for c in plan[0])):
        return "not a plan", None
    return None, plan


def encode(program: Program, key: str, name: str, parts, source: str, uses_blas: bool):
    """The entry's bytes (header + pickled plan), or None when the plan cannot be kept (logged)."""
    f = io.BytesIO()
    try:
        _Pickler(f, _objects(program)).dump((parts, source, bool(uses_blas)))
    except Exception as e:          # (Uncacheable, or an object pickle refuses)
        STATS["uncacheable"] += 1
        logs.log("kernels", f"ember.compile({name}): plan not cached: {type(e).__name__}: {e}")
        return None
    payload = f.getvalue()
    return _MAGIC + key.encode() + b"\n" + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def write(key: str, name: str, data: bytes) -> bool:
    """Put an encoded entry in place atomically (a private temporary file, then ``os.replace``)."""
    d = _plans_dir()
    if d is None:
        return False
    from .cache import replace_private, sweep_leftovers
    sweep_leftovers(d)
    try:
        replace_private(d, _path(d, key, name), data, prefix=".plan-")
    except OSError as e:
        logs.log("kernels", f"ember.compile({name}): plan not cached: {e}")
        return False
    STATS["stores"] += 1
    return True



def store(program: Program, key: str, name: str, parts, source: str, uses_blas: bool) -> bool:
    """Encode and write the plan; False when it cannot be kept."""
    data = encode(program, key, name, parts, source, uses_blas)
    return data is not None and write(key, name, data)


# ---- the runner ----------------------------------------------------------------------------------------------

def native_runner(program: Program, mode, name: str):
    """``native.build_runner(program, mode, name)``, through the plan cache where it applies."""
    from . import native
    from .ir import paused_gc
    # (the key's tokens and a loaded plan: many objects, all freed or kept at once; the pipeline of a
    # miss pauses the collector itself, and its many cyclic temporaries are left to it)
    with paused_gc(kept=True):
        key, runner = _cached_runner(program, mode, name)
    if runner is not None:
        return runner

    def make():
        runner = native.build_runner(program, mode=mode, name=name)
        if runner is not None and key is not None:
            _store_when_built(runner, program, key, name)
        return runner
    from . import background        # (a large graph: made and built in the background, background.py)
    return background.BackgroundRunner(program, name, make, key) if background.wanted(program, mode) else make()


def _cached_runner(program: Program, mode, name: str):
    """``(key, runner)``: the plan's key (None when the program cannot be keyed) and the runner made from
    the cached plan (None on a miss)."""
    from . import native
    key = None
    if mode not in ("max-autotune", "max-autotune-no-cudagraphs"):
        try:
            from . import blas as _blas
            from .autotune import learned_defaults
            from .render_c import Options
            key = plan_key(program, Options(blas_available=_blas.blas_available(), **learned_defaults()), name)
        except Uncacheable as e:
            STATS["uncacheable"] += 1
            logs.log("kernels", f"ember.compile({name}): plan not cached: {e}")
    if key is None:
        return None, None
    plan = load(program, key, name)
    runner = None
    if plan is not None:
        try:
            runner = native.NativeRunner(program, plan[0], None, plan[1], name, plan[2])
        except Exception as e:      # (a plan that does not fit this trace after all: run the pipeline)
            STATS["rejected"] += 1
            logs.log("kernels", f"ember.compile({name}): plan cache entry not used: {type(e).__name__}: {e}")
    if runner is not None:
        STATS["hits"] += 1
        logs.log("kernels", f"ember.compile({name}): plan cache hit (decompose, schedule and render skipped)")
        native._log_kernels(runner)
        _note_arenas(name, runner)
        return key, runner
    STATS["misses"] += 1
    return key, None


def _store_when_built(runner, program, key, name):
    """Keep the plan once its library is built (a plan whose C fails to build is not worth keeping). The
    plan is pickled in a thread while the C compilers run (this thread waits for them without the GIL),
    before the runner's first run binds it; it is written after the build succeeded."""
    build = runner.build

    def build_then_store():
        del runner.build                 # (once: a failed build is not tried again either)
        box: dict = {}
        t = threading.Thread(target=lambda: box.update(data=encode(program, key, name, runner.parts, runner.source,
                                                                    runner.uses_blas)), name="ember-plan-encode")
        t.start()
        try:
            ok = build()
        finally:
            t.join()
        if ok and runner.lib is not None and box.get("data") is not None:
            if write(key, name, box["data"]):
                _note_arenas(name, runner)
        return ok
    runner.build = build_then_store


def _note_arenas(name, runner):
    """The runner's arena sizes, for the next process's first trace of ``name`` (prefault.py)."""
    from . import native, prefault
    prefault.note(name, [native.arena_bytes(c) for c in runner.parts])
