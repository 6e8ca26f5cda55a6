"""The backward engine: iterative (no Python recursion), dependency-counted, in reverse creation order.

1. Walk the graph from the roots and count, for every node, the edges that feed it.
2. Seed the roots' gradients; a node is ready once every consumer has sent its gradient.
3. Run ready nodes newest-first (by sequence number, as torch does): tensor hooks, pre-hooks, the
   op's derivative, post-hooks; sum each produced gradient to its input's shape/dtype and pass it on.
4. Leaves accumulate into ``.grad`` (or into the result list, for ``autograd.grad``).
"""
from __future__ import annotations

import heapq

import numpy as np

from ..tensor import Tensor, wrap
from . import grad_mode as _gm
from . import anomaly as _anomaly


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def _make_seeds(outputs, grad_outputs, fn_name):
    seeds = []
    for i, t in enumerate(outputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn_name}: expected a Tensor as element {i}, got {type(t).__name__}")
        g = None if grad_outputs is None else grad_outputs[i]
        if not t._rg:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn")
        if g is None:
            if t._data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            g = wrap(np.ones(t._data.shape, dtype=t._dtype.np), t._dtype)
        elif not isinstance(g, Tensor):
            g = wrap(np.full(t._data.shape, g, dtype=t._dtype.np), t._dtype)
        else:
            if g._data.shape != t._data.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {_shp(g._data.shape)} and "
                    f"output[{i}] has a shape of {_shp(t._data.shape)}.")
            if g._dtype is not t._dtype and g._dtype.is_floating_point != t._dtype.is_floating_point:
                raise RuntimeError(
                    f"For output {i}: grad_output dtype {g._dtype} is incompatible with output dtype {t._dtype}")
        seeds.append((t, g))
    return seeds


