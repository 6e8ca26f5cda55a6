"""Embedding, EmbeddingBag, one_hot, dropout and distance layers against torch (values, gradients,
state_dict, repr, errors), plus statistical and determinism checks for dropout."""
import warnings

import numpy as np
import pytest
import torch

import ember
import ember.nn as enn
import ember.nn.functional as EF
import torch.nn.functional as TF
from oracle import raises_like as _raises_like


def _np(t):
    return t.detach().numpy()


def _close(a, b, atol=1e-5, rtol=1e-4):
    np.testing.assert_allclose(_np(a), _np(b), atol=atol, rtol=rtol)


def _copy_state(e_mod, t_mod):
    e_mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})


# ---- Embedding ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [{}, {"padding_idx": 2}, {"padding_idx": -1}, {"scale_grad_by_freq": True},
                                {"padding_idx": 0, "scale_grad_by_freq": True}])
def test_embedding_module(kw):
    t_mod, e_mod = torch.nn.Embedding(7, 4, **kw), enn.Embedding(7, 4, **kw)
    _copy_state(e_mod, t_mod)
    assert repr(e_mod) == repr(t_mod)
    assert list(e_mod.state_dict()) == ["weight"]
    assert e_mod.padding_idx == t_mod.padding_idx
    idx = np.random.default_rng(0).integers(0, 7, (3, 5))
    idx[0, :3] = t_mod.padding_idx if t_mod.padding_idx is not None else 1
    g = np.random.default_rng(1).standard_normal((3, 5, 4)).astype(np.float32)
    yt, ye = t_mod(torch.tensor(idx)), e_mod(ember.tensor(idx))
    _close(ye, yt)
    (yt * torch.tensor(g)).sum().backward()
    (ye * ember.tensor(g)).sum().backward()
    _close(e_mod.weight.grad, t_mod.weight.grad)
    if t_mod.padding_idx is not None:
        assert (_np(e_mod.weight.grad)[t_mod.padding_idx] == 0).all()


def test_embedding_init_and_padding_row():
    ember.manual_seed(0)
    m = enn.Embedding(2000, 8, padding_idx=3)
    w = _np(m.weight)
    assert (w[3] == 0).all()
    rest = np.delete(w, 3, axis=0)
    assert abs(rest.mean()) < 0.03 and abs(rest.std() - 1.0) < 0.03     # N(0, 1)
    assert m.weight.requires_grad
    m.reset_parameters()
    assert (_np(m.weight)[3] == 0).all()


def test_embedding_from_pretrained():
    w = ember.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    m = enn.Embedding.from_pretrained(w)
    assert not m.weight.requires_grad and repr(m) == "Embedding(4, 3)"
    _close(m(ember.tensor([[1, 3]])), torch.nn.Embedding.from_pretrained(torch.tensor(w.numpy()))(torch.tensor([[1, 3]])))
    m2 = enn.Embedding.from_pretrained(w, freeze=False, padding_idx=1)
    assert m2.weight.requires_grad and m2.padding_idx == 1
    with pytest.raises(AssertionError, match="Embeddings parameter is expected to be 2-dimensional"):
        enn.Embedding.from_pretrained(ember.zeros(3))


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0])
def test_embedding_max_norm_renormalizes_rows_in_place(norm_type):
    t_mod = torch.nn.Embedding(6, 3, max_norm=1.0, norm_type=norm_type)
    e_mod = enn.Embedding(6, 3, max_norm=1.0, norm_type=norm_type)
    with torch.no_grad():
        t_mod.weight.mul_(3)
    _copy_state(e_mod, t_mod)
    idx = [[0, 2, 2], [4, 0, 1]]
    yt, ye = t_mod(torch.tensor(idx)), e_mod(ember.tensor(idx))
    _close(ye, yt)
    _close(e_mod.weight, t_mod.weight)     # looked-up rows were rescaled, others left alone
    yt.sum().backward()
    ye.sum().backward()
    _close(e_mod.weight.grad, t_mod.weight.grad)


