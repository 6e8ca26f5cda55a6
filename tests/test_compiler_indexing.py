"""ember.compile captures advanced indexing: index tensors are arguments of the index/index_put ops, so
a replay reads each call's own indices (values AND gradients equal eager ember on a first call and on a
second call with different index values, with no recompile). Boolean-mask reads have a data-dependent
shape: they end a graph with a guard on the mask's count (a retrace when it changes)."""
import numpy as np
import pytest

import ember
from ember.compiler import counters, explain

BACKENDS = ("eager", "aot_eager", "inductor")

def _params(names):
    """(name, backend) pairs over every backend."""
    return [pytest.param(n, b) for n in names for b in BACKENDS]


def _rng(seed):
    return np.random.default_rng(seed)


def _t(a, rg=False):
    t = ember.from_numpy(np.array(a, copy=True))
    if rg:
        t.requires_grad_(True)
    return t


def _clone_inputs(xs):
    """Fresh leaves with the same values (so eager and compiled runs don't share tensors)."""
    return [_t(x._data, x.requires_grad) if isinstance(x, ember.Tensor) else x for x in xs]


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _run(fn, xs, seed):
    """Call ``fn`` and, when something requires grad, take the gradients of a random projection."""
    leaves = [x for x in xs if isinstance(x, ember.Tensor) and x.requires_grad]
    outs = _outputs(fn(*xs))
    diff = [o for o in outs if o.requires_grad]
    grads = []
    if leaves and diff:
        r = _rng(seed + 100)
        loss = sum((o * _t(r.standard_normal(tuple(o.shape)).astype(o.dtype.np))).sum() for o in diff)
        grads = ember.autograd.grad(loss, leaves, allow_unused=True)
    return [o.detach()._data.copy() for o in outs], [None if g is None else g._data.copy() for g in grads]


def _same(a, b, what):
    assert len(a) == len(b), what
    for x, y in zip(a, b):
        if x is None or y is None:
            assert x is None and y is None, what
            continue
        assert x.shape == y.shape and x.dtype == y.dtype, what
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6, err_msg=what)


def check_compiles(fn, make, backend, *, breaks=0, calls=(0, 1), written=()):
    """``fn`` compiled on ``backend`` matches eager on calls with fresh values (``make(seed)``), with
    ``breaks`` graph breaks, no fallback and no recompile; ``written`` lists inputs the function writes
    in place (their contents after the call must match too)."""
    ember.compiler.reset()
    e = explain(fn)(*make(calls[0]))
    assert e.compiled, e.break_reasons
    assert e.graph_break_count == breaks, [str(r) for r in e.break_reasons]
    ember.compiler.reset()
    cf = ember.compile(fn, backend=backend)
    for seed in calls:
        xs = make(seed)
        ys = _clone_inputs(xs)
        want = _run(fn, xs, seed)
        got = _run(cf, ys, seed)
        _same(got[0], want[0], f"forward, call with seed {seed}")
        _same(got[1], want[1], f"gradients, call with seed {seed}")
        for i in written:
            np.testing.assert_array_equal(ys[i]._data, xs[i]._data, err_msg=f"input {i} after the call")
    assert counters["fallbacks"] == 0, counters["fallback_reasons"]
    assert counters["recompiles"] == 0, counters["recompile_reasons"]
    assert counters["captures"] == 1
    return cf


def _x(r, shape=(5, 4), rg=True):
    return _t(r.standard_normal(shape).astype(np.float32), rg)


def _idx(r, lo, hi, shape):
    return _t(r.integers(lo, hi, shape).astype(np.int64))


# ---- reads ------------------------------------------------------------------------------------------------

