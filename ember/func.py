"""``ember.func``: torch.func's function transforms, built on ember's reverse-mode autograd.

* ``functional_call(module, params_and_buffers, args)`` runs a module with some parameters/buffers
  swapped for the given tensors (the meta-learning and ensembling workhorse);
* ``grad`` / ``grad_and_value`` / ``vjp`` / ``jacrev`` / ``jacfwd`` / ``hessian`` / ``jvp`` compute
  derivatives of Python functions of tensors. They nest (``grad(grad(f))``): an input that already takes
  part in an outer differentiation is differentiated through a fresh alias, and graphs are kept only
  when an outer level needs them. ``jacfwd`` and ``jvp`` give forward-mode results through reverse mode
  (the same values; ember has no forward-mode AD);
* ``vmap(f, in_dims, out_dims)`` maps ``f`` over a batch dimension by calling it once per slice and
  stacking the results: the values torch's batching rules give, for functions without side effects,
  at a loop's speed. Random ops inside draw independently per slice (torch's ``randomness="different"``);
* ``stack_module_state(models)`` stacks the parameters and buffers of identical models;
* ``functionalize(f)`` runs ``f`` as torch's eager functionalization does (outputs never alias inputs) and
  ``linearize(f, *primals)`` returns ``f(primals)`` and a function computing JVPs at ``primals``.
"""
from __future__ import annotations

import functools

from .tensor import Tensor
from .autograd.grad_mode import enable_grad, is_grad_enabled

__all__ = ["functional_call", "stack_module_state", "grad", "grad_and_value", "vjp", "jacrev", "jacfwd", "hessian",
           "jvp", "vmap", "functionalize", "linearize"]


# ---- a minimal pytree (tuples, lists, dicts of tensors) ----------------------------------------------------


def _flatten(tree):
    if isinstance(tree, (tuple, list)):
        leaves, specs = [], []
        for t in tree:
            lv, sp = _flatten(t)
            leaves.extend(lv)
            specs.append(sp)
        return leaves, (type(tree), specs)
    if isinstance(tree, dict):
        leaves, specs = [], []
        for k in tree:
            lv, sp = _flatten(tree[k])
            leaves.extend(lv)
            specs.append((k, sp))
        return leaves, (dict, specs)
    return [tree], None


def _unflatten(leaves, spec):
    it = iter(leaves)

    def build(sp):
        if sp is None:
            return next(it)
        kind, children = sp
        if kind is dict:
            return {k: build(c) for k, c in children}
        vals = [build(c) for c in children]
        return tuple(vals) if kind is tuple else list(vals)
    return build(spec)


# ---- functional_call / stack_module_state --------------------------------------------------------------------


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):
    """Call ``module(*args, **kwargs)`` with the named parameters/buffers replaced by the given tensors
    (restored afterwards). Tied weights follow a replaced name when ``tie_weights`` is True."""
    if isinstance(parameter_and_buffer_dicts, dict):
        values = dict(parameter_and_buffer_dicts)
    else:
        values = {}
        seen_twice = []
        for d in parameter_and_buffer_dicts:
            for k in d:
                if k in values:
                    seen_twice.append(k)
            values.update(d)
        if seen_twice:
            raise ValueError(f"{sorted(set(seen_twice))} appeared in multiple dictionaries; behavior of functional "
                             "call is ambiguous")
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    kwargs = kwargs or {}
    names = {}
    for n, p in module.named_parameters(remove_duplicate=False):
        names[n] = p
    for n, b in module.named_buffers(remove_duplicate=False):
        names[n] = b
    if tie_weights:
        # a replaced tensor also replaces every other name bound to the same original tensor
        by_id: dict = {}
        for n, t in names.items():
            by_id.setdefault(id(t), []).append(n)
        for n in list(values):
            if n in names:
                for other in by_id[id(names[n])]:
                    if other in values and values[other] is not values[n]:
                        raise ValueError(f"functional_call got multiple values for keys ['{n}', '{other}'], which "
                                         "are tied. Consider using tie_weights=False")
                    values.setdefault(other, values[n])
    if strict:
        missing = [n for n in names if n not in values]
        unexpected = [n for n in values if n not in names]
        if missing or unexpected:
            msg = f"Error(s) in reparametrizing for {type(module).__name__}:"
            if unexpected:
                msg += "\n\tUnexpected key(s): " + ", ".join(f"'{k}'" for k in unexpected) + "."
            if missing:
                msg += "\n\tMissing key(s): " + ", ".join(f"'{k}'" for k in missing) + "."
            raise RuntimeError(msg)
    swapped = []
    try:
        for name, value in values.items():
            if name not in names:
                continue
            owner_name, _, attr = name.rpartition(".")
            owner = module.get_submodule(owner_name) if owner_name else module
            store = owner._parameters if attr in owner._parameters else owner._buffers
            swapped.append((store, attr, store[attr]))
            store[attr] = value
        return module(*args, **kwargs)
    finally:
        for store, attr, old in reversed(swapped):
            store[attr] = old


