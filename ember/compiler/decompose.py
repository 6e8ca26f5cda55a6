"""Decomposition: a captured Program -> a graph of primitives (``prims.py``) plus effects.

``decompose(program)`` walks the program's graphs in order. Each ``OpNode`` whose op has an entry in
``DECOMPOSITIONS`` becomes primitives built with a :class:`Builder`; every other op (listed in
``EXTERN_OPS``) or an instance the decomposition declines (a dtype without C support, an unusual
layout) becomes an ``extern`` effect that calls the op's NumPy kernel from Python, with the reason
kept for ``EMBER_LOGS=kernels``. Every registered op is in exactly one of the two tables (a test
checks it).

Program values map to buffers (inputs, extern results, and node values that are written in place)
or to primitive nodes. In-place writes (``WriteNode``) become ``write`` effects into a buffer and bump
its version, so later reads of the same value see the new contents while values computed earlier
keep theirs (the scheduler materialises them if they would otherwise be evaluated after the write).
Values defined by view ops (view/permute/expand/getitem_basic) over a buffer are re-rooted on the
buffer's latest version when read after a write, as NumPy views would be.
"""
from __future__ import annotations

import math

import numpy as np

from . import prims as P
from .symbolic import SymInt
from .prims import PNode, Buffer, Effect
from .ir import OpNode, WriteNode, SetGradNode, AttrRef

DECOMPOSITIONS: dict = {}
# decompositions used only for OpenCL devices (``decompose(..., device=True)``): ops that stay extern on
# the CPU, where their NumPy kernels (BLAS, im2col) beat generated C, but need kernels on a device
DEVICE_DECOMPOSITIONS: dict = {}


class Unsupported(Exception):
    """A decomposition declined this instance; the op runs as an extern call (message says why)."""


def decomp(*names):
    def deco(fn):
        for n in names:
            DECOMPOSITIONS[n] = fn
        return fn
    return deco


def decomp_device(*names):
    def deco(fn):
        for n in names:
            DEVICE_DECOMPOSITIONS[n] = fn
        return fn
    return deco


def _npdt(d):
    return d.np if hasattr(d, "np") else np.dtype(d)


