"""The small functions programs written for ``torch.compiler`` / ``torch._dynamo`` call around compiled
code: ``disable``, ``is_compiling``, ``graph_break``, ``set_stance``, ``list_backends`` and the markers
that only matter to torch's bytecode tracer (``allow_in_graph``, ``assume_constant_result``,
``cudagraph_mark_step_begin``).

ember traces by running the function with real values and replays the recorded ops; it never runs the
function's Python again between graphs. So a function marked ``disable`` (which torch runs eagerly, outside
any graph, on every call) cannot be cut out of a replay: a compiled call that reaches one is not captured
and runs eagerly as a whole (counted in ``counters["fallbacks"]`` with the function's name; under
``fullgraph=True`` it raises, as torch does).
"""
from __future__ import annotations

import functools

from .capture import Tracer, GraphBreakError, user_frame

STANCE = ["default"]          # set_stance: "default" or "force_eager" (read by CompiledFunction.__call__)
_STANCES = ("default", "force_eager")


def is_compiling() -> bool:
    """True while ember.compile traces a function (the code then runs to be recorded)."""
    return Tracer.active is not None


is_dynamo_compiling = is_compiling


def is_exporting() -> bool:
    """False: ember's export (``ember.onnx``) does not run user code under a flag of its own."""
    return False


def disable(fn=None, recursive: bool = True, *, reason: str | None = None):
    """``@disable`` / ``disable(fn)``: ``fn`` always runs eagerly. Called while a compiled function is
    traced, that whole call runs eagerly (see the module docstring); outside compiled code it is ``fn``."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    if getattr(fn, "_ember_disabled", False):
        return fn
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__

    @functools.wraps(fn)
    def run_eagerly(*args, **kwargs):
        tracer = Tracer.active
        if tracer is not None:
            why = f"calls {name}, marked ember.compiler.disable" + (f" ({reason})" if reason else "")
            if tracer.fullgraph:
                filename, lineno = user_frame()
                raise GraphBreakError(f"ember.compile(fullgraph=True): graph break at {filename}:{lineno}: {why}")
            tracer.refuse(why + ": ember cannot run part of a replayed graph eagerly, so this call runs "
                          "eagerly as a whole", "move the call outside the compiled function, or remove "
                          "the disable marker if its body is plain tensor code")
        return fn(*args, **kwargs)

    run_eagerly._ember_disabled = True
    return run_eagerly


def graph_break() -> None:
    """torch splits its graph here. ember's capture needs no split, so it only raises under
    ``fullgraph=True`` (as torch does) and is a no-op otherwise."""
    tracer = Tracer.active
    if tracer is not None and tracer.fullgraph:
        filename, lineno = user_frame()
        raise GraphBreakError(f"ember.compile(fullgraph=True): graph break at {filename}:{lineno}: "
                              "graph_break() called")


def allow_in_graph(fn):
    """Returns ``fn``: ember records every op a function runs, so nothing needs allowing."""
    return fn


def assume_constant_result(fn):
    """Returns ``fn``: its tensor ops are recorded; Python values read from tensors become guards."""
    return fn


def cudagraph_mark_step_begin() -> None:
    """No-op: ember does not use CUDA graphs (its replay needs no step marker)."""


def list_backends(exclude_tags=("debug", "experimental")) -> list:
    """The backend names ``ember.compile`` takes; ``eager``/``aot_eager`` are the debug ones (as in torch)."""
    debug = {"eager", "aot_eager"}
    excluded = exclude_tags is not None and "debug" in tuple(exclude_tags)
    from .api import BACKENDS
    return sorted(b for b in BACKENDS if not (excluded and b in debug))


class set_stance:
    """``set_stance("force_eager")`` makes compiled functions run as plain Python until
    ``set_stance("default")``; also usable as a context manager or decorator (the stance before is
    restored on exit)."""

    def __init__(self, stance: str = "default", *, skip_guard_eval_unsafe: bool = False, force_backend=None):
        if stance not in _STANCES:
            raise NotImplementedError(f"ember.compiler.set_stance: stance {stance!r} is not supported; "
                                      f"supported: {', '.join(_STANCES)}")
        if force_backend is not None:
            raise NotImplementedError("ember.compiler.set_stance: force_backend is not supported")
        self.prev = STANCE[0]
        STANCE[0] = stance
        self.stance = stance

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STANCE[0] = self.prev
        return False

    def __call__(self, fn):
        stance = self.stance
        STANCE[0] = self.prev           # as a decorator, the stance holds only inside fn

        @functools.wraps(fn)
        def with_stance(*args, **kwargs):
            prev = STANCE[0]
            STANCE[0] = stance
            try:
                return fn(*args, **kwargs)
            finally:
                STANCE[0] = prev
        return with_stance
