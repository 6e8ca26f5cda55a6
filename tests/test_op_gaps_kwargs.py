"""Keyword spellings torch accepts (``axis=`` for a ``dim`` that comes before other required arguments,
``swapaxes``' ``axis0``/``axis1``) and calls torch refuses where ember used to be lenient (softmax without a
dim), each checked against torch."""
import numpy as np
import pytest
import torch

import ember
from oracle import same_error


def _x(m):
    return m.arange(12.).reshape(3, 4)


AXIS_CALLS = {
    "index_select": lambda m, kw: m.index_select(_x(m), index=m.tensor([2, 0]), **kw),
    "gather": lambda m, kw: m.gather(_x(m), index=m.tensor([[0, 3], [1, 1]]), **kw),
    "scatter": lambda m, kw: m.scatter(_x(m), index=m.tensor([[0, 1]]), src=-_x(m), **kw),
    "scatter-value": lambda m, kw: m.scatter(_x(m), index=m.tensor([[0, 1]]), value=7., **kw),
    "scatter_add": lambda m, kw: m.scatter_add(_x(m), index=m.tensor([[0, 0]]), src=_x(m), **kw),
    "scatter_reduce": lambda m, kw: m.scatter_reduce(_x(m), index=m.tensor([[0, 0]]), src=_x(m), reduce="amax", **kw),
    "narrow": lambda m, kw: m.narrow(_x(m), start=1, length=2, **kw),
    "select": lambda m, kw: m.select(_x(m), index=-1, **kw),
    "index_add": lambda m, kw: m.index_add(_x(m), index=m.tensor([0]), source=_x(m)[:, :1], **kw),
    "index_fill": lambda m, kw: m.index_fill(_x(m), index=m.tensor([0, 2]), value=-1., **kw),
    "index_copy": lambda m, kw: m.index_copy(_x(m), index=m.tensor([3]), source=_x(m)[:, :1] * 0, **kw),
    "renorm": lambda m, kw: m.renorm(_x(m), p=2, maxnorm=1., **kw),
    "cross": lambda m, kw: m.cross(_x(m)[:, :3].T, _x(m)[:, 1:].T.flip(0), **{k: 0 for k in kw}),
    "cosine_similarity": lambda m, kw: m.cosine_similarity(_x(m), _x(m).flip(1) + 1, **kw),
    "unflatten": lambda m, kw: m.unflatten(_x(m), sizes=(2, 2), **kw),
    "method-index_select": lambda m, kw: _x(m).index_select(index=m.tensor([1]), **kw),
    "method-gather": lambda m, kw: _x(m).gather(index=m.tensor([[1, 0]]), **kw),
    "method-narrow": lambda m, kw: _x(m).narrow(start=0, length=1, **kw),
    "method-select": lambda m, kw: _x(m).select(index=0, **kw),
    "method-renorm": lambda m, kw: _x(m).renorm(p=1, maxnorm=2., **kw),
    "method-scatter_": lambda m, kw: _x(m).scatter_(index=m.tensor([[0, 1]]), src=-_x(m), **kw),
    "method-scatter_add_": lambda m, kw: _x(m).scatter_add_(index=m.tensor([[0, 1]]), src=-_x(m), **kw),
    "method-index_fill_": lambda m, kw: _x(m).index_fill_(index=m.tensor([0]), value=1., **kw),
    "method-index_add_": lambda m, kw: _x(m).index_add_(index=m.tensor([0]), source=_x(m)[:, :1], **kw),
}


@pytest.mark.parametrize("name", list(AXIS_CALLS))
def test_axis_stands_for_a_leading_dim(name):
    f = AXIS_CALLS[name]
    for kw in ({"dim": 1}, {"axis": 1}):
        t, e = f(torch, kw), f(ember, kw)
        assert tuple(e.shape) == tuple(t.shape) and str(e.dtype)[6:] == str(t.dtype)[6:]
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["index_select", "gather", "scatter_add", "narrow", "select", "index_add",
                                  "renorm", "unflatten"])
