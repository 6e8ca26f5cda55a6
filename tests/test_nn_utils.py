"""ember.nn.utils against torch.nn.utils: gradient clipping, parameter vectors, RNN sequence utilities."""
import warnings

import numpy as np
import pytest
import torch

import ember

RS = np.random.RandomState(0)
SHAPES = [(3, 4), (5,), (2, 2, 3)]


def _params(lib, dtype="float32", scale=1.0, seed=0, grads=True):
    rs = np.random.RandomState(seed)
    out = []
    for s in SHAPES:
        p = lib.tensor(rs.randn(*s), dtype=getattr(lib, dtype), requires_grad=True)
        if grads:
            p.grad = lib.tensor(rs.randn(*s) * scale, dtype=getattr(lib, dtype))
        out.append(p)
    return out


def _check_weighted_sum_grads(out_t, out_e, w, leaves_t, leaves_e):
    """Backpropagate ``sum(out * w)`` in torch and ember; the leaves' gradients must be equal."""
    (out_t * torch.tensor(w)).sum().backward()
    (out_e * ember.tensor(w)).sum().backward()
    for a, b in zip(leaves_e, leaves_t):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def _grads(params):
    return [p.grad.numpy().copy() if p.grad is not None else None for p in params]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, 0.5, 0, float("inf"), -float("inf"), "inf", -1.5])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(norm_type, max_norm, dtype):
    pt, pe = _params(torch, dtype), _params(ember, dtype)
    nt = torch.nn.utils.clip_grad_norm_(pt, max_norm, norm_type)
    ne = ember.nn.utils.clip_grad_norm_(pe, max_norm, norm_type)
    assert str(ne.dtype).replace("ember", "torch") == str(nt.dtype) and ne.shape == () and nt.shape == ()
    rtol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(ne.numpy(), nt.numpy(), rtol=rtol)
    for a, b in zip(_grads(pe), _grads(pt)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-7)


def test_clip_grad_norm_in_place_and_skips_missing_grads():
    for lib in (torch, ember):
        ps = _params(lib)
        ps[1].grad = None
        g0 = ps[0].grad
        total = lib.nn.utils.clip_grad_norm_(ps, 0.1)
        assert ps[0].grad is g0 and ps[1].grad is None
        expect = np.sqrt(sum((g ** 2).sum() for g in _grads(_params(lib)) if g is not None) - (
            _grads(_params(lib))[1] ** 2).sum())
        np.testing.assert_allclose(float(total), expect, rtol=1e-5)
        np.testing.assert_allclose(float(lib.nn.utils.get_total_norm([p.grad for p in ps if p.grad is not None])),
                                   0.1, rtol=1e-4)


def test_clip_grad_norm_single_tensor_and_generator():
    for lib in (torch, ember):
        p = lib.tensor([3.0, 4.0], requires_grad=True)
        p.grad = lib.tensor([3.0, 4.0])
        assert float(lib.nn.utils.clip_grad_norm_(p, 1.0)) == 5.0
        np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)
        with pytest.warns(UserWarning, match="empty generator"):
            n = lib.nn.utils.clip_grad_norm_((q for q in []), 1.0)
        assert float(n) == 0.0 and n.dtype == lib.float32


def test_clip_grad_norm_mixed_dtypes_and_half():
    out = []
    for lib in (torch, ember):
        a = lib.tensor(RS.randn(4), dtype=lib.float32, requires_grad=True)
        b = lib.tensor(RS.randn(3), dtype=lib.float64, requires_grad=True)
        rs = np.random.RandomState(1)
        a.grad = lib.tensor(rs.randn(4), dtype=lib.float32)
        b.grad = lib.tensor(rs.randn(3), dtype=lib.float64)
        n = lib.nn.utils.clip_grad_norm_([a, b], 0.5)
        h = lib.zeros(5, dtype=lib.float16, requires_grad=True)
        h.grad = lib.tensor(rs.randn(5), dtype=lib.float16)
        nh = lib.nn.utils.clip_grad_norm_([h], 0.5)
        out.append((n.numpy(), str(n.dtype), a.grad.numpy(), b.grad.numpy(), nh.numpy(), str(nh.dtype),
                    h.grad.numpy()))
    t, e = out
    assert t[1] == e[1].replace("ember", "torch") and t[5] == e[5].replace("ember", "torch")
    for i in (0, 2, 3):
        np.testing.assert_allclose(e[i], t[i], rtol=1e-6)
    np.testing.assert_allclose(e[4], t[4], rtol=1e-3)
    np.testing.assert_allclose(e[6], t[6], rtol=1e-3)


