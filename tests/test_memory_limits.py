"""The memory limit is enforced before memory is touched; huge allocations raise torch's RuntimeError.

Under ``set_per_process_memory_fraction`` a refused allocation must not allocate (or fill) anything
first: each case below asks for 64 MiB past a 2 MiB headroom, and tracemalloc (which NumPy reports its
allocations to) must see no more than a few KiB during the refused call. In-place ops need no new
memory and must pass under a limit their tensor nearly fills. Without a limit, sizes no machine can hold
raise ``RuntimeError`` (as torch's CPU allocator does), never NumPy's ``MemoryError``/``ValueError``.
"""
import contextlib
import gc
import importlib
import resource
import tracemalloc

import numpy as np
import pytest
import torch

import ember
import ember.memory as mem
import ember.nn.functional as F
from ember.ops import registry

_tensor_mod = importlib.import_module("ember.tensor")
MiB = 1 << 20


@pytest.fixture(autouse=True, scope="module")
def _frozen_heap():
    # a refused allocation first collects garbage (as torch's allocator retries after freeing its
    # cache); with torch imported that full collection takes ~0.3 s, so park the objects alive now
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


from test_memory import _tracking  # noqa: E402,F401 - the same tracking fixture (autouse)


def _limit_at(extra_bytes):
    mem.set_per_process_memory_fraction((mem.memory_allocated() + extra_bytes) / mem._physical_memory())


@contextlib.contextmanager
def _peak():
    """Yields a list that receives the peak bytes NumPy/Python allocated inside the block."""
    out = []
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        yield out
    finally:
        out.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