def test_axis_with_dim_or_with_nothing_is_torchs_type_error(name):
    f = AXIS_CALLS[name]
    same_error(lambda m: f(m, {"dim": 1, "axis": 1}), exact=False)
    same_error(lambda m: f(m, {}), exact=False)


def test_a_missing_later_argument_is_a_type_error():
    for call in (lambda m: m.index_select(_x(m), 0), lambda m: m.gather(_x(m), axis=0),
                 lambda m: m.narrow(_x(m), 0, 1), lambda m: _x(m).index_fill_(0, m.tensor([0])),
                 lambda m: m.scatter_add(_x(m), 0, m.tensor([[0]]))):
        same_error(call, exact=False)


def test_swapaxes_takes_numpy_names_and_swapdims_torchs():
    for call in (lambda m: m.swapaxes(_x(m), axis0=0, axis1=1), lambda m: _x(m).swapaxes(axis1=0, axis0=1),
                 lambda m: m.swapdims(_x(m), dim0=1, dim1=0), lambda m: _x(m).swapaxes_(0, 1)):
        t, e = call(torch), call(ember)
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    for call in (lambda m: m.swapaxes(_x(m), dim0=0, dim1=1), lambda m: _x(m).swapaxes(dim0=0, dim1=1),
                 lambda m: m.swapdims(_x(m), axis0=0, axis1=1)):
        same_error(call, exact=False)


@pytest.mark.parametrize("call", [
    lambda m: m.softmax(m.ones(2, 3)), lambda m: m.ones(2, 3).softmax(), lambda m: m.log_softmax(m.ones(2, 3)),
    lambda m: m.ones(2, 3).log_softmax(), lambda m: m.softmax(m.tensor([1, 2]), 0),
    lambda m: m.log_softmax(m.tensor([True]), 0), lambda m: m.softmax(m.ones(0, dtype=m.int32), 5),
], ids=["softmax", "method-softmax", "log_softmax", "method-log_softmax", "int", "bool", "empty-int-bad-dim"])
def test_softmax_refuses_what_torch_refuses(call):
    same_error(call)


def test_softmax_of_an_empty_integer_tensor_is_empty_as_torch():
    for m_call in (lambda m: m.softmax(m.ones(0, 2, dtype=m.int64), 1), lambda m: m.log_softmax(m.ones(0, dtype=m.bool), 0),
                   lambda m: m.softmax(m.ones(0, dtype=m.int32), 0, dtype=m.float64)):
        t, e = m_call(torch), m_call(ember)
        assert tuple(e.shape) == tuple(t.shape) and str(e.dtype)[6:] == str(t.dtype)[6:]
    # F.softmax keeps torch's implicit dim choice (with its warning)
    with pytest.warns(UserWarning):
        e = ember.nn.functional.softmax(ember.ones(2, 3))
    np.testing.assert_allclose(e.numpy(), np.full((2, 3), 1 / 3), rtol=1e-6)


@pytest.mark.parametrize("shape,index", [((1, 4), [0]), ((3, 2), [0]), ((2, 2), [0, 1]), ((3, 1), [0, 1])])
def test_index_copy_checks_slice_shapes_before_the_count(shape, index):
    same_error(lambda m: m.zeros(3, 4).index_copy(1, m.tensor(index), m.ones(shape)))


@pytest.mark.parametrize("call", [
    lambda m: m.sum(m.ones(2, 3), keepdim=True), lambda m: m.ones(2, 3).sum(keepdim=True),
    lambda m: m.ones(2, 3).mean(keepdim=True), lambda m: m.prod(m.ones(2, 3), keepdim=True),
    lambda m: m.sum(m.ones(2, 3), keepdims=True),
], ids=["sum", "method-sum", "mean", "prod", "sum-keepdims"])
def test_keepdim_without_a_dim_is_a_type_error(call):
    same_error(call, exact=False)