def test_embedding_double_backward_with_padding():
    w = ember.randn(5, 3, dtype=ember.float64, requires_grad=True)
    idx = ember.tensor([[0, 1, 1], [4, 1, 2]])

    def f(v):
        y = EF.embedding(idx, w, padding_idx=1)
        (g,) = ember.autograd.grad((y * v).sum(), w, create_graph=True)
        return g
    v = ember.randn(2, 3, 3, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(f, (v,))


def test_embedding_scale_grad_by_freq_double_backward_is_exact():
    # d(weight grad)/d(upstream grad) is the gather scaled by 1/count (torch's own double backward
    # leaves the 1/count out; ember computes the exact derivative, checked numerically here)
    w = ember.randn(4, 2, dtype=ember.float64, requires_grad=True)
    idx = ember.tensor([0, 0, 3, 0, 2])

    def f(v):
        y = EF.embedding(idx, w, scale_grad_by_freq=True)
        (g,) = ember.autograd.grad((y * v).sum(), w, create_graph=True)
        return g
    v = ember.randn(5, 2, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(f, (v,))


@pytest.mark.parametrize("call", [
    lambda m, F, w, i: F.embedding(i.float(), w),
    lambda m, F, w, i: F.embedding(i + 10, w),
    lambda m, F, w, i: F.embedding(i - 10, w),
    lambda m, F, w, i: F.embedding(i, w, padding_idx=6),
    lambda m, F, w, i: F.embedding(i, w, padding_idx=-7),
    lambda m, F, w, i: F.one_hot(i.int()),
    lambda m, F, w, i: F.one_hot(i, 2),
    lambda m, F, w, i: F.one_hot(i - 10),
    lambda m, F, w, i: F.one_hot(i[:0]),
    lambda m, F, w, i: F.embedding_bag(i, w, m.tensor([0, 1])),
    lambda m, F, w, i: F.embedding_bag(i[0], w),
    lambda m, F, w, i: F.embedding_bag(i[0], w, m.tensor([[0]])),
    lambda m, F, w, i: F.embedding_bag(i[0], w, m.tensor([0]), mode="prod"),
    lambda m, F, w, i: F.embedding_bag(i[0], w, m.tensor([0]), mode="max", scale_grad_by_freq=True),
    lambda m, F, w, i: F.embedding_bag(i[0], w, m.tensor([0]), mode="mean", per_sample_weights=m.ones(3)),
    lambda m, F, w, i: F.embedding_bag(i[0], w, m.tensor([0]), per_sample_weights=m.ones(2)),
    lambda m, F, w, i: F.embedding_bag(i[0], w[0], m.tensor([0])),
])
def test_lookup_errors_match_torch(call):
    w = np.zeros((6, 3), np.float32)
    i = np.array([[1, 2, 0], [5, 3, 3]])
    e_msg, t_msg = _raises_like(lambda: call(ember, EF, ember.tensor(w), ember.tensor(i)),
                                lambda: call(torch, TF, torch.tensor(w), torch.tensor(i)))
    assert e_msg.replace("ember.tensor.", "torch.").replace("ember.", "torch.") == t_msg


def test_embedding_module_errors():
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        enn.Embedding(4, 2, padding_idx=4)
    with pytest.raises(AssertionError, match="Shape of weight does not match"):
        enn.Embedding(4, 2, _weight=ember.zeros(3, 2))
    with pytest.raises(RuntimeError, match="sparse"):
        enn.Embedding(4, 2, sparse=True)(ember.tensor([1]))


def test_one_hot():
    i = np.array([[0, 3], [2, 1]])
    for nc in (-1, 5):
        e, t = EF.one_hot(ember.tensor(i), nc), TF.one_hot(torch.tensor(i), nc)
        assert e.dtype is ember.int64 and tuple(e.shape) == tuple(t.shape)
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    assert tuple(EF.one_hot(ember.zeros(0, dtype=ember.int64), 3).shape) == (0, 3)


# ---- EmbeddingBag -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("kw", [{}, {"padding_idx": 1}, {"include_last_offset": True}])
def test_embedding_bag_module_1d(mode, kw):
    t_mod, e_mod = torch.nn.EmbeddingBag(8, 3, mode=mode, **kw), enn.EmbeddingBag(8, 3, mode=mode, **kw)
    _copy_state(e_mod, t_mod)
    assert repr(e_mod) == repr(t_mod)
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9 - 2, 1, 0])
    offs = np.array([0, 2, 2, 5, 9]) if not kw.get("include_last_offset") else np.array([0, 2, 2, 5, 10])
    g = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    yt = t_mod(torch.tensor(idx), torch.tensor(offs))
    ye = e_mod(ember.tensor(idx), ember.tensor(offs))
    assert tuple(ye.shape) == tuple(yt.shape)
    _close(ye, yt)
    (yt * torch.tensor(g[:yt.shape[0]])).sum().backward()
    (ye * ember.tensor(g[:ye.shape[0]])).sum().backward()
    _close(e_mod.weight.grad, t_mod.weight.grad)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_input(mode):
    t_mod, e_mod = torch.nn.EmbeddingBag(6, 4, mode=mode), enn.EmbeddingBag(6, 4, mode=mode)
    _copy_state(e_mod, t_mod)
    idx = np.random.default_rng(2).integers(0, 6, (3, 4))
    yt, ye = t_mod(torch.tensor(idx)), e_mod(ember.tensor(idx))
    _close(ye, yt)
    yt.pow(2).sum().backward()
    ye.pow(2).sum().backward()
    _close(e_mod.weight.grad, t_mod.weight.grad)


