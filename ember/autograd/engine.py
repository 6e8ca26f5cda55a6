"""The backward engine: iterative (no Python recursion), dependency-counted, in reverse creation order.

1. Walk the graph from the roots and count, for every node *and every leaf*, the edges that feed it.
2. Seed the roots' gradients; a node (or leaf) is ready once every consumer has sent its gradient, so
   each one sees the *sum* of its incoming gradients exactly once (hooks run once, as in torch).
3. Run ready nodes newest-first (by sequence number, as torch does): tensor hooks, pre-hooks, the
   op's derivative, post-hooks; sum each produced gradient to its input's shape/dtype and pass it on.
   A node that ends up with no gradient at all (every consumer returned None for it) is skipped, and
   its children are counted done, so shared descendants still run.
4. Leaves accumulate into ``.grad`` (or into the result list, for ``autograd.grad``).

For ``autograd.grad`` / ``backward(inputs=...)`` only nodes from which a requested input is reachable
receive gradients, and a node whose only role is to hand its gradient to a requested non-leaf input is
not executed at all.
"""
from __future__ import annotations

import heapq
import sys
import warnings

import numpy as np

from ..tensor import Tensor, wrap
from . import grad_mode as _gm
from . import anomaly as _anomaly
from .node import node_class, rename


NODE_HOOKS: list = []   # the profiler: hook(node, run) -> gradients wraps each derivative; checked once per node

# final callbacks of the running backward passes (innermost last): queue_callback appends to the last list
_FINAL_CALLBACKS: list = []


def queue_callback(callback) -> None:
    """Run ``callback()`` once the running backward pass has finished (every leaf's ``.grad`` written and
    its hooks run): ``Variable._execution_engine.queue_callback``, as torch's DistributedDataParallel uses
    it to wait for its gradient all-reduces. Only valid while a backward pass runs (from a hook)."""
    if not _FINAL_CALLBACKS:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    _FINAL_CALLBACKS[-1].append(callback)


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def _shp(s):
    return "ember.Size([" + ", ".join(map(str, s)) + "])"


_ONE: dict = {}     # NumPy dtype -> a 0-d one (copied: cheaper than np.ones for the usual scalar loss)


def _ones(shape, npdt) -> np.ndarray:
    if shape:
        return np.ones(shape, dtype=npdt)
    one = _ONE.get(npdt)
    if one is None:
        one = _ONE[npdt] = np.ones((), dtype=npdt)
    return one.copy()


def _make_seeds(outputs, grad_outputs, fn_name):
    """Pair each output with its seed gradient (ones for scalars), checking shapes like torch."""
    seeds = []
    for i, t in enumerate(outputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn_name}: expected a Tensor as element {i} of the outputs, got {type(t).__name__}")
        g = None if grad_outputs is None or i >= len(grad_outputs) else grad_outputs[i]
        if g is None:
            if not t._rg:
                raise RuntimeError(
                    f"element {i} of tensors does not require grad and does not have a grad_fn")
            if t._data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if t._dtype.is_complex:
                raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got "
                                   f"ember.{t._dtype.name}")
            if type(t._data) is not np.ndarray:       # made on the device (None while capturing)
                from ..ops.creation import _device_empty
                g = _device_empty(t._data.shape, t._dtype, -1 - t._data.device, False, 1)
            if g is None:
                # (marked a constant before the move, so a capture makes it a device constant)
                g = _on_device_of(t, _factory(wrap(_ones(t._data.shape, t._dtype.np), t._dtype)))
        elif not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
        else:
            if g._data.shape != t._data.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {_shp(g._data.shape)} and "
                    f"output[{i}] has a shape of {_shp(t._data.shape)}.")
            if not t._rg:
                raise RuntimeError(
                    f"element {i} of tensors does not require grad and does not have a grad_fn")
            if g._dtype is not t._dtype:
                # the engine hands each node gradients of its output's dtype
                g = g.detach().to(t._dtype)
        seeds.append((t, g))
    if grad_outputs is not None and len(grad_outputs) != len(outputs):
        raise RuntimeError(f"grad_outputs has {len(grad_outputs)} gradients for {len(outputs)} outputs; "
                           "they must match in number")
    return seeds