@pytest.mark.parametrize("call", [
    lambda m: m.sum(m.ones(2, 3), None, True), lambda m: m.ones(2, 3).mean(dim=None, keepdim=True),
    lambda m: m.sum(m.ones(2, 3), axis=0, keepdims=True), lambda m: m.ones(2, 3).prod(),
    lambda m: m.ones(2, 3).sum(dtype=m.float64), lambda m: m.mean(m.ones(2, 3), axis=1),
], ids=["sum-None", "mean-None", "sum-axis", "prod", "sum-dtype", "mean-axis"])
def test_reductions_over_all_dims_still_work(call):
    t, e = call(torch), call(ember)
    assert tuple(e.shape) == tuple(t.shape) and str(e.dtype)[6:] == str(t.dtype)[6:]
    np.testing.assert_allclose(e.numpy(), t.numpy())


@pytest.mark.parametrize("call", [
    lambda m: m.hsplit(m.ones(3), 2), lambda m: m.vsplit(m.ones(3), 3), lambda m: m.dsplit(m.ones(2, 2, 4), 3),
    lambda m: m.dsplit(m.ones(2, 4), 2), lambda m: m.hsplit(m.ones(2, 0), 0),
], ids=["hsplit-indivisible", "vsplit-1d", "dsplit-indivisible", "dsplit-2d", "hsplit-zero"])
def test_hsplit_vsplit_dsplit_refuse_as_torch(call):
    same_error(call)


@pytest.mark.parametrize("call", [
    lambda m: m.hsplit(m.arange(8.).reshape(2, 4), 2), lambda m: m.hsplit(m.arange(6.), [1, 4]),
    lambda m: m.vsplit(m.arange(8.).reshape(4, 2), [3]), lambda m: m.dsplit(m.arange(16.).reshape(2, 2, 4), [1]),
    lambda m: m.arange(16.).reshape(2, 2, 4).dsplit(2),
], ids=["hsplit", "hsplit-1d-indices", "vsplit", "dsplit-indices", "method-dsplit"])
def test_hsplit_vsplit_dsplit(call):
    t, e = call(torch), call(ember)
    assert len(t) == len(e)
    for a, b in zip(t, e):
        np.testing.assert_array_equal(b.numpy(), a.numpy())


@pytest.mark.parametrize("call", [
    lambda m: m.clamp(m.ones(3), 0, 1, out=m.empty(3, dtype=m.float64)),
    lambda m: m.clamp(m.ones(3, dtype=m.int64), 0, 1, out=m.empty(3)),
    lambda m: m.clamp_min(m.ones(3), 0, out=m.empty(3, dtype=m.float64)),
    lambda m: m.clip(m.ones(3), 0, 1, out=m.empty(3, dtype=m.float16)),
], ids=["float-into-double", "long-into-float", "clamp_min", "clip"])
def test_clamp_with_number_bounds_writes_out_only_in_its_dtype(call):
    same_error(call)


def test_clamp_with_tensor_bounds_casts_into_out():
    for m in (torch, ember):
        x = m.tensor([-1., 0.5, 3.])
        out = m.empty(3, dtype=m.float64)
        r = m.clamp(x, min=m.zeros(3), max=m.ones(3), out=out)
        assert r is out and str(out.dtype).endswith("float64")
        np.testing.assert_array_equal(out.numpy(), [0., 0.5, 1.])


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_bfloat16_sum_and_mean_accumulate_in_float32(op):
    a = np.random.default_rng(3).standard_normal((64, 300)).astype(np.float32) + 0.3
    for args in ((), (1,), (0, True)):
        t = getattr(torch.from_numpy(a).bfloat16(), op)(*args)
        e = getattr(ember.from_numpy(a).to(ember.bfloat16), op)(*args)
        assert e.dtype is ember.bfloat16
        np.testing.assert_array_equal(e.float().numpy(), t.float().numpy())


def test_cholesky_inverse_takes_input_by_its_torch_name():
    a = np.array([[2., 0.], [1., 1.]], dtype=np.float32)
    t = torch.cholesky_inverse(input=torch.from_numpy(a))
    e = ember.cholesky_inverse(input=ember.from_numpy(a))
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


@pytest.mark.parametrize("values,rng", [([], None), ([0.3], None), ([2., 2.], None), ([2., 2.], (1., 1.)),
                                        ([], (1., 1.)), ([1., 3.], (0., 2.)), ([-1., 5., 2.], None)])