def test_embedding_bag_per_sample_weights_and_from_pretrained():
    w = np.random.default_rng(3).standard_normal((5, 2)).astype(np.float32)
    t_mod = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(w), freeze=False, mode="sum")
    e_mod = enn.EmbeddingBag.from_pretrained(ember.tensor(w), freeze=False, mode="sum")
    assert e_mod.weight.requires_grad and repr(e_mod) == repr(t_mod)
    idx, offs = [0, 4, 4, 2, 1], [0, 3]
    psw = np.array([0.5, 2.0, -1.0, 1.5, 3.0], np.float32)
    pt, pe = torch.tensor(psw, requires_grad=True), ember.tensor(psw, requires_grad=True)
    yt = t_mod(torch.tensor(idx), torch.tensor(offs), pt)
    ye = e_mod(ember.tensor(idx), ember.tensor(offs), pe)
    _close(ye, yt)
    yt.sum().backward()
    ye.sum().backward()
    _close(pe.grad, pt.grad)
    _close(e_mod.weight.grad, t_mod.weight.grad)
    assert not enn.EmbeddingBag.from_pretrained(ember.tensor(w)).weight.requires_grad


# ---- Dropout ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout_statistics_and_scaling(p):
    ember.manual_seed(123)
    x = ember.ones(200_000)
    y = EF.dropout(x, p, training=True)
    yn = y.numpy()
    frac_zero = (yn == 0).mean()
    # binomial standard deviation of the zero fraction is ~1e-3 here; allow 5 sigma
    assert abs(frac_zero - p) < 5 * np.sqrt(p * (1 - p) / yn.size)
    kept = yn[yn != 0]
    np.testing.assert_allclose(kept, np.float32(1.0) / np.float32(1 - p), rtol=1e-6)
    assert abs(yn.mean() - 1.0) < 0.02          # expectation preserved


def test_dropout_determinism_under_manual_seed():
    x = ember.randn(50, 40)
    ember.manual_seed(7)
    a = EF.dropout(x, 0.3)
    b = enn.Dropout2d(0.4)(x.view(5, 10, 4, 10))
    ember.manual_seed(7)
    a2 = EF.dropout(x, 0.3)
    b2 = enn.Dropout2d(0.4)(x.view(5, 10, 4, 10))
    np.testing.assert_array_equal(a.numpy(), a2.numpy())
    np.testing.assert_array_equal(b.numpy(), b2.numpy())
    c = EF.dropout(x, 0.3)
    assert not np.array_equal(c.numpy(), a.numpy())


def test_dropout_eval_identity_and_p0():
    x = ember.randn(3, 4, requires_grad=True)
    for mod in (enn.Dropout(0.5), enn.Dropout1d(), enn.AlphaDropout(), enn.FeatureAlphaDropout(), enn.Dropout3d()):
        mod.eval()
        y = mod(x.view(3, 4, 1, 1, 1)) if isinstance(mod, enn.Dropout3d) else mod(x if not isinstance(
            mod, enn.Dropout1d) else x.view(3, 4, 1))
        np.testing.assert_array_equal(_np(y).reshape(3, 4), _np(x))
    assert EF.dropout(x, 0.5, training=False) is x
    assert EF.dropout(x, 0.0, training=True) is x
    assert EF.alpha_dropout(x, 0.5) is x           # training defaults to False, as in torch
    m = enn.Dropout()
    assert m.training and m.eval()(x) is x


def test_dropout_gradient_is_mask_times_scale():
    ember.manual_seed(1)
    x = ember.randn(100, 10, requires_grad=True)
    y = EF.dropout(x, 0.25)
    y.sum().backward()
    mask = _np(y) != 0
    expected = np.where(mask, np.float32(1) / np.float32(0.75), 0).astype(np.float32)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(_np(y)[mask], _np(x)[mask] / np.float32(0.75), rtol=1e-6)


