"""ember/ops/shape_join.py, shape_rearrange.py and copies.py beyond the oracle table: errors (type and
message as torch), out=, views, in-place semantics of fill_/zero_/copy_, and edge cases, each checked
against torch."""
import numpy as np
import pytest
import torch

import ember


from oracle import same_error  # noqa: E402


def same(fn):
    """``fn(lib)`` gives equal values, shapes and dtypes in both libraries."""
    t, e = fn(torch), fn(ember)
    ts = t if isinstance(t, (tuple, list)) else [t]
    es = e if isinstance(e, (tuple, list)) else [e]
    assert len(ts) == len(es)
    for a, b in zip(ts, es):
        if isinstance(a, torch.Tensor):
            assert tuple(b.shape) == tuple(a.shape)
            assert b.dtype.name == str(a.dtype).replace("torch.", "")
            np.testing.assert_allclose(np.asarray(b._data, dtype=np.float64), a.double().numpy(), rtol=1e-6)
        else:
            assert a == b


def T(lib, shape, dtype="float32"):
    return lib.arange(int(np.prod(shape))).reshape(shape).to(getattr(lib, dtype))


# ---- cat / stack -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: m.cat([T(m, (2, 3)), T(m, (2, 4))], 0),
    lambda m: m.cat([T(m, (2, 3)), T(m, (2, 3, 1))]),
    lambda m: m.cat([]),
    lambda m: m.cat([m.tensor(1.0)]),
    lambda m: m.cat([T(m, (2, 3)), m.tensor(1.0)]),
    lambda m: m.cat([T(m, (2, 3))], 2),
    lambda m: m.cat(T(m, (2, 3))),
    lambda m: m.cat([T(m, (2, 3)), 1]),
    lambda m: m.cat([m.zeros(0, 1), T(m, (2, 3))], 0),
    lambda m: m.cat([T(m, (2, 2)), T(m, (2, 2))], out=m.empty(0, dtype=m.int64)),
    lambda m: m.stack([T(m, (2, 3)), T(m, (2, 4))]),
    lambda m: m.stack([]),
    lambda m: m.stack([T(m, (2, 3))], 3),
    lambda m: m.hstack([]),
    lambda m: m.vstack([]),
    lambda m: m.dstack([]),
    lambda m: m.column_stack([]),
    lambda m: m.hstack(T(m, (3,))),
    lambda m: m.vstack([T(m, (3,)), T(m, (4,))]),
    lambda m: m.column_stack([T(m, (3,)), T(m, (2,))]),
])
def test_cat_stack_errors(fn):
    same_error(fn)


@pytest.mark.parametrize("fn", [
    lambda m: m.cat([T(m, (2, 3)), m.empty(0, dtype=m.float64)], 1),     # legacy empty: skipped, promotes
    lambda m: m.cat([m.empty(0, dtype=m.float64), T(m, (2, 3))], -1),
    lambda m: m.cat([m.empty(0), m.empty(0, dtype=m.int64)]),
    lambda m: m.cat([m.empty(0), T(m, (3,))], -1),
    lambda m: m.cat([T(m, (2, 3), "bool"), T(m, (2, 3), "uint8")]),
    lambda m: m.cat([T(m, (2, 3), "int32"), T(m, (1, 3), "int64"), T(m, (1, 3), "float16")]),
    lambda m: m.cat((T(m, (2, 3)), T(m, (2, 1))), axis=1),
    lambda m: m.stack([T(m, (2, 3)), T(m, (2, 3), "float64")], -1),
    lambda m: m.stack([m.tensor(1.0), m.tensor(2.0)]),
    lambda m: m.hstack([m.tensor(1.0), T(m, (2,))]),
    lambda m: m.vstack([m.tensor(1.0), m.tensor(2.0)]),
    lambda m: m.dstack([T(m, (2, 3)), T(m, (2, 3, 2))]),
    lambda m: m.column_stack([m.tensor(1.0), m.tensor(2.0)]),
    lambda m: m.cat([T(m, (0, 3)), T(m, (0, 3))], 1),
])
def test_cat_stack_values(fn):
    same(fn)