class Builder:
    """Creates primitive nodes (hash-consed: the same op on the same inputs is one node) and effects."""

    def __init__(self, device: bool = False):
        self.device = device         # building for an OpenCL device (DEVICE_DECOMPOSITIONS apply)
        self.items: list = []        # PNodes and Effects in program order
        self.buffers: list = []
        self.seq = 0
        self._memo: dict = {}
        self._keys: list = []        # memo keys in creation order (to roll back a declined attempt)
        self.errors: list = []      # (exception type, message template) per checked gather

    def checkpoint(self) -> tuple:
        return (len(self.items), len(self._keys), len(self.errors))

    def rollback(self, cp: tuple) -> None:
        """Forget the nodes made since ``cp`` (a decomposition that declined half-way)."""
        ni, nk, ne = cp
        for key in self._keys[nk:]:
            self._memo.pop(key, None)
        del self._keys[nk:]
        del self.items[ni:]
        del self.errors[ne:]

    # ---- creation ------------------------------------------------------------------------------------
    def _next(self) -> int:
        self.seq += 1
        return self.seq

    def node(self, op, inputs, attrs, shape, dtype) -> PNode:
        dtype = np.dtype(dtype)
        key = (op, tuple(i.id for i in inputs), _hashable(attrs), tuple(shape), dtype.str)
        n = self._memo.get(key)
        if n is not None:
            return n
        seq = self._next()
        n = PNode(seq, op, inputs, attrs, shape, dtype, seq)
        self._memo[key] = n
        self._keys.append(key)
        self.items.append(n)
        return n

    def buffer(self, kind, shape, dtype, value=None) -> Buffer:
        b = Buffer(len(self.buffers), kind, shape, np.dtype(dtype), value)
        self.buffers.append(b)
        return b

    def load(self, buf: Buffer) -> PNode:
        key = ("load", buf.id, buf.version)
        n = self._memo.get(key)
        if n is None:
            seq = self._next()
            n = PNode(seq, "load", (), {}, buf.shape, buf.dtype, seq, buf, buf.version)
            self._memo[key] = n
            self._keys.append(key)
            self.items.append(n)
        return n

    def effect(self, kind, **kw) -> Effect:
        e = Effect(kind, self._next(), **kw)
        self.items.append(e)
        return e

    # ---- scalars and shapes -----------------------------------------------------------------------------
    def const(self, value, dtype) -> PNode:
        dtype = np.dtype(dtype)
        if not P.native_dtype(dtype):
            raise Unsupported(f"dtype {dtype} is not computed natively")
        v = value if type(value) is SymInt and dtype.kind in "iuf" else dtype.type(value).item()
        if isinstance(v, float) and v != v:
            v = float("nan")
        return self.node("const", (), {"value": v}, (), dtype)

    def full(self, value, shape, dtype) -> PNode:
        return self.broadcast_to(self.const(value, dtype), tuple(shape))

    def iota(self, shape, axis, dtype=np.int64) -> PNode:
        return self.node("iota", (), {"axis": axis}, tuple(shape), dtype)

    def reshape(self, x: PNode, shape) -> PNode:
        shape = P.sizes(shape)
        if P.same_shape(x.shape, shape):
            return x
        if math.prod(shape) != x.numel:
            raise Unsupported(f"reshape {x.shape} -> {shape} changes the number of elements")
        if x.op == "reshape":
            x = x.inputs[0]
            if P.same_shape(x.shape, shape):
                return x
        return self.node("reshape", (x,), {}, shape, x.dtype)

    def permute(self, x: PNode, axes) -> PNode:
        axes = tuple(int(a) % max(len(x.shape), 1) for a in axes)
        if axes == tuple(range(len(axes))):
            return x
        return self.node("permute", (x,), {"axes": axes}, tuple(x.shape[a] for a in axes), x.dtype)

    def expand(self, x: PNode, shape) -> PNode:
        shape = P.sizes(shape)
        if len(shape) > len(x.shape):
            x = self.reshape(x, (1,) * (len(shape) - len(x.shape)) + x.shape)
        if P.same_shape(x.shape, shape):
            return x
        for a, b in zip(x.shape, shape):
            if a != b and a != 1:
                raise Unsupported(f"cannot expand {x.shape} to {shape}")
        return self.node("expand", (x,), {}, shape, x.dtype)

    def broadcast_to(self, x, shape) -> PNode:
        return self.expand(x, shape)

    def slice(self, x: PNode, starts, steps, shape) -> PNode:
        starts, steps, shape = tuple(starts), tuple(steps), tuple(shape)
        if P.same_shape(shape, x.shape) and all(s == 0 for s in starts) and all(s == 1 for s in steps):
            return x
        return self.node("slice", (x,), {"starts": starts, "steps": steps}, shape, x.dtype)

    def cast(self, x: PNode, dtype) -> PNode:
        dtype = np.dtype(dtype)
        if x.dtype == dtype:
            return x
        if not P.native_dtype(dtype) or not P.native_dtype(x.dtype):
            raise Unsupported(f"cast {x.dtype} -> {dtype} is not native")
        if x.op == "const":
            return self.broadcast_to(self.const(x.attrs["value"], dtype), x.shape) if dtype.kind != "b" \
                else self.const(bool(x.attrs["value"]), dtype)
        return self.node("cast", (x,), {}, x.shape, dtype)

    # ---- elementwise ---------------------------------------------------------------------------------
    def ew(self, prim, *args, dtype=None) -> PNode:
        """Elementwise ``prim`` with NumPy broadcasting; ``dtype`` is the compute dtype (default: NumPy's
        promotion of the tensor operands, Python scalars being weak)."""
        tensors = [a for a in args if isinstance(a, PNode)]
        if not tensors:
            raise Unsupported(f"{prim} of Python scalars only")
        if dtype is None:
            dtype = np.result_type(*[t.dtype for t in tensors],
                                   *[a for a in args if not isinstance(a, PNode) and not isinstance(a, bool)])
        dtype = np.dtype(dtype)
        if prim == "where":
            cdt = dtype
            if not P.supports(prim, cdt):
                raise Unsupported(f"where in {cdt} is not native")
        elif not P.supports(prim, dtype):
            raise Unsupported(f"primitive {prim} has no C form for {dtype}")
        shape = P.broadcast_shapes(*[t.shape for t in tensors])
        ops = []
        for i, a in enumerate(args):
            want = np.dtype(np.bool_) if (prim == "where" and i == 0) else dtype
            if isinstance(a, PNode):
                ops.append(self.broadcast_to(self.cast(a, want), shape))
            else:
                ops.append(self.broadcast_to(self.const(a, want), shape))
        out_dt = np.dtype(np.bool_) if prim in P.BOOL_RESULT else dtype
        return self.node(prim, tuple(ops), {}, shape, out_dt)

    def where(self, c, a, b, dtype=None) -> PNode:
        if dtype is None:
            ts = [x for x in (a, b) if isinstance(x, PNode)]
            dtype = np.result_type(*[t.dtype for t in ts], *[x for x in (a, b) if not isinstance(x, PNode)]) \
                if ts else None
        if isinstance(c, PNode):
            shp = P.broadcast_shapes(c.shape, *[x.shape for x in (a, b) if isinstance(x, PNode)])
        else:
            raise Unsupported("where with a Python condition")
        c = self.broadcast_to(self.cast(c, np.bool_), shp)
        return self.ew("where", c, a, b, dtype=dtype)

    # ---- reductions ------------------------------------------------------------------------------------
    def reduce(self, op, x: PNode, axes, keepdims=False, dtype=None) -> PNode:
        nd = len(x.shape)
        axes = tuple(sorted({int(a) % nd for a in axes})) if nd else ()
        out_dt = np.dtype(np.int64) if op in ("argmax", "argmin") else np.dtype(dtype or x.dtype)
        if not axes:
            if op in ("argmax", "argmin"):
                return self.full(0, x.shape, np.int64)
            return self.cast(x, out_dt)
        if dtype is not None and op in ("sum", "prod"):
            x = self.cast(x, out_dt)
        if not P.native_dtype(x.dtype):
            raise Unsupported(f"reduction over {x.dtype}")
        kshape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
        if any(x.shape[d] == 0 for d in axes):
            if op == "sum":
                r = self.full(0, kshape, out_dt)
            elif op == "prod":
                r = self.full(1, kshape, out_dt)
            else:
                raise Unsupported(f"{op} over an empty dimension")
        else:
            r = self.node("reduce", (x,), {"op": op, "axes": axes}, kshape, out_dt)
        if not keepdims:
            r = self.reshape(r, tuple(s for d, s in enumerate(x.shape) if d not in axes))
        return r

    def sum(self, x, axes, keepdims=False, dtype=None):
        return self.reduce("sum", x, axes, keepdims, dtype)

    def mean(self, x, axes, keepdims=False):
        n = 1
        for a in axes:
            n *= x.shape[a]
        s = self.reduce("sum", x, axes, keepdims)
        return self.ew("div", s, n, dtype=x.dtype)

    # ---- matmul / gather -------------------------------------------------------------------------------
    def matmul(self, a: PNode, b: PNode) -> PNode:
        """NumPy matmul semantics (1-D operands, broadcast batch dims) over 3-D (B, M, K) @ (B, K, N)."""
        if a.dtype != b.dtype or a.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise Unsupported(f"matmul of {a.dtype} and {b.dtype} (BLAS handles float32/float64)")
        va, vb = len(a.shape) == 1, len(b.shape) == 1
        A = self.reshape(a, (1,) + a.shape) if va else a
        B = self.reshape(b, b.shape + (1,)) if vb else b
        M, K = A.shape[-2:]
        K2, N = B.shape[-2:]
        if K != K2:
            raise Unsupported("matmul shapes do not match")
        batch = P.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        nb = math.prod(batch) if batch else 1
        A3 = self.reshape(self.expand(A, batch + (M, K)), (nb, M, K))
        B3 = self.reshape(self.expand(B, batch + (K, N)), (nb, K, N))
        r = self.node("matmul", (A3, B3), {}, (nb, M, N), a.dtype)
        shape = batch + ((M,) if not va else ()) + ((N,) if not vb else ())
        return self.reshape(r, shape)

    def gather(self, x: PNode, index: PNode, axis: int, error=None) -> PNode:
        """``out[i] = x[i with axis -> index[i]]`` (index has the output's shape and x's rank)."""
        index = self.cast(index, np.int64)
        check = 0
        if error is not None:
            self.errors.append(error)
            check = len(self.errors)
        return self.node("gather", (x, index), {"axis": axis, "check": check}, index.shape, x.dtype)


