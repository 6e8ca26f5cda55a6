"""Sparse CSR matrices (ember/sparse/_csr.py) and COO @ COO against torch: construction and conversion,
crow/col/values, products with strided matrices and their gradients, to_dense / to_sparse_coo, repr, the
checks on bad input, and saving in torch's checkpoint format."""
import io
import warnings

import numpy as np
import pytest
import torch

import ember
from oracle import same_error

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
warnings.filterwarnings("ignore", message="Sparse invariant checks")

D = np.array([[0.0, 2.0, 0.0, 0.0], [1.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0], [4.0, 0.0, 0.0, 5.0]], np.float32)


def _np(t):
    return t.detach().numpy()


def test_conversion_and_parts_match_torch():
    for make in (lambda L: L.tensor(D).to_sparse_csr(), lambda L: L.tensor(D).to_sparse().to_sparse_csr(),
                 lambda L: L.sparse_csr_tensor(L.tensor([0, 1, 3, 3, 5]), L.tensor([1, 0, 2, 0, 3]),
                                               L.tensor([2.0, 1.0, 3.0, 4.0, 5.0]), (4, 4))):
        t, e = make(torch), make(ember)
        assert e.layout == ember.sparse_csr and e.is_sparse_csr and not e.is_sparse
        assert str(e.layout).replace("ember", "torch") == str(t.layout)
        for part in ("crow_indices", "col_indices", "values"):
            np.testing.assert_array_equal(_np(getattr(e, part)()), _np(getattr(t, part)()))
        assert e._nnz() == t._nnz() and tuple(e.shape) == tuple(t.shape)
        np.testing.assert_array_equal(_np(e.to_dense()), _np(t.to_dense()))
        assert repr(e).replace("ember", "torch") == repr(t)
        coo = e.to_sparse_coo()
        assert coo.layout == ember.sparse_coo
        np.testing.assert_array_equal(_np(coo.to_dense()), D)
    t = torch.sparse_csr_tensor(torch.tensor([0, 1, 3]), torch.tensor([1, 0, 2]), torch.tensor([1.0, 2.0, 3.0]))
    e = ember.sparse_csr_tensor(ember.tensor([0, 1, 3]), ember.tensor([1, 0, 2]), ember.tensor([1.0, 2.0, 3.0]))
    assert tuple(e.shape) == tuple(t.shape) == (2, 3)
    assert repr(ember.tensor(D, dtype=ember.float64).to_sparse_csr()).replace("ember", "torch") == \
        repr(torch.tensor(D, dtype=torch.float64).to_sparse_csr())


@pytest.mark.parametrize("form", ["matmul_op", "mm", "matmul", "sparse_mm", "method"])
def test_products_and_gradients_match_torch(form):
    rng = np.random.RandomState(0)
    w = rng.randn(4, 3).astype(np.float32)
    res = []
    for L in (torch, ember):
        v = L.tensor([2.0, 1.0, 3.0, 4.0, 5.0], requires_grad=True)
        s = L.sparse_csr_tensor(L.tensor([0, 1, 3, 3, 5]), L.tensor([1, 0, 2, 0, 3]), v, (4, 4))
        W = L.tensor(w, requires_grad=True)
        out = {"matmul_op": lambda: s @ W, "mm": lambda: L.mm(s, W), "matmul": lambda: L.matmul(s, W),
               "sparse_mm": lambda: L.sparse.mm(s, W), "method": lambda: s.matmul(W)}[form]()
        (out * L.tensor(np.arange(12.0, dtype=np.float32).reshape(4, 3))).sum().backward()
        res.append((_np(out), _np(v.grad), _np(W.grad)))
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)


def test_coo_times_coo_matches_torch():
    rng = np.random.RandomState(1)
    b = (rng.rand(4, 3) < 0.5) * rng.randn(4, 3)
    res = []
    for L in (torch, ember):
        va = L.tensor(D).to_sparse().coalesce()
        vals = va.values().detach().clone().requires_grad_()
        a = L.sparse_coo_tensor(va.indices(), vals, (4, 4))
        out = L.sparse.mm(a, L.tensor(b.astype(np.float32)).to_sparse())
        assert out.layout == L.sparse_coo
        out.to_dense().sum().backward()
        res.append((_np(out.to_dense()), _np(vals.grad)))
    for x, y in zip(*res):
        np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-6)


CHECK = {"check_invariants": True}


@pytest.mark.parametrize("call", [
    lambda L: L.sparse_csr_tensor(L.tensor([0, 1, 3]), L.tensor([1, 0]), L.tensor([1.0, 2.0]), (2, 3), **CHECK),
    lambda L: L.sparse_csr_tensor(L.tensor([0, 2, 2]), L.tensor([1, 0]), L.tensor([1.0, 2.0]), (2, 3), **CHECK),
    lambda L: L.sparse_csr_tensor(L.tensor([0, 1, 2]), L.tensor([1, 5]), L.tensor([1.0, 2.0]), (2, 3), **CHECK),
    lambda L: L.sparse_csr_tensor(L.tensor([0, 1, 2]), L.tensor([1, 0]), L.tensor([1.0, 2.0, 3.0]), (2, 3), **CHECK),
])
def test_bad_csr_input_raises_runtime_error_like_torch(call):
    # (torch checks with check_invariants=True; ember always checks)
    same_error(call, exact=False)


def test_save_load_across_libraries():
    buf = io.BytesIO()
    ember.save({"a": ember.tensor(D).to_sparse_csr()}, buf)
    buf.seek(0)
    t = torch.load(buf, weights_only=True)["a"]
    assert t.layout == torch.sparse_csr
    np.testing.assert_array_equal(t.to_dense().numpy(), D)
    buf = io.BytesIO()
    torch.save({"a": torch.tensor(D).to_sparse_csr()}, buf)
    buf.seek(0)
    e = ember.load(buf)["a"]
    assert e.layout == ember.sparse_csr
    np.testing.assert_array_equal(_np(e.to_dense()), D)
