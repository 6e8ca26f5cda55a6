"""Sparse COO tensors (ember.sparse) against torch: construction, layout predicates, coalescing, products,
reductions, softmax, arithmetic, autograd, printing, pickling and checkpoints in both directions."""
import copy
import io
import pickle
import warnings

import numpy as np
import pytest
import torch

import ember

pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks")

IDX = [[0, 1, 1, 0, 2], [2, 0, 2, 2, 1]]
VAL = [3., 4., 5., 1., -2.]


def both(idx=IDX, val=VAL, size=(3, 3), dtype="float32", **kw):
    t = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(val, dtype=getattr(torch, dtype)), size, **kw)
    e = ember.sparse_coo_tensor(ember.tensor(idx), ember.tensor(val, dtype=getattr(ember, dtype)), size, **kw)
    return t, e


def same(t, e, tol=1e-6):
    if t.is_sparse:
        assert e.is_sparse and e.layout is ember.sparse_coo
        t, e = t.to_dense(), e.to_dense()
    assert tuple(t.shape) == tuple(e.shape)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def test_construction_and_metadata():
    t, e = both()
    assert e.is_sparse and not ember.zeros(2).is_sparse
    assert e.layout == ember.sparse_coo and ember.zeros(2).layout is ember.strided
    assert str(e.layout) == "ember.sparse_coo" and repr(ember.strided) == "ember.strided"
    assert isinstance(e, ember.Tensor)
    assert tuple(e.shape) == tuple(t.shape) and e.dim() == 2 and e.numel() == t.numel()
    assert e._nnz() == t._nnz() and e.sparse_dim() == t.sparse_dim() and e.dense_dim() == t.dense_dim()
    assert e.is_coalesced() == t.is_coalesced() is False
    assert e.dtype is ember.float32
    # size inferred from the indices; list inputs; dtype argument
    t2 = torch.sparse_coo_tensor(IDX, VAL)
    e2 = ember.sparse_coo_tensor(IDX, VAL)
    assert tuple(e2.shape) == tuple(t2.shape)
    assert ember.sparse_coo_tensor(IDX, [1, 2, 3, 4, 5]).dtype is ember.int64
    assert ember.sparse_coo_tensor(IDX, VAL, dtype=ember.float64).dtype is ember.float64
    same(t, e)


def test_hybrid_tensor_to_dense_and_back():
    vals = np.arange(15, dtype=np.float32).reshape(5, 3)
    t = torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(vals), (3, 3, 3))
    e = ember.sparse_coo_tensor(ember.tensor(IDX), ember.tensor(vals), (3, 3, 3))
    assert e.dense_dim() == 1 and e.sparse_dim() == 2
    same(t, e)
    d = np.where(np.random.RandomState(0).rand(4, 5, 2) > 0.6, 1.0, 0.0).astype(np.float32)
    for sd in (None, 1, 2):
        ts, es = torch.tensor(d).to_sparse(*(() if sd is None else (sd,))), ember.tensor(d).to_sparse(*(() if sd is None else (sd,)))
        assert es._nnz() == ts._nnz() and es.sparse_dim() == ts.sparse_dim() and es.is_coalesced()
        np.testing.assert_array_equal(es._indices().numpy(), ts._indices().numpy())
        same(ts, es)


@pytest.mark.parametrize("bad", [
    dict(idx=[[0, 5]], val=[1., 2.], size=(2,)),          # index past the size
    dict(idx=[[0, -1]], val=[1., 2.], size=(2,)),         # negative index
    dict(idx=[[0, 1]], val=[1., 2., 3.], size=(2,)),      # nnz mismatch
    dict(idx=[0, 1], val=[1., 2.], size=(2,)),            # indices not 2-D
    dict(idx=[[0, 1], [0, 1]], val=[1., 2.], size=(2,)),  # len(size) != sparse_dim + dense_dim
])
def test_bad_construction_raises_runtime_error(bad):
    with pytest.raises(RuntimeError):
        ember.sparse_coo_tensor(bad["idx"], bad["val"], bad["size"])


def test_coalesce_indices_values():
    t, e = both()
    with pytest.raises(RuntimeError, match="uncoalesced"):
        e.indices()
    with pytest.raises(RuntimeError, match="uncoalesced"):
        e.values()
    tc, ec = t.coalesce(), e.coalesce()
    assert ec.is_coalesced() and ec.coalesce() is ec
    np.testing.assert_array_equal(ec.indices().numpy(), tc.indices().numpy())
    np.testing.assert_array_equal(ec.values().numpy(), tc.values().numpy())
    np.testing.assert_array_equal(e._indices().numpy(), t._indices().numpy())
    np.testing.assert_array_equal(e._values().numpy(), t._values().numpy())
    assert ec.indices().dtype is ember.int64