def _check_inputs(inputs, what):
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise RuntimeError(f"all inputs have to be Tensors or GradientEdges, but got {type(t).__name__}")
        if not t._rg:
            raise RuntimeError("One of the differentiated Tensors does not require grad")


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
             inputs=None) -> None:
    """``ember.autograd.backward``: accumulate gradients of ``tensors`` into the leaves' ``.grad``.

        >>> x = ember.tensor([1.0, 2.0], requires_grad=True)
        >>> ember.autograd.backward((x * x).sum())
        >>> x.grad
        tensor([2., 4.])
    """
    if grad_variables is not None and grad_tensors is None:
        grad_tensors = grad_variables
    tensors = _as_tuple(tensors)
    grad_tensors = _as_tuple(grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    targets = None
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if len(inputs) == 0:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
        _check_inputs(inputs, "backward")
        targets = list(inputs)
    seeds = _make_seeds(tensors, grad_tensors, "backward")
    if create_graph:
        warnings.warn(
            "Using backward() with create_graph=True will create a reference cycle between the parameter "
            "and its gradient which can cause a memory leak. We recommend using autograd.grad when creating "
            "the graph to avoid this. If you have to use this function, make sure to reset the .grad fields "
            "of your parameters to None after use to break the cycle and avoid the leak.", stacklevel=3)
    _run(seeds, retain_graph, create_graph, targets, accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """``ember.autograd.grad``: gradients of ``outputs`` w.r.t. ``inputs``, returned, not accumulated.

        >>> x = ember.tensor([1.0, 2.0], requires_grad=True)
        >>> ember.autograd.grad((x * x).sum(), x)
        (tensor([2., 4.]),)
    """
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if is_grads_batched:
        raise RuntimeError("autograd.grad: is_grads_batched=True is not supported by ember (it needs vmap); "
                           "call grad once per batch element instead")
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    grad_outputs = _as_tuple(grad_outputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    _check_inputs(inputs, "grad")
    if retain_graph is None:
        retain_graph = create_graph
    seeds = _make_seeds(outputs, grad_outputs, "grad")
    res = _run(seeds, retain_graph, create_graph, list(inputs), accumulate=False)
    out = []
    for i, (t, g) in enumerate(zip(inputs, res)):
        if g is None:
            if materialize_grads:
                g = _on_device_of(t, wrap(np.zeros(t._data.shape, dtype=t._dtype.np), t._dtype))
                _factory(g)
            elif not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in the graph. "
                    "Set allow_unused=True if this is the desired behavior.")
        out.append(g)
    return tuple(out)


def _key(t):
    return id(t) if t.grad_fn is None else (id(t.grad_fn), t._output_nr)


class _Leaf:
    """Gradient buffer of one leaf tensor during a backward pass."""

    __slots__ = ("tensor", "grad")

    def __init__(self, tensor):
        self.tensor = tensor
        self.grad = None


def _run(seeds, keep_graph, create_graph, targets, accumulate):
    # --- 1. discover the graph and count the edges feeding every node and leaf -------------------
    deps: dict = {}
    nodes: dict = {}
    stack = []
    for t, _ in seeds:
        fn = t.grad_fn
        if fn is not None and id(fn) not in nodes:
            nodes[id(fn)] = fn
            stack.append(fn)
    while stack:
        node = stack.pop()
        for e in node.edges:
            if e is None:
                continue
            if type(e) is tuple:
                child = e[0]
                cid = id(child)
                deps[cid] = deps.get(cid, 0) + 1
                if cid not in nodes:
                    nodes[cid] = child
                    stack.append(child)
            else:
                lid = id(e)
                deps[lid] = deps.get(lid, 0) + 1

    # --- targets (autograd.grad / backward(inputs=...)) and pruning ----------------------------
    target_index = None
    needed = executed = None
    results = None
    if targets is not None:
        target_index = {}
        for i, t in enumerate(targets):
            target_index.setdefault(_key(t), []).append(i)
        results = [None] * len(targets)
        needed, executed = _needed_nodes(nodes, target_index)

    heappush = heapq.heappush
    buffers: dict = {}       # id(node) -> [grad per output]
    leaves: dict = {}        # id(leaf) -> _Leaf
    ready: list = []

    def send(edge, g):
        if type(edge) is not tuple:        # a leaf tensor: buffer until every producer is done
            lid = id(edge)
            lb = leaves.get(lid)
            if lb is None:
                if target_index is not None and lid not in target_index:
                    return                 # not requested: torch does not run its AccumulateGrad
                lb = leaves[lid] = _Leaf(edge)
            lb.grad = g if lb.grad is None else lb.grad + g
            return
        node, nr = edge
        nid = id(node)
        if needed is not None and nid not in needed:
            return
        buf = buffers.get(nid)
        if buf is None:
            buf = buffers[nid] = [None] * node.nout
        prev = buf[nr]
        buf[nr] = g if prev is None else prev + g

    def flush_leaf(lid):
        lb = leaves.pop(lid, None)
        if lb is not None and lb.grad is not None:
            _leaf(lb, target_index, results, accumulate, create_graph)

    def finish(node):
        # ``node`` has run (or been skipped): count its edges done; start whatever became ready
        work = None
        while True:
            for e in node.edges:
                if e is None:
                    continue
                if type(e) is tuple:
                    child = e[0]
                    cid = id(child)
                    d = deps[cid] - 1
                    deps[cid] = d
                    if d == 0:
                        if cid in buffers:
                            heappush(ready, (-child.seq, cid, child))
                        elif work is None:
                            # no gradient reached it: skip it (torch keeps its saved values, as it
                            # never ran) and count its edges done
                            work = [child]
                        else:
                            work.append(child)
                else:
                    lid = id(e)
                    d = deps[lid] - 1
                    deps[lid] = d
                    if d == 0:
                        flush_leaf(lid)
            if not work:
                return
            node = work.pop()

    prev_mode = _gm.GRAD[0]
    _gm.GRAD[0] = bool(create_graph)
    callbacks: list = []
    _FINAL_CALLBACKS.append(callbacks)
    try:
        for t, g in seeds:
            if t.grad_fn is None:
                send(t, g)
            else:
                send((t.grad_fn, t._output_nr), g)
        for t, _ in seeds:
            if t.grad_fn is None and deps.get(id(t), 0) == 0:
                flush_leaf(id(t))
        roots = {}
        for t, _ in seeds:
            fn = t.grad_fn
            if fn is not None and deps.get(id(fn), 0) == 0:
                roots[id(fn)] = fn
        for nid, node in roots.items():
            if nid in buffers:
                heapq.heappush(ready, (-node.seq, nid, node))
            else:
                finish(node)
        # the usual pass (backward() without inputs=, no profiler, no anomaly mode, no dynamic capture):
        # a node with one output and no hooks runs inline below; anything else goes through _run_node
        plain = (targets is None and not NODE_HOOKS and _validate is _ENGINE_VALIDATE
                 and not _anomaly.ENABLED[0])
        heappop = heapq.heappop
        while ready:
            _, nid, node = heappop(ready)
            grads = buffers.pop(nid)
            if not plain or node.nout != 1 or node.tensor_hooks is not None or node.pre_hooks is not None \
                    or node.hooks is not None or node.released:
                _run_node(node, grads, send, target_index, results, keep_graph,
                          executed is None or nid in executed)
                finish(node)
                continue
            gi = node.op.backward(node, grads[0])
            del grads
            if type(gi) is not tuple:
                gi = (gi,) if not isinstance(gi, list) else tuple(gi)
            _validate(node, gi, send)
            gi = None           # (no reference left here: _accumulate may take a leaf's array over)
            if not keep_graph:
                node.release()
            finish(node)
        if accumulate and targets is not None:
            # backward(inputs=[non_leaf]) accumulates into the non-leaf's .grad as well
            for t, g in zip(targets, results):
                if t.grad_fn is not None and g is not None:
                    _accumulate(t, g, create_graph)
        i = 0
        while i < len(callbacks):        # a callback may queue more
            callbacks[i]()
            i += 1
    finally:
        _FINAL_CALLBACKS.pop()
        _gm.GRAD[0] = prev_mode
    return results


def _needed_nodes(nodes, target_index):
    """(needed, executed): nodes from which a target is reachable (they receive gradients), and those
    among them whose derivative must run (some edge leads on to a target)."""
    needed = set()
    executed = set()
    order = []
    seen = set()
    for nid, node in nodes.items():
        if nid in seen:
            continue
        stack = [(node, False)]
        while stack:
            n, done = stack.pop()
            if done:
                order.append(n)
                continue
            if id(n) in seen:
                continue
            seen.add(id(n))
            stack.append((n, True))
            for e in n.edges:
                if type(e) is tuple and id(e[0]) not in seen:
                    stack.append((e[0], False))
    for n in order:  # post-order: children first
        run = False
        for e in n.edges:
            if e is None:
                continue
            if type(e) is tuple:
                if id(e[0]) in needed:
                    run = True
                    break
            elif id(e) in target_index:
                run = True
                break
        nid = id(n)
        if run:
            executed.add(nid)
            needed.add(nid)
        elif any((nid, nr) in target_index for nr in range(n.nout)):
            needed.add(nid)
    return needed, executed


def _leaf(lb, target_index, results, accumulate, create_graph):
    """A leaf's summed gradient: run its hooks, then capture it (grad) or accumulate it (backward)."""
    leaf = lb.tensor
    g = lb.grad
    lb.grad = None          # hand over the only reference, so _accumulate may take the array over
    if leaf._hooks:
        for h in list(leaf._hooks.values()):
            r = h(g)
            if r is not None:
                g = r
    if target_index is not None:
        idx = target_index.get(id(leaf))
        if idx is None:
            return
        if not accumulate:
            for i in idx:
                results[i] = g if results[i] is None else results[i] + g
            return
    _accumulate(leaf, g, create_graph)


def _run_node(node, grads, send, target_index, results, keep_graph, execute=True):
    # tensor hooks (register_hook on non-leaf tensors, retain_grad) see each output's gradient
    if node.tensor_hooks:
        for nr, hooks in node.tensor_hooks.items():
            g = grads[nr]
            if g is None:
                continue
            for k, h in list(hooks.items()):
                if type(k) is tuple:
                    continue            # retain_grad runs last, on the final value
                r = h(g)
                if r is not None:
                    g = r
            for k, h in list(hooks.items()):
                if type(k) is tuple:
                    h(g)
            grads[nr] = g
    if target_index is not None:
        for nr in range(node.nout):
            idx = target_index.get((id(node), nr))
            if idx is not None and grads[nr] is not None:
                for i in idx:
                    results[i] = grads[nr] if results[i] is None else results[i] + grads[nr]
    if not execute:
        return
    if node.released and node.op.save:
        node._check()            # raises torch's "backward through the graph a second time"
    if node.pre_hooks:
        for h in list(node.pre_hooks.values()):
            r = h(tuple(grads))
            if r is not None:
                grads = list(r)
    if node.nout > 1:
        grads = _materialize(node, grads)
    op = node.op
    try:
        gi = op.backward(node, *grads) if not NODE_HOOKS else NODE_HOOKS[-1](node, lambda: op.backward(node, *grads))
    except Exception:
        if node.trace is not None:
            warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that caused the "
                          f"error:\n{node.trace}", stacklevel=2)
        raise
    if type(gi) is not tuple:
        gi = (gi,) if not isinstance(gi, list) else tuple(gi)
    if node.hooks or _validate is not _ENGINE_VALIDATE or (_anomaly.ENABLED[0] and _anomaly.CHECK_NAN[0]):
        # post-hooks, NaN checks, or ember.compile's dynamic capture, which replaces _validate (it
        # compares shapes as symbolic sizes): the checked path, through _validate
        _send_checked(node, gi, grads, send, keep_graph)
        return
    # the usual case, in one pass: bring each gradient to its input's shape and dtype and pass it on
    # (send only buffers it: nothing reaches a leaf before this node is finished)
    _validate(node, gi, send)
    if not keep_graph:
        node.release()


def _send_checked(node, gi, grads, send, keep_graph):
    """Pass on a node's gradients when post-hooks or anomaly mode's NaN check watch them."""
    edges = node.edges
    if len(gi) < len(edges):
        gi = gi + (None,) * (len(edges) - len(gi))
    gi = _validate(node, gi)
    if node.hooks:
        # post-hooks see gradients already reduced to each input's shape and dtype, as in torch
        for h in list(node.hooks.values()):
            r = h(gi, tuple(grads))
            if r is not None:
                gi = _validate(node, tuple(r))
    if not keep_graph:
        node.release()
    check_nan = _anomaly.ENABLED[0] and _anomaly.CHECK_NAN[0]
    for i, e in enumerate(edges):
        if e is None:
            continue
        g = gi[i]
        if g is None:
            continue
        if check_nan and g._dtype.is_floating_point and np.isnan(g._data).any():
            if node.trace is not None:
                warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that caused the "
                              f"error:\n{node.trace}", stacklevel=2)
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")
        send(e, g)


