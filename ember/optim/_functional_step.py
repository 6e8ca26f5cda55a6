"""The functional forms of the optimizers (``torch.optim.adam.adam``, ``torch.optim.sgd.sgd``): one update
of explicit parameter/gradient/state lists, run by the optimizer class's own per-parameter loop
(``Optimizer._step_group``) so the update rule exists once.

Each parameter is stood in for by a proxy tensor that shares its buffer and carries the given gradient;
the given state tensors are the proxy's state, so the loop updates the caller's parameters and state in
place, exactly as a step of the class would.
"""
from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ..tensor import Tensor


def _proxy(p: Tensor, g: Tensor) -> Tensor:
    q = Tensor.__new__(Tensor)
    q._data = p._data
    q._dtype = p._dtype
    q._grad = g
    return q


def functional_step(cls, fn: str, defaults: dict, params, grads, states) -> list:
    """Run ``cls``'s update once over ``params`` with ``grads`` and per-parameter state dicts ``states``
    (mutated in place; returned, as the loop may add entries such as SGD's momentum buffer)."""
    if not (len(params) == len(grads) == len(states)):
        raise ValueError(f"{fn}: params, grads and state lists must have the same length, got "
                         f"{len(params)}, {len(grads)}, {len(states)}")
    opt = cls.__new__(cls)
    opt.defaults = defaults
    opt.state = {}
    proxies = []
    for p, g, st in zip(params, grads, states):
        if not isinstance(p, Tensor) or not isinstance(g, Tensor):
            raise TypeError(f"{fn}: params and grads must be lists of tensors")
        q = _proxy(p, g)
        opt.state[q] = st
        proxies.append(q)
    group = dict(defaults, params=proxies)
    opt._check_group(group)
    with no_grad():
        opt._step_group(group)
    for p in params:
        p._bump()
    return [opt.state[q] for q in proxies]


def check_steps(fn: str, state_steps) -> None:
    if not all(isinstance(t, Tensor) for t in state_steps):
        raise RuntimeError(f"API has changed, `state_steps` argument must contain a list of singleton tensors "
                           f"({fn})")