def _hashable(attrs):
    if not attrs:
        return ()
    out = []
    for k in sorted(attrs):
        v = attrs[k]
        if isinstance(v, np.ndarray):
            v = ("nd", v.dtype.str, v.shape, v.tobytes())
        elif type(v) is SymInt:
            v = ("sym", v.expr)
        elif isinstance(v, (list, dict)):
            v = repr(v)
        out.append((k, v))
    return tuple(out)


# ---- shared by the decompositions (decompose_*.py) ----------------------------------------------------

def _out(n, i=0):
    v = n.outputs[i]
    return tuple(v.shape), _npdt(v.dtype)


def _finish(b: Builder, n, r: PNode, i=0) -> PNode:
    shape, dt = _out(n, i)
    r = b.cast(r, dt)
    if r.shape != shape:
        r = b.broadcast_to(r, shape) if r.numel != math.prod(shape) else b.reshape(r, shape)
    return r


# ---- the driver ----------------------------------------------------------------------------------------

class PGraph:
    """The decomposed program: ``items`` (PNodes and Effects in order), buffers, and how program values
    map to them (``value_node(v)`` gives the final node of a value)."""

    def __init__(self, builder, program):
        self.builder = builder
        self.items = builder.items
        self.buffers = builder.buffers
        self.program = program
        self.inputs: dict = {}        # Value id -> Buffer (inputs bound per call)
        self.outputs: dict = {}       # Value id -> PNode (program outputs, at the end)
        self.fwd_needed: dict = {}    # Value id -> PNode (values the backward program reads)
        self.errors = builder.errors
        self.graph_ends: list = []    # seq of each graph's end