@pytest.mark.parametrize("fn,shape,noise_shape", [
    (lambda x: EF.dropout1d(x, 0.5), (8, 6, 20), (8, 6, 1)),
    (lambda x: EF.dropout1d(x, 0.5), (6, 20), (6, 1)),
    (lambda x: EF.dropout2d(x, 0.5), (8, 6, 4, 5), (8, 6, 1, 1)),
    (lambda x: EF.dropout3d(x, 0.5), (4, 6, 2, 3, 4), (4, 6, 1, 1, 1)),
    (lambda x: EF.dropout3d(x, 0.5), (6, 2, 3, 4), (6, 1, 1, 1)),
    (lambda x: EF.feature_alpha_dropout(x, 0.5, True), (8, 6, 4, 5), (8, 6, 1, 1)),
])
def test_feature_dropout_drops_whole_channels(fn, shape, noise_shape):
    ember.manual_seed(3)
    x = ember.ones(shape)
    y = _np(fn(x))
    assert y.shape == shape
    # every channel is constant over its spatial positions
    red = tuple(i for i, s in enumerate(noise_shape) if s == 1 and shape[i] != 1)
    assert np.all(y.max(axis=red) == y.min(axis=red))
    assert len(np.unique(y)) == 2


def test_alpha_dropout_keeps_mean_and_variance():
    ember.manual_seed(5)
    x = ember.randn(400_000)
    y = EF.alpha_dropout(x, 0.3, training=True).numpy()
    assert abs(y.mean()) < 0.01 and abs(y.std() - 1.0) < 0.01
    # dropped units all take the same value, SELU's saturation mapped by the affine correction
    a = 1.0 / np.sqrt((1.7580993408473766 ** 2 * 0.3 + 1) * 0.7)
    dropped = -1.7580993408473766 * a + 1.7580993408473766 * a * 0.3
    assert abs((np.abs(y - dropped) < 1e-6).mean() - 0.3) < 0.005


def test_dropout_inplace():
    ember.manual_seed(2)
    x = ember.ones(1000)
    y = EF.dropout(x, 0.5, inplace=True)
    assert y is x and ((x.numpy() == 0) | (x.numpy() == 2)).all()
    leaf = ember.ones(4, requires_grad=True)
    e_msg, t_msg = _raises_like(lambda: EF.dropout(leaf, 0.5, inplace=True),
                                lambda: TF.dropout(torch.ones(4, requires_grad=True), 0.5, inplace=True))
    assert e_msg == t_msg
    # in place on a non-leaf: gradient still flows through the mask
    a = ember.ones(100, requires_grad=True)
    h = a * 3
    enn.Dropout(0.5, inplace=True)(h).sum().backward()
    assert set(np.unique(a.grad.numpy())) <= {0.0, 6.0}
    x2 = ember.ones(3, 4)
    assert EF.dropout1d(x2, 0.5, inplace=True) is x2 and tuple(x2.shape) == (3, 4)


def test_dropout_p1_and_empty():
    x = ember.tensor([-1.0, 2.0])
    y = EF.dropout(x, 1.0)
    np.testing.assert_array_equal(y.numpy(), TF.dropout(torch.tensor([-1.0, 2.0]), 1.0).numpy())
    assert np.signbit(y.numpy()[0])
    assert tuple(EF.dropout(ember.zeros(0, 3), 0.5).shape) == (0, 3)


@pytest.mark.parametrize("call", [
    lambda m, F, x: F.dropout(x, 1.5),
    lambda m, F, x: F.dropout(x, -0.1),
    lambda m, F, x: F.alpha_dropout(x, 2.0),
    lambda m, F, x: F.dropout2d(x, 1.01),
    lambda m, F, x: m.nn.Dropout(2),
    lambda m, F, x: m.nn.AlphaDropout(-1),
    lambda m, F, x: F.dropout(x.long(), 0.5),
    lambda m, F, x: F.feature_alpha_dropout(x[0], 0.5, True),
    lambda m, F, x: F.dropout1d(x[0], 0.5),
])
def test_dropout_errors_match_torch(call):
    x = np.ones((3, 4), np.float32)
    e_msg, t_msg = _raises_like(lambda: call(ember, EF, ember.tensor(x)), lambda: call(torch, TF, torch.tensor(x)))
    assert e_msg == t_msg


def test_dropout2d_warnings_like_torch():
    with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
        EF.dropout2d(ember.ones(2, 3, 4), 0.5)
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
        EF.dropout2d(ember.ones(2, 3), 0.5)


def test_dropout_repr_and_no_state():
    for cls in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"):
        e, t = getattr(enn, cls)(0.25, inplace=True), getattr(torch.nn, cls)(0.25, inplace=True)
        assert repr(e) == repr(t)
        assert list(e.state_dict()) == []


