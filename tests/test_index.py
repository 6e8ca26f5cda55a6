"""Indexing behaviour beyond the oracle table: views vs copies, errors (type and message, against torch),
in-place and out= forms, autograd details of __setitem__, and the single-argument where."""
import warnings

import numpy as np
import pytest
import torch

import ember

BASE = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)


def _both(fn, data=BASE):
    """Run ``fn(lib, x)`` in torch and ember on copies of ``data``; return (torch result, ember result)."""
    out = []
    for lib in (torch, ember):
        out.append(fn(lib, lib.from_numpy(data.copy())))
    return out


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return t.detach()._data


def same_error(fn, data=BASE, message=True):
    """Both libraries raise the same exception type (and, by default, the same message)."""
    errs = []
    for lib in (torch, ember):
        x = lib.from_numpy(data.copy())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(Exception) as info:
                fn(lib, x)
        errs.append(info.value)
    t, e = errs
    assert type(e) is type(t), f"ember raised {type(e).__name__}({e}), torch {type(t).__name__}({t})"
    if message:
        assert str(e).replace("ember", "torch") == str(t), f"ember: {e}\ntorch: {t}"


def same_value(fn, data=BASE):
    t, e = _both(fn, data)
    for a, b in zip(t if isinstance(t, tuple) else (t,), e if isinstance(e, tuple) else (e,)):
        assert tuple(b.shape) == tuple(a.shape)
        assert b.dtype.name == str(a.dtype).replace("torch.", "")
        np.testing.assert_allclose(_np(b), _np(a), rtol=1e-6)


# ---- views and copies --------------------------------------------------------------------------


@pytest.mark.parametrize("key", [
    (0,), (slice(1, None), 0), (Ellipsis, 1), (None, 0, slice(None, None, 2)), (0, 1, 2), (slice(-2, None), Ellipsis),
])
def test_basic_keys_are_views(key):
    x = ember.from_numpy(BASE.copy())
    v = x[key]
    assert v._base is x
    v.add_(100)
    expected = BASE.copy()
    expected[key] += 100
    np.testing.assert_array_equal(x._data, expected)


def test_int_tensor_0d_is_a_view_but_lists_and_bools_copy():
    x = ember.from_numpy(BASE.copy())
    assert x[ember.tensor(1)]._base is x
    for key in ([0, 1], True, ember.tensor([True, False]), (0, [1, 2])):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = x[key]
        assert r._base is None
        assert not np.shares_memory(r._data, x._data)


def test_setitem_writes_through_and_bumps_version():
    x = ember.zeros(3, 4)
    row = x[1]
    v0 = x._version
    x[1, 1:3] = 5
    assert x._version > v0
    np.testing.assert_array_equal(row._data, [0, 5, 5, 0])
    x[[0, 2], 0] = ember.tensor([7.0, 8.0])
    np.testing.assert_array_equal(x._data[:, 0], [7, 0, 8])


def test_full_integer_key_on_every_dim_is_a_writable_view():
    x = ember.zeros(2, 3)
    x[1, 2] = 4.0
    v = x[0, 1]
    v.add_(2)
    np.testing.assert_array_equal(x._data, [[0, 2, 0], [0, 0, 4]])


# ---- getitem errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [
    lambda m, x: x[5],
    lambda m, x: x[-5],
    lambda m, x: x[0, 5],
    lambda m, x: x[None, :, 5],
    lambda m, x: x[:, m.tensor([5])],
    lambda m, x: x[[0, 1], [0, 7]],
    lambda m, x: x[:, :, [9]],
    lambda m, x: x[[0], :, [9]],
    lambda m, x: x[:, m.tensor([True, False])],
    lambda m, x: x[:, m.ones(3, 3, dtype=m.bool)],
    lambda m, x: x[m.tensor([True, False, True])],
    lambda m, x: x[0, 0, 0, 0],
    lambda m, x: x[[0, 1], [0, 1, 2]],
    lambda m, x: x[m.tensor([1.0])],
    lambda m, x: x[1.0],
    lambda m, x: x[np.bool_(True)],
    lambda m, x: x[m.tensor([0], dtype=m.int16)],
    lambda m, x: x[m.tensor(1.0)],
])
def test_getitem_errors_match_torch(fn):
    same_error(fn)