ALIAS_OPS = ("view", "permute", "expand", "getitem_basic")
# ops whose output shape depends on the values: generated code is shape-specialised, so programs that
# contain them run in the interpreter
DYNAMIC_SHAPE_OPS = ("unique", "nonzero", "masked_select", "bincount")
ALIAS_UNSUPPORTED = ("unfold", "diagonal", "as_strided", "split", "split_with_sizes", "unbind")


class Declined(Exception):
    """The whole program is not compiled natively (the runner uses the interpreter); says why."""


def decompose(program, fwd_values: set | None = None, device: bool = False) -> PGraph:
    """Program -> PGraph. ``fwd_values``: ids of values a backward program will read (kept whole);
    ``device``: for an OpenCL device (the device-only decompositions apply too)."""
    b = Builder(device)
    g = PGraph(b, program)
    producer = {}
    for gr in program.graphs:
        for n in gr.nodes:
            if isinstance(n, OpNode):
                if n.op.name in DYNAMIC_SHAPE_OPS:
                    raise Declined(f"{n.op.name} has an output shape that depends on the values")
                for o in n.outputs:
                    producer[o.id] = n
    # values written in place must live in buffers: find the root each write goes through
    mutable_roots = set()
    for gr in program.graphs:
        for n in gr.nodes:
            if isinstance(n, WriteNode):
                v = n.target
                while v.kind == "node":
                    p = producer.get(v.id)
                    if p is None:
                        break
                    if p.op.name in ALIAS_UNSUPPORTED:
                        raise Declined(f"an in-place write goes through a {p.op.name} view")
                    if p.op.name not in ALIAS_OPS:
                        break
                    v = p.inputs[0]
                mutable_roots.add(v.id)
    vmap: dict = {}          # Value id -> Buffer | PNode
    alias_def: dict = {}     # Value id -> OpNode (native views, re-rooted after writes)
    consts_written = {n.target.id for gr in program.graphs for n in gr.nodes if isinstance(n, WriteNode)}

    def bind_input(v, kind):
        buf = b.buffer(kind, v.shape, _npdt(v.dtype), v)
        vmap[v.id] = buf
        g.inputs[v.id] = buf
        return buf

    for v in program.args:
        bind_input(v, "arg")
    for v in program.lifted:
        bind_input(v, "lifted")
    for v in getattr(program, "fwd_refs", ()):
        bind_input(v, "fwd")
    for v in program.grad_outputs:
        bind_input(v, "grad_in")
    for v in program.consts:
        arr = np.asarray(v.ref)
        if v.id not in consts_written and arr.size == 1 and P.native_dtype(arr.dtype):
            vmap[v.id] = b.full(arr.reshape(-1)[0].item(), arr.shape, arr.dtype)
        else:
            buf = bind_input(v, "const")
            if v.id not in consts_written:
                buf.data = np.ascontiguousarray(arr)

    def lookup(v):
        x = vmap[v.id]
        if isinstance(x, Buffer):
            return b.load(x)
        opn = alias_def.get(v.id)
        if opn is not None and _stale(x):
            # a view read after its base was written: rebuild it on the base's current version
            args = [lookup(a) if hasattr(a, "kind") else a for a in opn.inputs]
            x = DECOMPOSITIONS[opn.op.name](b, opn, args, dict(opn.attrs))[0]
            vmap[v.id] = x
        return x

    def arg_of(a):
        if hasattr(a, "kind") and hasattr(a, "id") and hasattr(a, "shape"):
            return lookup(a)
        return a

    for gi, gr in enumerate(program.graphs):
        for n in gr.nodes:
            if isinstance(n, OpNode):
                _decompose_op(b, g, n, vmap, alias_def, arg_of, mutable_roots)
            elif isinstance(n, WriteNode):
                tgt = lookup(n.target)
                src = lookup(n.source)
                _write(b, tgt, src)
            elif isinstance(n, SetGradNode):
                src = None if n.source is None else lookup(n.source)
                b.effect("setgrad", leaf=n.leaf, source=src)
        if gr.ended_by is not None:
            b.effect("read", source=lookup(gr.ended_by.value), read_node=gr.ended_by)
        g.graph_ends.append(b.seq)

    def collect(v, out):
        x = lookup(v)
        r = _root_load(x)
        if r.op == "load" and r.buffer.kind == "const":
            # a baked constant is shared by every call: the caller gets a copy
            x = b.node("copy", (x,), {}, x.shape, x.dtype)
        out[v.id] = x
        return v
    from .ir import map_struct, Value
    map_struct(program.outputs, lambda v: isinstance(v, Value), lambda v: collect(v, g.outputs))
    for vid in fwd_values or ():
        v = program.values[vid]
        if v.id in vmap:
            g.fwd_needed[vid] = lookup(v)
    g.vmap = vmap
    return g