def test_transpose_and_t():
    t, e = both(size=(3, 4))
    same(t.t(), e.t())
    same(t.transpose(0, 1), e.transpose(0, 1))
    assert tuple(e.t().shape) == (4, 3)


@pytest.mark.parametrize("right", ["matrix", "vector"])
def test_products(right):
    t, e = both(size=(3, 4))
    d = np.random.RandomState(1).randn(4, 5).astype(np.float32) if right == "matrix" else \
        np.random.RandomState(1).randn(4).astype(np.float32)
    td, ed = torch.tensor(d), ember.tensor(d)
    ref = torch.sparse.mm(t, td) if right == "matrix" else t @ td
    for got in ([ember.sparse.mm(e, ed), ember.mm(e, ed), ember.spmm(e, ed), e.mm(ed)] if right == "matrix" else []) + \
            [e @ ed, ember.matmul(e, ed), e.matmul(ed)]:
        assert not got.is_sparse
        same(ref, got, 1e-5)
    if right == "matrix":       # dense @ sparse, through the function forms
        dl = np.random.RandomState(2).randn(2, 3).astype(np.float32)
        same(torch.tensor(dl) @ t, ember.mm(ember.tensor(dl), e), 1e-5)
        bias = np.ones((3, 5), np.float32)
        same(torch.sparse.addmm(torch.tensor(bias), t, td, beta=0.5, alpha=2.0),
             ember.sparse.addmm(ember.tensor(bias), e, ed, beta=0.5, alpha=2.0), 1e-5)


def test_product_errors():
    t, e = both(size=(3, 4))
    with pytest.raises(RuntimeError):
        ember.sparse.mm(e, ember.ones(3, 2))
    with pytest.raises(RuntimeError, match="Double"):
        ember.sparse.mm(e, ember.ones(4, 2, dtype=ember.float64))


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)])
def test_sparse_sum(dim):
    t, e = both()
    ref = torch.sparse.sum(t) if dim is None else torch.sparse.sum(t, dim)
    got = ember.sparse.sum(e) if dim is None else ember.sparse.sum(e, dim)
    assert got.is_sparse == ref.is_sparse
    same(ref, got)
    if dim is not None and ref.is_sparse:
        assert got.is_coalesced() and got._nnz() == ref._nnz()
        same(t.sum(dim), e.sum(dim))
    assert float(e.sum()) == pytest.approx(float(t.sum()))


def test_sparse_sum_hybrid_dense_dim():
    vals = np.arange(15, dtype=np.float32).reshape(5, 3)
    t = torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(vals), (3, 3, 3))
    e = ember.sparse_coo_tensor(ember.tensor(IDX), ember.tensor(vals), (3, 3, 3))
    for dim in (2, (1, 2), 1):
        same(torch.sparse.sum(t, dim), ember.sparse.sum(e, dim))


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_sparse_softmax(fn, dim):
    t, e = both()
    ref = getattr(torch.sparse, fn)(t, dim)
    got = getattr(ember.sparse, fn)(e, dim)
    np.testing.assert_array_equal(got._indices().numpy(), ref.coalesce()._indices().numpy())
    np.testing.assert_allclose(got._values().detach().numpy(), ref.coalesce()._values().numpy(), rtol=1e-5, atol=1e-6)


def test_arithmetic():
    t, e = both()
    t2, e2 = both(idx=[[2, 0, 1], [2, 2, 1]], val=[1., 7., 3.])
    for f in (lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a.add(b, alpha=2)):
        r, g = f(t, t2), f(e, e2)
        assert g.is_sparse
        same(r, g)
    assert (e + e2).is_coalesced()
    same(t * 2.5, e * 2.5)
    same(2.5 * t, 2.5 * e)
    same(t / 4, e / 4)
    same(-t, -e)
    dense = np.arange(9, dtype=np.float32).reshape(3, 3)
    same(t * torch.tensor(dense), e * ember.tensor(dense))
    assert (e * 2).is_sparse and (e * 2).is_coalesced() == (t * 2).is_coalesced()
    with pytest.raises(RuntimeError, match="add\\(sparse, dense\\)"):
        e + ember.ones(3, 3)
    with pytest.raises(RuntimeError):
        e + ember.sparse_coo_tensor([[0]], [1.], (4,))
    same(t.double(), e.double())
    assert e.double().dtype is ember.float64 and e.to(ember.float64).dtype is ember.float64


@pytest.mark.parametrize("call", [lambda s: s.exp(), lambda s: s.view(-1), lambda s: ember.cumsum(s, 0),
                                  lambda s: ember.softmax(s, 1), lambda s: s.relu()])
def test_unsupported_ops_raise_not_implemented_naming_the_layout(call):
    _, e = both()
    with pytest.raises(NotImplementedError, match="sparse_coo"):
        call(e)