def stack_module_state(models):
    """``(params, buffers)``: dicts of each name's tensors stacked along a new leading dim."""
    from .ops.shape_join import stack
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    first = type(models[0])
    if not all(type(m) is first for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    all_params = [dict(m.named_parameters()) for m in models]
    all_buffers = [dict(m.named_buffers()) for m in models]
    params = {}
    for k in all_params[0]:
        t = stack([p[k].detach() for p in all_params])
        if all(p[k].requires_grad for p in all_params):
            t.requires_grad_(True)
        params[k] = t
    buffers = {k: stack([b[k] for b in all_buffers]) for k in all_buffers[0]}
    return params, buffers


# ---- derivatives -------------------------------------------------------------------------------------------


def _prepare(x):
    """A differentiable stand-in for ``x``: an alias on the outer graph if ``x`` is already being
    differentiated, else a fresh leaf."""
    if not isinstance(x, Tensor):
        raise TypeError(f"Expected a Tensor to differentiate with respect to, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise RuntimeError("only Tensors of floating point dtype can require gradients")
    if x.requires_grad and is_grad_enabled():
        return x.view_as(x)
    return x.detach().requires_grad_(True)


def _outside_leaves(tensors, fresh_ids) -> bool:
    """True if the autograd graph behind ``tensors`` reaches a grad-requiring tensor other than the fresh
    leaves made by this transform (then an outer differentiation needs the graph kept)."""
    seen, stack = set(), []
    for t in tensors:
        if isinstance(t, Tensor) and t.requires_grad:
            if t.grad_fn is None:
                if id(t) not in fresh_ids:
                    return True
            else:
                stack.append(t.grad_fn)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for e in getattr(node, "edges", None) or ():
            if e is None:
                continue
            if isinstance(e, Tensor):
                if id(e) not in fresh_ids:
                    return True
            elif e[0] is not None:
                stack.append(e[0])
    return False


def _finish(tensors, fresh_ids, keep: bool):
    """Detach results that only depend on this transform's own leaves (as torch.func returns them)."""
    if keep or _outside_leaves(tensors, fresh_ids):
        return list(tensors)
    return [t.detach() if isinstance(t, Tensor) else t for t in tensors]


def _argnums_tuple(argnums, nargs, fn):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for a in nums:
        if not -nargs <= a < nargs:
            raise RuntimeError(f"{fn}: Got argnums={a}, but only {nargs} positional inputs")
    return single, tuple(a % nargs for a in nums)


def _grads(outputs, inputs, grad_outputs, create_graph):
    from .autograd import grad as _autograd_grad
    from .ops.creation import zeros_like
    res = _autograd_grad(outputs, inputs, grad_outputs=grad_outputs, create_graph=create_graph,
                         retain_graph=True, allow_unused=True)
    return [zeros_like(i) if g is None else g for g, i in zip(res, inputs)]


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """``f -> (grad of f at args, f(args))`` for a scalar-valued ``f`` (with ``has_aux``: ``f`` returns
    ``(value, aux)`` and the result is ``(grad, (value, aux))``)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        single, nums = _argnums_tuple(argnums, len(args), "grad_and_value(f)(*args)")
        outer = is_grad_enabled()
        nested = outer and any(isinstance(t, Tensor) and t.requires_grad
                               for a in args for t in _flatten(a)[0])
        args = list(args)
        specs, flat_inputs, counts = [], [], []
        for i in nums:
            leaves, spec = _flatten(args[i])
            prepared = [_prepare(t) for t in leaves]
            args[i] = _unflatten(prepared, spec)
            specs.append(spec)
            counts.append(len(prepared))
            flat_inputs.extend(prepared)
        with enable_grad():
            out = func(*args, **kwargs)
            aux = None
            if has_aux:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise RuntimeError("grad_and_value(f)(*args): output of function f should be a tuple: "
                                       "(output, aux) if has_aux is True")
                out, aux = out
            if not isinstance(out, Tensor):
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                                   f"{type(out).__name__}")
            if out.dim() != 0:
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                                   f"tensor with {out.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs "
                                   "instead?")
            gs = _grads([out], flat_inputs, None, create_graph=outer)
        fresh = {id(t) for t in flat_inputs if t.grad_fn is None}
        gs = _finish(gs, fresh, nested)
        out = _finish([out], fresh, nested)[0]
        if aux is not None:
            aux_leaves, aux_spec = _flatten(aux)
            aux = _unflatten(_finish(aux_leaves, fresh, nested), aux_spec)
        grouped, k = [], 0
        for spec, n in zip(specs, counts):
            grouped.append(_unflatten(gs[k:k + n], spec))
            k += n
        g = grouped[0] if single else tuple(grouped)
        return (g, (out, aux)) if has_aux else (g, out)
    return wrapper


def grad(func, argnums=0, has_aux: bool = False):
    """``f -> gradient of f`` for a scalar-valued ``f`` (``(grad, aux)`` with ``has_aux``)."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux: bool = False):
    """``(f(primals), vjp_fn[, aux])``: ``vjp_fn(cotangents)`` returns one gradient per primal."""
    outer = is_grad_enabled()
    nested = outer and any(isinstance(t, Tensor) and t.requires_grad for p in primals for t in _flatten(p)[0])
    prepared, specs = [], []
    for p in primals:
        leaves, spec = _flatten(p)
        prepared.append([_prepare(t) for t in leaves])
        specs.append(spec)
    with enable_grad():
        out = func(*[_unflatten(lv, sp) for lv, sp in zip(prepared, specs)])
        aux = None
        if has_aux:
            out, aux = out
    out_leaves, out_spec = _flatten(out)
    flat_in = [t for lv in prepared for t in lv]

    def vjp_fn(cotangents):
        ct_leaves, _ = _flatten(cotangents)
        if len(ct_leaves) != len(out_leaves):
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of "
                               "outputs to the function")
        with enable_grad():
            gs = _grads(out_leaves, flat_in, ct_leaves, create_graph=nested or is_grad_enabled() and any(
                c.requires_grad for c in ct_leaves if isinstance(c, Tensor)))
        res, k = [], 0
        for lv, sp in zip(prepared, specs):
            res.append(_unflatten(gs[k:k + len(lv)], sp))
            k += len(lv)
        return tuple(res)

    value = out if nested else _unflatten([o.detach() for o in out_leaves], out_spec)
    return (value, vjp_fn, aux) if has_aux else (value, vjp_fn)


def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size=None):
    """``f -> Jacobian of f`` (output shape + input shape), one reverse pass per output element."""
    @functools.wraps(func)
    def wrapper(*args):
        from .ops.creation import zeros_like
        from .ops.shape_join import stack
        single, nums = _argnums_tuple(argnums, len(args), "jacrev(f)(*args)")
        nested = is_grad_enabled() and any(isinstance(a, Tensor) and a.requires_grad for a in args)
        args = list(args)
        ins = []
        for i in nums:
            args[i] = _prepare(args[i])
            ins.append(args[i])
        with enable_grad():
            out = func(*args)
            aux = None
            if has_aux:
                out, aux = out
            multi = isinstance(out, tuple)
            outs = list(out) if multi else [out]
            jac_per_out = []
            for o in outs:
                flat = o.reshape(-1)
                rows = [[] for _ in ins]
                for j in range(flat.numel()):
                    gs = _grads([flat[j]], ins, None, create_graph=is_grad_enabled())
                    for r, g in zip(rows, gs):
                        r.append(g)
                jacs = []
                for r, x in zip(rows, ins):
                    if r:
                        jac = stack(r).reshape(tuple(o.shape) + tuple(x.shape))
                    else:
                        jac = zeros_like(x).reshape((0,) + tuple(x.shape)).reshape(tuple(o.shape) + tuple(x.shape))
                    jacs.append(_finish([jac], {id(t) for t in ins if t.grad_fn is None}, nested)[0])
                jac_per_out.append(jacs[0] if single else tuple(jacs))
        res = tuple(jac_per_out) if multi else jac_per_out[0]
        return (res, aux) if has_aux else res
    return wrapper


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """The Jacobian of ``func`` (computed in reverse mode here; the values equal forward mode's)."""
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func, argnums=0):
    """The Hessian of a scalar ``func``: the Jacobian of its gradient."""
    return jacrev(jacrev(func, argnums), argnums)