def _stale(x: PNode) -> bool:
    while x.op in P.VIEWS:
        x = x.inputs[0]
    return x.op == "load" and x.version != x.buffer.version


def _root_load(x: PNode) -> PNode:
    while x.op in P.VIEWS:
        x = x.inputs[0]
    return x


def _write(b: Builder, target: PNode, source: PNode):
    root = _root_load(target)
    if root.op != "load":
        raise Declined("an in-place write into a value that is not a buffer")
    buf = root.buffer
    src = b.cast(source, buf.dtype) if P.native_dtype(buf.dtype) and P.native_dtype(source.dtype) else None
    if src is None:
        raise Declined(f"in-place write of {source.dtype} into {buf.dtype}")
    src = b.broadcast_to(src, target.shape)
    b.effect("write", buffer=buf, target=target, source=src)
    buf.version += 1
    buf.written = True


def _decompose_op(b, g, n, vmap, alias_def, arg_of, mutable_roots):
    name = n.op.name
    fn = DECOMPOSITIONS.get(name)
    if fn is None and b.device:
        fn = DEVICE_DECOMPOSITIONS.get(name)
    args = [arg_of(a) for a in n.inputs]
    attrs = {k: (arg_of(v.value) if type(v) is AttrRef else v) for k, v in n.attrs.items()}
    outs = None
    reason = ""
    if fn is None:
        reason = "no decomposition (extern op)"
    else:
        cp = b.checkpoint()
        try:
            outs = fn(b, n, args, attrs)
            for o, v in zip(outs, n.outputs):
                want = _npdt(v.dtype)
                if o.shape != tuple(v.shape):
                    raise Unsupported(f"decomposition gave shape {o.shape}, traced {tuple(v.shape)}")
                if o.dtype != want:
                    raise Unsupported(f"decomposition gave {o.dtype}, traced {want}")
                if not P.native_dtype(o.dtype):     # data movement of complex values: no C type for them
                    raise Unsupported(f"{o.dtype} values are not computed natively")
        except Unsupported as e:
            outs = None
            reason = str(e)
            b.rollback(cp)
        except Exception as e:     # a decomposition bug: keep the program correct, say so
            outs = None
            reason = f"decomposition failed: {type(e).__name__}: {e}"
            b.rollback(cp)
            from .logs import log
            log("kernels", f"decomposition of {name} failed ({type(e).__name__}: {e}); it runs as an extern call")
    if outs is None:
        bufs = [b.buffer("extern", v.shape, _npdt(v.dtype), v) for v in n.outputs]
        b.effect("extern", op_node=n, args=args, attrs=attrs, outs=bufs, reason=reason)
        for v, buf in zip(n.outputs, bufs):
            vmap[v.id] = buf
        return
    for v, o in zip(n.outputs, outs):
        if v.id in mutable_roots:
            # written in place later: give it its own buffer now
            buf = b.buffer("temp", v.shape, _npdt(v.dtype), v)
            _write(b, b.load(buf), o)
            vmap[v.id] = buf
        else:
            vmap[v.id] = o
            if name in ALIAS_OPS:
                alias_def[v.id] = n