# name, op named in the message, setup() -> inputs, call(inputs) asking for 64 MiB or more
N = 16 * MiB                                         # float32 elements in 64 MiB
_CASES = [
    ("empty", "empty", lambda: None, lambda _: ember.empty(N)),
    ("zeros", "zeros", lambda: None, lambda _: ember.zeros(4096, 4096)),
    ("ones", "ones", lambda: None, lambda _: ember.ones(N)),
    ("full", "full", lambda: None, lambda _: ember.full((N,), 2.0)),
    ("arange_float", "arange", lambda: None, lambda _: ember.arange(0.0, float(N))),
    ("arange_int", "arange", lambda: None, lambda _: ember.arange(N)),
    ("linspace", "linspace", lambda: None, lambda _: ember.linspace(0, 1, N)),
    ("logspace", "logspace", lambda: None, lambda _: ember.logspace(0, 1, N)),
    ("rand", "rand", lambda: None, lambda _: ember.rand(N)),
    ("randn", "randn", lambda: None, lambda _: ember.randn(N)),
    ("randint", "randint", lambda: None, lambda _: ember.randint(0, 10, (N,))),
    ("randperm", "randperm", lambda: None, lambda _: ember.randperm(N)),
    ("eye", "eye", lambda: None, lambda _: ember.eye(4096)),
    ("zeros_like", "zeros_like", lambda: ember.ones(1).expand(N), lambda x: ember.zeros_like(x)),
    ("new_ones", "new_ones", lambda: ember.ones(1), lambda x: x.new_ones(N)),
    ("cat", "cat", lambda: ember.ones(MiB), lambda x: ember.cat([x] * 16)),
    ("stack", "cat", lambda: ember.ones(MiB), lambda x: ember.stack([x] * 16)),
    ("repeat", "repeat", lambda: ember.ones(1024), lambda x: x.repeat(16384)),
    ("tile", "repeat", lambda: ember.ones(1024), lambda x: ember.tile(x, (4, 4096))),
    ("expand_contiguous", "contiguous", lambda: ember.ones(1), lambda x: x.expand(N).contiguous()),
    ("matmul_outer", "matmul", lambda: (ember.ones(4096, 1), ember.ones(1, 4096)), lambda a: a[0] @ a[1]),
    ("broadcast_add", "add", lambda: (ember.ones(4096, 1), ember.ones(4096)), lambda a: a[0] + a[1]),
    ("broadcast_lt", "lt", lambda: (ember.ones(8192, 1), ember.ones(8192)), lambda a: a[0] < a[1]),
    ("where", "where", lambda: (ember.ones(4096, 1) > 0, ember.ones(4096)), lambda a: ember.where(a[0], a[1], 0.0)),
    ("outer", "mul", lambda: ember.ones(4096), lambda x: ember.outer(x, x)),
    ("kron", "mul", lambda: (ember.ones(64, 64), ember.ones(64, 64)), lambda a: ember.kron(a[0], a[1])),
    ("repeat_interleave", "contiguous", lambda: ember.ones(1024), lambda x: x.repeat_interleave(16384)),
    ("repeat_interleave_tensor", "repeat_interleave", lambda: (ember.ones(4), ember.tensor([N // 4] * 4)),
     lambda a: a[0].repeat_interleave(a[1])),
    ("one_hot", "one_hot", lambda: ember.arange(1024), lambda i: F.one_hot(i, 8192)),
    ("pad", "constant_pad_nd", lambda: ember.ones(1, 1024), lambda x: F.pad(x, (0, 0, 0, 16383))),
    ("to_double", "to_dtype", lambda: ember.ones(8 * MiB), lambda x: x.double()),
    ("cumsum", "cumsum", lambda: ember.ones(N // 4, dtype=ember.int32), lambda x: x.cumsum(0)),
]


@pytest.mark.parametrize("name,op,setup,call", _CASES, ids=[c[0] for c in _CASES])
def test_refused_before_allocating(name, op, setup, call):
    inputs = setup()
    gc.collect()
    _limit_at(2 * MiB)
    before = mem.memory_allocated()
    ooms = mem.memory_stats()["num_ooms"]
    with _peak() as peak, pytest.raises(ember.OutOfMemoryError) as info:
        call(inputs)
    assert peak[0] < 256 * 1024, f"{name}: {peak[0]} bytes were allocated before the refusal"
    assert isinstance(info.value, RuntimeError)
    assert issubclass(torch.OutOfMemoryError, RuntimeError)       # the type torch raises past a fraction
    msg = str(info.value)
    assert f"'{op}'" in msg and "tried to allocate" in msg and "shape [" in msg and "dtype " in msg, msg
    asked = int(msg.split(" bytes)")[0].rsplit("(", 1)[1])
    assert asked >= 16 * MiB                                       # what the op would have needed
    assert mem.memory_allocated() == before
    assert mem.memory_stats()["num_ooms"] == ooms + 1


def test_sized_ops_fit_when_there_is_room():
    # the same ops pass under a limit that leaves room: the size rules do not overstate
    x = ember.ones(256)
    _limit_at(4 * MiB)
    assert ember.cat([x] * 4).shape == (1024,)
    assert (x.reshape(256, 1) + x).shape == (256, 256)
    assert (x.reshape(256, 1) @ x.reshape(1, 256)).sum().item() == 65536.0
    assert x.repeat_interleave(3).shape == (768,)
    assert F.one_hot(ember.arange(4), 8).sum().item() == 4
    assert ember.arange(1000).sum().item() == 499500


# ---- the size rules agree with what the kernels allocate ---------------------------------------


def _meta_samples():
    a = ember.randn(3, 4)
    b = ember.randn(4)
    i = ember.tensor([[1, 2], [3, 4]])
    return [
        lambda: a + b, lambda: a * 2.0, lambda: a / i.sum(), lambda: i + 1.5, lambda: a < b, lambda: a == 0,
        lambda: ember.where(a > 0, a, 0.0), lambda: ember.where(a > 0, a, b), lambda: a.masked_fill(a > 0, 1.0),
        lambda: a.clamp(-1, 1), lambda: ember.lerp(a, b.expand(3, 4), 0.5), lambda: ember.addcmul(a, a, b),
        lambda: ember.isclose(a, b), lambda: a.pow(2), lambda: 2 ** a, lambda: ember.atan2(a, b),
        lambda: ember.maximum(a, b), lambda: i & 3, lambda: i << 1, lambda: ~i, lambda: ember.logical_not(a),
        lambda: a.neg(), lambda: a.abs(), lambda: a.exp(), lambda: a.sigmoid(), lambda: a.sign(),
        lambda: a.relu(), lambda: a.clone(), lambda: a.flip(0), lambda: a.roll(1, 0), lambda: a.tril(),
        lambda: a.softmax(1), lambda: a.log_softmax(0), lambda: a.cumsum(1), lambda: i.cumsum(0),
        lambda: i.cumprod(1), lambda: ember.cat([a, a], 1), lambda: ember.stack([b, b]), lambda: a.repeat(2, 1, 3),
        lambda: b.repeat_interleave(2), lambda: b.repeat_interleave(ember.tensor([1, 0, 2, 3])),
        lambda: a.t().contiguous(), lambda: a.contiguous(), lambda: a.double(), lambda: i.float(),
        lambda: a @ b, lambda: b @ a.t(), lambda: a @ a.t(), lambda: ember.randn(2, 3, 4) @ a.t(),
        lambda: a.index_select(1, ember.tensor([0, 0, 3])), lambda: a.gather(1, ember.tensor([[0], [1], [2]])),
        lambda: F.pad(a, (1, 2, 0, 1), value=3.0), lambda: ember.diag_embed(a), lambda: ember.block_diag(a, b[None]),
        lambda: F.linear(a, ember.randn(5, 4)), lambda: F.embedding(i, ember.randn(6, 3)),
        lambda: ember.randn(5), lambda: ember.randint(0, 3, (4,)), lambda: ember.randperm(6),
        lambda: a.t().reshape(-1), lambda: ember.kron(a, a), lambda: ember.outer(b, b),
    ]


def test_size_rules_match_the_kernels():
    from ember.ops.meta import output_bytes
    seen = []

    def check(op, args, attrs, run):
        predicted = output_bytes(op, args, attrs)[0] if op.meta is not None else None
        out = run()
        if predicted is not None:
            ins = [a._data for a in args if isinstance(a, ember.Tensor)]
            outs = out if isinstance(out, tuple) else (out,)
            new = sum(o._data.nbytes for o in outs if not any(np.shares_memory(o._data, x) for x in ins))
            seen.append((op.name, predicted, new))
        return out

    registry.HOOKS.append(check)
    try:
        for f in _meta_samples():
            f()
    finally:
        registry.HOOKS.remove(check)
    wrong = [s for s in seen if s[1] != s[2]]
    assert not wrong, wrong
    assert len({s[0] for s in seen}) >= 40


# ---- in-place ops need no new memory --------------------------------------------------------------


def test_inplace_ops_pass_under_a_limit():
    n = 5 * MiB                                         # 20 MiB of float32 under a 25.6 MiB limit
    x = ember.zeros(n)
    _limit_at(int(5.6 * MiB))
    before = mem.memory_allocated()
    with _peak() as peak:
        x.add_(1)
        x += 2
        x.mul_(3.0)
        x.sub_(ember.ones(1))
        x.div_(2)
    assert peak[0] < 256 * 1024                         # computed in place: no temporary at all
    assert float(x[0]) == float(x[-1]) == 4.0
    x.clamp_(0, 3.5)                                    # a temporary of x's size is allowed ...
    x.fill_(0.5)
    x.exp_()
    assert float(x[7]) == pytest.approx(np.exp(0.5))
    assert mem.memory_allocated() == before
    with pytest.raises(ember.OutOfMemoryError):
        x + 1                                           # ... but a second tensor of x's size is not
    with pytest.raises(ember.OutOfMemoryError):
        ember.ones(n)


def test_inplace_direct_path_matches_torch():
    rng = np.random.default_rng(0)
    base = rng.standard_normal((4, 6)).astype(np.float32)
    row = rng.standard_normal(6).astype(np.float32)
    ints = rng.integers(-100, 100, (4, 6)).astype(np.int32)

    def run(lib):
        x = lib.tensor(base.copy())
        x.add_(lib.tensor(row))                         # broadcast
        x[:, ::2].mul_(2.5)                             # strided view: writes reach the base
        x.sub_(x.flip(0))                               # operand overlapping the output
        x /= 3
        h = lib.tensor(base.copy()).half()
        h.add_(0.1)
        i = lib.tensor(ints.copy())
        i.mul_(lib.tensor(ints.copy()))
        i -= lib.tensor(ints.copy()).flip(1)
        return x.numpy(), h.float().numpy(), i.numpy()

    for got, want in zip(run(ember), run(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # the version counter still moves, and autograd still sees in-place writes
    x = ember.ones(3)
    v = x._version
    x.add_(1)
    assert x._version == v + 1
    w = ember.ones(3, requires_grad=True)
    y = w * 1
    y.mul_(3.0)
    y.sum().backward()
    assert w.grad.tolist() == [3.0, 3.0, 3.0]


def test_no_hook_on_the_hot_path_without_a_limit():
    assert mem._limit_hook not in registry.HOOKS
    _limit_at(MiB)
    assert mem._limit_hook in registry.HOOKS and not registry.observed()
    mem._clear_limit()
    assert mem._limit_hook not in registry.HOOKS


# ---- huge allocations without a limit: torch's RuntimeError, nothing allocated ------------------


@contextlib.contextmanager
def _address_space_cap(extra=8 << 30):
    # whatever the machine's overcommit policy, no call below can really get gigabytes
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        vm = int(f.read().split()[0]) * resource.getpagesize()
    cap = vm + extra if hard == resource.RLIM_INFINITY else min(hard, vm + extra)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


_HUGE = [
    ("empty", lambda L: L.empty(10 ** 13), "[10000000000000]"),
    ("zeros", lambda L: L.zeros(2 ** 40, 2 ** 40), "[1099511627776, 1099511627776]"),
    ("empty", lambda L: L.empty(2 ** 62, 4), "[4611686018427387904, 4]"),
    ("empty", lambda L: L.empty(2 ** 63 - 1), "[9223372036854775807]"),
    ("ones", lambda L: L.ones(10 ** 12), "[1000000000000]"),
    ("full", lambda L: L.full((10 ** 12,), 1.0), "[1000000000000]"),
    ("arange", lambda L: L.arange(0, 1e13), "[10000000000000]"),
    ("arange", lambda L: L.arange(10 ** 13), "[10000000000000]"),
    ("randn", lambda L: L.randn(10 ** 12), "[1000000000000]"),
    ("rand", lambda L: L.rand(10 ** 12), "[1000000000000]"),
    ("randint", lambda L: L.randint(10, (10 ** 12,)), "[1000000000000]"),
    ("randperm", lambda L: L.randperm(10 ** 12), "[1000000000000]"),
    ("linspace", lambda L: L.linspace(0, 1, 10 ** 12), "[1000000000000]"),
    ("eye", lambda L: L.eye(10 ** 7), "[10000000, 10000000]"),
    ("empty_strided", lambda L: L.empty_strided((10 ** 12,), (1,)), "[1000000000000]"),
    ("zeros_like", lambda L: L.zeros_like(L.ones(1).expand(10 ** 12)), "[1000000000000]"),
    ("new_zeros", lambda L: L.ones(1).new_zeros(10 ** 12), "[1000000000000]"),
    ("repeat", lambda L: L.ones(10).repeat(10 ** 12), "[1000000000000, 10]"),
    ("contiguous", lambda L: L.ones(1).expand(10 ** 12).contiguous(), "[1000000000000]"),
    ("add", lambda L: L.ones(10 ** 6, 1) + L.ones(10 ** 6), "[1000000, 1000000]"),
    ("contiguous", lambda L: L.ones(10).repeat_interleave(10 ** 12), "[10, 1000000000000]"),
    ("contiguous", lambda L: L.ones(1).repeat_interleave(10 ** 12), "[1, 1000000000000]"),
]


@pytest.mark.parametrize("op,call,shape", _HUGE, ids=[f"{i}-{c[0]}" for i, c in enumerate(_HUGE)])
def test_huge_allocation_raises_runtime_error(op, call, shape):
    mem.disable_tracking()
    with _address_space_cap():
        with pytest.raises(BaseException) as want:
            call(torch)
        with pytest.raises(BaseException) as got:
            call(ember)
    assert type(want.value) is RuntimeError
    assert type(got.value) is RuntimeError, f"{type(got.value).__name__}: {got.value}"
    msg = str(got.value)
    assert f"'{op}'" in msg and shape in msg and "dtype " in msg, msg
    assert ("can't allocate memory" in msg) == ("can't allocate memory" in str(want.value)), msg
    if "overflowed" in str(want.value):
        assert "Storage size calculation overflowed" in msg


def test_repeat_interleave_returns_a_new_tensor():
    one = ember.tensor([2.0])
    y = one.repeat_interleave(4)
    assert y.stride() == (1,) and y.is_contiguous() and not np.shares_memory(y._data, one._data)
    y[0] = 7.0                                          # a stride-0 view could not be written
    assert y.tolist() == [7.0, 2.0, 2.0, 2.0] and one.tolist() == [2.0]
    x = ember.tensor([1.0, 2.0])
    z = x.repeat_interleave(1)
    z[0] = 5.0
    assert x.tolist() == [1.0, 2.0]                     # r == 1 is a copy too, as in torch
    t = torch.tensor([1.0, 2.0], requires_grad=True).repeat_interleave(3)
    e = ember.tensor([1.0, 2.0], requires_grad=True).repeat_interleave(3)
    assert e.tolist() == t.tolist()
    assert type(e.grad_fn).__name__ == type(t.grad_fn).__name__ == "ViewBackward0"
    assert (type(e.grad_fn.next_functions[0][0]).__name__
            == type(t.grad_fn.next_functions[0][0]).__name__ == "CloneBackward0")