def test_cat_out_and_bfloat16():
    for lib in (torch, ember):
        out = lib.empty(0, dtype=lib.float64)
        r = lib.cat([T(lib, (2, 2)), T(lib, (1, 2))], out=out)
        assert r is out and tuple(out.shape) == (3, 2) and out.dtype == lib.float64
        out = lib.empty(0)
        assert lib.stack([T(lib, (2,)), T(lib, (2,))], 1, out=out) is out and tuple(out.shape) == (2, 2)
        assert tuple(lib.hstack([T(lib, (2,))], out=lib.empty(0)).shape) == (2,)
    same(lambda m: m.cat([T(m, (2,), "bfloat16"), T(m, (2,), "float16")]))
    same(lambda m: m.cat([T(m, (2,), "bfloat16"), T(m, (2,), "bfloat16")]))


def test_cat_out_with_grad_raises():
    same_error(lambda m: m.cat([m.ones(2, requires_grad=True)], out=m.empty(2)), exact=False)


def test_cat_gradient_to_skipped_empty_and_dtypes():
    res = {}
    for lib in (torch, ember):
        a = lib.ones(2, 3, requires_grad=True)
        e = lib.zeros(0, dtype=lib.float64, requires_grad=True)
        b = lib.ones(1, 3, dtype=lib.float64, requires_grad=True)
        y = lib.cat([a, e, b])
        (y * lib.arange(9.0, dtype=lib.float64).reshape(3, 3)).sum().backward()
        res[lib] = (a.grad, e.grad, b.grad, y.dtype)
    for t, e in zip(res[torch][:3], res[ember][:3]):
        if t is None:
            assert e is None or e.numel() == 0
        else:
            np.testing.assert_allclose(e._data, t.numpy())
            assert e.dtype.name == str(t.dtype)[6:]


# ---- repeat / tile / repeat_interleave ---------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: T(m, (2, 3)).repeat(2),
    lambda m: T(m, (2, 3)).repeat(-1, 2),
    lambda m: T(m, (2, 3)).repeat(),
    lambda m: m.tile(T(m, (2, 3)), (-1,)),
    lambda m: m.repeat_interleave(T(m, (2, 3)), m.tensor([1, 2, 3])),
    lambda m: m.repeat_interleave(T(m, (2, 3)), m.tensor([1, 2, 3]), dim=0),
    lambda m: m.repeat_interleave(T(m, (2, 3)), m.tensor([1, -1]), dim=0),
    lambda m: m.repeat_interleave(T(m, (2, 3)), -1, dim=0),
    lambda m: m.repeat_interleave(T(m, (2, 3)), m.tensor([1.0, 2.0]), dim=0),
    lambda m: m.repeat_interleave(T(m, (2, 3)), m.tensor([[1, 2]]), dim=0),
    lambda m: m.repeat_interleave(m.tensor([1.0, 0.0, 2.0])),
    lambda m: m.repeat_interleave(m.tensor([[1, 0, 2]])),
    lambda m: m.repeat_interleave(T(m, (2, 3)), m.tensor([1, 2]), dim=0, output_size=4),
    lambda m: m.repeat_interleave(T(m, (2, 3)), 2, dim=0, output_size=5),
    lambda m: m.repeat_interleave(m.tensor([1, 2]), output_size=4),
    lambda m: m.repeat_interleave(T(m, (2, 3)), 2, dim=2),
    lambda m: m.repeat_interleave(m.tensor(3.0), 2, dim=0),
    lambda m: m.repeat_interleave(m.tensor(3.0), m.tensor([2]), dim=0),
])
def test_repeat_errors(fn):
    same_error(fn)


@pytest.mark.parametrize("fn", [
    lambda m: m.tensor(1.0).repeat(()),
    lambda m: T(m, (2, 3)).repeat(m.Size([2, 1])),
    lambda m: m.tile(T(m, (2, 3)), ()),
    lambda m: T(m, (2, 3), "int64").tile((2, 1, 1)),
    lambda m: m.repeat_interleave(m.tensor([1, 0, 2], dtype=m.int32)),
    lambda m: m.repeat_interleave(m.tensor([1, 2]), output_size=3),
    lambda m: m.repeat_interleave(m.tensor(3.0), 2),
    lambda m: m.repeat_interleave(T(m, (2, 3)), m.tensor(2), dim=0),
    lambda m: m.repeat_interleave(T(m, (2, 3), "bool"), 2, dim=-1),
    lambda m: m.repeat_interleave(T(m, (2, 3)), 0, dim=1),
    lambda m: T(m, (2, 3)).repeat_interleave(m.tensor([0, 0, 0]), dim=1),
])
def test_repeat_values(fn):
    same(fn)


