"""``SummaryWriter.add_graph``: the ops of one model call, as ember's compiler captures them, as a GraphDef.

The call is traced by ``ember.compiler``'s tracer (the same one ``ember.compile`` and
``ember.compiler.explain`` use). Global module hooks note which module was running when each op was
recorded, so ops are named by module scope (``Net/Linear[fc1]/linear.0``) and TensorBoard folds them
into one box per module.
"""
from __future__ import annotations

import inspect

import numpy as np


def _scope_names(model) -> dict:
    """id(module) -> TensorBoard scope path, e.g. ``Net/Sequential[body]/Linear[0]``."""
    root = type(model).__name__
    names = {id(model): root}
    if hasattr(model, "named_modules"):
        mods = dict(model.named_modules())
        for qual, m in mods.items():
            if qual:
                parts = qual.split(".")
                path = [root] + [f"{type(mods['.'.join(parts[:i + 1])]).__name__}[{p}]" for i, p in enumerate(parts)]
                names.setdefault(id(m), "/".join(path))
    return names


def _param_names(model, scopes: dict) -> dict:
    """id(parameter or buffer tensor) -> node name under its module's scope."""
    out = {}
    if not hasattr(model, "named_modules"):
        return out
    for qual, m in model.named_modules():
        scope = scopes.get(id(m), type(model).__name__)
        for kind in ("_parameters", "_buffers"):
            for n, t in getattr(m, kind, {}).items():
                if t is not None:
                    out.setdefault(id(t), f"{scope}/{n}")
    return out


def _input_names(model, n: int) -> list:
    try:
        params = [p for p in inspect.signature(model.forward if hasattr(model, "forward") else model).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:n]]
    return names + [f"input.{i}" for i in range(len(names), n)]


def graph_def(model, inputs, verbose: bool = False):
    """(GraphDef, RunMetadata) for ``model(*inputs)``."""
    from tensorboard.compat.proto import (attr_value_pb2, config_pb2, graph_pb2, node_def_pb2, step_stats_pb2,
                                          tensor_shape_pb2, versions_pb2)
    from ...tensor import Tensor
    from ...autograd.grad_mode import no_grad
    from ...compiler.capture import Tracer
    from ...compiler.api import _paths
    from ...compiler.ir import OpNode, Value, flat_values
    from ...nn.modules import module as _module

    if inputs is None:
        args = ()
    elif isinstance(inputs, Tensor):
        args = (inputs,)
    else:
        args = tuple(inputs)
    scopes = _scope_names(model)
    root = scopes[id(model)]
    tracer = Tracer()
    stack = [root]
    marks = []                  # (number of nodes recorded so far, scope from then on)

    def count():
        return sum(len(g.nodes) for g in tracer.graphs)

    def pre(m, a):
        stack.append(scopes.get(id(m), stack[-1]))
        marks.append((count(), stack[-1]))

    def post(m, a, out):
        if len(stack) > 1:
            stack.pop()
        marks.append((count(), stack[-1]))

    h1 = _module.register_module_forward_pre_hook(pre)
    h2 = _module.register_module_forward_hook(post)
    try:
        with no_grad(), tracer:
            for t, p in _paths(args, {}):
                tracer.add_arg(t, p)
            out = model(*args)
            program = tracer.program(out)
    finally:
        h1.remove()
        h2.remove()
    if verbose:
        print(program.format("add_graph"))

    def shape_attr(values):
        shapes = [tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=int(d))
                                                         for d in v.shape]) for v in values]
        return attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(shape=shapes))

    def node(name, op, ins, values, text=""):
        attr = {"_output_shapes": shape_attr(values)}
        attr["attr"] = attr_value_pb2.AttrValue(s=text.encode("utf-8"))
        if values:
            attr["dtype"] = attr_value_pb2.AttrValue(s=values[0].dtype.name.encode("utf-8"))
        return node_def_pb2.NodeDef(name=name, op=op, input=ins, attr=attr)

    nodes = []
    vname = {}                  # Value id -> producing node name (":k" for the k-th output of several)
    in_names = _input_names(model, len(program.args))
    for v, nm in zip(program.args, in_names):
        vname[v.id] = f"input/{nm}"
        nodes.append(node(vname[v.id], "IO Node", [], [v], f"{v.dtype.name}{list(v.shape)}"))
    pnames = _param_names(model, scopes)
    for v in program.lifted:
        vname[v.id] = pnames.get(id(v.ref), f"{root}/tensor.{v.id}")
        nodes.append(node(vname[v.id], "Parameter", [], [v], f"{v.dtype.name}{list(v.shape)}"))
    for v in program.consts:
        vname[v.id] = f"{root}/constant.{v.id}"
        nodes.append(node(vname[v.id], "Constant", [], [v], np.array2string(np.asarray(v.ref), threshold=8)))

    k = 0
    mi = 0
    scope = root
    for g in program.graphs:
        for n in g.nodes:
            while mi < len(marks) and marks[mi][0] <= k:
                scope = marks[mi][1]
                mi += 1
            k += 1
            if not isinstance(n, OpNode):
                continue
            name = f"{scope}/{n.op.name}.{k - 1}"
            ins = [vname[i.id] for i in n.inputs if isinstance(i, Value) and i.id in vname]
            text = ", ".join(f"{a}={v!r}" for a, v in n.attrs.items())
            nodes.append(node(name, n.op.name, ins, n.outputs, text))
            for j, o in enumerate(n.outputs):
                vname[o.id] = name if len(n.outputs) == 1 else f"{name}:{j}"

    outs = flat_values(program.outputs)
    for i, v in enumerate(outs):
        src = vname.get(v.id)
        nodes.append(node(f"output/output.{i}", "IO Node", [src] if src else [], [v],
                          f"{v.dtype.name}{list(v.shape)}"))
    gd = graph_pb2.GraphDef(node=nodes, versions=versions_pb2.VersionDef(producer=22))
    rm = config_pb2.RunMetadata(step_stats=step_stats_pb2.StepStats(
        dev_stats=[step_stats_pb2.DeviceStepStats(device="/device:CPU:0")]))
    return gd, rm