def test_top_level_dropout_forms():
    x = ember.ones(1000)
    ember.manual_seed(0)
    a = ember.dropout(x, 0.5, True)
    ember.manual_seed(0)
    b = EF.dropout(x, 0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert ember.dropout(x, 0.5, False) is x
    assert ember.feature_dropout(ember.ones(4, 3, 2), 0.5, True).shape == (4, 3, 2)


# ---- distance -----------------------------------------------------------------------------------------

def test_distance_modules():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    for e_mod, t_mod in ((enn.CosineSimilarity(), torch.nn.CosineSimilarity()),
                         (enn.CosineSimilarity(dim=0, eps=1e-3), torch.nn.CosineSimilarity(dim=0, eps=1e-3)),
                         (enn.PairwiseDistance(), torch.nn.PairwiseDistance()),
                         (enn.PairwiseDistance(p=1.5, keepdim=True), torch.nn.PairwiseDistance(p=1.5, keepdim=True))):
        assert repr(e_mod) == repr(t_mod)
        at, bt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        ae, be = ember.tensor(a, requires_grad=True), ember.tensor(b, requires_grad=True)
        yt, ye = t_mod(at, bt), e_mod(ae, be)
        _close(ye, yt)
        yt.sum().backward()
        ye.sum().backward()
        _close(ae.grad, at.grad)
        _close(be.grad, bt.grad)


def test_cosine_similarity_zero_vectors_and_dtype():
    z = np.zeros((2, 3), np.float32)
    zt, ze = torch.tensor(z, requires_grad=True), ember.tensor(z, requires_grad=True)
    yt, ye = TF.cosine_similarity(zt, zt * 2), EF.cosine_similarity(ze, ze * 2)
    _close(ye, yt)
    assert EF.cosine_similarity(ember.ones(2, 3).double(), ember.ones(2, 3)).dtype is ember.float64


def test_cdist_double_backward_numerically():
    rng = np.random.default_rng(5)
    for p in (2.0, 1.0, 3.0):
        a = ember.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
        b = ember.tensor(rng.standard_normal((2, 4, 4)), requires_grad=True)
        assert ember.autograd.gradcheck(lambda x, y: ember.cdist(x, y, p), (a, b))
        if p != 1.0:       # p = 1 has a zero second derivative almost everywhere (sign)
            assert ember.autograd.gradgradcheck(lambda x, y: ember.cdist(x, y, p), (a, b))


def test_cdist_zero_distance_gradient_and_batch_broadcast():
    x = np.array([[0.0, 1.0], [2.0, 2.0]], np.float32)
    for mode in ("use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        xt, xe = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
        torch.cdist(xt, xt, compute_mode=mode).sum().backward()
        ember.cdist(xe, xe, compute_mode=mode).sum().backward()
        _close(xe.grad, xt.grad)
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((3, 1, 4, 2)).astype(np.float32), rng.standard_normal((5, 3, 2)).astype(np.float32)
    _close(ember.cdist(ember.tensor(a), ember.tensor(b)), torch.cdist(torch.tensor(a), torch.tensor(b)))


@pytest.mark.parametrize("call", [
    lambda m, F, a, b: m.cdist(a, b[:, :3]),
    lambda m, F, a, b: m.cdist(a[0], b),
    lambda m, F, a, b: m.cdist(a, b, p=-1),
    lambda m, F, a, b: m.cdist(a.long(), b.long()),
    lambda m, F, a, b: m.cdist(a.double(), b),
    lambda m, F, a, b: m.cdist(a, b, compute_mode="x"),
    lambda m, F, a, b: F.pdist(a[0]),
    lambda m, F, a, b: F.pdist(a, p=-1),
    lambda m, F, a, b: F.cosine_similarity(a.long(), b.long()),
    lambda m, F, a, b: F.cosine_similarity(a, b[:2]),
])
def test_distance_errors_match_torch(call):
    a, b = np.ones((3, 4), np.float32), np.ones((5, 4), np.float32)
    e_msg, t_msg = _raises_like(lambda: call(ember, EF, ember.tensor(a), ember.tensor(b)),
                                lambda: call(torch, TF, torch.tensor(a), torch.tensor(b)))
    assert e_msg == t_msg


def test_no_warnings_in_lookup_and_distance():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = ember.randn(6, 3, requires_grad=True)
        (EF.pdist(x).sum() + ember.cdist(x, x).sum() + EF.cosine_similarity(x, x).sum()).backward()
        e = enn.Embedding(5, 2, padding_idx=0)
        e(ember.tensor([0, 1, 1])).sum().backward()