def test_negative_and_zero_steps():
    same_error(lambda m, x: x[::-1])
    same_error(lambda m, x: x[:, 3:0:-1])
    same_error(lambda m, x: x[::0])
    with pytest.raises(ValueError, match="step must be greater than zero"):
        ember.zeros(3)[::-2] = 1.0


@pytest.mark.parametrize("fn", [
    lambda m, x: x[0],
    lambda m, x: x[:],
    lambda m, x: x[[0]],
])
def test_zero_dim_tensor_errors(fn):
    same_error(fn, np.array(3.0, dtype=np.float32))


def test_zero_dim_tensor_valid_keys():
    for fn in (lambda m, x: x[...], lambda m, x: x[None], lambda m, x: x[True], lambda m, x: x[False],
               lambda m, x: x[..., None]):
        same_value(fn, np.array(3.0, dtype=np.float32))


def test_index_into_empty_dim():
    same_error(lambda m, x: x[[0]], np.zeros((0, 3), np.float32))
    same_value(lambda m, x: x[:, [0]], np.zeros((0, 3), np.float32))
    same_value(lambda m, x: x[m.tensor([], dtype=m.int64)])


def test_uint8_mask_warns_and_selects():
    x = ember.from_numpy(BASE.copy())
    with pytest.warns(UserWarning):
        r = x[ember.tensor([1, 0], dtype=ember.uint8)]
    assert tuple(r.shape) == (1, 3, 4)


def test_sequence_keys_like_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fn in (lambda m, x: x[[0, [1, 2]]], lambda m, x: x[[0, slice(None)]], lambda m, x: x[(0, 1), ],
                   lambda m, x: x[[True, 1]], lambda m, x: x[[1.0]], lambda m, x: x[[[0, 1], [1, 0]]],
                   lambda m, x: x[..., 0, ...]):
            same_value(fn)


def test_half_precision_dtypes_kept():
    for dt in ("float16", "bfloat16"):
        x = ember.ones(3, 4, dtype=getattr(ember, dt))
        assert x[[0, 1]].dtype is getattr(ember, dt)
        assert x[x[:, 0] > 0].dtype is getattr(ember, dt)


# ---- setitem ---------------------------------------------------------------------------------------


def _set(key, value, dtype="float32"):
    def fn(m, x):
        y = m.zeros(3, 4, dtype=getattr(m, dtype))
        y[key(m) if callable(key) else key] = value(m) if callable(value) else value
        return y
    return fn


@pytest.mark.parametrize("fn", [
    _set([0], lambda m: m.tensor([1, 2, 3, 4])),
    _set(0, [1, 2, 3, 4]),
    _set(0, np.ones(4)),
    _set(0, lambda m: m.ones(3)),
    _set([0, 1], lambda m: m.ones(3)),
    _set([0], lambda m: m.tensor(2.7), "int64"),
    _set(7, 5),
    _set([7], 5),
    _set(slice(None, None, -1), 5),
])
def test_setitem_errors_match_torch(fn):
    same_error(fn)


@pytest.mark.parametrize("fn", [
    _set(0, lambda m: m.tensor([1, 2, 3, 4])),
    _set(0, lambda m: m.ones(1, 1, 4)),
    _set([0, 1], lambda m: m.ones(1, 1, 4)),
    _set(0, 2.7, "int64"),
    _set(1, -1, "uint8"),
    _set(lambda m: m.tensor([[True, False, True, False]] * 3), lambda m: m.tensor([1.0, 2, 3, 4, 5, 6])),
    _set(True, 5),
    _set((None, 0), 5),
    _set(Ellipsis, 5),
    _set(lambda m: m.tensor(1), 3.0),
    _set((0, 1), lambda m: m.tensor(4.0)),
    _set((slice(1, 3), [0, 2]), lambda m: m.tensor([[1.0, 2], [3, 4]])),
    _set(0, True, "bool"),
    _set(0, lambda m: m.tensor([1.0, 2, 3, 4], dtype=m.float64)),
])
def test_setitem_values_match_torch(fn):
    same_value(fn)