def _check_grad_type(node, g, i):
    if not isinstance(g, Tensor):
        raise TypeError(f"Function {node.name()} returned a {type(g).__name__} as gradient {i}; "
                        "expected a Tensor or None")


def _fit(node, i, g, shape, dt):
    """Gradient ``i`` of ``node`` brought to its input's shape (summing broadcast dims) and dtype."""
    if g._data.shape != shape:
        g = _fit_shape(g, shape, node, i)
    if g._dtype is not dt:
        # a real input that met a complex one gets the real part of its gradient (torch's rule)
        g = g.to(dt) if not g._dtype.is_complex or dt.is_complex else g.real.to(dt)
    return g


def _validate(node, gi, send=None):
    """Check each produced gradient and bring it to its input's shape (summing broadcast dims) and dtype
    (a new tuple only when some gradient changes). With ``send`` (the engine's usual case), each
    gradient is passed on once checked, in the same pass, and nothing is returned."""
    meta = node.in_meta
    n = len(gi)
    out = None
    for i, e in enumerate(node.edges):
        if e is None or i >= n:
            continue
        g = gi[i]
        if g is None:
            continue
        if type(g) is not Tensor:
            _check_grad_type(node, g, i)
        shape, dt = meta[i]
        if g._data.shape != shape or g._dtype is not dt:
            g = _fit(node, i, g, shape, dt)
            if send is None:
                if out is None:
                    out = list(gi)
                out[i] = g
        if send is not None:
            send(e, g)
    return gi if out is None else tuple(out)