def test_histogram_range_rules_as_torch(values, rng):
    t = torch.histogram(torch.tensor(values), 4, range=rng)
    e = ember.histogram(ember.tensor(values), 4, range=rng)
    for a, b in zip(t, e):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6)


@pytest.mark.parametrize("values,rng", [([2.], (2., 1.)), ([2.], (0., float("inf"))), ([float("nan")], None),
                                        ([float("inf"), 1.], None)])
def test_histogram_bad_ranges_raise_as_torch(values, rng):
    same_error(lambda m: m.histogram(m.tensor(values), 4, range=rng))


_NAN_BF16 = [[1.5, float("nan"), -float("inf"), 0.5], [0., float("inf"), -2., float("nan")]]


@pytest.mark.parametrize("name,call", [
    ("sort-desc", lambda m, x: x.sort(descending=True)), ("sort", lambda m, x: x.sort(dim=0, stable=True)),
    ("argsort", lambda m, x: (x.argsort(0),)), ("msort", lambda m, x: (m.msort(x),)), ("topk", lambda m, x: x.topk(2)),
    ("kthvalue", lambda m, x: x.kthvalue(3)), ("median", lambda m, x: x.median(1)), ("nanmedian", lambda m, x: x.nanmedian(1)),
    ("median-all", lambda m, x: (x.median(),)), ("mode", lambda m, x: x.mode(1)),
])
def test_bfloat16_orders_nan_as_torch(name, call):
    t = call(torch, torch.tensor(_NAN_BF16, dtype=torch.bfloat16))
    e = call(ember, ember.tensor(_NAN_BF16, dtype=ember.bfloat16))
    for a, b in zip(t, e):
        np.testing.assert_array_equal(b.float().numpy() if b.is_floating_point() else b.numpy(),
                                      a.float().numpy() if a.is_floating_point() else a.numpy())


def _set(key, value, dtype="float32"):
    def f(m):
        x = m.zeros(3, 4, dtype=getattr(m, dtype))
        x[key(m) if callable(key) else key] = value(m) if callable(value) else value
        return x
    return f


@pytest.mark.parametrize("key,value,dtype", [
    (lambda m: m.tensor([True, False, True]), lambda m: m.tensor([7]), "float32"),
    (lambda m: m.ones(3, 4, dtype=m.bool).tril(), lambda m: m.tensor(1.5, dtype=m.float64), "int64"),
    (True, lambda m: m.arange(4., dtype=m.float64), "int64"), (True, lambda m: m.ones(3, 1, dtype=m.int32), "bool"),
    (False, lambda m: m.ones(7), "float32"), ([0, 2], 1e10, "float16"), (0, 1e10, "float16"),
    (lambda m: m.tensor([True, False, True]), -1e6, "bfloat16"), ([0], -1, "uint8"),
], ids=["mask-1elem", "mask2d-0d-f64", "true-row", "true-col-bool", "false-noop", "list-half-inf", "int-half-inf",
        "mask-bf16", "uint8-wraps"])
def test_setitem_casts_where_torch_does(key, value, dtype):
    t, e = _set(key, value, dtype)(torch), _set(key, value, dtype)(ember)
    assert str(e.dtype)[6:] == str(t.dtype)[6:]
    np.testing.assert_array_equal(e.float().numpy(), t.float().numpy())


@pytest.mark.parametrize("key,value,dtype", [
    (lambda m: m.tensor([True, False, True]), lambda m: m.arange(4., dtype=m.float64), "float32"),
    (lambda m: m.tensor([0, 1]), lambda m: m.arange(4., dtype=m.float64), "float32"),
    ([0], 300, "uint8"), (lambda m: m.tensor([True, False, True]), 2 ** 40, "int32"), (0, 1000, "int8"),
], ids=["mask-row-f64", "index-f64", "uint8-overflow", "int32-overflow", "int8-overflow"])
def test_setitem_refuses_where_torch_does(key, value, dtype):
    same_error(_set(key, value, dtype))