def test_setitem_on_leaf_requiring_grad_raises_like_torch():
    same_error(lambda m, x: m.ones(3, requires_grad=True).__setitem__(0, 1.0))
    same_error(lambda m, x: m.ones(3, requires_grad=True).__setitem__([0], 1.0))
    same_error(lambda m, x: m.ones(3, requires_grad=True).__setitem__(m.tensor([True, False, True]), 1.0))


def test_setitem_overlapping_source_raises_like_torch():
    def basic(m, x):
        y = m.arange(5.0)
        y[1:] = y[:-1]

    def adv(m, x):
        y = m.arange(5.0)
        y[[1, 2, 3, 4]] = y[:-1]
    same_error(basic)
    same_error(adv)
    y = ember.arange(5.0)
    y[:] = y            # full overlap is allowed
    np.testing.assert_array_equal(y._data, np.arange(5.0))


def test_setitem_autograd_brief_example():
    res = []
    for lib in (torch, ember):
        a = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], requires_grad=True)
        b = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        x = a.clone()
        x[1:] = b * 2
        (x * lib.arange(9.0).reshape(3, 3)).sum().backward()
        res.append((_np(a.grad), _np(b.grad), x.grad_fn is not None))
    for t, e in zip(*res):
        np.testing.assert_allclose(e, t)


def test_setitem_constant_zeroes_gradient():
    for key in (slice(1, None), [1, 2], Ellipsis):
        grads = []
        for lib in (torch, ember):
            a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
            x = a.clone()
            x[key] = 0
            x.sum().backward()
            grads.append(_np(a.grad))
        np.testing.assert_allclose(grads[1], grads[0])


def test_setitem_value_requiring_grad_makes_target_require_grad():
    for lib in (torch, ember):
        v = lib.tensor([1.0, 2.0], requires_grad=True)
        x = lib.zeros(3, 2)
        x[[0, 2]] = v
        assert x.requires_grad
        x.sum().backward()
        np.testing.assert_allclose(_np(v.grad), [2.0, 2.0])


def test_setitem_grad_fn_names():
    x = ember.randn(3, requires_grad=True).clone()
    x[[0]] = 1.0
    assert x.grad_fn.name() == "IndexPutBackward0"
    assert ember.randn(3, 4, requires_grad=True)[[0, 1]].grad_fn.name() == "IndexBackward0"
    assert ember.randn(3, 4, requires_grad=True).gather(0, ember.tensor([[0]])).grad_fn.name() == "GatherBackward0"


# ---- gather / scatter ------------------------------------------------------------------------------

X34 = np.arange(12.0, dtype=np.float32).reshape(3, 4)
L = "int64"


def _idx(m, v, dt="int64"):
    return m.tensor(v, dtype=getattr(m, dt))


@pytest.mark.parametrize("fn", [
    lambda m, x: x.gather(0, _idx(m, [[0]], "int16")),
    lambda m, x: x.gather(0, _idx(m, [[5]])),
    lambda m, x: x.gather(0, _idx(m, [[-1]])),
    lambda m, x: x.gather(0, _idx(m, [0])),
    lambda m, x: x.gather(0, m.zeros(2, 5, dtype=m.int64)),
    lambda m, x: x.gather(2, _idx(m, [[0]])),
    lambda m, x: x.gather(0, [[0]]),
    lambda m, x: x.scatter(0, _idx(m, [[0]], "float32"), x),
    lambda m, x: x.scatter(0, _idx(m, [0, 1]), x),
    lambda m, x: x.scatter(0, m.zeros(2, 4, dtype=m.int64), m.ones(1, 4)),
    lambda m, x: x.scatter(0, m.zeros(2, 5, dtype=m.int64), 1.0),
    lambda m, x: x.scatter(0, _idx(m, [[5]]), x),
    lambda m, x: x.scatter(0, _idx(m, [[0]]), x.double()),
    lambda m, x: x.scatter(0, _idx(m, [[0]]), x, reduce="sum"),
    lambda m, x: x.scatter_add(0, _idx(m, [[-1]]), x),
    lambda m, x: x.scatter_add(0, _idx(m, [[0]]), x.double()),
    lambda m, x: x.scatter_reduce(0, _idx(m, [[0]]), x, "foo"),
    lambda m, x: x.scatter_reduce(0, _idx(m, [[3]]), x, "sum"),
    lambda m, x: x.scatter_reduce(0, m.zeros(2, 2, dtype=m.int64), m.ones(1, 1), "sum"),
])
def test_gather_scatter_errors_match_torch(fn):
    same_error(fn, X34)