def jvp(func, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """``(f(primals), J(primals) @ tangents)``, by differentiating a vector-Jacobian product (the
    "double-vjp" trick), since ember's autograd is reverse mode only."""
    from .ops.creation import zeros_like
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be tuples")
    if len(primals) != len(tangents):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same length")
    ins = [_prepare(p) for p in primals]
    with enable_grad():
        out = func(*ins)
        aux = None
        if has_aux:
            out, aux = out
        outs = list(out) if isinstance(out, tuple) else [out]
        us = [zeros_like(o).requires_grad_(True) for o in outs]
        g = _grads(outs, ins, us, create_graph=True)
        tang = _grads(g, us, list(tangents), create_graph=False)
    value = tuple(o.detach() for o in outs) if isinstance(out, tuple) else outs[0].detach()
    tout = tuple(t.detach() for t in tang) if isinstance(out, tuple) else tang[0].detach()
    return (value, tout, aux) if has_aux else (value, tout)


# ---- vmap --------------------------------------------------------------------------------------------------------


def vmap(func, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None):
    """Map ``func`` over dimension ``in_dims`` of its inputs, stacking outputs along ``out_dims``."""
    from .ops.shape_join import stack

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise ValueError(f"vmap(f, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                             f"structure of `inputs`. in_dims has structure {len(dims)} but inputs has "
                             f"structure {len(args)}.")
        flat_args, sizes = [], []
        for a, d in zip(args, dims):
            leaves, spec = _flatten(a)
            dl = [d] * len(leaves) if not isinstance(d, (tuple, list, dict)) else _flatten(d)[0]
            for t, di in zip(leaves, dl):
                if di is not None:
                    if not isinstance(t, Tensor):
                        raise ValueError(f"vmap: Got in_dim={di} for an input but the input is of type "
                                         f"{type(t).__name__}. We cannot vmap over non-Tensor arguments")
                    sizes.append(t.size(di))
            flat_args.append((leaves, spec, dl))
        if not sizes:
            raise ValueError("vmap(f, in_dims, ...)(<inputs>): at least one input must be batched (in_dims all "
                             "None)")
        if len(set(sizes)) != 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sizes} for the mapped dimension")
        results = []
        for i in range(sizes[0]):
            call_args = []
            for leaves, spec, dl in flat_args:
                sl = [t.select(di, i) if di is not None else t for t, di in zip(leaves, dl)]
                call_args.append(_unflatten(sl, spec))
            results.append(func(*call_args, **kwargs))
        out_leaves_per = [_flatten(r) for r in results]
        spec = out_leaves_per[0][1]
        n = len(out_leaves_per[0][0])
        odims = out_dims if isinstance(out_dims, (tuple, list)) else (out_dims,) * n
        stacked = []
        for j in range(n):
            items = [lv[j] for lv, _ in out_leaves_per]
            if not isinstance(items[0], Tensor):
                raise ValueError(f"vmap: `{func.__name__}` must only return Tensors, got type {type(items[0]).__name__}")
            d = odims[j] if j < len(odims) else 0
            stacked.append(stack(items, dim=d if d >= 0 else d + items[0].dim() + 1))
        return _unflatten(stacked, spec)
    return wrapper