def test_clip_grad_norm_nonfinite():
    for lib in (torch, ember):
        p = lib.ones(3, requires_grad=True)
        p.grad = lib.tensor([1.0, float("nan"), 2.0])
        with pytest.raises(RuntimeError, match="non-finite, so it cannot be clipped"):
            lib.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
        n = lib.nn.utils.clip_grad_norm_([p], 1.0)
        assert np.isnan(float(n)) and np.isnan(p.grad.numpy()).all()
        p.grad = lib.tensor([1.0, float("inf"), 0.0])
        with pytest.raises(RuntimeError, match="non-finite"):
            lib.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
        with pytest.raises(RuntimeError, match="cannot compute the infinity norm on an empty tensor"):
            lib.nn.utils.get_total_norm([lib.zeros(0)], "inf")
        with pytest.raises(ValueError, match="could not convert string to float"):
            lib.nn.utils.get_total_norm([lib.ones(2)], "fro")


def test_get_total_norm_and_clip_grads_with_norm():
    for norm_type in [2.0, 1.0, 0, float("inf")]:
        gt = [torch.tensor(RS.randn(*s), dtype=torch.float32) for s in SHAPES]
        ge = [ember.tensor(g.numpy()) for g in gt]
        nt = torch.nn.utils.get_total_norm(gt, norm_type)
        ne = ember.nn.utils.get_total_norm(ge, norm_type)
        np.testing.assert_allclose(ne.numpy(), nt.numpy(), rtol=1e-6)
        pt, pe = _params(torch), _params(ember)
        torch.nn.utils.clip_grads_with_norm_(pt, 1.0, nt)
        ember.nn.utils.clip_grads_with_norm_(pe, 1.0, ne)
        for a, b in zip(_grads(pe), _grads(pt)):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    assert float(ember.nn.utils.get_total_norm([])) == 0.0
    assert float(ember.nn.utils.get_total_norm(ember.tensor([3.0, 4.0]))) == 5.0


def test_clip_grad_norm_deprecated_alias():
    for lib in (torch, ember):
        ps = _params(lib)
        with pytest.warns(FutureWarning, match="deprecated in favor of"):
            lib.nn.utils.clip_grad_norm(ps, 1.0)


@pytest.mark.parametrize("foreach", [None, True, False])
def test_clip_grad_value_matches_torch(foreach):
    pt, pe = _params(torch, scale=3.0), _params(ember, scale=3.0)
    pt[1].grad = None
    pe[1].grad = None
    g0 = pe[0].grad
    assert torch.nn.utils.clip_grad_value_(pt, 1.5, foreach=foreach) is None
    assert ember.nn.utils.clip_grad_value_(pe, 1.5, foreach=foreach) is None
    assert pe[0].grad is g0
    for a, b in zip(_grads(pe), _grads(pt)):
        if b is None:
            assert a is None
        else:
            np.testing.assert_array_equal(a, b)
    p = ember.tensor([1.0, 2.0], requires_grad=True)
    p.grad = ember.tensor([-5.0, float("nan")])
    ember.nn.utils.clip_grad_value_(p, 2)
    assert p.grad.numpy()[0] == -2.0 and np.isnan(p.grad.numpy()[1])


def test_clipping_then_optimizer_step_matches_torch():
    res = []
    for lib in (torch, ember):
        rs = np.random.RandomState(3)
        W = lib.tensor(rs.randn(4, 3), requires_grad=True)
        X, Y = lib.tensor(rs.randn(16, 3)), lib.tensor(rs.randn(16, 4))
        opt = lib.optim.SGD([W], lr=0.1, momentum=0.9)
        norms = []
        for _ in range(10):
            opt.zero_grad()
            (((X @ W.T - Y) ** 2).sum()).backward()
            norms.append(float(lib.nn.utils.clip_grad_norm_([W], 1.0)))
            opt.step()
        res.append((W.detach().numpy(), norms))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-5)


# ---- parameters_to_vector / vector_to_parameters ---------------------------------------------------------
def test_parameters_to_vector():
    pt, pe = _params(torch, grads=False), _params(ember, grads=False)
    vt = torch.nn.utils.parameters_to_vector(pt)
    ve = ember.nn.utils.parameters_to_vector(pe)
    np.testing.assert_array_equal(ve.detach().numpy(), vt.detach().numpy())
    assert ve.shape == (sum(int(np.prod(s)) for s in SHAPES),) and ve.requires_grad
    w = np.arange(ve.shape[0], dtype=np.float32)
    _check_weighted_sum_grads(vt, ve, w, pt, pe)


def test_vector_to_parameters():
    for lib in (torch, ember):
        ps = _params(lib, grads=False)
        n = sum(p.numel() for p in ps)
        vec = lib.arange(n, dtype=lib.float32)
        lib.nn.utils.vector_to_parameters(vec, ps)
        assert ps[0].shape == (3, 4) and ps[1].tolist() == [12.0, 13.0, 14.0, 15.0, 16.0]
        assert ps[2][1, 1, 2].item() == 28.0
        with lib.no_grad():
            vec[0] = -1.0                              # parameters now share the vector's memory
        assert ps[0][0, 0].item() == -1.0
        assert ps[0].requires_grad
        with pytest.raises(TypeError, match="expected (torch|ember).Tensor, but got: list"):
            lib.nn.utils.vector_to_parameters([1.0], ps)


