"""Programs that tests/test_distributed.py starts with mpiexec (or the launcher): ``python
distributed_worker.py MODE OUT.json``. Each rank runs many checks against NumPy references computed
from every rank's (seeded) inputs; rank 0 gathers the outcomes and writes them to OUT.json as
{check name: [ok, detail]} so the test names each failing check."""
from __future__ import annotations

import datetime
import json
import os
import sys
import time
import traceback
import warnings

import numpy as np

import ember
import ember.distributed as dist
from ember.distributed import ReduceOp

TIMEOUT = float(os.environ.get("EMBER_TEST_DIST_TIMEOUT", "20"))      # seconds: a broken check fails, never hangs
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
REDUCE_OPS = ["SUM", "AVG", "MIN", "MAX", "PRODUCT"]
BITWISE_OPS = ["BAND", "BOR", "BXOR"]


def collective_check_names() -> list:
    names = [f"all_reduce[{d}-{op}]" for d in DTYPES for op in REDUCE_OPS]
    names += [f"all_reduce[{d}-{op}]" for d in ("bool", "uint8", "int32", "int64") for op in BITWISE_OPS]
    names += [f"broadcast[{d}]" for d in DTYPES] + [f"all_gather[{d}]" for d in DTYPES]
    names += [f"send_recv[{d}]" for d in DTYPES]
    names += ["all_reduce_strided", "all_reduce_async", "all_reduce_large", "broadcast_strided", "reduce",
              "all_gather_into_tensor", "reduce_scatter_tensor", "reduce_scatter_tensor_int_avg", "reduce_scatter",
              "gather", "scatter", "gather_list_on_wrong_rank", "isend_irecv_any_source", "recv_shape_mismatch",
              "all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list", "barrier",
              "new_group", "mismatched_shapes", "mismatched_dtypes", "mismatched_collectives",
              "mismatched_src", "float_bitwise_error", "world", "device_tensors"]
    return names


def ddp_check_names() -> list:
    return ["launcher_env", "mlp_20_steps", "no_sync", "compiled_module", "compile_ddp", "unused_parameters",
            "buffers_broadcast", "state_dict", "initial_broadcast", "shape_verification", "sampler_loader",
            "device_module"]


def accelerator():
    """The accelerator device's name, or a SKIP reason naming what is missing."""
    if not ember.accelerator.is_available():
        return None, "SKIP: no accelerator device (ember.accelerator.is_available() is False: no OpenCL platform)"
    return str(ember.accelerator.current_accelerator()), None


# ---- helpers ----------------------------------------------------------------------------------------------

def np_dtype(name):
    return getattr(ember, name).np


def make(rank: int, name: str, shape=(3, 4), seed: int = 0) -> np.ndarray:
    """Rank ``rank``'s input: small values so products and sums stay in range."""
    rng = np.random.default_rng(1000 * seed + 17 * rank + DTYPES.index(name))
    if name == "bool":
        return rng.random(shape) < 0.5
    if name == "uint8":
        return rng.integers(0, 4, shape).astype(np.uint8)
    if name.startswith("int"):
        return rng.integers(-3, 4, shape).astype(np_dtype(name))
    return (rng.standard_normal(shape) * 2).astype(np.float32).astype(np_dtype(name))