# ---- flip / roll / rot90 -----------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: m.flip(T(m, (2, 3)), 0),
    lambda m: m.flip(T(m, (2, 3)), [0, 0]),
    lambda m: m.flip(T(m, (2, 3)), [2]),
    lambda m: m.fliplr(T(m, (3,))),
    lambda m: m.flipud(m.tensor(1.0)),
    lambda m: m.roll(T(m, (2, 3)), (1, 2), (0,)),
    lambda m: m.roll(T(m, (2, 3)), (1,), (0, 1)),
    lambda m: m.roll(T(m, (2, 3)), (), ()),
    lambda m: m.roll(T(m, (2, 3)), (1, 2)),
    lambda m: m.roll(m.tensor(1.0), 1, 0),
    lambda m: m.rot90(T(m, (2, 3)), 1, [0]),
    lambda m: m.rot90(T(m, (2, 3)), 1, [0, 0]),
    lambda m: m.rot90(T(m, (3,)), 1),
    lambda m: m.rot90(T(m, (2, 3)), 1, [0, 2]),
])
def test_flip_roll_errors(fn):
    same_error(fn)


@pytest.mark.parametrize("fn", [
    lambda m: m.flip(T(m, (2, 3)), []),
    lambda m: m.flip(m.tensor(2.0), [0]),
    lambda m: T(m, (2, 3)).flip(0, 1),
    lambda m: m.roll(m.tensor(1.0), 1),
    lambda m: m.roll(m.zeros(0, 3), 1, 0),
    lambda m: m.roll(T(m, (2, 3)), -7),
    lambda m: m.rot90(T(m, (2, 3)), 1, [1, -2]),
    lambda m: m.rot90(T(m, (2, 3, 2)), 5, (2, 0)),
])
def test_flip_roll_values(fn):
    same(fn)


def test_flip_is_a_copy_and_rot90_strides():
    a = ember.arange(6.0).reshape(2, 3)
    f = a.flip(0)
    assert not np.shares_memory(f._data, a._data)
    f.fill_(9.0)
    assert a.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert ember.rot90(a).stride() == torch.rot90(torch.arange(6.0).reshape(2, 3)).stride()


# ---- meshgrid / products / indices -------------------------------------------------------------------

def test_meshgrid_2d_input_error():
    # torch prints the offending tensor after this text; ember prints its repr
    with pytest.raises(RuntimeError, match="torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got"):
        ember.meshgrid(T(ember, (3,)), T(ember, (2, 3)), indexing="ij")
    same_error(lambda m: m.meshgrid(T(m, (3,)), T(m, (2, 3)), indexing="ij"), exact=False)


@pytest.mark.parametrize("fn", [
    lambda m: m.meshgrid(T(m, (3,)), T(m, (2,), "int64"), indexing="ij"),
    lambda m: m.meshgrid(indexing="ij"),
    lambda m: m.meshgrid(T(m, (3,)), indexing="foo"),
    lambda m: m.cartesian_prod(T(m, (2, 3))),
    lambda m: m.cartesian_prod(T(m, (3,)), T(m, (2,), "int64")),
    lambda m: m.combinations(T(m, (4,)), -1),
    lambda m: m.combinations(T(m, (2, 3))),
    lambda m: m.tril_indices(-1, 3),
    lambda m: m.triu_indices(3, -2),
    lambda m: m.triu_indices(3, 4, dtype=m.float32),
])
def test_grid_errors(fn):
    same_error(fn)