# ---- extern ops: run their NumPy kernel between native segments -------------------------------------------
# (rare in training graphs: linear algebra decompositions, sorting, random draws, convolutions ...)
EXTERN_OPS = frozenset("""
split split_with_sizes unbind div_floor div_trunc take_flat put_flat_add as_strided fill_flat_zero copy_slices
unfold diagonal erfinv digamma polygamma special_i1 i0 sinc isclose bitwise_left_shift bitwise_right_shift
ldexp logaddexp logaddexp2 heaviside cumsum cumprod logcumsumexp sort topk kthvalue median_dim mode cummax cummin argsort
median unique scatter scatter_add scatter_reduce index_add index_copy index_fill masked_select
masked_scatter nonzero einsum cross linalg_inv linalg_solve linalg_det linalg_slogdet linalg_cholesky linalg_qr
linalg_eigh linalg_eig linalg_eig_backward linalg_svd linalg_pinv linalg_lu_factor_ex repeat_interleave repeat_interleave_backward roll diag_embed block_diag
normal bernoulli bernoulli_p poisson binary_cross_entropy binary_cross_entropy_with_logits conv2d
conv_transpose2d conv2d_weight im2col col2im max_pool2d max_pool_scatter avg_pool2d avg_pool2d_backward
adaptive_max_pool2d native_group_norm native_batch_norm cdist rnn_layer rnn_layer_backward lstm_layer
lstm_layer_backward gru_layer gru_layer_backward norm count_nonzero nanmean bincount histc histogram
ctc_loss ctc_loss_backward searchsorted max_pool_gather random_draw conv3d conv_transpose3d conv3d_weight
max_pool3d avg_pool3d avg_pool3d_backward adaptive_max_pool3d upsample_uint8
real imag view_as_real view_as_complex conj_physical angle complex polar sgn_complex fft_c2c fft_r2c fft_c2r
""".split())

# the decompositions live in these modules (imported for their registrations)
from . import decompose_elementwise  # noqa: E402,F401
from . import decompose_shape  # noqa: E402,F401
from . import decompose_reduce  # noqa: E402,F401
from . import decompose_nn  # noqa: E402,F401
from . import decompose_conv  # noqa: E402,F401
from . import decompose_scatter  # noqa: E402,F401
from . import decompose_scan  # noqa: E402,F401
from . import decompose_sort  # noqa: E402,F401
from . import decompose_losses  # noqa: E402,F401
from . import decompose_optim  # noqa: E402,F401