def test_numpy_refused_like_torch():
    _, e = both()
    with pytest.raises(TypeError, match="to_dense"):
        e.numpy()


def _grad_pair(lib):
    rng = np.random.RandomState(3)
    v = lib.tensor(np.array(VAL, np.float64), requires_grad=True)
    d = lib.tensor(rng.randn(4, 2), requires_grad=True)
    s = lib.sparse_coo_tensor(lib.tensor(IDX), v, (3, 4))
    out = lib.sparse.mm(s, d) if lib is torch else lib.sparse.mm(s, d)
    (out.pow(2).sum() + (s.coalesce() * 3).to_dense().sin().sum() + lib.sparse.sum(s.t(), 1).to_dense().pow(2).sum()
     + lib.sparse.softmax(s, 1).to_dense().pow(3).sum()).backward()
    return v.grad, d.grad, s.grad_fn


def test_autograd_through_values_and_dense_operand():
    tv, td, tfn = _grad_pair(torch)
    ev, ed, efn = _grad_pair(ember)
    same(tv, ev, 1e-9)
    same(td, ed, 1e-9)
    assert type(efn).__name__ == type(tfn).__name__ == "SparseCooTensorWithDimsAndTensorsBackward0"


def test_gradcheck_sparse_mm_values():
    v = ember.tensor(np.array(VAL, np.float64), requires_grad=True)
    d = ember.tensor(np.random.RandomState(0).randn(4, 2), requires_grad=True)

    def f(v, d):
        return ember.sparse.mm(ember.sparse_coo_tensor(IDX, v, (3, 4)), d)
    assert ember.autograd.gradcheck(f, (v, d))
    assert ember.autograd.gradgradcheck(f, (v, d))


def test_sparse_leaf_gradient_is_sparse_and_coalesced():
    t, e = both(size=(3, 4), dtype="float64", requires_grad=True)
    assert e.requires_grad and e.is_leaf and e.grad_fn is None
    d = np.random.RandomState(5).randn(4, 2)
    (torch.sparse.mm(t, torch.tensor(d)) ** 2).sum().backward()
    (ember.sparse.mm(e, ember.tensor(d)) ** 2).sum().backward()
    assert e.grad.is_sparse
    same(t.grad, e.grad, 1e-9)
    np.testing.assert_array_equal(e.grad._indices().numpy(), t.grad._indices().numpy())
    np.testing.assert_allclose(e.grad._values().numpy(), t.grad._values().numpy(), rtol=1e-9)


def _text(x):
    return repr(x).replace("torch.", "ember.")


@pytest.mark.parametrize("case", ["plain", "coalesced", "float64_rg", "int", "empty", "hybrid", "grad_fn"])
def test_printing_matches_torch(case):
    if case == "plain":
        t, e = both()
    elif case == "coalesced":
        t, e = (x.coalesce() for x in both())
    elif case == "float64_rg":
        t, e = both(dtype="float64", requires_grad=True)
    elif case == "int":
        t, e = both(val=[1, 2, 3, 4, 5], dtype="int32")
    elif case == "empty":
        t = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, 3), (4, 4, 3))
        e = ember.sparse_coo_tensor(ember.zeros(2, 0, dtype=ember.int64), ember.zeros(0, 3), (4, 4, 3))
    elif case == "hybrid":
        t = torch.sparse_coo_tensor(torch.tensor([[0, 1, 1]]), torch.tensor([[3., 4], [5, 6], [1, 1]]), (2, 2))
        e = ember.sparse_coo_tensor(ember.tensor([[0, 1, 1]]), ember.tensor([[3., 4], [5, 6], [1, 1]]), (2, 2))
    else:
        tv, ev = torch.tensor(VAL, requires_grad=True), ember.tensor(VAL, requires_grad=True)
        t = torch.sparse_coo_tensor(torch.tensor(IDX), tv, (3, 3))
        e = ember.sparse_coo_tensor(ember.tensor(IDX), ev, (3, 3))
    assert repr(e) == _text(t)


def _roundtrip_same(e, back):
    assert back.is_sparse and back.is_coalesced() == e.is_coalesced()
    np.testing.assert_array_equal(back._indices().numpy(), e._indices().numpy())
    np.testing.assert_array_equal(back._values().detach().numpy(), e._values().detach().numpy())
    assert tuple(back.shape) == tuple(e.shape) and back.dtype == e.dtype


