"""``DistributedDataParallel``: data-parallel training over ``ember.distributed`` (MPI).

Each process holds a replica of the module and trains on its share of every batch; DDP keeps the
replicas identical by averaging gradients:

- at construction it checks that every rank has the same parameters (names, shapes, dtypes) and
  broadcasts rank 0's parameters and buffers;
- the parameters that require grad are split into *buckets* (in reverse registration order, which is
  roughly the order backward produces their gradients; the first bucket small, at most 1 MiB, so that
  communication starts early; then ``bucket_cap_mb``); a post-accumulate-grad hook on each parameter
  copies its gradient, divided by the world size, into its bucket, and a bucket whose gradients are
  all in is all-reduced at once with a non-blocking ``MPI_Iallreduce`` while backward goes on (buckets
  start in the same order on every rank, as MPI requires);
- a daemon thread polls the buckets in flight (MPI advances non-blocking operations only inside MPI
  calls; NumPy and MPI release the GIL), so the transfers go on while backward computes;
- a final callback queued on the autograd engine waits for the last buckets when backward ends and
  writes the averaged gradients back into ``.grad``;
- with ``broadcast_buffers`` (default) rank 0's buffers are broadcast before each forward;
- inside ``no_sync()`` gradients only accumulate locally; the first backward after it all-reduces the
  accumulated gradients.

Parameters that get no gradient in a backward (unused branches) must be declared with
``find_unused_parameters=True``: their bucket slots are then reduced as zeros at the end of backward,
and a parameter no rank used keeps its ``.grad`` untouched (torch's behaviour); without the flag such a
backward raises torch's error naming the parameters.

With ``ember.compile``: ``DDP(ember.compile(model))`` runs the compiled forward and backward, and
the hooks see the gradients the compiled backward accumulates. ``ember.compile(DDP(model))`` captures
DDP's forward too; when buffers must be broadcast before every forward it runs eagerly instead (the
broadcast cannot be part of a captured graph). A compiled function that calls ``backward`` itself runs
eagerly when DDP's hooks fire inside it, so the all-reduce is never skipped by a replay.
"""
from __future__ import annotations

import contextlib
import sys
import time
import weakref

import numpy as np

from ..modules.module import Module

__all__ = ["DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1024 * 1024
_DEFAULT_BUCKET_MB = 25.0


def _tracer():
    """The active ember.compile tracer, if a capture is running (without importing the compiler)."""
    cap = sys.modules.get("ember.compiler.capture")
    return None if cap is None else cap.Tracer.active


def _work_dtype(dt) -> np.dtype:
    return np.dtype(np.float32) if dt.name in ("float16", "bfloat16") else dt.np


def _mpi_type(MPI, npdt: np.dtype):
    return {"float32": MPI.FLOAT, "float64": MPI.DOUBLE}[npdt.name]


def _coalesced_broadcast(tensors, pg, root: int = 0, what: str = "DistributedDataParallel broadcast") -> None:
    """Broadcast ``tensors`` from group rank ``root`` in one message per dtype (values only, no autograd)."""
    from ...distributed import _mpi
    if pg.size() == 1 or not tensors:
        return
    MPI = _mpi._MPI
    by_dtype: dict = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype.name, []).append(t)
    for group in by_dtype.values():
        host = [t._data if t.device.type == "cpu" else t.detach().cpu()._data for t in group]
        flat = np.concatenate([np.ascontiguousarray(a).reshape(-1) for a in host])
        req = pg._comm.Ibcast([flat.view(np.uint8), MPI.BYTE], root=root)
        _mpi.wait_requests([req], what, pg._timeout, flat.nbytes)
        if pg.rank() != root:
            off = 0
            for t, a in zip(group, host):
                n = a.size
                vals = flat[off:off + n].reshape(a.shape)
                off += n
                if t.device.type == "cpu":
                    np.copyto(a, vals)
                    t._bump()
                else:                          # a device tensor: through a host copy
                    from ...autograd.grad_mode import no_grad
                    from ...tensor import wrap
                    with no_grad():
                        t.copy_(wrap(np.ascontiguousarray(vals), t.dtype))