# ---- rnn utilities ------------------------------------------------------------------------------------------
def _seqs(lib, lengths=(5, 3, 4, 1), feat=(2,), dtype="float64", grad=True):
    rs = np.random.RandomState(7)
    return [lib.tensor(rs.randn(n, *feat), dtype=getattr(lib, dtype), requires_grad=grad) for n in lengths]


def _backward_weights(out):
    rs = np.random.RandomState(11)
    return rs.randn(*out.shape)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("feat", [(), (2,), (2, 3)])
def test_pad_sequence_matches_torch(batch_first, padding_side, feat):
    st, se = _seqs(torch, feat=feat), _seqs(ember, feat=feat)
    ot = torch.nn.utils.rnn.pad_sequence(st, batch_first=batch_first, padding_value=-1.5,
                                         padding_side=padding_side)
    oe = ember.nn.utils.rnn.pad_sequence(se, batch_first=batch_first, padding_value=-1.5,
                                         padding_side=padding_side)
    assert tuple(oe.shape) == tuple(ot.shape)
    np.testing.assert_array_equal(oe.detach().numpy(), ot.detach().numpy())
    w = _backward_weights(ot)
    _check_weighted_sum_grads(ot, oe, w, st, se)


def test_pad_sequence_dtypes_and_inputs():
    for lib in (torch, ember):
        out = lib.nn.utils.rnn.pad_sequence([lib.ones(2, 3, dtype=lib.int64), lib.ones(3, 3)], padding_value=0.5)
        assert out.dtype == lib.int64 and out.shape == (3, 2, 3) and out[2, 0, 0].item() == 0
        out = lib.nn.utils.rnn.pad_sequence([lib.ones(2, 3), lib.ones(3, 3, dtype=lib.float64)])
        assert out.dtype == lib.float32
        out = lib.nn.utils.rnn.pad_sequence(lib.arange(6.0).reshape(3, 2))   # a tensor is split into rows
        assert out.shape == (2, 3) and out.tolist() == [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]
        out = lib.nn.utils.rnn.pad_sequence((s for s in [lib.ones(1), lib.ones(2)]), batch_first=True)
        assert out.tolist() == [[1.0, 0.0], [1.0, 1.0]]
        out = lib.nn.utils.rnn.pad_sequence([lib.ones(2, 3), lib.full((3, 1), 2.0)])   # broadcast into the slot
        assert out[:, 1].tolist() == [[2.0] * 3] * 3


def test_pad_sequence_errors():
    for lib in (torch, ember):
        U = lib.nn.utils.rnn
        with pytest.raises(RuntimeError, match="received an empty list of sequences"):
            U.pad_sequence([])
        with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of tensor b \(4\) "
                                               r"at non-singleton dimension 1"):
            U.pad_sequence([lib.ones(2, 3), lib.ones(3, 4)])
        with pytest.raises(RuntimeError, match="Expected padding_side to be one of left or right, but got middle."):
            U.pad_sequence([lib.ones(2)], padding_side="middle")
        with pytest.raises(RuntimeError, match="Expected iterable for input sequences"):
            U.pad_sequence(5)
        with pytest.raises(RuntimeError):
            U.pad_sequence([lib.ones(()), lib.ones(())])


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths, enforce_sorted", [((5, 4, 3, 1), True), ((5, 3, 4, 1), False),
                                                     ((2, 5, 2, 5), False), ((3, 3, 3, 3), True),
                                                     ((1, 6, 2, 4), False)])
def test_pack_pad_round_trip_matches_torch(batch_first, lengths, enforce_sorted):
    st, se = _seqs(torch, lengths), _seqs(ember, lengths)
    pt = torch.nn.utils.rnn.pad_sequence(st, batch_first=batch_first)
    pe = ember.nn.utils.rnn.pad_sequence(se, batch_first=batch_first)
    kt = torch.nn.utils.rnn.pack_padded_sequence(pt, list(lengths), batch_first=batch_first,
                                                 enforce_sorted=enforce_sorted)
    ke = ember.nn.utils.rnn.pack_padded_sequence(pe, ember.tensor(list(lengths)), batch_first=batch_first,
                                                 enforce_sorted=enforce_sorted)
    np.testing.assert_array_equal(ke.data.detach().numpy(), kt.data.detach().numpy())
    assert ke.batch_sizes.tolist() == kt.batch_sizes.tolist() and ke.batch_sizes.dtype == ember.int64
    for a, b in [(ke.sorted_indices, kt.sorted_indices), (ke.unsorted_indices, kt.unsorted_indices)]:
        assert (a is None) == (b is None)
        if a is not None:
            assert a.tolist() == b.tolist() and a.dtype == ember.int64
    ut, lt = torch.nn.utils.rnn.pad_packed_sequence(kt, batch_first=batch_first, padding_value=9.0,
                                                    total_length=7)
    ue, le = ember.nn.utils.rnn.pad_packed_sequence(ke, batch_first=batch_first, padding_value=9.0,
                                                    total_length=7)
    np.testing.assert_array_equal(ue.detach().numpy(), ut.detach().numpy())
    assert le.tolist() == lt.tolist() and le.dtype == ember.int64
    w = _backward_weights(ut)
    _check_weighted_sum_grads(ut, ue, w, st, se)


