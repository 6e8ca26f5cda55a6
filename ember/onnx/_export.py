"""ember.onnx.export: the captured op graph of one model call, rebuilt as an ONNX model.

Steps:

1. Capture: the model runs once under ``ember.compile``'s tracer (``fullgraph``: a graph break is an
   error), in eval mode and without gradients, as ``torch.onnx.export`` exports by default.
2. Dynamic axes: the captured graph has every size fixed (a ``view`` records ``(2, 16)``, not
   ``(batch, 16)``). When ``dynamic_axes`` names input dims, the model is captured a second time with
   those dims resized (each label to its own new size). The two graphs must run the same ops; a size
   that differs between them is dynamic, and is rebuilt in the ONNX graph from the input's ``Shape``
   (a label's size, a multiple of it, a product of two labels, or ``-1`` in a Reshape), so the file
   runs with other sizes. Constants the model makes from a dynamic size (zero initial states,
   ``arange``) are rebuilt the same way.
3. Conversion: each captured op is mapped by ``_ops.CONVERTERS`` to ONNX nodes built with
   ``onnx.helper``; parameters and buffers become initializers named as in ``state_dict``.
4. Dead nodes are dropped, the model is checked with ``onnx.checker.check_model(full_check=True)``
   and saved with ``onnx.save_model``.
"""
from __future__ import annotations

import inspect

import numpy as np

DEFAULT_OPSET = 20          # torch.onnx.export's default opset_version in torch 2.x
MIN_OPSET = 14
_INSTALL = "pip install onnx (and pip install onnxruntime to run the exported model)"

# ops whose output shares the input's buffer: an in-place write into one of them changes its base too
_VIEW_OPS = {"view", "permute", "getitem_basic", "expand", "diagonal", "as_strided", "unfold"}


class UnsupportedOperatorError(RuntimeError):
    """A captured op has no ONNX mapping at the requested opset (the message names both)."""


def _onnx():
    try:
        import onnx
        import onnx.checker  # noqa: F401
        import onnx.helper  # noqa: F401
        import onnx.numpy_helper  # noqa: F401
    except ImportError as e:
        raise ImportError(f"ember.onnx.export needs the 'onnx' package, which is not installed ({e}); "
                          f"install it with: {_INSTALL}") from None
    return onnx


def supported_ops() -> list:
    """Names of the captured ops the exporter maps to ONNX."""
    from ._ops import CONVERTERS
    return sorted(CONVERTERS)


# ---- capture ----------------------------------------------------------------------------------------

def _trace(model, args, kwargs):
    from ..autograd.grad_mode import no_grad
    from ..compiler.capture import Tracer, GraphBreakError
    from ..compiler.api import _paths
    mods = list(model.modules()) if hasattr(model, "modules") and callable(model.modules) else []
    flags = [m.training for m in mods]
    tracer = Tracer(fullgraph=True)
    try:
        for m in mods:
            m.training = False              # eval semantics: dropout off, batch norm's running statistics
        with no_grad(), tracer:
            for t, p in _paths(args, kwargs):
                tracer.add_arg(t, p)
            out = model(*args, **kwargs)
            tracer.check_mutations()
            program = tracer.program(out)
    except GraphBreakError as e:
        raise RuntimeError(f"ember.onnx.export: the model must be captured as one graph, but {e}") from None
    finally:
        for m, f in zip(mods, flags):
            m.training = f
    if tracer.unsupported is not None:
        raise RuntimeError(f"ember.onnx.export: the model cannot be captured: {tracer.unsupported}")
    if len(program.graphs) != 1:
        raise RuntimeError("ember.onnx.export: the model must be captured as one graph, got "
                           f"{len(program.graphs)}: " + "; ".join(str(r) for r in program.break_reasons))
    return program


