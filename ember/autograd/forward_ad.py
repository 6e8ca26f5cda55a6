"""torch.autograd.forward_ad on ember's reverse mode: ``dual_level``, ``make_dual``, ``unpack_dual``.

ember has no tangent-carrying ops. A dual tensor is the primal made differentiable (an alias that
requires grad, or a view when the primal already does) and registered with its tangent at the current
level; ops on it build the ordinary reverse graph. ``unpack_dual(y)`` computes y's tangent
``sum_i J_i t_i`` by the double-backward trick: with a dummy cotangent ``u``, ``g_i = J_i^T u`` is linear
in ``u``, and the gradient of ``sum_i <g_i, t_i>`` with respect to ``u`` is ``sum_i J_i t_i``. Every op
whose derivative is written in ember ops (all registered ops) works, elementwise ops and matmul
included; an op whose backward is not differentiable (a custom ``Function`` written in NumPy) raises
instead of giving a wrong tangent.

Differences from torch, by construction: the graph is recorded, so duals and the values computed from
them report ``requires_grad=True`` and forward AD does not work under ``no_grad()`` (a value computed
there has no tangent: ``unpack_dual`` returns None for it); each ``unpack_dual`` of a computed value
costs two backward passes; ``UnpackedDualTensor.primal`` is the tensor itself.
"""
from __future__ import annotations

from typing import NamedTuple

from ..tensor import Tensor
from . import grad_mode as _gm

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "dual_level"]


class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: the primal and its tangent (None when it has none at the level)."""

    primal: Tensor
    tangent: Tensor | None


class _Level:
    __slots__ = ("duals", "index")

    def __init__(self):
        self.duals = []        # (dual tensor, tangent), in creation order
        self.index = {}        # id(dual) -> position in duals


_LEVELS: list = []


def enter_dual_level() -> int:
    """Open a new forward-AD level and return its index (``dual_level`` does this for a ``with`` block)."""
    _LEVELS.append(_Level())
    return len(_LEVELS) - 1


def exit_dual_level(*, level=None) -> None:
    """Close the innermost level: its duals lose their tangents."""
    if level is None:
        level = len(_LEVELS) - 1
    if not _LEVELS or level != len(_LEVELS) - 1:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. This is "
                           "not supported.")
    _LEVELS.pop()


def _level(level):
    if level is None:
        level = len(_LEVELS) - 1
    if level < 0 or level >= len(_LEVELS):
        return None
    return _LEVELS[level]


def make_dual(tensor, tangent, *, level=None) -> Tensor:
    """A dual tensor with primal ``tensor`` and ``tangent`` at ``level`` (the current one by default)."""
    lv = _level(level)
    if lv is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                           "enter_dual_level() first.")
    for name, t in (("primal", tensor), ("tangent", tangent)):
        if not isinstance(t, Tensor):
            raise TypeError(f"make_dual: expected the {name} to be a Tensor, got {type(t).__name__}")
        if not (t.dtype.is_floating_point or t.dtype.is_complex):
            raise ValueError(f"Expected {name} to be floating point or complex, but got: {t.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    with _gm.enable_grad():
        dual = tensor.view_as(tensor) if tensor.requires_grad else tensor.detach().requires_grad_(True)
    lv.index[id(dual)] = len(lv.duals)
    lv.duals.append((dual, tangent))
    return dual


def unpack_dual(tensor, *, level=None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor`` at ``level``; the tangent is None when ``tensor`` does not
    depend on a dual of that level (or the level has been exited)."""
    lv = _level(level)
    if lv is None or not isinstance(tensor, Tensor):
        return UnpackedDualTensor(tensor, None)
    pos = lv.index.get(id(tensor))
    if pos is not None and lv.duals[pos][0] is tensor:
        return UnpackedDualTensor(tensor, lv.duals[pos][1])
    if not tensor.requires_grad or tensor.grad_fn is None or not lv.duals:
        return UnpackedDualTensor(tensor, None)
    return UnpackedDualTensor(tensor, _tangent_of(tensor, lv))


def _tangent_of(y: Tensor, lv: _Level):
    from .engine import grad
    from ..ops.creation import zeros_like
    duals = [d for d, _ in lv.duals]
    with _gm.enable_grad():
        u = zeros_like(y).requires_grad_(True)
        gs = grad(y, duals, grad_outputs=u, create_graph=True, allow_unused=True)
        used = [(g, t) for g, (_, t) in zip(gs, lv.duals) if g is not None]
        if not used:
            return None
        for g, _ in used:
            if not g.requires_grad:
                raise RuntimeError(f"forward AD: the backward of an op between the duals and this tensor (grad_fn "
                                   f"{y.grad_fn.name()}) is not differentiable in ember, so its tangent cannot be "
                                   "computed (ember computes tangents by double backward)")
        (jv,) = grad([g for g, _ in used], u, grad_outputs=[t.to(g.dtype) for g, t in used],
                     create_graph=_gm.GRAD[0], allow_unused=True)
    if jv is None:
        return zeros_like(y)
    return jv if _gm.GRAD[0] else jv.detach()


class dual_level:
    """Context manager (and decorator) for one forward-AD level: duals made inside carry their tangents
    until the block ends."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*a, **k):
            with self:
                return fn(*a, **k)
        return wrapped