class _Bucket:
    __slots__ = ("index", "params", "offsets", "flat", "pending", "req", "launched")

    def __init__(self, index, params, dtype):
        self.index = index
        self.params = params                       # indices into the reducer's parameter list
        self.offsets = []
        self.flat = None
        self.pending = 0
        self.req = None
        self.launched = False


class _Reducer:
    """The gradient buckets of one DDP module and the state of the backward pass in flight."""

    def __init__(self, ddp, params, names, pg, bucket_bytes: float, find_unused: bool):
        self.ddp = weakref.ref(ddp)
        self.params = params
        self.names = names
        self.pg = pg
        self.find_unused = find_unused
        self.world = pg.size()
        # buckets: reverse registration order, one dtype per bucket, the first one small
        self.buckets: list = []
        self.where: list = [None] * len(params)          # param index -> (bucket, offset)
        open_: dict = {}
        order = []
        for i in reversed(range(len(params))):
            p = params[i]
            key = _work_dtype(p.dtype).name
            b = open_.get(key)
            if b is None:
                b = open_[key] = [[], 0]
            b[0].append(i)
            b[1] += p.numel() * _work_dtype(p.dtype).itemsize
            cap = min(_FIRST_BUCKET_BYTES, bucket_bytes) if not order else bucket_bytes
            if b[1] >= cap:
                order.append((key, b[0]))
                del open_[key]
        order.extend((k, b[0]) for k, b in open_.items())
        for bi, (key, idxs) in enumerate(order):
            bucket = _Bucket(bi, idxs, key)
            off = 0
            for i in idxs:
                bucket.offsets.append(off)
                self.where[i] = (bucket, off)
                off += params[i].numel()
            bucket.flat = np.zeros(off, np.dtype(key))
            self.buckets.append(bucket)
        self.overlap = True        # False: every bucket waits for the end of backward (benchmarks compare)
        self.background = False    # whether the MPI progress thread moves the buckets in flight
        self.active = False
        self.marked = [False] * len(params)
        self.next_launch = 0
        self.sync_next = None      # DDP's forward sets it (True/False); None: decide at backward time
        self.error = None
        self.stats = {"backward_syncs": 0, "wait_s": 0.0, "finalize_s": 0.0, "bytes": 0, "launched_in_backward": 0,
                      "launched_at_end": 0}
        self.finalizing = False
        self.timeline = None       # a list: (backward end, all-reduce done) of each synced step, time.monotonic
        self.handles = []
        ref = weakref.ref(self)
        for i, p in enumerate(params):
            def hook(param, _i=i, _ref=ref):
                red = _ref()
                if red is not None:
                    red.ready(_i)
            self.handles.append(p.register_post_accumulate_grad_hook(hook))

    def remove_hooks(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    # ---- during backward ---------------------------------------------------------------------------------
    def ready(self, i: int) -> None:
        """Parameter ``i``'s gradient is accumulated: put it into its bucket; start buckets now complete."""
        ddp = self.ddp()
        if ddp is None:
            return
        sync = self.sync_next if self.sync_next is not None else ddp.require_backward_grad_sync
        if not sync:
            return
        tr = _tracer()
        if tr is not None:
            # backward inside a compiled function: replays would skip the all-reduce, so this function
            # runs eagerly (this call is eager already and syncs normally)
            tr.refuse("DistributedDataParallel all-reduces gradients in hooks that a compiled replay would not run",
                      "compile the module instead: DistributedDataParallel(ember.compile(model)), and call backward "
                      "outside the compiled function")
        if not self.active:
            self.start()
        bucket, off = self.where[i]
        if self.marked[i]:
            if bucket.launched:
                raise RuntimeError(
                    f"DistributedDataParallel: parameter {self.names[i]!r} received a gradient twice in one backward "
                    "pass after its bucket was already all-reduced (e.g. a reentrant backward through shared "
                    "parameters); this is not supported")
            self.copy_in(i)          # again: .grad now holds both contributions
            return
        self.marked[i] = True
        self.copy_in(i)
        bucket.pending -= 1
        if bucket.pending == 0 and self.overlap:
            self.launch_ready()
        self.progress()

    def start(self) -> None:
        from ...autograd.engine import queue_callback
        self.active = True
        self.marked = [False] * len(self.params)
        self.next_launch = 0
        for b in self.buckets:
            b.pending = len(b.params)
            b.req = None
            b.launched = False
        queue_callback(self.finalize)

    def copy_in(self, i: int) -> None:
        p = self.params[i]
        bucket, off = self.where[i]
        n = p.numel()
        dst = bucket.flat[off:off + n]
        g = p.grad
        if g is None:
            dst[...] = 0
        else:
            gd = g._data if g.device.type == "cpu" else g.detach().cpu()._data
            np.divide(gd.reshape(-1), self.world, out=dst, casting="unsafe")

    def launch_ready(self) -> None:
        """Start the next buckets in order while they are complete (the same order on every rank)."""
        while self.next_launch < len(self.buckets) and self.buckets[self.next_launch].pending == 0:
            self.launch(self.buckets[self.next_launch])
            self.next_launch += 1

    def launch(self, b: _Bucket) -> None:
        b.launched = True
        self.stats["launched_at_end" if self.finalizing else "launched_in_backward"] += 1
        if self.world == 1:
            return
        from ...distributed import _mpi
        MPI = _mpi._MPI
        with _mpi.PROGRESS_LOCK:
            b.req = self.pg._comm.Iallreduce(MPI.IN_PLACE, [b.flat, _mpi_type(MPI, b.flat.dtype)], MPI.SUM)
        self.stats["bytes"] += b.flat.nbytes
        if not self.finalizing:
            self.background = _mpi.progress_in_background([b.req])

    def progress(self) -> None:
        """Let MPI move the buckets in flight along (its progress engine runs inside MPI calls), unless
        the background progress thread does."""
        if self.background:
            return
        from ...distributed import _mpi
        reqs = [b.req for b in self.buckets[:self.next_launch] if b.req is not None]
        if reqs:
            _mpi._MPI.Request.Testall(reqs)

    # ---- when backward ends --------------------------------------------------------------------------------
    def finalize(self) -> None:
        t0 = time.perf_counter()
        t_end = time.monotonic()
        from ...distributed import _mpi
        self.finalizing = True
        try:
            unused = [i for i, m in enumerate(self.marked) if not m]
            for i in unused:                     # their slots: the current .grad (or zeros)
                self.copy_in(i)
                self.where[i][0].pending -= 1
            self.launch_ready()
            used_any = None
            if self.find_unused and self.world > 1:
                MPI = _mpi._MPI
                used_any = np.array(self.marked, np.uint8)
                ureq = self.pg._comm.Iallreduce(MPI.IN_PLACE, [used_any, MPI.UINT8_T], MPI.MAX)
            reqs = [b.req for b in self.buckets if b.req is not None]
            if used_any is not None:
                reqs.append(ureq)
            tw = time.perf_counter()
            if reqs:
                _mpi.wait_requests(reqs, "DistributedDataParallel gradient all-reduce", self.pg._timeout,
                                   sum(b.flat.nbytes for b in self.buckets if b.req is not None))
            self.stats["wait_s"] += time.perf_counter() - tw
            if self.timeline is not None:
                self.timeline.append((t_end, time.monotonic()))
            for i, p in enumerate(self.params):
                if used_any is not None and not used_any[i]:
                    continue                      # no rank used it: its .grad stays as it was
                if self.find_unused and self.world == 1 and not self.marked[i]:
                    continue
                self.copy_out(i)
        finally:
            self.active = False
            self.finalizing = False
            self.sync_next = None
        self.stats["backward_syncs"] += 1
        self.stats["finalize_s"] += time.perf_counter() - t0
        if unused and not self.find_unused:
            names = ", ".join(self.names[i] for i in unused)
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a new one. This error "
                "indicates that your module has parameters that were not used in producing loss. You can enable "
                "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
                "`DistributedDataParallel`. Parameters which did not receive grad for rank "
                f"{self.pg._ranks[self.pg.rank()]}: {names}")

    def copy_out(self, i: int) -> None:
        p = self.params[i]
        bucket, off = self.where[i]
        vals = bucket.flat[off:off + p.numel()].reshape(tuple(p.shape))
        g = p.grad
        from ...tensor import wrap
        if g is None:
            if p.device.type == "cpu":
                p.grad = wrap(vals.astype(p._data.dtype), p.dtype)
            else:
                p.grad = wrap(vals.astype(p.dtype.np), p.dtype).to(p.device)
        elif g.device.type == "cpu" and g.grad_fn is None and g._data.flags.writeable:
            np.copyto(g._data, vals, casting="unsafe")
            g._bump()
        else:
            from ...autograd.grad_mode import no_grad
            with no_grad():
                g.copy_(wrap(vals.astype(p.dtype.np), p.dtype))