def _shp(s):
    return "torch.Size([" + ", ".join(map(str, s)) + "])"


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None) -> None:
    """``ember.autograd.backward``: accumulate gradients of ``tensors`` into leaves' ``.grad``."""
    tensors = _as_tuple(tensors)
    grad_tensors = _as_tuple(grad_tensors)
    if grad_tensors is not None and len(grad_tensors) != len(tensors):
        raise RuntimeError(f"got {len(grad_tensors)} gradients for {len(tensors)} tensors")
    if retain_graph is None:
        retain_graph = create_graph
    targets = None
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if len(inputs) == 0:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        targets = list(inputs)
    seeds = _make_seeds(tensors, grad_tensors, "backward")
    _run(seeds, retain_graph, create_graph, targets, accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """``ember.autograd.grad``: gradients of ``outputs`` w.r.t. ``inputs``, returned, not accumulated."""
    outputs = _as_tuple(outputs)
    single = isinstance(inputs, Tensor)
    inputs = _as_tuple(inputs)
    grad_outputs = _as_tuple(grad_outputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    for i, t in enumerate(inputs):
        if not t._rg:
            raise RuntimeError(f"One of the differentiated Tensors does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    seeds = _make_seeds(outputs, grad_outputs, "grad")
    res = _run(seeds, retain_graph, create_graph, list(inputs), accumulate=False)
    out = []
    for i, (t, g) in enumerate(zip(inputs, res)):
        if g is None:
            if materialize_grads:
                g = wrap(np.zeros(t._data.shape, dtype=t._dtype.np), t._dtype)
            elif not allow_unused:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the graph. "
                    "Set allow_unused=True if this is the desired behavior.")
        out.append(g)
    return tuple(out)


def _key(t):
    return id(t) if t.grad_fn is None else (id(t.grad_fn), t._output_nr)


def _run(seeds, keep_graph, create_graph, targets, accumulate):
    # --- 1. count dependencies ---------------------------------------------------------------
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
        if node.released and node.op.save:
            node._check()
        for e in node.edges:
            if e is None or type(e) is not tuple:
                continue
            child = e[0]
            cid = id(child)
            deps[cid] = deps.get(cid, 0) + 1
            if cid not in nodes:
                nodes[cid] = child
                stack.append(child)

    # --- targets (autograd.grad / backward(inputs=...)) and pruning ----------------------------
    target_index = None
    needed = None
    results = None
    if targets is not None:
        target_index = {}
        for i, t in enumerate(targets):
            target_index.setdefault(_key(t), []).append(i)
        results = [None] * len(targets)
        needed = _needed_nodes(nodes, target_index)

    buffers: dict = {}
    handed_out: set = set()
    ready: list = []

    def send(edge, g):
        if type(edge) is not tuple:        # a leaf tensor
            _leaf(edge, g)
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

    def _leaf(leaf, g):
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
        _accumulate(leaf, g, create_graph, handed_out)

    prev_mode = _gm.GRAD[0]
    _gm.GRAD[0] = bool(create_graph)
    try:
        for t, g in seeds:
            handed_out.add(id(g._data))
            if t.grad_fn is None:
                _leaf(t, g)
            else:
                send((t.grad_fn, t._output_nr), g)
        for nid, node in nodes.items():
            if deps.get(nid, 0) == 0 and nid in buffers:
                heapq.heappush(ready, (-node.seq, nid, node))
        while ready:
            _, nid, node = heapq.heappop(ready)
            grads = buffers.pop(nid, None)
            if grads is not None and (needed is None or nid in needed):
                _run_node(node, grads, send, target_index, results, accumulate, keep_graph)
            # children become ready as their last consumer finishes
            for e in node.edges:
                if type(e) is tuple:
                    cid = id(e[0])
                    d = deps[cid] - 1
                    deps[cid] = d
                    if d == 0:
                        if cid in buffers:
                            heapq.heappush(ready, (-e[0].seq, cid, e[0]))
                        elif not keep_graph:
                            _release_subgraph(e[0], deps)
        if accumulate and targets is not None:
            # backward(inputs=[non_leaf]) accumulates into the non-leaf's .grad as well
            for t, g in zip(targets, results):
                if t.grad_fn is not None and g is not None:
                    _accumulate(t, g, create_graph, handed_out)
    finally:
        _gm.GRAD[0] = prev_mode
    return results


def _release_subgraph(node, deps):
    # a node that received no gradient is never run; free it and count it done for its children
    stack = [node]
    while stack:
        n = stack.pop()
        n.release()
        for e in n.edges:
            if type(e) is tuple:
                cid = id(e[0])
                deps[cid] -= 1
                if deps[cid] == 0:
                    stack.append(e[0])


def _needed_nodes(nodes, target_index):
    """Nodes from which some target is reachable (only those run in autograd.grad)."""
    needed = set()
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
        hit = any((id(n), nr) in target_index for nr in range(n.nout))
        if not hit:
            for e in n.edges:
                if e is None:
                    continue
                if type(e) is tuple:
                    if id(e[0]) in needed:
                        hit = True
                        break
                elif id(e) in target_index:
                    hit = True
                    break
        if hit:
            needed.add(id(n))
    return needed


def _run_node(node, grads, send, target_index, results, accumulate, keep_graph):
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
    if node.pre_hooks:
        for h in list(node.pre_hooks.values()):
            r = h(tuple(grads))
            if r is not None:
                grads = list(r)
    if node.nout > 1:
        grads = _materialize(node, grads)
    if all(e is None for e in node.edges):
        if not keep_graph:
            node.release()
        return
    op = node.op
    try:
        gi = op.backward(node, *grads)
    except Exception as exc:
        if node.trace is not None:
            import warnings
            warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n{node.trace}")
        raise
    if type(gi) is not tuple:
        gi = (gi,) if not isinstance(gi, list) else tuple(gi)
    edges = node.edges
    if len(gi) < len(edges):
        gi = gi + (None,) * (len(edges) - len(gi))
    if node.hooks:
        for h in list(node.hooks.values()):
            r = h(gi, tuple(grads))
            if r is not None:
                gi = tuple(r)
    if not keep_graph:
        node.release()
    check_nan = _anomaly.ENABLED[0] and _anomaly.CHECK_NAN[0]
    for i, e in enumerate(edges):
        if e is None:
            continue
        g = gi[i]
        if g is None:
            continue
        if not isinstance(g, Tensor):
            raise TypeError(f"Function {node.name()} returned a {type(g).__name__} as gradient {i}; expected a Tensor or None")
        shape, dt = node.in_meta[i]
        if g._data.shape != shape:
            g = _fit_shape(g, shape, node, i)
        if g._dtype is not dt:
            g = g.to(dt)
        if check_nan and np.isnan(g._data).any():
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output."
                               + (f"\nForward call that made it:\n{node.trace}" if node.trace else ""))
        send(e, g)


def _materialize(node, grads):
    if all(g is not None for g in grads):
        return grads
    meta = node.ctx_data.get("out_meta") if isinstance(node.ctx_data, dict) else None
    if meta is None:
        return grads
    return [g if g is not None or meta[i] is None else
            wrap(np.zeros(meta[i][0], dtype=meta[i][1].np), meta[i][1]) for i, g in enumerate(grads)]


def _fit_shape(g, shape, node, i):
    from ..ops.reduce import sum_to_size
    try:
        return sum_to_size(g, shape)
    except Exception:
        raise RuntimeError(
            f"Function {node.name()} returned an invalid gradient at index {i} - got "
            f"[{', '.join(map(str, g._data.shape))}] but expected shape compatible with "
            f"[{', '.join(map(str, shape))}]") from None


def _accumulate(leaf, g, create_graph, handed_out):
    cur = leaf.grad
    if cur is None:
        if create_graph:
            leaf.grad = g
        else:
            d = g._data
            if id(d) in handed_out or d.base is not None or not d.flags.writeable or not d.flags.c_contiguous:
                d = np.array(d, order="C")
            handed_out.add(id(d))
            leaf.grad = wrap(d, g._dtype)
    elif create_graph or cur.grad_fn is not None or not cur._data.flags.writeable:
        leaf.grad = cur + g
    else:
        np.add(cur._data, g._data, out=cur._data)
        cur._bump()
    if leaf._post_acc_hooks:
        for h in list(leaf._post_acc_hooks.values()):
            h(leaf)