def test_pack_sequence_and_unpack():
    for enforce_sorted, lengths in [(True, (4, 2, 2, 1)), (False, (2, 5, 1, 3))]:
        st, se = _seqs(torch, lengths), _seqs(ember, lengths)
        kt = torch.nn.utils.rnn.pack_sequence(st, enforce_sorted=enforce_sorted)
        ke = ember.nn.utils.rnn.pack_sequence(se, enforce_sorted=enforce_sorted)
        np.testing.assert_array_equal(ke.data.detach().numpy(), kt.data.detach().numpy())
        assert ke.batch_sizes.tolist() == kt.batch_sizes.tolist()
        back = ember.nn.utils.rnn.unpack_sequence(ke)
        for a, b in zip(back, se):
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        sum((b * float(i + 1)).sum() for i, b in enumerate(back)).backward()
        for i, s in enumerate(se):
            np.testing.assert_array_equal(s.grad.numpy(), np.full(s.shape, i + 1.0))


def test_unpad_sequence():
    for batch_first in (False, True):
        st, se = _seqs(torch, grad=False), _seqs(ember, grad=False)
        lt, le = torch.tensor([5, 3, 4, 1]), ember.tensor([5, 3, 4, 1])
        pt = torch.nn.utils.rnn.pad_sequence(st, batch_first=batch_first)
        pe = ember.nn.utils.rnn.pad_sequence(se, batch_first=batch_first)
        ut = torch.nn.utils.rnn.unpad_sequence(pt, lt, batch_first=batch_first)
        ue = ember.nn.utils.rnn.unpad_sequence(pe, le, batch_first=batch_first)
        assert len(ue) == len(ut)
        for a, b in zip(ue, ut):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_packed_sequence_object():
    R = ember.nn.utils.rnn
    k = R.pack_sequence([ember.ones(3, 2), ember.ones(2, 2)])
    assert isinstance(k, tuple) and k._fields == ("data", "batch_sizes", "sorted_indices", "unsorted_indices")
    d, b = k[0], k[1]
    k2 = R.PackedSequence(d, b)
    assert k2.data is d and k2.sorted_indices is None and k2.unsorted_indices is None
    k3 = R.PackedSequence((d, b), sorted_indices=ember.tensor([1, 0]))
    assert k3.unsorted_indices.tolist() == [1, 0]
    assert k.double().data.dtype == ember.float64 and k.float().data.dtype == ember.float32
    assert k.to(ember.float32) is k and not k.is_cuda and not k.is_pinned()
    assert R.invert_permutation(ember.tensor([2, 0, 1])).tolist() == [1, 2, 0]
    assert R.invert_permutation(None) is None


def test_pack_errors_like_torch():
    for lib in (torch, ember):
        R = lib.nn.utils.rnn
        x = lib.ones(3, 2, 4)
        with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
            R.pack_padded_sequence(x, [2, 3])
        with pytest.raises(RuntimeError, match="has to be greater than 0"):
            R.pack_padded_sequence(x, [3, 0])
        with pytest.raises(RuntimeError, match=r"Expected `len\(lengths\)` to be equal to batch_size, but got 3 "
                                               r"\(batch_size=2\)"):
            R.pack_padded_sequence(x, [3, 2, 1])
        k = R.pack_padded_sequence(x, [3, 2])
        with pytest.raises(ValueError, match="Expected total_length to be at least the length of the longest"):
            R.pad_packed_sequence(k, total_length=2)
    with pytest.raises(RuntimeError, match="exceeds the padded length"):
        ember.nn.utils.rnn.pack_padded_sequence(ember.ones(3, 2, 4), [4, 3])


def test_exports():
    U = ember.nn.utils
    for name in ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_",
                 "parameters_to_vector", "vector_to_parameters", "rnn"]:
        assert hasattr(U, name), name
    for name in ["PackedSequence", "pad_sequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
                 "unpack_sequence", "unpad_sequence", "invert_permutation"]:
        assert hasattr(U.rnn, name), name
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        U.clip_grad_norm_([], 1.0)