def ref_reduce(stack: np.ndarray, op: str, name: str, n: int) -> np.ndarray:
    """The NumPy reference of reducing ``stack`` (ranks along axis 0)."""
    if name == "bool":
        f = {"SUM": np.any, "MAX": np.any, "PRODUCT": np.all, "MIN": np.all}.get(op)
        if f is not None:
            return f(stack, axis=0)
        u = stack.astype(np.uint8)
        return {"BAND": np.bitwise_and, "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}[op].reduce(u).astype(bool)
    work = np.float32 if name in ("float16", "bfloat16") else stack.dtype
    s = stack.astype(work)
    if op in ("SUM", "AVG"):
        r = np.add.reduce(s, axis=0, dtype=work)
        if op == "AVG":
            if r.dtype.kind == "f":
                r = r / n
            else:
                q = np.abs(r) // n
                r = np.where(r < 0, -q, q)
    elif op == "PRODUCT":
        r = np.multiply.reduce(s, axis=0, dtype=work)
    elif op == "MIN":
        r = s.min(0)
    elif op == "MAX":
        r = s.max(0)
    else:
        r = {"BAND": np.bitwise_and, "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}[op].reduce(s, axis=0)
    return r.astype(stack.dtype)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f" or str(a.dtype) == "bfloat16":
        return np.array_equal(a.astype(np.float64), b.astype(np.float64))
    return np.array_equal(a, b)


def tensor(a: np.ndarray):
    return ember.from_numpy(np.array(a))


class Checks:
    def __init__(self):
        self.results = {}

    def run(self, name, fn):
        if os.environ.get("EMBER_DIST_TRACE"):
            print(f"[rank {dist.get_rank()}] {name}", file=sys.stderr, flush=True)
        try:
            out = fn()
            if isinstance(out, str) and out.startswith("SKIP: "):
                ok, detail = None, out[len("SKIP: "):]          # the test skips with this reason
            else:
                ok, detail = (True, "") if out is None or out is True else (False, str(out))
        except Exception:           # noqa: BLE001
            ok, detail = False, traceback.format_exc(limit=6)
        if ok is False and os.environ.get("EMBER_DIST_TRACE"):
            print(f"[rank {dist.get_rank()}] FAILED {name}: {detail}", file=sys.stderr, flush=True)
        self.results[name] = [ok, detail]

    def expect(self, cond, detail):
        if not cond:
            raise AssertionError(detail)


def expect_raises(fn, exc_type, *fragments):
    try:
        fn()
    except exc_type as e:
        msg = str(e)
        missing = [f for f in fragments if f not in msg]
        if missing:
            raise AssertionError(f"message {msg!r} lacks {missing}")
        return msg
    raise AssertionError(f"expected {exc_type.__name__}")


# ---- the collectives run ----------------------------------------------------------------------------------

def collectives(out_path):
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=TIMEOUT))
    r, n = dist.get_rank(), dist.get_world_size()
    c = Checks()

    def all_reduce_case(name, op):
        def run():
            x = tensor(make(r, name))
            if name == "bool" and op == "AVG":
                expect_raises(lambda: dist.all_reduce(x, op=ReduceOp.AVG), RuntimeError, "AVG", "bool")
                return
            want = ref_reduce(np.stack([make(i, name) for i in range(n)]), op, name, n)
            dist.all_reduce(x, op=getattr(ReduceOp, op))
            if not same(x._data, want):
                return f"got {x._data!r}, want {want!r}"
        return run

    for d in DTYPES:
        for op in REDUCE_OPS:
            c.run(f"all_reduce[{d}-{op}]", all_reduce_case(d, op))
    for d in ("bool", "uint8", "int32", "int64"):
        for op in BITWISE_OPS:
            c.run(f"all_reduce[{d}-{op}]", all_reduce_case(d, op))

    def strided():
        base = tensor(np.arange(24, dtype=np.float32).reshape(4, 6) * (r + 1))
        view = base[:, ::2].t()                 # a non-contiguous view: results land in the base
        v0 = base._version
        dist.all_reduce(view)
        want = np.arange(24, dtype=np.float32).reshape(4, 6) * sum(i + 1 for i in range(n))
        exp = np.arange(24, dtype=np.float32).reshape(4, 6) * (r + 1)
        exp[:, ::2] = want[:, ::2]
        if not same(base._data, exp):
            return f"base {base._data}"
        if base._version == v0:
            return "version counter not bumped"
    c.run("all_reduce_strided", strided)

    def async_ops():
        xs = [tensor(make(r, "float64", seed=s)) for s in range(4)]
        works = [dist.all_reduce(x, async_op=True) for x in xs]
        for s, (w, x) in enumerate(zip(works, xs)):
            w.wait()
            if not w.is_completed() or not w.is_success():
                return "work not completed after wait"
            want = ref_reduce(np.stack([make(i, "float64", seed=s) for i in range(n)]), "SUM", "float64", n)
            if not same(x._data, want) or w.result()[0] is not x:
                return f"async result {s} differs"
    c.run("all_reduce_async", async_ops)

    def large():
        x = tensor(np.full(1 << 20, r + 1, np.float32))
        dist.all_reduce(x, op=ReduceOp.AVG)
        if not same(x._data, np.full(1 << 20, sum(range(1, n + 1)) / n, np.float32)):
            return "large average differs"
    c.run("all_reduce_large", large)

    def bcast_case(name):
        def run():
            x = tensor(make(r, name, shape=(2, 3, 2)))
            dist.broadcast(x, src=1)
            if not same(x._data, make(1, name, shape=(2, 3, 2))):
                return "broadcast differs"
        return run
    for d in DTYPES:
        c.run(f"broadcast[{d}]", bcast_case(d))

    def bcast_strided():
        base = tensor(np.arange(12, dtype=np.int64).reshape(3, 4) + 100 * r)
        dist.broadcast(base[:, 1], src=0)
        exp = np.arange(12, dtype=np.int64).reshape(3, 4) + 100 * r
        exp[:, 1] = (np.arange(12).reshape(3, 4))[:, 1]
        if not same(base._data, exp):
            return f"got {base._data}"
    c.run("broadcast_strided", bcast_strided)

    def reduce_():
        x = tensor(make(r, "float32"))
        y = tensor(make(r, "int64"))
        dist.reduce(x, dst=1)
        dist.reduce(y, dst=1, op=ReduceOp.MAX)
        if r == 1:
            wx = ref_reduce(np.stack([make(i, "float32") for i in range(n)]), "SUM", "float32", n)
            wy = ref_reduce(np.stack([make(i, "int64") for i in range(n)]), "MAX", "int64", n)
        else:
            wx, wy = make(r, "float32"), make(r, "int64")        # non-destination ranks keep theirs
        if not (same(x._data, wx) and same(y._data, wy)):
            return "reduce differs"
        expect_raises(lambda: dist.reduce(x), ValueError, "Must specify")
    c.run("reduce", reduce_)

    def gather_case(name):
        def run():
            x = tensor(make(r, name))
            outs = [tensor(np.zeros((3, 4), np_dtype(name))) for _ in range(n)]
            dist.all_gather(outs, x)
            for i in range(n):
                if not same(outs[i]._data, make(i, name)):
                    return f"slot {i} differs"
        return run
    for d in DTYPES:
        c.run(f"all_gather[{d}]", gather_case(d))

    def into_tensor():
        x = tensor(make(r, "float32", shape=(2, 3)))
        cat = ember.zeros(2 * n, 3)
        stacked = ember.zeros(n, 2, 3)
        dist.all_gather_into_tensor(cat, x)
        w = dist.all_gather_into_tensor(stacked, x, async_op=True)
        w.wait()
        want = np.stack([make(i, "float32", shape=(2, 3)) for i in range(n)])
        if not (same(cat._data, want.reshape(2 * n, 3)) and same(stacked._data, want)):
            return "all_gather_into_tensor differs"
        bad = ember.zeros(3, 3)
        expect_raises(lambda: dist.all_gather_into_tensor(bad, x), ValueError, "float32[3, 3]", "float32[2, 3]")
    c.run("all_gather_into_tensor", into_tensor)

    def rs_tensor():
        for op in ("SUM", "AVG", "MAX"):
            x = tensor(make(r, "float32", shape=(2 * n, 3)))
            out = ember.zeros(2, 3)
            dist.reduce_scatter_tensor(out, x, op=getattr(ReduceOp, op))
            full = ref_reduce(np.stack([make(i, "float32", shape=(2 * n, 3)) for i in range(n)]), op, "float32", n)
            if not same(out._data, full[2 * r:2 * r + 2]):
                return f"{op}: got {out._data}, want {full[2 * r:2 * r + 2]}"
            if not same(x._data, make(r, "float32", shape=(2 * n, 3))):
                return "input changed"
    c.run("reduce_scatter_tensor", rs_tensor)

    def rs_int():
        x = tensor(make(r, "int32", shape=(n * 5,)) * 7)
        out = ember.zeros(5, dtype=ember.int32)
        dist.reduce_scatter_tensor(out, x, op=ReduceOp.AVG)
        full = ref_reduce(np.stack([make(i, "int32", shape=(n * 5,)) * 7 for i in range(n)]), "AVG", "int32", n)
        if not same(out._data, full[5 * r:5 * r + 5]):
            return f"got {out._data} want {full[5 * r:5 * r + 5]}"
    c.run("reduce_scatter_tensor_int_avg", rs_int)

    def rs_list():
        ins = [tensor(make(r, "float64", seed=k)) for k in range(n)]
        out = ember.zeros(3, 4, dtype=ember.float64)
        dist.reduce_scatter(out, ins, op=ReduceOp.MIN)
        want = ref_reduce(np.stack([make(i, "float64", seed=r) for i in range(n)]), "MIN", "float64", n)
        if not same(out._data, want):
            return "reduce_scatter differs"
    c.run("reduce_scatter", rs_list)

    def gather_():
        x = tensor(make(r, "int16"))
        lst = [tensor(np.zeros((3, 4), np.int16)) for _ in range(n)] if r == 1 else None
        dist.gather(x, lst, dst=1)
        if r == 1 and not all(same(lst[i]._data, make(i, "int16")) for i in range(n)):
            return "gather differs"
    c.run("gather", gather_)

    def scatter_():
        y = ember.zeros(3, 4, dtype=ember.bfloat16)
        lst = [tensor(make(i, "bfloat16", seed=5)) for i in range(n)] if r == 1 else None
        dist.scatter(y, lst, src=1)
        if not same(y._data, make(r, "bfloat16", seed=5)):
            return "scatter differs"
    c.run("scatter", scatter_)

    def gather_wrong():
        x = ember.ones(2)
        lst = [ember.zeros(2) for _ in range(n)]       # given on every rank: wrong on the non-destination ones
        if r == 0:
            expect_raises(lambda: dist.gather(x, lst, dst=0), RuntimeError, "rank(s) [1]", "invalid arguments")
        else:
            expect_raises(lambda: dist.gather(x, lst, dst=0), ValueError, "must NOT be specified")
        dist.gather(x, lst if r == 0 else None, dst=0)       # the group is still usable afterwards
        if r == 0 and not all(same(t._data, np.ones(2, np.float32)) for t in lst):
            return "gather after the error differs"
    c.run("gather_list_on_wrong_rank", gather_wrong)

    def p2p_case(name):
        def run():
            if r == 0:
                dist.send(tensor(make(0, name, shape=(5,))), dst=1, tag=3)
                back = tensor(np.zeros((5,), np_dtype(name)))
                src = dist.recv(back, src=1)
                if src != 1 or not same(back._data, make(1, name, shape=(5,))):
                    return "reply differs"
            elif r == 1:
                got = tensor(np.zeros((5,), np_dtype(name)))
                dist.recv(got, src=0, tag=3)
                if not same(got._data, make(0, name, shape=(5,))):
                    return "received data differs"
                dist.send(tensor(make(1, name, shape=(5,))), dst=0)
        return run
    for d in DTYPES:
        c.run(f"send_recv[{d}]", p2p_case(d))

    def any_source():
        if r == 1:
            w = dist.isend(ember.arange(6).float(), dst=0, tag=9)
            w.wait()
        elif r == 0:
            buf = ember.zeros(6)
            w = dist.irecv(buf, tag=9)
            w.wait()
            if w._source_rank() != 1 or buf.tolist() != list(map(float, range(6))):
                return f"any-source receive got {buf.tolist()}"
            buf2 = ember.zeros(6)
        dist.barrier()
        if r == 0:
            expect_raises(lambda: dist.send(buf2, dst=0), ValueError, "destination rank should not be the same")
    c.run("isend_irecv_any_source", any_source)

    def recv_mismatch():
        if r == 1:
            dist.send(ember.ones(4, dtype=ember.float64), dst=0)
        elif r == 0:
            expect_raises(lambda: dist.recv(ember.zeros(5), src=1), RuntimeError, "rank 1 sent float64[4]",
                          "rank 0 receives into float32[5]")
        dist.barrier()
    c.run("recv_shape_mismatch", recv_mismatch)

    def objects_gather():
        lst = [None] * n
        dist.all_gather_object(lst, {"rank": r, "s": "x" * (r + 1), "t": ember.ones(2) * r})
        for i, o in enumerate(lst):
            if o["rank"] != i or o["s"] != "x" * (i + 1) or o["t"].tolist() != [float(i)] * 2:
                return f"object {i}: {o}"
    c.run("all_gather_object", objects_gather)

    def objects_bcast():
        lst = [r, "from %d" % r, {"k": [r] * 3}] if r == 1 else [None, None, None]
        dist.broadcast_object_list(lst, src=1)
        if lst != [1, "from 1", {"k": [1, 1, 1]}]:
            return f"got {lst}"
    c.run("broadcast_object_list", objects_bcast)

    def objects_gather_dst():
        lst = [None] * n if r == 0 else None
        dist.gather_object(("r", r), lst, dst=0)
        if r == 0 and lst != [("r", i) for i in range(n)]:
            return f"got {lst}"
    c.run("gather_object", objects_gather_dst)

    def objects_scatter():
        out = [None]
        dist.scatter_object_list(out, [{"to": i} for i in range(n)] if r == 1 else None, src=1)
        if out != [{"to": r}]:
            return f"got {out}"
    c.run("scatter_object_list", objects_scatter)

    def barrier_():
        t0 = time.monotonic()
        if r == 1:
            time.sleep(0.3)
        dist.barrier()
        if r == 0 and time.monotonic() - t0 < 0.25:
            return "barrier returned before rank 1 arrived"
    c.run("barrier", barrier_)

    def groups():
        solo = dist.new_group([1])
        both = dist.new_group([1, 0])
        if r == 0:
            if solo is not dist.GroupMember.NON_GROUP_MEMBER:
                return f"rank 0 got {solo} for a group without it"
            if dist.get_rank(solo) != -1 or dist.get_world_size(solo) != -1:
                return "rank/size outside the group should be -1"
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                if dist.all_reduce(ember.ones(1), group=solo) is not None or not w:
                    return "non-member all_reduce should warn and return None"
        else:
            x = ember.ones(3) * 5
            dist.all_reduce(x, group=solo)
            if x.tolist() != [5.0] * 3 or dist.get_rank(solo) != 0 or dist.get_world_size(solo) != 1:
                return "single-rank group"
            if dist.get_process_group_ranks(solo) != [1] or dist.get_global_rank(solo, 0) != 1:
                return "group rank mapping"
        x = ember.ones(2) * (r + 1)
        dist.all_reduce(x, op=ReduceOp.PRODUCT, group=both)
        dist.broadcast(x, group=both, group_src=1)
        want = float(np.prod(np.arange(1, n + 1)))
        if x.tolist() != [want] * 2 or dist.get_process_group_ranks(both) != [0, 1]:
            return f"group all_reduce {x.tolist()}"
        dist.destroy_process_group(both)
    c.run("new_group", groups)

    def mismatched_shapes():
        x = ember.ones(4 + r)
        expect_raises(lambda: dist.all_reduce(x), RuntimeError, "rank 0: float32[4]", "rank 1: float32[5]")
        y = ember.ones(2, 3 if r == 0 else 2)
        expect_raises(lambda: dist.broadcast(y, src=0), RuntimeError, "rank 0: float32[2, 3]", "rank 1: float32[2, 2]")
        z = ember.ones(2)
        dist.all_reduce(z)            # still in step after the errors
        if z.tolist() != [float(n)] * 2:
            return "collective after a mismatch differs"
    c.run("mismatched_shapes", mismatched_shapes)

    def mismatched_dtypes():
        x = ember.ones(3, dtype=ember.float32 if r == 0 else ember.float64)
        expect_raises(lambda: dist.all_reduce(x), RuntimeError, "rank 0: float32[3]", "rank 1: float64[3]")
    c.run("mismatched_dtypes", mismatched_dtypes)

    def mismatched_collectives():
        x = ember.ones(3)
        if r == 0:
            expect_raises(lambda: dist.all_reduce(x), RuntimeError, "rank 0 called all_reduce",
                          "rank 1 called broadcast")
        else:
            expect_raises(lambda: dist.broadcast(x, src=0), RuntimeError, "rank 0 called all_reduce",
                          "rank 1 called broadcast")
    c.run("mismatched_collectives", mismatched_collectives)

    def mismatched_src():
        x = ember.ones(3)
        expect_raises(lambda: dist.broadcast(x, src=r), RuntimeError, "disagree on the root")
    c.run("mismatched_src", mismatched_src)

    def float_bitwise():
        expect_raises(lambda: dist.all_reduce(ember.ones(2), op=ReduceOp.BAND), RuntimeError, "BAND", "float32")
    c.run("float_bitwise_error", float_bitwise)

    def world():
        if (dist.get_rank(), dist.get_world_size(), dist.get_backend()) != (r, n, "mpi"):
            return "rank/size/backend"
        if not dist.is_initialized() or dist.group.WORLD is None or os.environ.get("TORCHELASTIC_RUN_ID"):
            return "initialized state"
        expect_raises(lambda: dist.init_process_group("mpi"), ValueError, "twice")
    c.run("world", world)

    def device_tensors():
        """Device tensors go through host copies and stay on their device."""
        dev, skip = accelerator()
        if skip:
            return skip
        for name, op in (("float32", "SUM"), ("int64", "MAX"), ("bool", "PRODUCT"), ("float32", "AVG")):
            x = tensor(make(r, name)).to(dev)
            dist.all_reduce(x, op=getattr(ReduceOp, op))
            want = ref_reduce(np.stack([make(i, name) for i in range(n)]), op, name, n)
            if x.device.type != dev or not same(x.cpu()._data, want):
                return f"all_reduce {name} {op} on {dev}: {x.cpu()._data}"
        y = tensor(make(r, "float32")).to(dev)
        dist.broadcast(y, src=1)
        outs = [ember.zeros(3, 4, device=dev) for _ in range(n)]
        dist.all_gather(outs, tensor(make(r, "float32")).to(dev))
        rs = ember.zeros(2, 3, device=dev)
        dist.reduce_scatter_tensor(rs, tensor(make(r, "float32", shape=(2 * n, 3))).to(dev))
        full = ref_reduce(np.stack([make(i, "float32", shape=(2 * n, 3)) for i in range(n)]), "SUM", "float32", n)
        if not (same(y.cpu()._data, make(1, "float32")) and
                all(same(outs[i].cpu()._data, make(i, "float32")) for i in range(n)) and
                same(rs.cpu()._data, full[2 * r:2 * r + 2])):
            return "broadcast / all_gather / reduce_scatter_tensor on the device differ"
        if any(t.device.type != dev for t in [y, rs] + outs):
            return "a result left its device"
        if r == 0:
            dist.send(tensor(make(0, "int16", shape=(5,))).to(dev), dst=1)
        elif r == 1:
            got = ember.zeros(5, dtype=ember.int16, device=dev)
            dist.recv(got, src=0)
            if not same(got.cpu()._data, make(0, "int16", shape=(5,))):
                return "send/recv of a device tensor"
    c.run("device_tensors", device_tensors)

    finish(c, out_path)