def _pair_programs(p1, p2):
    """Map every Value of the first capture to its counterpart in the second, checking both ran the same
    ops (else the model's structure depends on a dynamic size)."""
    from ..compiler.ir import OpNode, WriteNode, Value, flat_values
    m = {}

    def same(a, b, what):
        if len(a) != len(b):
            raise RuntimeError(f"ember.onnx.export: the model's graph changes with the size of a dynamic axis "
                               f"({what}: {len(a)} vs {len(b)}); export without dynamic_axes")
        for x, y in zip(a, b):
            if isinstance(x, Value) != isinstance(y, Value):
                raise RuntimeError("ember.onnx.export: the model's graph changes with the size of a dynamic axis; "
                                   "export without dynamic_axes")
            if isinstance(x, Value):
                if x.id in m and m[x.id] is not y:
                    raise RuntimeError("ember.onnx.export: the model's graph changes with the size of a dynamic "
                                       "axis; export without dynamic_axes")
                m[x.id] = y
    same(p1.args, p2.args, "inputs")
    same(p1.lifted, p2.lifted, "parameters")
    same(p1.consts, p2.consts, "constants")
    n1, n2 = p1.graphs[0].nodes, p2.graphs[0].nodes
    if len(n1) != len(n2):
        same(n1, n2, "nodes")
    nodes2 = {}
    for a, b in zip(n1, n2):
        if type(a) is not type(b) or (isinstance(a, OpNode) and a.op.name != b.op.name):
            raise RuntimeError(f"ember.onnx.export: the model runs different ops when a dynamic axis changes size "
                               f"({a!r} vs {b!r}); export without dynamic_axes")
        if isinstance(a, OpNode):
            same(a.inputs, b.inputs, f"inputs of {a.op.name}")
            same(a.outputs, b.outputs, f"outputs of {a.op.name}")
            nodes2[id(a)] = b
        elif isinstance(a, WriteNode):
            same([a.target, a.source], [b.target, b.source], "in-place writes")
    same(flat_values(p1.outputs), flat_values(p2.outputs), "outputs")
    return m, nodes2


def _resize(t, axis: int, n: int):
    """``t`` with dim ``axis`` resized to ``n`` by repeating its entries cyclically (valid indices stay valid)."""
    from ..tensor import wrap
    a = t._data
    idx = np.arange(n) % a.shape[axis]
    return wrap(np.ascontiguousarray(np.take(a, idx, axis=axis)), t._dtype)


# ---- the builder ------------------------------------------------------------------------------------

