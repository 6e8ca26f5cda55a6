"""Sparse CSC matrices against torch: construction, conversions (strided, COO, CSR), CSR.t() -> CSC and back,
the compressed-index accessors, products with strided matrices (values and gradients), printing, pickling."""
import pickle

import numpy as np
import pytest
import torch

import ember

DENSE = np.array([[0., 2., 0., 0.], [3., 0., 4., 0.], [0., 0., 5., 6.]], dtype=np.float32)


def _np(t):
    return t.detach().numpy()


def _both(fn):
    return fn(torch), fn(ember)


def _same_csc(a, b):
    assert str(b.layout).split(".")[-1] == str(a.layout).split(".")[-1] == "sparse_csc"
    assert tuple(b.shape) == tuple(a.shape)
    np.testing.assert_array_equal(_np(b.ccol_indices()), _np(a.ccol_indices()))
    np.testing.assert_array_equal(_np(b.row_indices()), _np(a.row_indices()))
    np.testing.assert_allclose(_np(b.values()), _np(a.values()))
    np.testing.assert_allclose(_np(b.to_dense()), _np(a.to_dense()))


@pytest.mark.parametrize("make", [
    lambda lib: lib.tensor(DENSE).to_sparse_csc(),
    lambda lib: lib.tensor(DENSE).to_sparse(layout=lib.sparse_csc),
    lambda lib: lib.tensor(DENSE).to_sparse_csr().to_sparse_csc(),
    lambda lib: lib.tensor(DENSE).to_sparse().to_sparse_csc(),
    lambda lib: lib.tensor(DENSE.T.copy()).to_sparse_csr().t(),
    lambda lib: lib.sparse_csc_tensor(lib.tensor([0, 1, 2, 4, 5]), lib.tensor([1, 0, 1, 2, 2]),
                                      lib.tensor([3., 2., 4., 5., 6.]), size=(3, 4)),
    lambda lib: lib.sparse_csc_tensor([0, 1, 2, 4, 5], [1, 0, 1, 2, 2], [3., 2., 4., 5., 6.]),
])
def test_csc_construction_matches_torch(make):
    t, e = _both(make)
    _same_csc(t, e)
    assert e.is_sparse is t.is_sparse is False and e.is_sparse_csr is t.is_sparse_csr is False
    assert e._nnz() == t._nnz() and e.sparse_dim() == t.sparse_dim() and e.dense_dim() == t.dense_dim()


def test_csc_conversions_and_transposes_match_torch():
    t, e = _both(lambda lib: lib.tensor(DENSE).to_sparse_csc())
    for conv in (lambda x: x.to_sparse_csr(), lambda x: x.t(), lambda x: x.transpose(0, 1)):
        ct, ce = conv(t), conv(e)
        assert str(ce.layout).split(".")[-1] == str(ct.layout).split(".")[-1] == "sparse_csr"
        np.testing.assert_array_equal(_np(ce.crow_indices()), _np(ct.crow_indices()))
        np.testing.assert_array_equal(_np(ce.col_indices()), _np(ct.col_indices()))
        np.testing.assert_allclose(_np(ce.values()), _np(ct.values()))
    ct, ce = t.to_sparse_coo(), e.to_sparse_coo()
    assert ce.is_sparse and ce.is_coalesced() == ct.is_coalesced()
    np.testing.assert_allclose(_np(ce.to_dense()), _np(ct.to_dense()))
    _same_csc(t.t().t(), e.t().t())
    _same_csc(t * 2, e * 2)
    _same_csc(-t, -e)
    _same_csc(t.to(torch.float64), e.to(ember.float64))
    assert e.to(ember.float64).dtype is ember.float64
    assert float(e.sum()) == pytest.approx(float(t.sum()))


def test_csc_accessor_errors_match_torch():
    t, e = _both(lambda lib: lib.tensor(DENSE).to_sparse_csc())
    for name in ("crow_indices", "col_indices", "indices"):
        with pytest.raises(RuntimeError) as te:
            getattr(t, name)()
        with pytest.raises(RuntimeError) as ee:
            getattr(e, name)()
        assert str(ee.value) == str(te.value)


@pytest.mark.parametrize("op", [
    lambda lib, s, d: s @ d,
    lambda lib, s, d: lib.mm(s, d),
    lambda lib, s, d: lib.matmul(s, d[:, 0]),
    lambda lib, s, d: lib.addmm(lib.ones(3, 2), s, d),
    lambda lib, s, d: d.t()[:, :3] @ s,
    lambda lib, s, d: s.t() @ lib.ones(3, 2),
])
def test_csc_products_and_gradients_match_torch(op):
    dn = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
    res = {}
    for lib in (torch, ember):
        v = lib.tensor([3., 2., 4., 5., 6.], requires_grad=True)
        s = lib.sparse_csc_tensor(lib.tensor([0, 1, 2, 4, 5]), lib.tensor([1, 0, 1, 2, 2]), v, size=(3, 4))
        d = lib.tensor(dn, requires_grad=True)
        out = op(lib, s, d)
        out.sum().backward()
        res[lib.__name__] = (_np(out), _np(v.grad), None if d.grad is None else _np(d.grad))
    (to, tv, td), (eo, ev, ed) = res["torch"], res["ember"]
    np.testing.assert_allclose(eo, to, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ev, tv, rtol=1e-5, atol=1e-6)
    if td is not None:
        np.testing.assert_allclose(ed, td, rtol=1e-5, atol=1e-6)


def test_csc_repr_and_pickle():
    t, e = _both(lambda lib: lib.tensor(DENSE).to_sparse_csc())
    assert repr(e) == repr(t).replace("torch.", "ember.")
    back = pickle.loads(pickle.dumps(e))
    _same_csc(t, back)


def test_csc_bad_input_matches_torch():
    for args in (([0, 1, 3], [0, 1], [1., 2.]),            # ccol's last entry is not nnz
                 ([0, 2, 2], [1, 0], [1., 2.]),            # rows not sorted within a column
                 ([0, 1, 2], [0, 5], [1., 2.], (3, 2))):   # a row out of range
        for lib in (torch, ember):
            with pytest.raises(RuntimeError):
                lib.sparse_csc_tensor(*[lib.tensor(a) for a in args[:3]], *args[3:], check_invariants=True).to_dense()
    with pytest.raises(RuntimeError, match="dense_dim"):
        ember.tensor(DENSE).to_sparse_csc(dense_dim=1)


def test_csc_save_load_across_libraries():
    import io
    for weights_only in (True, False):
        buf = io.BytesIO()
        ember.save({"a": ember.tensor(DENSE).to_sparse_csc(), "w": ember.ones(2)}, buf)
        buf.seek(0)
        t = torch.load(buf, weights_only=weights_only)["a"]
        assert t.layout == torch.sparse_csc
        np.testing.assert_array_equal(t.to_dense().numpy(), DENSE)
        buf = io.BytesIO()
        torch.save({"a": torch.tensor(DENSE).to_sparse_csc()}, buf)
        buf.seek(0)
        e = ember.load(buf, weights_only=weights_only)["a"]
        assert e.layout == ember.sparse_csc
        np.testing.assert_array_equal(e.ccol_indices().numpy(), [0, 1, 2, 4, 5])
        np.testing.assert_array_equal(_np(e.to_dense()), DENSE)
        buf = io.BytesIO()
        ember.save(e, buf)
        buf.seek(0)
        np.testing.assert_array_equal(_np(ember.load(buf).to_dense()), DENSE)