def finish(c: Checks, out_path: str) -> None:
    """Each rank writes its own outcomes (OUT.json.RANK): no collective needed, so a broken check that
    left the ranks out of step still reports."""
    with open(f"{out_path}.{dist.get_rank()}", "w") as f:
        json.dump(c.results, f)
    dist.destroy_process_group()


# ---- a lone process (no mpiexec) ------------------------------------------------------------------------------

def single(out_path):
    c = Checks()

    def lone():
        os.environ["WORLD_SIZE"] = "2"
        expect_raises(lambda: dist.init_process_group("mpi"), RuntimeError, "not started by MPI")
        del os.environ["WORLD_SIZE"]
        dist.init_process_group()
        x = ember.arange(4).float()
        dist.all_reduce(x, op=ReduceOp.AVG)
        dist.broadcast(x, src=0)
        outs = [ember.zeros(4)]
        dist.all_gather(outs, x)
        out = ember.zeros(4)
        dist.reduce_scatter_tensor(out, x)
        same4 = [0., 1., 2., 3.]
        if (dist.get_world_size(), x.tolist(), outs[0].tolist(), out.tolist()) != (1, same4, same4, same4):
            return "world of one"
        dist.destroy_process_group()
        if dist.is_initialized():
            return "still initialized"
    c.run("lone_process", lone)
    with open(out_path, "w") as f:
        json.dump(c.results, f)


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "collectives":
        collectives(out)
    elif mode == "single":
        single(out)
    elif mode == "ddp":
        from distributed_ddp_worker import main as ddp_main
        ddp_main(out)
    elif mode.startswith("fault-"):
        from distributed_ddp_worker import fault
        fault(mode[len("fault-"):])
    else:
        raise SystemExit(f"unknown mode {mode}")