def test_meshgrid_views_and_default_indexing():
    x, y = ember.arange(3.0), ember.arange(4.0)
    gx, gy = ember.meshgrid(x, y)                 # default "ij", no warning
    tx, ty = torch.meshgrid(torch.arange(3.0), torch.arange(4.0), indexing="ij")
    assert gx.stride() == tx.stride() and gy.stride() == ty.stride()
    assert gx._base is not None                   # an expanded view of x
    gx2, gy2 = ember.meshgrid([x, y], indexing="xy")
    tx2, ty2 = torch.meshgrid([torch.arange(3.0), torch.arange(4.0)], indexing="xy")
    assert gx2.shape == tuple(tx2.shape) and gx2.stride() == tx2.stride() and gy2.stride() == ty2.stride()
    (g,) = ember.meshgrid(x, indexing="xy")
    assert g.shape == (3,)


def test_cartesian_prod_single_returns_input():
    x = ember.arange(3.0)
    assert ember.cartesian_prod(x) is x


# ---- diagonals ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: m.diag(m.ones(2, 2, 2)),
    lambda m: m.diag(m.tensor(1.0)),
    lambda m: m.diag_embed(T(m, (2, 3)), 0, 1, 1),
    lambda m: m.diag_embed(T(m, (2, 3)), 0, -2, -2),
    lambda m: m.diag_embed(m.tensor(1.0)),
    lambda m: m.diag_embed(T(m, (2, 3)), 0, 0, 3),
    lambda m: m.diag(T(m, (3,)), out=m.empty(0, dtype=m.float64)),
    lambda m: m.block_diag(m.ones(2, 2, 2)),
])
def test_diag_errors(fn):
    same_error(fn)


@pytest.mark.parametrize("fn", [
    lambda m: m.diag(T(m, (2, 3)), 5),
    lambda m: m.diag(T(m, (2, 3)), -2),
    lambda m: m.diag(T(m, (3,), "bool"), 1),
    lambda m: m.diag(T(m, (3,)), out=m.empty(0)),
    lambda m: m.diagflat(m.tensor(1.0)),
    lambda m: m.diagflat(T(m, (2, 2)), -3),
    lambda m: m.diag_embed(T(m, (2, 3, 2)), -2, 3, 1),
    lambda m: m.block_diag(),
    lambda m: m.block_diag(T(m, (2, 2), "int32"), T(m, (3,), "float64")),
    lambda m: m.block_diag(m.tensor(2.0, dtype=m.float64), T(m, (2,))),
    lambda m: m.block_diag(T(m, (0, 3)), m.ones(0), m.tensor(5.0), T(m, (2, 0))),
])
def test_diag_values(fn):
    same(fn)


# ---- atleast / broadcast -----------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: m.atleast_1d(),
    lambda m: m.atleast_2d((T(m, (3,)),)),
    lambda m: m.atleast_3d([m.tensor(1.0), T(m, (2,))]),
    lambda m: m.atleast_3d(T(m, (1, 2, 3, 4))),
    lambda m: m.broadcast_tensors(),
    lambda m: m.broadcast_shapes((2, 3), (3,), 1),
    lambda m: m.broadcast_shapes(),
    lambda m: m.broadcast_shapes((0,), (1,)),
    lambda m: m.broadcast_shapes([5, 1, 3], (4, 1)),
])
def test_atleast_broadcast_values(fn):
    same(fn)


def test_atleast_and_broadcast_are_views():
    x = ember.arange(3.0)
    for f in (ember.atleast_2d, ember.atleast_3d):
        v = f(x)
        assert np.shares_memory(v._data, x._data)
    b = ember.broadcast_tensors(x, ember.zeros(2, 1))[0]
    assert b.shape == (2, 3) and b.stride() == (0, 1)
    assert isinstance(ember.broadcast_shapes((2, 1), (3,)), ember.Size)


@pytest.mark.parametrize("fn", [
    lambda m: m.broadcast_tensors(T(m, (4,)), T(m, (2, 3))),
    lambda m: m.broadcast_shapes((2, 3), (4,)),
    lambda m: m.broadcast_shapes((2, -1), (3,)),
    lambda m: m.broadcast_tensors([T(m, (3, 1)), T(m, (2,))]),
])
def test_broadcast_errors(fn):
    same_error(fn)