@pytest.mark.parametrize("weights_only", [True, False])
def test_checkpoints_both_ways(weights_only):
    t, e = both(dtype="float64")
    # ember -> torch
    buf = io.BytesIO()
    ember.save({"raw": e, "c": e.coalesce()}, buf)
    buf.seek(0)
    got = torch.load(buf, weights_only=weights_only)
    for k, x in (("raw", t), ("c", t.coalesce())):
        assert got[k].is_sparse and got[k].is_coalesced() == x.is_coalesced()
        assert torch.equal(got[k].to_dense(), x.to_dense())
        assert torch.equal(got[k]._indices(), x._indices())
    # torch -> ember
    buf = io.BytesIO()
    torch.save({"raw": t, "c": t.coalesce()}, buf)
    buf.seek(0)
    back = ember.load(buf, weights_only=weights_only)
    _roundtrip_same(e, back["raw"])
    _roundtrip_same(e.coalesce(), back["c"])


def test_plain_pickle_and_deepcopy():
    _, e = both()
    _roundtrip_same(e, pickle.loads(pickle.dumps(e)))
    c = copy.deepcopy(e)
    _roundtrip_same(e, c)
    assert c._data.values is not e._data.values


def test_compiled_functions_with_sparse_tensors_match_eager():
    _, s = both(size=(3, 4))
    w = ember.tensor(np.random.RandomState(4).randn(4, 2), dtype=ember.float32, requires_grad=True)

    def closure(x):
        return ember.spmm(s, x @ w).tanh().sum()

    def argument(adj, x):
        return (adj @ (x @ w)).tanh().sum()

    x = ember.tensor(np.random.RandomState(5).randn(4, 4), dtype=ember.float32)
    ref = closure(x)
    ref.backward()
    gref = w.grad.numpy().copy()
    for f, args in ((ember.compile(closure), (x,)), (ember.compile(argument), (s, x))):
        for _ in range(2):
            w.grad = None
            out = f(*args)
            out.backward()
            np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-5)
            np.testing.assert_allclose(w.grad.numpy(), gref, rtol=1e-5, atol=1e-6)


def test_legacy_constructors_and_T():
    t, e = both()
    same(torch.sparse.FloatTensor(torch.tensor(IDX), torch.tensor(VAL), torch.Size([3, 3])),
         ember.sparse.FloatTensor(ember.tensor(IDX), ember.tensor(VAL), ember.Size([3, 3])))
    empty = ember.sparse.DoubleTensor(2, 3)
    assert empty.is_sparse and tuple(empty.shape) == (2, 3) and empty._nnz() == 0 and empty.dtype is ember.float64
    same(t.T, e.T)


def test_sparse_buffer_in_a_module_state_dict_and_dtype():
    class M(ember.nn.Module):
        def __init__(self, vals):
            super().__init__()
            self.register_buffer("adj", ember.sparse_coo_tensor(IDX, vals, (3, 3)))

    m = M(VAL).double()
    assert m.adj.is_sparse and m.adj.dtype is ember.float64
    sd = m.state_dict()
    m2 = M([0.0] * len(VAL)).double()
    m2.load_state_dict(sd)
    same(torch.sparse_coo_tensor(IDX, VAL, (3, 3), dtype=torch.float64), m2.adj)
    with pytest.raises(RuntimeError, match="between dense and sparse"):
        m2.adj.copy_(ember.zeros(3, 3))


def test_inplace_ops_and_repeated_backward_accumulate_sparse_grads():
    t, e = both(size=(3, 4), dtype="float64", requires_grad=True)
    d = np.ones((4, 2))
    for _ in range(2):
        torch.sparse.mm(t, torch.tensor(d)).sum().backward()
        ember.sparse.mm(e, ember.tensor(d)).sum().backward()
    assert e.grad.is_sparse
    same(t.grad, e.grad)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        e.mul_(2)
    t2, e2 = both()
    t2.mul_(3).add_(t2)
    e2.mul_(3).add_(e2)
    same(t2, e2)
    e2.zero_()
    t2.zero_()
    assert e2._nnz() == t2._nnz() == 0 and tuple(e2.shape) == (3, 3)


def test_dense_with_sparse_right_operand():
    t, e = both(size=(3, 4))
    d = np.random.RandomState(6).randn(3, 4).astype(np.float32)
    td, ed = torch.tensor(d, requires_grad=True), ember.tensor(d, requires_grad=True)
    for f in (lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b):
        r, g = f(td, t), f(ed, e)
        assert g.is_sparse == r.is_sparse
        same(r, g)
    m = np.random.RandomState(7).randn(2, 3).astype(np.float32)
    same(torch.tensor(m) @ t, ember.tensor(m) @ e, 1e-5)
    (ed + e).sum().backward()
    np.testing.assert_array_equal(ed.grad.numpy(), np.ones((3, 4)))
    with pytest.raises(RuntimeError, match="add\\(sparse, dense\\)"):
        0 + e
    with pytest.raises(RuntimeError, match="Sparse division"):
        ed / e