_ENGINE_VALIDATE = _validate


def _materialize(node, grads):
    """Zeros for outputs that got no gradient (torch materialises them for multi-output nodes)."""
    if all(g is not None for g in grads):
        return grads
    meta = node.ctx_data.get("out_meta") if isinstance(node.ctx_data, dict) else None
    if meta is None:
        return grads
    like = next((g for g in grads if g is not None), None)     # zeros on the device of the gradients (meta, ...)
    return [g if g is not None or meta[i] is None else
            _zeros_like_grad(like, wrap(np.zeros(meta[i][0], dtype=meta[i][1].np), meta[i][1]))
            for i, g in enumerate(grads)]


def _zeros_like_grad(like, z):
    return _factory(z) if like is None else _on_device_of(like, _factory(z))


def _fit_shape(g, shape, node, i):
    from ..ops.reduce import sum_to_size
    try:
        return sum_to_size(g, shape)
    except Exception:
        raise RuntimeError(
            f"Function {node.name()} returned an invalid gradient at index {i} - got "
            f"[{', '.join(map(str, g._data.shape))}] but expected shape compatible with "
            f"[{', '.join(map(str, shape))}]") from None


# references to a gradient the engine may take over: the caller's local, the argument, getrefcount's own
_STEAL_REFS = 3


