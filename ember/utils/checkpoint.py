"""Activation checkpointing, as ``torch.utils.checkpoint``: run a piece of the model without keeping its
intermediate activations, and recompute them when the backward pass reaches it.

``checkpoint(fn, *args, use_reentrant=...)`` runs ``fn`` under ``no_grad`` inside a custom autograd
Function that saves only the inputs. Its backward restores the random-number state (so dropout draws
the same mask) and the autocast state, reruns ``fn`` with grad enabled on detached copies of the
inputs, and backpropagates the incoming gradients through that fresh graph: input gradients are
returned, parameter gradients accumulate into ``.grad`` as the backward pass goes.

Both ``use_reentrant`` settings recompute this way. With ``use_reentrant=False`` the outputs are
attached to the graph even when no input requires grad (so parameters inside ``fn`` still get
gradients), as in torch. What neither mode supports here: ``autograd.grad`` with respect to parameters
used inside ``fn`` (their gradients are accumulated into ``.grad``, not returned), and double backward
through a checkpoint; both raise a clear error or are documented below.
"""
from __future__ import annotations

import warnings

from ..tensor import Tensor
from ..autograd import grad_mode as _gm
from ..autograd.function import Function
from .. import random as _random
from ..amp import state as _amp_state

__all__ = ["checkpoint", "checkpoint_sequential", "noop_context_fn"]


def noop_context_fn():
    """The default ``context_fn``: no extra context around the forward and the recomputation."""
    import contextlib
    return contextlib.nullcontext(), contextlib.nullcontext()


def _amp_snapshot():
    return dict(_amp_state.ENABLED), dict(_amp_state.DTYPE)


def _amp_restore(snap):
    enabled, dtype = snap
    _amp_state.ENABLED.update(enabled)
    _amp_state.DTYPE.update(dtype)
    _amp_state.refresh()


class _Checkpoint(Function):
    """Forward without a graph; backward recomputes ``fn`` with grad on and backpropagates through it."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, context_fn, kwargs, dummy, *args):
        ctx.run_function = run_function
        ctx.kwargs = kwargs
        ctx.context_fn = context_fn
        ctx.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:
            ctx.rng_state = _random.get_rng_state()
        ctx.amp = _amp_snapshot()
        ctx.tensor_idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.args = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_idx])
        fwd_ctx, _ = context_fn()
        with fwd_ctx:
            out = run_function(*args, **kwargs)
        return out

    @staticmethod
    def backward(ctx, *grads):
        if _gm.is_grad_enabled():
            raise RuntimeError("ember.utils.checkpoint: double backward (create_graph=True) through a checkpointed "
                               "region is not supported; call the function without checkpoint instead")
        saved = ctx.saved_tensors
        args = list(ctx.args)
        inputs = []
        for i, t in zip(ctx.tensor_idx, saved):
            d = t.detach()
            d.requires_grad_(t.requires_grad)
            args[i] = d
            inputs.append(d)
        current_rng = _random.get_rng_state() if ctx.preserve_rng_state else None
        current_amp = _amp_snapshot()
        try:
            if ctx.preserve_rng_state:
                _random.set_rng_state(ctx.rng_state)
            _amp_restore(ctx.amp)
            _, recompute_ctx = ctx.context_fn()
            with _gm.enable_grad(), recompute_ctx:
                outs = ctx.run_function(*args, **ctx.kwargs)
        finally:
            if current_rng is not None:
                _random.set_rng_state(current_rng)
            _amp_restore(current_amp)
        outs = outs if isinstance(outs, tuple) else (outs,)
        pairs = [(o, g) for o, g in zip(outs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if pairs:
            from ..autograd import backward as _backward
            _backward([o for o, _ in pairs], [g for _, g in pairs])
        in_grads = [None] * len(ctx.args)
        for i, d in zip(ctx.tensor_idx, inputs):
            in_grads[i] = d.grad if d.requires_grad else None
        return (None, None, None, None, None) + tuple(in_grads)


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn, determinism_check: str = "default",
               debug: bool = False, early_stop: bool = True, preserve_rng_state: bool = True, **kwargs):
    """Run ``function(*args, **kwargs)`` without storing its activations; recompute them in backward.

        >>> h = ember.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
    """
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
                      "use_reentrant=False is recommended, but if you need to preserve the current default "
                      "behavior, you can pass use_reentrant=True.", stacklevel=2)
        use_reentrant = True
    if determinism_check not in ("default", "none"):
        raise ValueError("determinism_check should be one of ['default', 'none'], but got " + str(determinism_check))
    if use_reentrant:
        if context_fn is not noop_context_fn or debug:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if _gm.is_grad_enabled() and not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)
        dummy = None
    else:
        # a grad-requiring placeholder keeps the outputs on the graph when no input requires grad, so the
        # parameters used inside ``function`` still receive gradients (torch's non-reentrant behaviour)
        from ..ops.creation import empty
        dummy = empty(0, requires_grad=True) if _gm.is_grad_enabled() else None
    if not _gm.is_grad_enabled() or _capturing():
        # under ember.compile the region is traced like any code: recomputation is a memory trade of eager
        # autograd, and the compiled backward already keeps only what it needs (same values, same draws)
        return function(*args, **kwargs)
    return _Checkpoint.apply(function, preserve_rng_state, context_fn, kwargs, dummy, *args)


def _capturing() -> bool:
    import sys
    cap = sys.modules.get("ember.compiler.capture")
    return cap is not None and cap.Tracer.active is not None


def checkpoint_sequential(functions, segments: int, input, use_reentrant=None, **kwargs):  # noqa: A002
    """Split a Sequential (or list of modules/functions) into ``segments`` chunks and checkpoint all but
    the last one."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed "
                      "explicitly. use_reentrant=False is recommended.", stacklevel=2)
        use_reentrant = True
    from ..nn.modules.container import Sequential
    if isinstance(functions, Sequential):
        functions = list(functions.children())
    functions = list(functions)

    def run_function(start, end, fns):
        def forward(x):
            for j in range(start, end + 1):
                x = fns[j](x)
            return x
        return forward

    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run_function(start, end, functions), input, use_reentrant=use_reentrant,  # noqa: A001
                           preserve_rng_state=kwargs.get("preserve_rng_state", True))
    return run_function(end + 1, len(functions) - 1, functions)(input)