READS = {
    "1d_index": (lambda x, i: x[i] * 2, lambda r: [_x(r), _idx(r, -5, 5, (3,))]),
    "2d_index": (lambda x, i: x[i].sin(), lambda r: [_x(r), _idx(r, 0, 5, (2, 3))]),
    "index_with_duplicates": (lambda x, i: x[i] * 3, lambda r: [_x(r), _t(np.array([1, 1, r.integers(5), 1]))]),
    "columns": (lambda x, i: x[:, i] + 1, lambda r: [_x(r), _idx(r, -4, 4, (6,))]),
    "index_then_slice": (lambda x, i: x[i, 1:] * x[i, 1:], lambda r: [_x(r), _idx(r, 0, 5, (4,))]),
    "two_tensors_broadcast": (lambda x, i, j: x[i, j] * 2, lambda r: [_x(r), _idx(r, 0, 5, (3, 1)),
                                                                      _idx(r, 0, 4, (2,))]),
    "non_adjacent": (lambda x, i, j: x[i, :, j].exp(), lambda r: [_x(r, (3, 4, 5)), _idx(r, 0, 3, (2,)),
                                                                  _idx(r, 0, 5, (2,))]),
    "int32_index": (lambda x, i: x[:, i] * 2, lambda r: [_x(r), _t(r.integers(0, 4, (3,)).astype(np.int32))]),
    "list_constant": (lambda x: (x[[0, 2]] * 2, x[[4, 1], 1:], x[0, [1, 3]]), lambda r: [_x(r)]),
    "ndarray_constant": (lambda x: x[np.array([3, 0, 3])] * 2, lambda r: [_x(r)]),
    "bool_scalars": (lambda x: (x[True] * 2, x[..., False] * 2), lambda r: [_x(r)]),
    "arange_targets": (lambda x, t: x[ember.arange(x.shape[0]), t] * 2, lambda r: [_x(r), _idx(r, 0, 4, (5,))]),
    "take": (lambda x, i: ember.take(x, i) * 2, lambda r: [_x(r), _idx(r, -20, 20, (2, 3))]),
    "bool_list_constant_mask": (lambda x: x[[True, False, True, True, False]] * 2, lambda r: [_x(r)]),
    # the rest of the family that took index arrays computed in Python
    "take_along_dim_negative": (lambda x, i: ember.take_along_dim(x, i, 1) * 2,
                                lambda r: [_x(r), _idx(r, -4, 4, (5, 3))]),
    "take_along_dim_flat": (lambda x, i: ember.take_along_dim(x, i) * 2, lambda r: [_x(r), _idx(r, -20, 20, (7,))]),
    "index_fill_tensor_value": (lambda x, i, v: x.index_fill(1, i, v.sum()) * 2,
                                lambda r: [_x(r), _idx(r, -4, 4, (3,)), _x(r, (2,))]),
    "masked_fill_tensor_value": (lambda x, k, v: x.masked_fill(k, v.sum()) * 2,
                                 lambda r: [_x(r), _t(r.random((5, 4)) > 0.5), _x(r, (2,))]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(READS))
def test_index_read_compiles(name, backend):
    fn, make = READS[name]
    check_compiles(fn, lambda seed: make(_rng(seed)), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cross_entropy_gather_with_backward_inside(backend):
    """The classic gather of the target log-probabilities, with the backward inside the compiled function."""
    def step(w, x, targets):
        logp = (x @ w).log_softmax(dim=1)
        loss = -logp[ember.arange(x.shape[0]), targets].mean()
        loss.backward()
        return loss.detach()

    def make(seed):
        r = _rng(seed)
        return [_x(r, (6, 3), rg=False), _idx(r, 0, 4, (6,))]

    w = _x(_rng(9), (3, 4))
    ember.compiler.reset()
    e = explain(step)(_t(w._data, True), *make(0))
    assert e.compiled and e.graph_break_count == 0, [str(b) for b in e.break_reasons]
    ember.compiler.reset()
    cf = ember.compile(step, backend=backend)
    w_eager, w_comp = _t(w._data, True), _t(w._data, True)
    for seed in (0, 1, 2):
        w_eager.grad = w_comp.grad = None          # as zero_grad() does between steps
        xs = make(seed)
        want = step(w_eager, *xs)
        got = cf(w_comp, *_clone_inputs(xs))
        np.testing.assert_allclose(got._data, want._data, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w_comp.grad._data, w_eager.grad._data, rtol=1e-5, atol=1e-6)
    assert counters["fallbacks"] == 0 and counters["recompiles"] == 0, counters["fallback_reasons"]


def test_grad_write_into_input_matches_eager():
    """``buf[i] = v`` with ``v`` requiring grad and ``buf`` an input: inplace.write_result snapshots
    ``buf`` outside the dispatcher (as for masked_fill_ into an input), which capture refuses for now;
    the call then runs eagerly with its reason recorded. Values, gradients and the written input match."""
    ember.compiler.reset()
    cf = ember.compile(_set_grad_value_into_input, backend="aot_eager")
    for seed in (0, 1):
        r = _rng(seed)
        xs = [_x(r, rg=False), _t(r.permutation(5)[:2]), _x(r, (2, 4))]
        ys = _clone_inputs(xs)
        got, want = _run(cf, ys, seed), _run(_set_grad_value_into_input, xs, seed)
        _same(got[0], want[0], "forward")
        _same(got[1], want[1], "gradients")
        np.testing.assert_array_equal(ys[0]._data, xs[0]._data)
    assert counters["fallbacks"] == 0 or counters["fallback_reasons"]


def test_fullgraph_index_read_and_write():
    """No graph break at all: fullgraph=True accepts tensor-indexed reads and writes."""
    def f(x, i, j):
        y = x[i, j] * 2
        x[j, i] = y
        return y
    ember.compiler.reset()
    cf = ember.compile(f, fullgraph=True)
    for seed in (0, 1):
        r = _rng(seed)
        x, i, j = _x(r, (4, 4), rg=False), _t(r.permutation(4)[:3]), _t(r.permutation(4)[:3])
        x2 = _t(x._data)
        np.testing.assert_array_equal(cf(x2, i, j)._data, f(x, i, j)._data)
        np.testing.assert_array_equal(x2._data, x._data)
    assert counters["captures"] == 1 and counters["fallbacks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_of_range_index_on_replay_raises(backend):
    """A replay with indices out of range raises torch's IndexError (not a wrong read)."""
    ember.compiler.reset()
    cf = ember.compile(lambda x, i: x[i] * 2, backend=backend)
    cf(ember.ones(5, 4), ember.tensor([0, 4]))
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 5"):
        cf(ember.ones(5, 4), ember.tensor([0, 5]))


# ---- writes -----------------------------------------------------------------------------------------------

def _set_into_input(buf, i, v):
    buf[i] = v
    return buf * 1


def _add_into_input(buf, i, v):
    buf[i] += v
    return buf * 1


def _set_autograd(x, i, v):
    y = x * 1
    y[i] = v
    return y


def _iadd_autograd(x, i, v):
    y = x * 1
    y[i] += v * 2
    return y


def _accumulate(x, i, v):
    y = x * 1
    y.index_put_((i,), v, accumulate=True)
    return y


def _set_two_tensors(x, i, j, v):
    y = x * 1
    y[i, j] = v
    return y


def _set_columns_number(x, i):
    y = x * 1
    y[:, i] = 0.5
    return y


def _put(x, i, v):
    y = x * 1
    y.put_(i, v, accumulate=True)
    return y


def _set_grad_value_into_input(buf, i, v):
    buf[i] = v * 2          # buf needs no grad; v does: buf takes v's history
    return buf.sum(dim=1)


WRITES = {
    "set_into_input": (_set_into_input, lambda r: [_x(r, rg=False), _idx(r, 0, 5, (2,)), _x(r, (2, 4), rg=False)],
                       (0,)),
    "add_into_input": (_add_into_input, lambda r: [_x(r, rg=False), _idx(r, -5, 5, (3,)), _x(r, (4,), rg=False)],
                       (0,)),
    "set_autograd": (_set_autograd, lambda r: [_x(r), _t(r.permutation(5)[:3]), _x(r, (3, 4))], ()),
    "iadd_autograd": (_iadd_autograd, lambda r: [_x(r), _t(r.permutation(5)[:2]), _x(r, (4,))], ()),
    "accumulate_duplicates": (_accumulate, lambda r: [_x(r), _idx(r, 0, 3, (6,)), _x(r, (6, 4))], ()),
    "two_tensors": (_set_two_tensors, lambda r: [_x(r), _t(r.permutation(5)[:3]), _t(r.permutation(4)[:3]),
                                                 _x(r, (3,))], ()),
    "columns_number": (_set_columns_number, lambda r: [_x(r), _idx(r, 0, 4, (2,))], ()),
    "put_accumulate": (_put, lambda r: [_x(r), _idx(r, -20, 20, (5,)), _x(r, (5,))], ()),
}


@pytest.mark.parametrize("name, backend", _params(WRITES))
def test_index_write_compiles(name, backend):
    fn, make, written = WRITES[name]
    check_compiles(fn, lambda seed: make(_rng(seed)), backend, written=written)


@pytest.mark.parametrize("backend", BACKENDS)
def test_basic_write_into_input_compiles(backend):
    """``x[0] = v`` / ``x[:, 1:3] = 0`` without autograd are recorded writes too (not direct buffer writes)."""
    def f(buf, v):
        buf[0] = 2.0
        buf[1:3, 1:] = v
        return buf.sum(dim=1)
    check_compiles(f, lambda seed: [_x(_rng(seed), rg=False), _x(_rng(seed + 7), (3,), rg=False)], backend,
                   written=(0,))


class _Counter(ember.nn.Module):
    """A module whose buffer is written through an advanced index in forward."""

    def __init__(self):
        super().__init__()
        self.register_buffer("hits", ember.zeros(6))

    def forward(self, ids, x):
        self.hits.index_put_((ids,), ember.ones(ids.shape[0]), accumulate=True)
        return x[ids] * self.hits[ids][:, None]


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_buffer_written_by_index(backend):
    ember.compiler.reset()
    eager, comp = _Counter(), _Counter()
    cm = ember.compile(comp, backend=backend)
    for seed in (0, 1, 2):
        r = _rng(seed)
        ids, x = _idx(r, 0, 6, (4,)), _x(r, (6, 3), rg=False)
        np.testing.assert_allclose(cm(ids, x)._data, eager(ids, x)._data, rtol=1e-6)
        np.testing.assert_array_equal(comp.hits._data, eager.hits._data)
    assert counters["fallbacks"] == 0 and counters["recompiles"] == 0, counters["fallback_reasons"]


# ---- boolean masks ----------------------------------------------------------------------------------------

def _mask_fill_number(x, k):
    y = x * 1
    y[k] = 0
    return y


def _mask_fill_tensor(x, k, v):
    y = x * 1
    y[k] = v.sum()
    return y


def _row_mask_fill_rows(x, k, v):
    y = x * 1
    y[k] = v            # v (4,) is written into every selected row
    return y


def _mask_fill_into_input(buf, k):
    buf[k] = -1.0
    return buf + 0


def _mask_index_put(x, k):
    return ember.index_put(x, (k,), ember.tensor(0.5))


def _mask(r, shape, count):
    """A random mask with ``count`` True values."""
    m = np.zeros(int(np.prod(shape)), dtype=bool)
    m[r.permutation(m.size)[:count]] = True
    return _t(m.reshape(shape))


# make(r, seed): the masks of the two calls (seeds 0 and 1) have different numbers of True values
MASK_WRITES = {
    "number": (_mask_fill_number, lambda r, s: [_x(r), _mask(r, (5, 4), 6 + 5 * s)], ()),
    "tensor_value": (_mask_fill_tensor, lambda r, s: [_x(r), _mask(r, (5, 4), 9 - 4 * s), _x(r, (2,))], ()),
    "row_mask_rows": (_row_mask_fill_rows, lambda r, s: [_x(r), _mask(r, (5,), 2 + s), _x(r, (4,))], ()),
    "into_input": (_mask_fill_into_input, lambda r, s: [_x(r, rg=False), _mask(r, (5, 4), 3 + 10 * s)], (0,)),
    "index_put": (_mask_index_put, lambda r, s: [_x(r), _mask(r, (5, 4), 12 - 3 * s)], ()),
}


@pytest.mark.parametrize("name, backend", _params(MASK_WRITES))
def test_mask_write_compiles_without_break(name, backend):
    """``x[mask] = value`` keeps x's shape: it becomes a where, no guard on the count (the two calls have
    different masks with different counts)."""
    fn, make, written = MASK_WRITES[name]
    check_compiles(fn, lambda seed: make(_rng(seed), seed), backend, written=written)


def _mask_inputs(count, seed, shape=(5, 4)):
    r = _rng(seed)
    m = np.zeros(shape[0] * shape[1], dtype=bool)
    m[r.permutation(m.size)[:count]] = True
    return [_x(r, shape), _t(m.reshape(shape))]


@pytest.mark.parametrize("backend", BACKENDS)
def test_mask_read_guards_the_count(backend):
    """``x[mask]``: one graph break whose guard is the count; the same count replays (with new mask
    values), a different count retraces; values and gradients match eager every time."""
    fn = lambda x, k: (x[k] * 2).exp()   # noqa: E731
    ember.compiler.reset()
    e = explain(fn)(*_mask_inputs(7, 0))
    assert e.compiled and e.graph_break_count == 1
    assert "boolean mask" in e.break_reasons[0].reason and "7" in e.break_reasons[0].reason
    ember.compiler.reset()
    cf = ember.compile(fn, backend=backend)
    for count, seed in ((7, 0), (7, 1), (3, 2), (7, 3)):
        xs = _mask_inputs(count, seed)
        ys = _clone_inputs(xs)
        want, got = _run(fn, xs, seed), _run(cf, ys, seed)
        _same(got[0], want[0], f"forward, count {count}")
        _same(got[1], want[1], f"gradients, count {count}")
    assert counters["fallbacks"] == 0, counters["fallback_reasons"]
    assert counters["captures"] == 2      # the trace for 7 True values, then one for 3 (7 again: a cache hit)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mask_increment_guards_once(backend):
    """``y[mask] += 1`` reads and writes through the same mask: one guard."""
    def fn(x, k):
        y = x * 1
        y[k] += 1
        return y
    ember.compiler.reset()
    assert explain(fn)(*_mask_inputs(5, 0)).graph_break_count == 1
    cf = ember.compile(fn, backend=backend)
    for count, seed in ((5, 0), (5, 1), (9, 2)):
        xs = _mask_inputs(count, seed)
        ys = _clone_inputs(xs)
        _same(_run(cf, ys, seed)[1], _run(fn, xs, seed)[1], f"gradients, count {count}")
        _same(_outputs(cf(*ys)), _outputs(fn(*xs)), f"forward, count {count}")
    assert counters["fallbacks"] == 0, counters["fallback_reasons"]


def test_mask_read_fullgraph_raises():
    cf = ember.compile(lambda x, k: x[k], fullgraph=True)
    with pytest.raises(ember.compiler.GraphBreakError, match="boolean mask"):
        cf(*_mask_inputs(3, 0))


# ---- 0-dim tensor indices ---------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_dim_index_tensor_is_a_guarded_read(backend):
    """``x[t]`` with a 0-dim int tensor is ``x[int(t)]`` (a view, as in torch): Python reads the value, so
    compiling guards it (a retrace for a new value, never the traced one reused)."""
    fn = lambda x, t: x[t] * 2     # noqa: E731
    ember.compiler.reset()
    e = explain(fn)(ember.ones(4, 3), ember.tensor(1))
    assert e.compiled and e.graph_break_count == 1
    cf = ember.compile(fn, backend=backend)
    x = _x(_rng(0), (4, 3), rg=False)
    for v in (1, 1, 3, -1):
        np.testing.assert_array_equal(cf(x, ember.tensor(v))._data, fn(x, ember.tensor(v))._data)
    assert counters["fallbacks"] == 0


def test_zero_dim_bool_index_is_a_guarded_read():
    fn = lambda x, b: x[b] * 2     # noqa: E731
    ember.compiler.reset()
    cf = ember.compile(fn, backend="aot_eager")
    x = ember.ones(2, 3)
    for v in (True, False, True):
        got, want = cf(x, ember.tensor(v)), fn(x, ember.tensor(v))
        assert tuple(got.shape) == tuple(want.shape) == ((1, 2, 3) if v else (0, 2, 3))
    assert counters["fallbacks"] == 0


# ---- the index family's derivatives capture too --------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_gather_backward_inside_compiles(backend):
    """gather's derivative starts from zeros of the input's shape (a constant): capturable."""
    def step(x, i):
        y = ember.gather(x, 1, i)
        (y * y).sum().backward()
        return y.detach()
    ember.compiler.reset()
    cf = ember.compile(step, backend=backend)
    for seed in (0, 1):
        r = _rng(seed)
        xs = [_x(r, (3, 4)), _idx(r, 0, 4, (3, 2))]
        ys = _clone_inputs(xs)
        np.testing.assert_allclose(cf(*ys)._data, step(*xs)._data)
        np.testing.assert_allclose(ys[0].grad._data, xs[0].grad._data)
    assert counters["fallbacks"] == 0, counters["fallback_reasons"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduce", ["mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_backward_recounts_for_new_indices(backend, reduce, include_self):
    """The derivative's counts and tie masks come from ops on the index tensor, not traced NumPy arrays."""
    def f(x, src, idx):
        r = x.scatter_reduce(0, idx, src, reduce, include_self=include_self)
        w = ember.arange(1.0, r.numel() + 1).reshape(r.shape)
        (r * w).sum().backward()
        return r
    cf = ember.compile(f, backend=backend)
    rng = _rng(1)
    for k in range(3):
        x0 = rng.integers(0, 3, 6).astype(np.float32)          # small integers: ties happen
        s0 = rng.integers(0, 3, 9).astype(np.float32)
        i0 = rng.integers(0, 6, 9)
        got = []
        for fn in (f, cf):
            x = ember.tensor(x0, requires_grad=True)
            s = ember.tensor(s0, requires_grad=True)
            r = fn(x, s, ember.tensor(i0))
            got.append((r.detach().numpy(), x.grad.numpy(), s.grad.numpy()))
        for a, b in zip(*got):
            np.testing.assert_allclose(b, a, rtol=1e-6)
    assert counters["fallbacks"] == 0