class DistributedDataParallel(Module):
    """``DistributedDataParallel(module, broadcast_buffers=True, process_group=None, bucket_cap_mb=None,
    find_unused_parameters=False, ...)``: see the module docstring. ``module`` may be an
    ``ember.compile``d module. State dict keys carry torch's ``module.`` prefix."""

    def __init__(self, module, device_ids=None, output_device=None, dim: int = 0, broadcast_buffers: bool = True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False, static_graph: bool = False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None, mixed_precision=None,
                 device_mesh=None, skip_all_reduce_unused_params: bool = False, init_sync: bool = True):
        super().__init__()
        from ... import distributed as dist
        from ...distributed import distributed_c10d as c10d
        if not dist.is_initialized():
            raise ValueError("Default process group has not been initialized, please make sure to call "
                             "init_process_group.")
        inner, compiled = module, None
        if not isinstance(module, Module):
            orig = getattr(module, "_orig_mod", None)
            if not isinstance(orig, Module):
                raise TypeError(f"DistributedDataParallel: module must be an nn.Module or an ember.compile'd module, "
                                f"got {type(module).__name__}")
            inner, compiled = orig, module
        devices = {p.device for p in inner.parameters()}
        on_device = len(devices) == 1 and next(iter(devices)).type != "cpu"
        if (device_ids or output_device is not None) and not (on_device and (not device_ids or len(device_ids) == 1)):
            raise ValueError(
                "DistributedDataParallel device_ids and output_device arguments only work with single-device "
                f"accelerator modules, but got device_ids {device_ids}, output_device {output_device}, and module "
                f"parameters {devices}.")
        if mixed_precision is not None or device_mesh is not None:
            raise ValueError("DistributedDataParallel: mixed_precision and device_mesh are not supported by ember")
        pg = c10d._resolve(process_group, "DistributedDataParallel")
        if pg is None:
            raise ValueError("DistributedDataParallel: this rank is not a member of process_group")
        if compiled is None:
            self.module = inner
        else:
            self._modules["module"] = inner          # parameters and state_dict ("module." keys)
            self.__dict__["module"] = compiled       # .module is what was passed, as in torch
        self.__dict__["_call_module"] = compiled if compiled is not None else inner
        self.process_group = pg
        self.dim = dim
        # a single-device accelerator module with device_ids: forward moves tensor inputs to its device
        self.device_ids = list(device_ids) if device_ids else None
        self.output_device = output_device
        self.__dict__["_input_device"] = next(iter(devices)) if (on_device and device_ids) else None
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self.static_graph = bool(static_graph)
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        cap = _DEFAULT_BUCKET_MB if bucket_cap_mb is None else float(bucket_cap_mb)
        if cap <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        self.bucket_bytes_cap = int(cap * 1024 * 1024)

        named, seen = [], set()
        for name, p in inner.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                named.append((name, p))
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter that "
                               "requires a gradient.")
        self._verify_same_model(inner, pg)
        if init_sync:
            _coalesced_broadcast([p for _, p in inner.named_parameters()] + [b for _, b in inner.named_buffers()],
                                 pg, 0, "DistributedDataParallel initial broadcast of parameters and buffers")
        self.__dict__["_reducer"] = _Reducer(self, [p for _, p in named], [n for n, _ in named], pg,
                                             self.bucket_bytes_cap, self.find_unused_parameters)

    def _verify_same_model(self, inner, pg) -> None:
        """Every rank must hold the same parameters and buffers and the same DDP options."""
        from ...distributed import distributed_c10d as c10d
        mine = {"params": [(n, tuple(p.shape), p.dtype.name, p.requires_grad) for n, p in inner.named_parameters()],
                "buffers": [(n, tuple(b.shape), b.dtype.name) for n, b in inner.named_buffers()],
                "options": (self.find_unused_parameters, self.broadcast_buffers, self.bucket_bytes_cap)}
        every = [None] * pg.size()
        c10d.all_gather_object(every, mine, group=pg if pg is not c10d._WORLD else None)
        ranks = pg._ranks
        ref = every[0]
        for r, other in enumerate(every[1:], start=1):
            if other == ref:
                continue
            if other["options"] != ref["options"]:
                raise RuntimeError(f"DistributedDataParallel: options differ across ranks (find_unused_parameters, "
                                   f"broadcast_buffers, bucket bytes): rank {ranks[0]}: {ref['options']}, "
                                   f"rank {ranks[r]}: {other['options']}")
            for kind in ("params", "buffers"):
                a, b = ref[kind], other[kind]
                if len(a) != len(b):
                    raise RuntimeError(f"DistributedDataParallel expects the same model on every rank, but rank "
                                       f"{ranks[0]} has {len(a)} {kind} while rank {ranks[r]} has {len(b)}")
                for x, y in zip(a, b):
                    if x != y:
                        def fmt(e):
                            return f"{e[0]!r} {e[2]}[{', '.join(map(str, e[1]))}]" + \
                                (" requires_grad" if len(e) > 3 and e[3] else "")
                        raise RuntimeError(f"DistributedDataParallel expects the same model on every rank: rank "
                                           f"{ranks[0]} has {fmt(x)}, rank {ranks[r]} has {fmt(y)}")

    # ---- calling ---------------------------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        red = self._reducer
        if red.active:
            red.active = False
            raise RuntimeError("DistributedDataParallel: the previous backward pass did not finish its gradient "
                               "all-reduce (it raised part way); the ranks may be out of step, so start again from a "
                               "checkpoint")
        from ...autograd.grad_mode import is_grad_enabled
        bufs = []
        if self.broadcast_buffers and self.require_forward_param_sync and self.process_group.size() > 1:
            bufs = [b for _, b in self._modules["module"].named_buffers()]
        tr = _tracer()
        if tr is not None:
            # captured by ember.compile(DDP(...)): replays skip this Python, so the backward decides
            red.sync_next = None
            if bufs:
                # this call runs for real (and broadcasts below); the calls after it run eagerly
                tr.refuse("DistributedDataParallel broadcasts buffers before every forward, which a compiled "
                          "graph cannot do",
                          "wrap the compiled module instead: DistributedDataParallel(ember.compile(model)), or pass "
                          "broadcast_buffers=False")
        else:
            red.sync_next = bool(is_grad_enabled() and self.require_backward_grad_sync)
        if bufs:
            _coalesced_broadcast(bufs, self.process_group, 0, "DistributedDataParallel broadcast of buffers before "
                                 "forward")
        dev = self._input_device
        if dev is not None:
            from ...tensor import Tensor
            inputs = tuple(a.to(dev) if isinstance(a, Tensor) else a for a in inputs)
            kwargs = {k: (v.to(dev) if isinstance(v, Tensor) else v) for k, v in kwargs.items()}
        return self._call_module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward passes only accumulate gradients locally; the first synchronized backward
        afterwards all-reduces the accumulated gradients."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def _ddp_stats(self) -> dict:
        """Counters of the gradient all-reduce: backward passes synced, seconds spent waiting for
        buckets at the end of backward, bytes reduced, buckets started while backward ran and at its
        end (for tests and benchmarks)."""
        return dict(self._reducer.stats)

    def _reset_ddp_stats(self) -> None:
        for k, v in self._reducer.stats.items():
            self._reducer.stats[k] = type(v)(0)

    def _bucket_sizes(self) -> list:
        """Bytes per gradient bucket, in launch order."""
        return [b.flat.nbytes for b in self._reducer.buckets]

    def __del__(self):
        red = self.__dict__.get("_reducer")
        if red is not None:
            red.remove_hooks()