class Builder:
    """Collects ONNX nodes and initializers while the converters walk the captured graph."""

    def __init__(self, onnx, opset, program, vmap2, labels, dim_src):
        self.onnx = onnx
        self.h = onnx.helper
        self.opset = opset
        self.program = program
        self.vmap2 = vmap2                  # Value id -> Value of the second capture (dynamic export)
        self.labels = labels                # (size in capture 1, size in capture 2) -> label
        self.dim_src = dim_src              # label -> (input name, axis)
        self.nodes = []
        self.inits = []
        self.init_names = set()
        self.names = {}                     # Value id -> ONNX tensor name
        self.used = set()
        self._const_cache = {}
        self._dim_cache = {}
        self._counter = 0
        self.producer = {}                  # Value id -> OpNode that made it
        self.node = None                    # the OpNode being converted (for error messages)

    # names
    def fresh(self, base: str) -> str:
        self._counter += 1
        name = f"{base}_{self._counter}"
        while name in self.used:
            self._counter += 1
            name = f"{base}_{self._counter}"
        self.used.add(name)
        return name

    def reserve(self, name: str) -> str:
        if name in self.used:
            return self.fresh(name)
        self.used.add(name)
        return name

    # nodes and constants
    def op(self, op_type: str, inputs, n_out: int = 1, **attrs):
        outs = [self.fresh(op_type) for _ in range(n_out)]
        self.nodes.append(self.h.make_node(op_type, [i if i is not None else "" for i in inputs], outs,
                                           name=self.fresh("n_" + op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    def initializer(self, arr: np.ndarray, name: str) -> str:
        name = self.reserve(name)
        self.inits.append(self.onnx.numpy_helper.from_array(np.asarray(arr), name))
        self.init_names.add(name)
        return name

    def const(self, value, dtype=None) -> str:
        a = np.asarray(value, dtype=dtype)
        if a.dtype == np.float64 and dtype is None and not isinstance(value, np.ndarray):
            a = a.astype(np.float32)
        key = (a.dtype.str, a.shape, a.tobytes()) if a.size <= 64 else None
        if key is not None and key in self._const_cache:
            return self._const_cache[key]
        name = self.initializer(a, "const")
        if key is not None:
            self._const_cache[key] = name
        return name

    def ints(self, values) -> str:
        return self.const(np.asarray(list(values), dtype=np.int64))

    # values
    def name(self, x, np_dtype=None) -> str:
        """The ONNX name of a captured Value, or a constant for a Python number (in ``np_dtype``)."""
        from ..compiler.ir import Value
        if isinstance(x, Value):
            n = self.names.get(x.id)
            if n is None:
                raise UnsupportedOperatorError(
                    f"ember.onnx.export: a value of shape {list(x.shape)} made by op "
                    f"'{self._producer_name(x)}' is used, but that output has no ONNX equivalent at opset "
                    f"{self.opset}")
            return n
        if x is None:
            return None
        return self.const(np.asarray(x, dtype=np_dtype if np_dtype is not None else None))

    def _producer_name(self, v) -> str:
        p = self.producer.get(v.id)
        return p.op.name if p is not None else v.kind

    def set(self, value, name: str) -> None:
        self.names[value.id] = name

    @staticmethod
    def np_dtype(v):
        return v.dtype.np

    def onnx_type(self, np_dtype) -> int:
        return self.h.np_dtype_to_tensor_dtype(np.dtype(np_dtype))

    def cast(self, name: str, from_dt, to_dt) -> str:
        if np.dtype(from_dt) == np.dtype(to_dt):
            return name
        return self.op("Cast", [name], to=self.onnx_type(to_dt))

    def const_value(self, v):
        """The NumPy value of a parameter, buffer or constant (None for a value computed in the graph)."""
        from ..compiler.ir import Value
        if not isinstance(v, Value):
            return None
        if v.kind == "lifted":
            return np.asarray(v.ref._data)
        if v.kind == "const" and (self.vmap2 is None or self.vmap2[v.id].shape == v.shape):
            return np.asarray(v.ref)
        return None

    # reductions with the opset's axes convention
    def reduce(self, op_type: str, x: str, axes, keepdims: bool) -> str:
        axes = list(axes)
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.op(op_type, [x, self.ints(axes)], keepdims=int(keepdims))
        return self.op(op_type, [x], axes=axes, keepdims=int(keepdims))

    def unsqueeze(self, x: str, axes) -> str:
        return self.op("Unsqueeze", [x, self.ints(axes)])

    def squeeze(self, x: str, axes) -> str:
        return self.op("Squeeze", [x, self.ints(axes)])

    # sizes (static, or rebuilt from the inputs' shapes for dynamic axes)
    def shape(self, v):
        """(size in the first capture, size in the second) per dim of a Value."""
        s1 = tuple(v.shape)
        s2 = tuple(self.vmap2[v.id].shape) if self.vmap2 is not None else s1
        return list(zip(s1, s2))

    def attr_pairs(self, node2, key, node=None):
        node = node or self.node
        a1 = node.attrs[key]
        a2 = node2.attrs[key] if node2 is not None else a1
        return list(zip(a1, a2))

    def label_dim(self, label) -> str:
        """A 1-D int64 tensor holding the run-time size of a dynamic label."""
        if label not in self._dim_cache:
            inp, axis = self.dim_src[label]
            shp = self.op("Shape", [inp])
            self._dim_cache[label] = self.op("Gather", [shp, self.ints([axis])], axis=0)
        return self._dim_cache[label]

    def dim_expr(self, a1: int, a2: int):
        """A 1-D int64 tensor for a size that is ``a1`` in the first capture and ``a2`` in the second, as
        an expression of the dynamic labels (None when none is found)."""
        if a1 == a2:
            return self.ints([a1])
        labels = list(self.labels.items())
        for (n1, n2), lab in labels:
            if (n1, n2) == (a1, a2):
                return self.label_dim(lab)
        for (n1, n2), lab in labels:
            if n1 and n2 and a1 % n1 == 0 and a2 % n2 == 0 and a1 // n1 == a2 // n2:
                return self.op("Mul", [self.label_dim(lab), self.ints([a1 // n1])])
        for i, ((n1, n2), la) in enumerate(labels):
            for (m1, m2), lb in labels[i:]:
                p1, p2 = n1 * m1, n2 * m2
                if p1 and p2 and a1 % p1 == 0 and a2 % p2 == 0 and a1 // p1 == a2 // p2:
                    prod = self.op("Mul", [self.label_dim(la), self.label_dim(lb)])
                    return prod if a1 == p1 else self.op("Mul", [prod, self.ints([a1 // p1])])
        for (n1, n2), lab in labels:
            if a1 - n1 == a2 - n2:
                return self.op("Add", [self.label_dim(lab), self.ints([a1 - n1])])
        return None

    def shape_tensor(self, pairs, what: str, infer_one: bool = False) -> str:
        """A 1-D int64 shape tensor from (capture 1, capture 2) size pairs; with ``infer_one`` one size
        that no expression explains becomes -1 (a Reshape infers it)."""
        if all(a == b for a, b in pairs):
            return self.ints([a for a, _ in pairs])
        parts, unknown = [], 0
        for a1, a2 in pairs:
            e = self.dim_expr(a1, a2)
            if e is None:
                unknown += 1
                if not infer_one or unknown > 1:
                    raise UnsupportedOperatorError(
                        f"ember.onnx.export: op '{self.node.op.name}' ({what}) has a size that depends on the "
                        f"dynamic axes in a way the exporter cannot express ({a1} vs {a2} in the two captures); "
                        "export without dynamic_axes for it")
                e = self.ints([-1])
            parts.append(e)
        return self.op("Concat", parts, axis=0)


# ---- export -----------------------------------------------------------------------------------------

def _input_names_default(model, paths) -> list:
    try:
        sig = inspect.signature(model.forward if hasattr(model, "forward") else model)
        pnames = [p.name for p in sig.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        pnames = []
    out = []
    for i, p in enumerate(paths):
        if p and p[0] == "kw" and len(p) >= 2:
            base = str(p[1])
        elif p and isinstance(p[0], int) and p[0] < len(pnames):
            base = pnames[p[0]]
        else:
            base = f"input_{i}"
        if len(p) > (2 if p and p[0] == "kw" else 1):
            base += "_" + "_".join(str(k) for k in p[(2 if p[0] == "kw" else 1):])
        out.append(base)
    return out


def _param_names(model) -> dict:
    out = {}
    if hasattr(model, "named_parameters"):
        for n, t in model.named_parameters():
            out.setdefault(id(t), n)
    if hasattr(model, "named_buffers"):
        for n, t in model.named_buffers():
            out.setdefault(id(t), n)
    return out


def _norm_dynamic_axes(dynamic_axes, known: set) -> dict:
    out = {}
    for name, dims in (dynamic_axes or {}).items():
        if name not in known:
            raise ValueError(f"ember.onnx.export: dynamic_axes names {name!r}, which is neither an input nor an "
                             f"output name (inputs and outputs: {sorted(known)})")
        if isinstance(dims, dict):
            out[name] = {int(k): str(v) for k, v in dims.items()}
        elif isinstance(dims, (list, tuple)):
            out[name] = {int(k): f"{name}_dynamic_axes_{j + 1}" for j, k in enumerate(dims)}
        else:
            raise TypeError(f"ember.onnx.export: dynamic_axes[{name!r}] must be a dict {{dim: name}} or a list of "
                            f"dims, got {type(dims).__name__}")
    return out


def export(model, args=(), f=None, *, kwargs=None, verbose=False, input_names=None, output_names=None,
           opset_version=None, dynamic_axes=None, export_params=True, keep_initializers_as_inputs=False,
           do_constant_folding=True, dynamo=None, training=None, **unused):
    """Export ``model(*args, **kwargs)`` to ONNX and save it to ``f`` (a path or a binary file object;
    None only returns it). Returns the ``onnx.ModelProto``.

    ``input_names``/``output_names`` name the graph's inputs (the tensors in ``args``, in order) and
    outputs (the tensors the model returns, in order); ``dynamic_axes`` maps such a name to the dims that
    may change size, as ``{name: {dim: "label"}}`` or ``{name: [dims]}``; ``opset_version`` defaults to
    torch's default, 20. The model is exported in eval mode (dropout off, batch norm's running
    statistics). An op without an ONNX mapping raises ``UnsupportedOperatorError`` naming the op and
    the opset."""
    from ..tensor import Tensor
    from ..compiler.api import _paths
    from ..compiler.ir import OpNode, WriteNode, SetGradNode, Value, flat_values
    from ._ops import CONVERTERS, MIN_OPSET_OF
    onnx = _onnx()
    if unused:
        raise TypeError(f"ember.onnx.export: unsupported argument(s) {sorted(unused)}")
    if not export_params:
        raise ValueError("ember.onnx.export: export_params=False is not supported (parameters are always "
                         "stored as initializers)")
    if training not in (None, "eval", "EVAL") and str(training).split(".")[-1].upper() != "EVAL":
        raise ValueError("ember.onnx.export: only eval-mode export is supported (training=None or EVAL)")
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    max_opset = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= max_opset:
        raise ValueError(f"ember.onnx.export: opset_version {opset} is not supported (supported: {MIN_OPSET} to "
                         f"{max_opset}, the newest this onnx package knows)")

    # arguments, as torch.onnx.export takes them: a tensor, a tuple, a tuple ending in a dict of kwargs
    if isinstance(args, Tensor):
        args = (args,)
    elif not isinstance(args, tuple):
        args = tuple(args) if isinstance(args, list) else (args,)
    kwargs = dict(kwargs or {})
    if args and isinstance(args[-1], dict):
        kwargs.update(args[-1])
        args = args[:-1]

    program = _trace(model, args, kwargs)
    paths = [p for _, p in _paths(args, kwargs)]
    in_names = list(input_names or [])
    if len(in_names) > len(program.args):
        raise ValueError(f"ember.onnx.export: {len(in_names)} input_names for {len(program.args)} tensor inputs")
    in_names += _input_names_default(model, paths)[len(in_names):]
    outs = flat_values(program.outputs)
    out_names = list(output_names or [])
    if len(out_names) > len(outs):
        raise ValueError(f"ember.onnx.export: {len(out_names)} output_names for {len(outs)} tensor outputs")
    out_names += [f"output_{i}" if len(outs) > 1 or i else "output" for i in range(len(out_names), len(outs))]
    if len(set(in_names + out_names)) != len(in_names) + len(out_names):
        raise ValueError("ember.onnx.export: input and output names must be unique")
    dyn = _norm_dynamic_axes(dynamic_axes, set(in_names) | set(out_names))

    # dynamic input dims: label sizes of the first capture, and new sizes for a second capture
    labels, dim_src, first_size = {}, {}, {}
    arg_tensors = [t for t, _ in _paths(args, kwargs)]
    for i, nm in enumerate(in_names):
        for d, lab in dyn.get(nm, {}).items():
            shape = program.args[i].shape
            if not -len(shape) <= d < len(shape):
                raise ValueError(f"ember.onnx.export: dynamic_axes[{nm!r}] names dim {d}, but the input has shape "
                                 f"{list(shape)}")
            d %= len(shape)
            n = shape[d]
            if first_size.setdefault(lab, n) != n:
                raise ValueError(f"ember.onnx.export: dynamic axis {lab!r} has sizes {first_size[lab]} and {n} in "
                                 "the example inputs")
            dim_src.setdefault(lab, (nm, d))
    vmap2 = nodes2 = None
    if dim_src:
        second = {lab: n + 1 + j for j, (lab, n) in enumerate(first_size.items())}
        labels = {(first_size[lab], second[lab]): lab for lab in dim_src}
        resized = {}
        for i, (nm, t) in enumerate(zip(in_names, arg_tensors)):
            nt = t
            for d, lab in dyn.get(nm, {}).items():
                nt = _resize(nt, d % t.dim(), second[lab])
            resized[id(t)] = nt
        args2, kwargs2 = _replace_tensors(args, resized), _replace_tensors(kwargs, resized)
        try:
            program2 = _trace(model, args2, kwargs2)
        except Exception as e:
            raise RuntimeError(f"ember.onnx.export: to make the dynamic axes symbolic the model is captured a second "
                               f"time with sizes {second}; that call failed: {e}") from e
        vmap2, nodes2 = _pair_programs(program, program2)

    b = Builder(onnx, opset, program, vmap2, labels, dim_src)
    h = onnx.helper

    # graph inputs
    graph_inputs = []
    for v, nm in zip(program.args, in_names):
        b.set(v, b.reserve(nm))
        dims = list(v.shape)
        for d, lab in dyn.get(nm, {}).items():
            dims[d % len(dims)] = lab
        graph_inputs.append(h.make_tensor_value_info(nm, b.onnx_type(v.dtype.np), dims))
    for nm in out_names:
        b.reserve(nm)
    # parameters, buffers and constants
    pnames = _param_names(model)
    for v in program.lifted:
        base = pnames.get(id(v.ref), "tensor")
        b.set(v, b.initializer(np.asarray(v.ref._data), base))
    for v in program.consts:
        b.set(v, _const_value(b, v))

    # the ops
    view_bases = set()
    for node in program.graphs[0].nodes:
        if isinstance(node, OpNode):
            for o in node.outputs:
                b.producer[o.id] = node
            b.node = node
            conv = CONVERTERS.get(node.op.name)
            if conv is None:
                raise UnsupportedOperatorError(
                    f"ember.onnx.export: op '{node.op.name}' has no ONNX mapping at opset {opset} (called at "
                    f"{node.where}); ember.onnx.supported_ops() lists the {len(CONVERTERS)} ops it maps")
            need = MIN_OPSET_OF.get(node.op.name, MIN_OPSET)
            if opset < need:
                raise UnsupportedOperatorError(f"ember.onnx.export: op '{node.op.name}' needs opset >= {need}; "
                                               f"opset {opset} was asked for")
            node2 = nodes2[id(node)] if nodes2 is not None else None
            if node2 is not None:
                _check_static_attrs(node, node2, conv)
                _dynamic_numbers(b, node, node2)
            conv.fn(b, node, node2)
            if node.op.name in _VIEW_OPS:
                for i in node.inputs:
                    if isinstance(i, Value):
                        view_bases.add(i.id)
        elif isinstance(node, WriteNode):
            t = node.target
            p = b.producer.get(t.id)
            if (p is not None and p.op.name in _VIEW_OPS) or t.id in view_bases:
                raise UnsupportedOperatorError(
                    f"ember.onnx.export: an in-place write into a view of a tensor (shape {list(t.shape)}) has no "
                    f"ONNX equivalent at opset {opset}; write the model out of place")
            src = b.name(node.source)
            if tuple(node.source.shape) != tuple(t.shape):
                src = b.op("Expand", [src, b.op("Shape", [b.name(t)])])
            b.set(t, b.cast(src, node.source.dtype.np, t.dtype.np))
        elif isinstance(node, SetGradNode):
            continue

    # graph outputs
    graph_outputs = []
    for v, nm in zip(outs, out_names):
        src = b.name(v)
        b.nodes.append(h.make_node("Identity", [src], [nm], name=b.fresh("n_output")))
        dims = []
        user = dyn.get(nm, {})
        for d, (a1, a2) in enumerate(b.shape(v)):
            if d in user or (d - len(v.shape)) in user:
                dims.append(user.get(d, user.get(d - len(v.shape))))
            elif a1 != a2:
                dims.append(labels.get((a1, a2), f"{nm}_dim{d}"))
            else:
                dims.append(a1)
        graph_outputs.append(h.make_tensor_value_info(nm, b.onnx_type(v.dtype.np), dims))

    nodes, inits = _prune(b.nodes, b.inits, out_names)
    graph = h.make_graph(nodes, type(model).__name__ if hasattr(model, "forward") else "main", graph_inputs,
                         graph_outputs, initializer=inits)
    if keep_initializers_as_inputs:
        graph.input.extend(h.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits)
    opsets = [h.make_opsetid("", opset)]
    from .. import __version__
    mp = h.make_model(graph, opset_imports=opsets, producer_name="ember", producer_version=__version__,
                      ir_version=h.find_min_ir_version_for(opsets))
    onnx.checker.check_model(mp, full_check=True)
    if verbose:
        print(h.printable_graph(mp.graph))
    if f is not None:
        if hasattr(f, "write"):
            f.write(mp.SerializeToString())
        else:
            onnx.save_model(mp, str(f))
    return mp


def _replace_tensors(x, table):
    from ..tensor import Tensor
    if isinstance(x, Tensor):
        return table.get(id(x), x)
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*[_replace_tensors(i, table) for i in x])
    if isinstance(x, (list, tuple)):
        return type(x)(_replace_tensors(i, table) for i in x)
    if isinstance(x, dict):
        return {k: _replace_tensors(v, table) for k, v in x.items()}
    return x


def _attr_equal(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape and \
            bool(np.array_equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_attr_equal(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return a is b


def _check_static_attrs(node, node2, conv):
    """Attributes a converter reads as fixed must be the same in both captures."""
    if node2 is None:
        return
    for k, v in node.attrs.items():
        if k in conv.dynamic:
            continue
        if not _attr_equal(v, node2.attrs.get(k)):
            raise UnsupportedOperatorError(
                f"ember.onnx.export: attribute {k!r} of op '{node.op.name}' changes with the size of a dynamic "
                f"axis ({v!r} vs {node2.attrs.get(k)!r}), which the exporter cannot express; export without "
                "dynamic_axes for it")


def _dynamic_numbers(b, node, node2):
    """A Python int argument that follows a dynamic size (``x * x.shape[0]``) becomes a scalar computed from
    the input's shape; any other number that differs between the captures is an error."""
    from ..compiler.ir import Value
    from .. import dtypes
    for i, (a, c) in enumerate(zip(node.inputs, node2.inputs)):
        if isinstance(a, Value) or _attr_equal(a, c):
            continue
        e = None
        if isinstance(a, int) and isinstance(c, int) and not isinstance(a, bool):
            e = b.dim_expr(a, c)
        if e is None:
            raise UnsupportedOperatorError(
                f"ember.onnx.export: argument {i} of op '{node.op.name}' changes with the size of a dynamic axis "
                f"({a!r} vs {c!r}) in a way the exporter cannot express; export without dynamic_axes for it")
        v = Value(-1 - len(b.names), "dynamic", (), dtypes.int64)
        b.set(v, b.squeeze(e, [0]))
        node.inputs = list(node.inputs)
        node.inputs[i] = v


def _const_value(b, v) -> str:
    """An initializer for a constant the model made; rebuilt from the input shapes when its size follows a
    dynamic axis (a fill value: ConstantOfShape; ``arange``: Range)."""
    a = np.asarray(v.ref)
    if b.vmap2 is None:
        return b.initializer(a, "constant")
    v2 = b.vmap2[v.id]
    a2 = np.asarray(v2.ref)
    if a.shape == a2.shape:
        if np.array_equal(a, a2, equal_nan=a.dtype.kind == "f"):
            return b.initializer(a, "constant")
        if a.ndim == 0:
            e = b.dim_expr(int(a), int(a2)) if a.dtype.kind in "iu" and float(a) == int(a) else None
            if e is not None:
                return b.cast(b.squeeze(e, [0]), np.int64, a.dtype)
    else:
        pairs = list(zip(a.shape, a2.shape))
        b.node = _FakeNode("constant")
        if a.size and (a == a.flat[0]).all() and a2.size and (a2 == a.flat[0]).all():
            shp = b.shape_tensor(pairs, "a constant filled with one value")
            return b.op("ConstantOfShape", [shp], value=b.onnx.numpy_helper.from_array(a.reshape(-1)[:1]))
        if a.ndim == 1 and np.array_equal(a, np.arange(a.shape[0])) and np.array_equal(a2, np.arange(a2.shape[0])):
            n = b.dim_expr(a.shape[0], a2.shape[0])
            if n is not None:
                lim = b.cast(b.squeeze(n, [0]), np.int64, a.dtype)
                return b.op("Range", [b.const(np.array(0, a.dtype)), lim, b.const(np.array(1, a.dtype))])
    raise UnsupportedOperatorError(
        f"ember.onnx.export: a constant tensor the model makes (shape {list(a.shape)}, {a.dtype}) depends on the "
        "size of a dynamic axis in a way the exporter cannot rebuild (it handles fills and arange); pass it as "
        "an input or export without dynamic_axes")


class _FakeNode:
    def __init__(self, name):
        class _Op:
            pass
        self.op = _Op()
        self.op.name = name


def _prune(nodes, inits, outputs):
    """Drop nodes whose outputs nothing reads, and initializers no node reads."""
    need = set(outputs)
    keep = []
    for n in reversed(nodes):
        if any(o in need for o in n.output):
            keep.append(n)
            need.update(i for i in n.input if i)
    keep.reverse()
    return keep, [t for t in inits if t.name in need]