# ---- functionalize / linearize -----------------------------------------------------------------------------

_REMOVE_HELP = ("received invalid argument for remove={}. Valid options are:\n     remove='mutations': all inplace "
                "and out= operators will be removed from the program, and replaced with their out-of-place "
                "equivalents.\n     remove='mutations_and_views': In addition to the above, all aliasing operators "
                "{{view}} will be replaced with their non-aliasing counterparts, {{view}}_copy.\n")


def functionalize(func, *, remove: str = "mutations"):
    """``func`` as torch's functionalization runs it eagerly: the same values, mutations of the inputs
    still land in the inputs, and no output aliases an input (an output that would is a copy). ember
    runs ``func`` itself (there is no graph to rewrite eagerly), then unaliases the outputs."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError("functionalize(f, remove='mutations'): " + _REMOVE_HELP.format(remove))

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        import numpy as np
        inputs = [t for t in _flatten((args, kwargs))[0] if isinstance(t, Tensor)]
        out = func(*args, **kwargs)
        leaves, spec = _flatten(out)

        def unalias(t):
            if not isinstance(t, Tensor) or type(t._data) is not np.ndarray:
                return t
            if any(type(i._data) is np.ndarray and np.may_share_memory(t._data, i._data) for i in inputs):
                return t.clone()
            return t
        return _unflatten([unalias(t) for t in leaves], spec)
    return wrapper


def linearize(func, *primals):
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` is the Jacobian-vector product of ``func`` at
    ``primals`` (computed by ``jvp`` on each call; ember has no forward-mode graph to keep)."""
    out = func(*primals)
    leaves = _flatten(primals)[0]

    def jvp_fn(*tangents):
        tl = _flatten(tangents)[0]
        if len(tl) != len(leaves):
            raise RuntimeError(f"Expected the tangents to have the same structure as the primals: {len(leaves)} "
                               f"primal(s), {len(tl)} tangent(s)")
        for k, (p, t) in enumerate(zip(leaves, tl)):
            if tuple(t.shape) != tuple(p.shape):
                raise RuntimeError(f"tangent:{k} with shape {t.shape} in flattened pytree doesn't match the shape "
                                   f"{p.shape} of the corresponding primal.")
            if t.dtype != p.dtype:
                raise RuntimeError(f"tangent:{k} with dtype {t.dtype} in flattened pytree doesn't match the dtype "
                                   f"{p.dtype} of the corresponding primal.")
        return jvp(func, tuple(primals), tuple(tangents))[1]
    detached = _unflatten([t.detach() if isinstance(t, Tensor) else t for t in _flatten(out)[0]], _flatten(out)[1])
    return detached, jvp_fn