def _grad_layout(leaf, d):
    """An array for ``leaf.grad`` holding ``d``: the leaf's strides when it is dense (torch's layout
    contract), C order otherwise."""
    ld = leaf._data
    dense = ld.flags.c_contiguous or ld.flags.f_contiguous or _dense(ld)
    out = np.empty_like(ld, order="K") if dense else np.empty(ld.shape, dtype=ld.dtype)
    np.copyto(out, d, casting="unsafe")
    return out


def _dense(a):
    # non-overlapping and dense: sorting strides gives a contiguous layout
    dims = sorted((st, n) for n, st in zip(a.shape, a.strides) if n != 1)
    expected = a.itemsize
    for st, n in dims:
        if st != expected:
            return False
        expected *= n
    return True


def _on_device_of(like, t):
    """``t`` (made on the CPU) on the device of ``like``."""
    if type(like._data) is np.ndarray:
        return t
    from ..devices.dispatch import to_device
    return to_device(t, like.device)


_FACTORY: list = []    # ember.ops.registry.FACTORY, looked up once (the ops import after this module)


def _factory(t):
    """Tell a capturing compiler that ``t`` is a constant made here (ones/zeros), not derived from values."""
    if not _FACTORY:
        from ..ops.registry import FACTORY
        _FACTORY.append(FACTORY)
    f = _FACTORY[0][0]
    if f is not None:
        f(t._data)
    return t