def test_gather_scatter_zero_dim_and_empty():
    same_value(lambda m, x: x.gather(0, m.tensor(0)), np.array(3.0, np.float32))
    same_value(lambda m, x: x.gather(0, m.tensor(1)), np.array([3.0, 4.0], np.float32))
    same_value(lambda m, x: x.gather(1, m.zeros(3, 0, dtype=m.int64)), X34)
    same_value(lambda m, x: x.scatter(0, m.zeros(5, 4, dtype=m.int64), 1.0), X34)
    same_value(lambda m, x: x.scatter(0, m.tensor([1]), 7), np.arange(4.0, dtype=np.float32))
    same_value(lambda m, x: m.arange(4).scatter(0, m.tensor([1]), 7.9))


def test_scatter_reduce_integer_mean_floors():
    same_value(lambda m, x: m.tensor([-5, 0]).scatter_reduce(0, m.tensor([0, 0]), m.tensor([0, 0]), "mean"))
    same_value(lambda m, x: m.tensor([-5, 0]).scatter_reduce(0, m.tensor([0, 0]), m.tensor([-3, 0]), "mean",
                                                             include_self=False))
    same_value(lambda m, x: m.tensor([-5, 0]).scatter_reduce(0, m.tensor([0, 0]), m.tensor([-7, -8]), "amax",
                                                             include_self=False))


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("incl", [True, False])
def test_scatter_reduce_ties_share_gradient_like_torch(reduce, incl):
    res = []
    for lib in (torch, ember):
        x = lib.tensor([1.0, 3.0, 2.0, 3.0], requires_grad=True)
        # several values tie with the result (and with self) at positions 0, 1 and 2
        s = lib.tensor([3.0, 3.0, 1.0, 2.0, 0.5], requires_grad=True)
        y = x.scatter_reduce(0, lib.tensor([1, 1, 0, 2, 3]), s, reduce, include_self=incl)
        (y * lib.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
        res.append((_np(x.grad), _np(s.grad), _np(y)))
    for t, e in zip(*res):
        np.testing.assert_allclose(e, t, rtol=1e-6)


def test_legacy_scatter_reduce_has_no_derivative():
    for lib in (torch, ember):
        x = lib.randn(3, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = x.scatter(0, lib.tensor([0]), lib.ones(1), reduce="add")
        with pytest.raises(RuntimeError, match="derivative for aten::scatter is not implemented"):
            y.sum().backward()


def test_gather_index_modified_in_place_is_detected():
    for lib in (torch, ember):
        x = lib.ones(3, requires_grad=True)
        i = lib.tensor([0, 0])
        y = x.gather(0, i)
        i[1] = 2
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_scatter_inplace_methods_return_self():
    x = ember.zeros(3, 4)
    assert x.scatter_(0, ember.tensor([[1, 2]]), 5.0) is x
    assert x.scatter_add_(1, ember.tensor([[0, 0]]), ember.ones(1, 2)) is x
    assert x.scatter_reduce_(0, ember.tensor([[2]]), ember.full((1, 1), 3.0), "amax") is x
    t = torch.zeros(3, 4)
    t.scatter_(0, torch.tensor([[1, 2]]), 5.0).scatter_add_(1, torch.tensor([[0, 0]]), torch.ones(1, 2))
    t.scatter_reduce_(0, torch.tensor([[2]]), torch.full((1, 1), 3.0), "amax")
    np.testing.assert_array_equal(x._data, t.numpy())


def test_scatter_reduce_prod_double_backward():
    for lib in (torch, ember):
        x = lib.tensor([1.5, 2.0], dtype=lib.float64, requires_grad=True)
        s = lib.tensor([2.0, 3.0, 0.5], dtype=lib.float64, requires_grad=True)
        y = x.scatter_reduce(0, lib.tensor([0, 0, 1]), s, "prod")
        g = lib.autograd.grad(y.sum(), (x, s), create_graph=True)
        gg = lib.autograd.grad(sum((t * t).sum() for t in g), (x, s))
        if lib is torch:
            expect = [_np(t) for t in gg]
        else:
            for a, b in zip(gg, expect):
                np.testing.assert_allclose(_np(a), b, rtol=1e-10)


# ---- index_select / index_add / index_copy / index_fill ------------------------------------------


@pytest.mark.parametrize("fn", [
    lambda m, x: x.index_select(0, _idx(m, [3])),
    lambda m, x: x.index_select(0, _idx(m, [-1])),
    lambda m, x: x.index_select(0, _idx(m, [[0]])),
    lambda m, x: x.index_select(0, _idx(m, [0], "int16")),
    lambda m, x: x.index_add(0, _idx(m, [3]), m.ones(1, 4)),
    lambda m, x: x.index_add(0, _idx(m, [-1]), m.ones(1, 4)),
    lambda m, x: x.index_add(0, _idx(m, [0]), m.ones(2, 4)),
    lambda m, x: x.index_add(0, _idx(m, [0]), m.ones(1, 5)),
    lambda m, x: x.index_add(0, _idx(m, [0]), m.ones(1, 4, dtype=m.float64)),
    lambda m, x: x.index_add(0, _idx(m, [[0]]), m.ones(1, 4)),
    lambda m, x: x.index_add(0, _idx(m, [0], "uint8"), m.ones(1, 4)),
    lambda m, x: x.index_copy(0, _idx(m, [3]), m.ones(1, 4)),
    lambda m, x: x.index_copy(0, _idx(m, [-1]), m.ones(1, 4)),
    lambda m, x: x.index_copy(0, _idx(m, [0]), m.ones(2, 4)),
    lambda m, x: x.index_copy(0, _idx(m, [0]), m.ones(1, 5)),
    lambda m, x: x.index_copy(0, _idx(m, [0]), m.ones(1, 4, dtype=m.float64)),
    lambda m, x: x.index_copy(0, _idx(m, [0], "int32"), m.ones(1, 4)),
    lambda m, x: x.index_fill(0, _idx(m, [3]), 1.0),
    lambda m, x: x.index_fill(0, _idx(m, [0]), m.tensor([2.0])),
    lambda m, x: x.index_fill(0, _idx(m, [[0]]), 1.0),
    lambda m, x: x.index_fill(0, _idx(m, [0], "int32"), 1.0),
])
def test_index_dim_errors_match_torch(fn):
    same_error(fn, X34)


def test_index_dim_values():
    same_value(lambda m, x: x.index_select(0, m.tensor(1)), X34)
    same_value(lambda m, x: x.index_select(0, m.tensor([0])), np.array(5.0, np.float32))
    same_value(lambda m, x: x.index_add(0, m.tensor([0, 0]), m.ones(2, 4), alpha=2), X34)
    same_value(lambda m, x: x.index_fill(0, m.tensor([-1]), 1.0), X34)
    same_value(lambda m, x: x.index_fill(1, m.tensor([0, 2]), m.tensor(2.0)), X34)
    same_value(lambda m, x: m.arange(6).reshape(2, 3).index_add(1, m.tensor([2]), m.ones(2, 1, dtype=m.int64)))


def test_index_dim_inplace_and_out():
    for lib in (torch, ember):
        x = lib.zeros(3, 4)
        assert x.index_add_(0, lib.tensor([1]), lib.ones(1, 4)) is x
        assert x.index_copy_(1, lib.tensor([3]), lib.full((3, 1), 2.0)) is x
        assert x.index_fill_(0, lib.tensor([2]), -1) is x
        out = lib.empty(0)
        r = lib.index_select(x, 1, lib.tensor([3, 0]), out=out)
        assert r is out
        r2 = lib.index_add(x, 0, lib.tensor([0]), lib.ones(1, 4), alpha=3, out=lib.empty(3, 4))
        r3 = lib.index_copy(x, 0, lib.tensor([0]), lib.ones(1, 4), out=lib.empty(0))
        if lib is torch:
            expect = [x.numpy().copy(), out.numpy().copy(), r2.numpy(), r3.numpy()]
        else:
            for a, b in zip([x, out, r2, r3], expect):
                np.testing.assert_array_equal(a._data, b)


def test_inplace_on_leaf_requiring_grad_raises():
    for name, args in [("index_add_", (0, [0], "src")), ("index_fill_", (0, [0], 1.0)),
                       ("masked_fill_", ("mask", 1.0)), ("scatter_", (0, [0], 1.0)), ("put_", ([0], "src1"))]:
        for lib in (torch, ember):
            x = lib.ones(3, requires_grad=True)
            conv = [lib.tensor(a) if isinstance(a, list) else lib.ones(1) if a == "src" else
                    lib.tensor([True, False, True]) if a == "mask" else lib.ones(1) if a == "src1" else a
                    for a in args]
            with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
                getattr(x, name)(*conv)


# ---- masked_* ------------------------------------------------------------------------------------


def _mask(m, shape=(3, 4), dt="bool"):
    return m.from_numpy((np.arange(int(np.prod(shape))).reshape(shape) % 3 == 0).astype(dt))


@pytest.mark.parametrize("fn", [
    lambda m, x: x.masked_fill(_mask(m, dt="int16"), 1.0),
    lambda m, x: x.masked_fill(_mask(m, dt="uint8"), 1.0),
    lambda m, x: x.masked_fill(_mask(m), m.tensor([1.0])),
    lambda m, x: x.masked_select(_mask(m, dt="float32")),
    lambda m, x: x.masked_scatter(_mask(m, dt="int16"), x),
    lambda m, x: x.masked_scatter(_mask(m), m.ones(2)),
    lambda m, x: x.masked_scatter(_mask(m), x.double()),
])
def test_masked_errors_match_torch(fn):
    same_error(fn, X34)


@pytest.mark.parametrize("fn", [
    lambda m, x: x.masked_fill(_mask(m, (2,)), 1.0),
    lambda m, x: x.masked_select(_mask(m, (2,))),
    lambda m, x: x.masked_scatter(_mask(m, (2,)), x),
    lambda m, x: x[0].clone().masked_fill_(_mask(m, (2, 4)), 1.0),
])
def test_masked_broadcast_errors(fn):
    same_error(fn, X34, message=False)


def test_masked_values():
    same_value(lambda m, x: x.masked_fill(_mask(m), m.tensor(1, dtype=m.int64)), X34)
    same_value(lambda m, x: m.arange(3).masked_fill(m.ones(3, dtype=m.bool), 2.7))
    same_value(lambda m, x: m.arange(3).masked_fill(m.ones(3, dtype=m.bool), True))
    same_value(lambda m, x: m.arange(3).masked_fill(m.ones(3, dtype=m.bool), m.tensor(2.7)))
    same_value(lambda m, x: x[0].masked_scatter(_mask(m, (2, 4)), m.arange(10.0)), X34)
    same_value(lambda m, x: x.clone().masked_scatter_(_mask(m, (4,)), m.arange(12.0)), X34)
    same_value(lambda m, x: m.masked_select(x, _mask(m), out=m.empty(0)), X34)


def test_masked_fill_tensor_value_gradient():
    res = []
    for lib in (torch, ember):
        x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        v = lib.tensor(5.0, requires_grad=True)
        y = x.masked_fill(lib.tensor([True, False]), v)
        (y * lib.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
        res.append((_np(x.grad), _np(v.grad)))
    for t, e in zip(*res):
        np.testing.assert_allclose(e, t)


# ---- take / take_along_dim / put ------------------------------------------------------------------


@pytest.mark.parametrize("fn", [
    lambda m, x: x.take(_idx(m, [12])),
    lambda m, x: x.take(_idx(m, [-13])),
    lambda m, x: x.take(_idx(m, [0], "int32")),
    lambda m, x: x.take_along_dim(_idx(m, [[0]], "int32"), 1),
    lambda m, x: x.take_along_dim(_idx(m, [0, 1]), 1),
    lambda m, x: x.take_along_dim(_idx(m, [[[0, 1]]]), 1),
    lambda m, x: m.put(x, _idx(m, [0, 13]), m.tensor([1.0, 2.0])),
    lambda m, x: x.clone().put_(_idx(m, [0, 1]), m.tensor([1.0, 2.0, 3.0])),
])
def test_take_put_errors_match_torch(fn):
    same_error(fn, X34)


def test_take_put_values_and_out():
    same_value(lambda m, x: x.take(m.tensor([-1, 0, 5])), X34)
    same_value(lambda m, x: x.take_along_dim(m.tensor([[-1]]), 1), X34)
    same_value(lambda m, x: x.clone().put_(m.tensor([0, 0]), m.tensor([1.0, 2.0]), accumulate=True), X34)
    same_value(lambda m, x: m.take(x, m.tensor([[1, 2]]), out=m.empty(0)), X34)
    same_value(lambda m, x: m.take_along_dim(x, m.tensor([[1], [0], [3]]), 1, out=m.empty(0)), X34)
    same_value(lambda m, x: m.gather(x, 0, m.tensor([[1, 2]]), out=m.empty(0)), X34)
    same_value(lambda m, x: m.scatter(x, 0, m.tensor([[1, 2]]), 9.0, out=m.empty(0)), X34)


# ---- index_put -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [
    lambda m, x: x.index_put((m.tensor([0]),) * 3, m.tensor(0.0)),
    lambda m, x: x.index_put([m.tensor([0, 0])], m.tensor(1.0, dtype=m.float64)),
    lambda m, x: x.index_put((None, m.tensor([0, 0])), m.tensor(1.0)),
    lambda m, x: x.clone().index_put_((m.tensor([0, 1]),), m.ones(3)),
    lambda m, x: x.index_put((m.tensor([0], dtype=m.int16),), m.tensor(1.0)),
])
def test_index_put_errors_match_torch(fn):
    same_error(fn, X34)


def test_index_put_values():
    same_value(lambda m, x: x.index_put((m.tensor([0, 0]),), m.tensor([1.0, 2, 3, 4]), accumulate=True), X34)
    same_value(lambda m, x: x.index_put((x > 5,), m.tensor(0.0)), X34)
    same_value(lambda m, x: m.index_put_(x, (m.tensor([1]), m.tensor([2])), m.tensor(-1.0)), X34)
    same_value(lambda m, x: m.zeros(3, dtype=m.int64).index_put_((m.tensor([0, 0]),), m.tensor(2), accumulate=True))


# ---- nonzero / argwhere / where ------------------------------------------------------------------


def test_nonzero_shapes_and_out():
    for data in (np.array(1.0, np.float32), np.array(0.0, np.float32), np.zeros((0, 3), np.float32),
                 np.array([[0, 1.5], [2, 0]], np.float32)):
        same_value(lambda m, x: m.nonzero(x), data)
        same_value(lambda m, x: m.argwhere(x), data)
        same_value(lambda m, x: m.nonzero(x, as_tuple=True), data)
        same_value(lambda m, x: m.where(x != 0), data)
    same_value(lambda m, x: m.nonzero(x, out=m.empty(0, dtype=m.int64)), X34)
    same_error(lambda m, x: m.nonzero(x, out=m.empty(0)), X34)


def test_where_single_argument_equals_nonzero_as_tuple():
    from ember.ops.index_masked import _where_single
    c = ember.tensor([[0.0, 1.0], [2.0, 0.0]])
    for a, b in zip(ember.where(c), _where_single(c)):
        np.testing.assert_array_equal(a._data, b._data)
    t = torch.where(torch.tensor([[0.0, 1.0], [2.0, 0.0]]))
    for a, b in zip(ember.where(c), t):
        np.testing.assert_array_equal(a._data, b.numpy())