# ---- fill_ / zero_ / copy_ ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda m: m.zeros(3).copy_(m.zeros(4)),
    lambda m: m.zeros(3).copy_(m.ones(2, 3)),
    lambda m: m.zeros(2, 3).fill_(m.tensor([1.0])),
    lambda m: m.zeros(2, 3, dtype=m.uint8).fill_(300),
    lambda m: m.zeros(3).expand(2, 3).copy_(m.ones(2, 3)),
    lambda m: m.ones(3, requires_grad=True).fill_(1.0),
    lambda m: m.ones(3, requires_grad=True).zero_(),
    lambda m: m.ones(3, requires_grad=True).copy_(m.ones(3)),
])
def test_write_errors(fn):
    same_error(fn)


def test_fill_on_expanded_view_is_refused():
    # torch writes the one shared location; ember's expanded views are read-only NumPy views, so it
    # refuses with torch's message for overlapping writes (a documented difference)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        ember.zeros(3).expand(2, 3).fill_(1.0)


def test_fill_bad_type():
    same_error(lambda m: m.zeros(2).fill_("a"), exact=False)


@pytest.mark.parametrize("fn", [
    lambda m: m.zeros(2, 3).copy_(m.arange(3)),
    lambda m: m.zeros(2, 3, dtype=m.int64).copy_(m.full((3,), 2.7)),
    lambda m: m.zeros(2, 3, dtype=m.bool).copy_(m.full((3,), 2.7)),
    lambda m: m.zeros(2, 3).copy_(m.tensor(5)),
    lambda m: m.zeros(2, 3).fill_(m.tensor(2.5)),
    lambda m: m.zeros(2, 3, dtype=m.int64).fill_(2.5),
    lambda m: m.zeros(2, 3, dtype=m.int64).fill_(m.tensor(2.5)),
    lambda m: m.zeros(2, 3, dtype=m.bool).fill_(2),
    lambda m: m.zeros(2, 3, dtype=m.bfloat16).fill_(1.3),
    lambda m: m.fill(m.zeros(2, 3), 2),
    lambda m: m.fill_(m.zeros(2, 3), 2),
    lambda m: m.zero_(m.ones(2, 3)),
    lambda m: m.ones(2, 3).zero_(),
])
def test_write_values(fn):
    same(fn)


def test_copy_writes_through_views_and_bumps_version():
    base = ember.zeros(3, 4)
    v = base.narrow(1, 1, 2)
    v0 = base._version
    r = v.copy_(ember.ones(2))
    assert r is v
    assert base._version == v0 + 1
    np.testing.assert_array_equal(base._data, [[0, 1, 1, 0]] * 3)
    base.t().fill_(7.0)
    assert (base._data == 7).all()
    base.zero_()
    assert (base._data == 0).all()


def test_copy_from_overlapping_source():
    for lib in (torch, ember):
        x = lib.arange(5.0)
        x.copy_(x.flip(0))
        assert x.tolist() == [4.0, 3.0, 2.0, 1.0, 0.0]


def test_copy_autograd_matches_torch():
    out = {}
    for lib in (torch, ember):
        a = lib.ones(3, requires_grad=True)
        s = lib.ones(3, dtype=lib.float64, requires_grad=True)
        v = lib.tensor(3.0, requires_grad=True)
        y = a * 2
        y.copy_(s * 3)
        (y * lib.arange(3.0)).sum().backward()
        z = a * 2
        z.fill_(v)
        (z * lib.arange(3.0)).sum().backward()
        w = lib.zeros(3)
        w.copy_(s)                          # a plain tensor starts tracking through copy_
        out[lib] = (a.grad.tolist(), s.grad.tolist(), v.grad.item(), w.requires_grad, s.grad.dtype)
    t, e = out[torch], out[ember]
    assert t[:4] == e[:4]
    assert e[4] is ember.float64
    y = ember.ones(3, requires_grad=True) * 2
    y.copy_(ember.zeros(3))
    assert y.grad_fn.name() == "torch::autograd::CopyBackwards"


def test_inplace_random_on_nonleaf_gives_zero_grad():
    for lib in (torch, ember):
        a = lib.ones(3, requires_grad=True)
        y = a * 2
        y.uniform_()
        y.sum().backward()
        assert a.grad.tolist() == [0.0, 0.0, 0.0]