# set by ember.compiler while capturing: hook(leaf, g) does the accumulation and records it
CAPTURE_ACC = [None]


_COPY_BACKWARDS = node_class("torch::autograd::CopyBackwards")     # torch's node for that copy


def _accumulate(leaf, g, create_graph):
    """Add ``g`` into ``leaf.grad`` following torch's AccumulateGrad rules."""
    if CAPTURE_ACC[0] is not None and not create_graph:
        CAPTURE_ACC[0](leaf, g)
        if leaf._post_acc_hooks:
            _run_post_acc_hooks(leaf)
        return
    cur = leaf.grad
    if type(g._data) is not np.ndarray:
        # a device gradient: accumulated with ember ops on its device (a new tensor, then in place)
        if cur is None:
            leaf._grad = rename(g.clone(), _COPY_BACKWARDS) if create_graph and _gm.GRAD[0] else g.detach().clone()
            from ..devices.meta import is_meta_array, obey_layout
            if is_meta_array(g._data):      # torch's layout contract: the leaf's strides (not for sparse data)
                obey_layout(leaf._grad, leaf)
        elif (create_graph and _gm.GRAD[0]) or cur.grad_fn is not None:
            leaf._grad = cur + g
        else:
            with _gm.no_grad():
                cur.add_(g)
        if leaf._post_acc_hooks:
            _run_post_acc_hooks(leaf)
        return
    if cur is None:
        if create_graph and _gm.GRAD[0]:
            # torch stores a differentiable copy, so the graph of g stays reachable from .grad
            c = g.clone() if g._rg else wrap(np.array(g._data), g._dtype)
            leaf._grad = rename(c, _COPY_BACKWARDS)
        else:
            d = g._data
            ld = leaf._data
            # take over a freshly computed array nobody else holds; copy anything else
            if (d.base is None and d.flags.writeable and d.strides == ld.strides
                    and sys.getrefcount(g) <= _STEAL_REFS and sys.getrefcount(d) <= _STEAL_REFS):
                leaf._grad = wrap(d, g._dtype)
            else:
                leaf._grad = wrap(_grad_layout(leaf, d), g._dtype)
    elif create_graph and _gm.GRAD[0]:
        leaf._grad = cur + g
    elif cur.grad_fn is not None or not cur._data.flags.writeable:
        leaf._grad = cur + g
    else:
        np.add(cur._data, g._data, out=cur._data, casting="unsafe")
        cur._bump()
    if leaf._post_acc_hooks:
        _run_post_acc_hooks(leaf)


def _run_post_acc_hooks(leaf):
    for h in list(leaf._post_acc_hooks.values()):
        if h(leaf) is not None:
            raise RuntimeError("Tensor post accumulate grad hooks should return None.")
