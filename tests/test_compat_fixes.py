"""Regression tests for what the compat programs (examples/compat) found missing or wrong, each checked
against torch: Tensor.type_as / new / legacy constructors / Variable, tensor([]) dtype, in-place view
ops, fill_diagonal_, module backward hooks and state-dict hooks, stats-op errors, parametrizations,
swa_utils, utils.checkpoint, distributions, torch.func, grid_sample & co."""
import copy
import io
import pickle
import warnings

import numpy as np
import pytest
import torch

import functools

import ember


from oracle import same_error as _same_error  # noqa: E402

same_error = functools.partial(_same_error, exact=False, first_line=False)


def np_of(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.detach().numpy()


def both(fn):
    """Run ``fn(lib)`` for both libraries; return (torch result, ember result)."""
    return fn(torch), fn(ember)


def assert_same(fn, atol=1e-6):
    t, e = both(fn)
    _assert_same(t, e, atol)


def _assert_same(t, e, atol):
    if isinstance(t, (tuple, list)):
        assert len(t) == len(e)
        for a, b in zip(t, e):
            _assert_same(a, b, atol)
        return
    if isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor)
        assert tuple(t.shape) == tuple(e.shape)
        assert str(t.dtype).replace("torch.", "") == str(e.dtype).replace("ember.", "")
        np.testing.assert_allclose(np_of(e).astype(np.float64), np_of(t).astype(np.float64), atol=atol, rtol=1e-5,
                                   equal_nan=True)
        return
    assert t == e, (t, e)


# ---- tensor basics ----------------------------------------------------------------------------------------


def test_tensor_of_empty_list_is_default_float():
    for data in ([], [[]], [[], []]):
        t, e = torch.tensor(data), ember.tensor(data)
        assert str(e.dtype).replace("ember.", "") == str(t.dtype).replace("torch.", "")
        assert tuple(e.shape) == tuple(t.shape)
    assert ember.tensor([True, False]).dtype is ember.bool       # non-empty inference unchanged
    assert ember.tensor([[1], []] if False else [1, 2]).dtype is ember.int64


def test_type_as_and_type_errors():
    assert_same(lambda m: m.tensor([1, 2]).type_as(m.ones(2)))
    assert_same(lambda m: m.tensor([1.5, 2.5]).type_as(m.tensor([1])))
    x = ember.ones(2)
    assert x.type_as(x) is x
    same_error(lambda m: m.ones(2).type_as(3))
    same_error(lambda m: m.ones(2).type("torch.Foo"), exact=True)
    assert ember.ones(2).type(ember.LongTensor).dtype is ember.int64


def test_legacy_constructors():
    assert_same(lambda m: m.FloatTensor([1, 2]))
    assert_same(lambda m: m.LongTensor([1.7, -2.2]))
    assert_same(lambda m: m.BoolTensor([1, 0]))
    assert_same(lambda m: m.DoubleTensor(np.ones(3)))
    for lib in (torch, ember):
        assert tuple(lib.FloatTensor(2, 3).shape) == (2, 3) and lib.FloatTensor(2, 3).dtype == lib.float32
        assert tuple(lib.ByteTensor(lib.Size([2, 2])).shape) == (2, 2)
        assert tuple(lib.FloatTensor().shape) == (0,)
        assert isinstance(lib.ones(2), lib.FloatTensor) and not isinstance(lib.ones(2), lib.LongTensor)
        assert lib.LongTensor.__name__ == "LongTensor"
    same_error(lambda m: m.FloatTensor(m.tensor([1, 2])))


def test_tensor_new():
    for lib in (torch, ember):
        x = lib.ones(2, dtype=lib.float64)
        assert tuple(x.new(2, 3).shape) == (2, 3) and x.new(2, 3).dtype == lib.float64
        assert x.new([1, 2]).dtype == lib.float64 and x.new([1, 2]).tolist() == [1.0, 2.0]
        assert tuple(x.new().shape) == (0,)
        assert x.new(lib.Size([3])).shape == (3,)
    same_error(lambda m: m.ones(2).new(m.tensor([1, 2])))


def test_autograd_variable():
    for lib in (torch, ember):
        V = lib.autograd.Variable
        x = lib.ones(2)
        v = V(x)
        assert v is not x and not v.requires_grad
        v.add_(1)
        assert x.tolist() == [2.0, 2.0]          # shares the data
        w = V(x, requires_grad=True)
        assert w.requires_grad and not x.requires_grad and w.grad_fn is None
        assert isinstance(x, V)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            V(x, volatile=True)
        assert any("volatile" in str(r.message) for r in rec)
        assert tuple(V().shape) == (0,)
    same_error(lambda m: m.autograd.Variable([1, 2]), exact=True)


def test_inplace_view_ops():
    for lib in (torch, ember):
        a = lib.ones(2, 3, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf Variable"):
            a.unsqueeze_(0)
        b = a * 2
        assert b.unsqueeze_(0) is b and tuple(b.shape) == (1, 2, 3)
        (b * lib.arange(3.0)).sum().backward()
        assert a.grad.tolist() == [[0.0, 2.0, 4.0]] * 2
        c = lib.zeros(2, 3)
        v = c[0]
        v.unsqueeze_(0)
        v.fill_(1)
        assert tuple(v.shape) == (1, 3) and c.sum().item() == 3
        d = lib.arange(6.0).view(2, 3)
        assert d.t_() is d and tuple(d.shape) == (3, 2) and not d.is_contiguous() and d.stride() == (1, 3)
        f = lib.ones(2, 1, 3)
        f.squeeze_()
        assert tuple(f.shape) == (2, 3)
        f.transpose_(0, 1)
        assert tuple(f.shape) == (3, 2)
        f.swapdims_(0, 1)
        assert tuple(f.shape) == (2, 3)


def test_resize_():
    assert_same(lambda m: m.arange(6.0).resize_(2, 3))
    assert_same(lambda m: m.arange(6.0).resize_(1, 2))
    assert_same(lambda m: m.arange(6.0).resize_as_(m.ones(2, 2)))
    for lib in (torch, ember):
        h = lib.arange(4.0)
        h.resize_(3, 3)
        assert tuple(h.shape) == (3, 3) and h.view(-1)[:4].tolist() == [0.0, 1.0, 2.0, 3.0]
    same_error(lambda m: m.ones(2, requires_grad=True).resize_(3))


def test_fill_diagonal_():
    for shape, wrap in [((3, 3), False), ((7, 3), False), ((7, 3), True), ((3, 5), True), ((2, 2, 2), False)]:
        assert_same(lambda m: m.zeros(*shape).fill_diagonal_(5, wrap=wrap))
    assert_same(lambda m: m.ones(2, 2, dtype=m.long).fill_diagonal_(2.7))

    def grad(m):
        a = m.ones(3, 3, requires_grad=True)
        b = a * 2
        b.fill_diagonal_(float("-inf"))
        b.exp().sum().backward()
        return a.grad
    assert_same(grad, atol=1e-5)
    same_error(lambda m: m.zeros(3).fill_diagonal_(1), exact=True)
    same_error(lambda m: m.zeros(2, 3, 2).fill_diagonal_(1), exact=True)
    same_error(lambda m: m.ones(2, 2, requires_grad=True).fill_diagonal_(0))


# ---- stats-family errors (values and gradients are in tests/optable/stats.py) ------------------------------


@pytest.mark.parametrize("fn", [
    lambda m: m.bincount(m.tensor([-1, 2])),
    lambda m: m.bincount(m.tensor([[1, 2]])),
    lambda m: m.bincount(m.tensor([1.0, 2.0])),
    lambda m: m.bincount(m.tensor([1, 2]), minlength=-1),
    lambda m: m.bincount(m.tensor([1, 2]), weights=m.tensor([1.0])),
    lambda m: m.histc(m.tensor([1, 2])),
    lambda m: m.histc(m.tensor([1.0, 2.0]), bins=0),
    lambda m: m.histc(m.tensor([1.0]), bins=4, min=3, max=1),
    lambda m: m.histc(m.tensor([1.0, float("inf")]), bins=4),
    lambda m: m.bucketize(m.tensor([3.0]), m.tensor([[1.0, 3.0], [5.0, 7.0]])),
    lambda m: m.searchsorted(m.tensor([1.0, 3.0]), m.tensor([2.0]), side="mid"),
    lambda m: m.searchsorted(m.tensor([1.0, 3.0]), m.tensor([2.0]), side="left", right=True),
    lambda m: m.searchsorted(m.tensor([[1.0, 3.0], [2.0, 4.0]]), m.tensor([2.0, 3.0])),
    lambda m: m.quantile(m.tensor([1.0, 2.0]), 1.5),
    lambda m: m.quantile(m.tensor([1, 2]), 0.5),
    lambda m: m.quantile(m.tensor([1.0, 2.0]), m.tensor(0.5, dtype=m.float64)),
    lambda m: m.quantile(m.tensor([1.0, 2.0]), m.tensor([[0.5]])),
    lambda m: m.quantile(m.tensor([1.0, 2.0]), 0.5, interpolation="foo"),
    lambda m: m.quantile(m.tensor([1.0, 2.0]), m.tensor([0.5, 2.0])),
    lambda m: m.quantile(m.ones(2, 0), 0.5, dim=1),
    lambda m: m.diff(m.tensor([1, 3, 6]), n=-1),
    lambda m: m.diff(m.tensor(1)),
    lambda m: m.diff(m.tensor([[1, 3, 6]]), prepend=m.tensor([0])),
    lambda m: m.trapezoid(m.tensor([1.0, 2.0]), m.tensor([1.0, 2.0, 3.0])),
    lambda m: m.dist(m.tensor([1, 2]), m.tensor([0, 0])),
])
def test_stats_errors_match_torch(fn):
    same_error(fn, exact=True)


def test_stats_values_edge_cases():
    assert_same(lambda m: m.bincount(m.tensor([1, 3, 3, 0]), weights=m.tensor([1, 2, 3, 4])))
    assert_same(lambda m: m.bincount(m.tensor([], dtype=m.long)))
    assert_same(lambda m: m.histc(m.tensor([1.0, 1.0, 1.0]), bins=4))
    assert_same(lambda m: m.histc(m.tensor([1.0, float("nan"), 1.0]), bins=4, min=0, max=3))
    assert_same(lambda m: m.searchsorted(m.tensor([5.0, 1.0, 3.0]), m.tensor([2.0]), sorter=m.tensor([1, 2, 0])))
    assert_same(lambda m: m.searchsorted(m.tensor([1, 3]), m.tensor([2.0, 4.0])))
    assert_same(lambda m: m.bucketize(3, m.tensor([1.0, 3.0, 5.0])))
    assert_same(lambda m: m.isin(m.tensor([1.0, float("nan")]), m.tensor([float("nan")])))
    assert_same(lambda m: m.isin(2, m.tensor([1, 2])))
    assert_same(lambda m: m.diff(m.tensor([True, False, False])))
    assert_same(lambda m: m.diff(m.tensor([1, 3, 6]), n=5))
    assert_same(lambda m: m.trapezoid(m.tensor([1, 2, 3]), dx=2))
    assert_same(lambda m: m.trapezoid(m.tensor([])))
    assert_same(lambda m: m.cov(m.tensor([[0, 1, 2], [2, 1, 0]])))
    assert_same(lambda m: m.cov(m.tensor([[0.0, 1, 2, 5], [2, 1, 0, 1]]), fweights=m.tensor([1, 2, 1, 3]),
                                aweights=m.tensor([0.5, 1, 2, 1])))
    assert_same(lambda m: m.corrcoef(m.tensor([1.0, 2, 4])))
    for interp in ("linear", "lower", "higher", "midpoint", "nearest"):
        assert_same(lambda m: m.quantile(m.tensor([1.0, 2, 3, 4]), m.tensor([0.5, 1 / 6, 0.3]), interpolation=interp))
    assert_same(lambda m: m.nanquantile(m.tensor([float("nan")] * 2), 0.5))
    assert_same(lambda m: m.quantile(m.tensor(3.0), 0.5, dim=0, keepdim=True))
    assert_same(lambda m: m.quantile(m.arange(12.0).view(3, 4), m.tensor([0.2, 0.7]), keepdim=True))
    assert_same(lambda m: m.tensor([[1.0, 2, 3], [4, 5, 6]]).renorm_(2, 0, 1), atol=1e-6)
    t, e = both(lambda m: m.histogram(m.tensor([1.0, 2, 1]), bins=4, range=(0.0, 3.0)))
    _assert_same(tuple(t), tuple(e), 1e-6)
    assert repr(e).startswith("ember.return_types.histogram(") and e.hist is e[0] and e.bin_edges is e[1]


# ---- nn.Module hooks and state dicts ------------------------------------------------------------------------


def _lin(lib):
    lin = lib.nn.Linear(3, 2)
    lin.load_state_dict({"weight": lib.tensor(np.arange(6.0).reshape(2, 3) / 10, dtype=lib.float32),
                         "bias": lib.zeros(2)})
    return lin


def test_full_backward_hook_sees_grads_and_can_replace_them():
    def run(lib):
        lin, log = _lin(lib), []
        h = lin.register_full_backward_hook(lambda m, gi, go: log.append(
            ([None if g is None else tuple(g.shape) for g in gi], [tuple(g.shape) for g in go],
             None if gi[0] is None else gi[0].sum().item(), go[0].sum().item())))
        x = lib.ones(4, 3, requires_grad=True)
        lin(x).sum().backward()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lin(lib.ones(4, 3)).sum().backward()           # no input needs grad: fires with grad_input None
        h.remove()
        h = lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0 + 1,))
        x.grad = None
        lin(x).sum().backward()
        replaced = x.grad.tolist()
        h.remove()
        h = lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))
        x.grad = None
        lin(x).sum().backward()
        doubled = x.grad.tolist()
        h.remove()
        x.grad = None
        lin(x).sum().backward()
        return log, replaced, doubled, x.grad.tolist()
    t, e = both(run)
    assert t[0] == e[0] or np.allclose([v for r in t[0] for v in r[2:] if v is not None],
                                       [v for r in e[0] for v in r[2:] if v is not None])
    assert [r[:2] for r in t[0]] == [r[:2] for r in e[0]]
    np.testing.assert_allclose(e[1], t[1])
    np.testing.assert_allclose(e[2], t[2], rtol=1e-6)
    np.testing.assert_allclose(e[3], t[3], rtol=1e-6)


def test_backward_hook_with_non_tensor_args_and_errors():
    def run(lib):
        class M(lib.nn.Module):
            def forward(self, a, k, b):
                return a * k + b, a.detach()
        m, log = M(), []
        m.register_full_backward_hook(lambda mod, gi, go: log.append(
            ([None if g is None else tuple(g.shape) for g in gi], [None if g is None else tuple(g.shape) for g in go])))
        a = lib.ones(2, requires_grad=True)
        o, o2 = m(a, 3, lib.ones(2))
        o.sum().backward()
        return log, o2.requires_grad
    t, e = both(run)
    assert t == e

    def bad(lib):
        lin = _lin(lib)
        lin.register_full_backward_hook(lambda m, gi, go: (lib.ones(4, 3),))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lin(lib.ones(4, 3)).sum().backward()
    same_error(bad, exact=True)
    with ember.no_grad():                       # hooks don't wrap anything without grad mode
        lin = _lin(ember)
        lin.register_full_backward_hook(lambda m, gi, go: None)
        assert not lin(ember.ones(1, 3, requires_grad=True)).requires_grad


def test_load_state_dict_reports_keys_and_runs_hooks():
    def run(lib):
        m, log = lib.nn.Linear(2, 2), []
        m.register_load_state_dict_pre_hook(lambda mod, sd, prefix, *a: log.append(("pre", prefix, sorted(sd))))
        m.register_state_dict_post_hook(lambda mod, sd, prefix, meta: log.append(("post", prefix, sorted(sd))))
        m.state_dict()
        r = m.load_state_dict({"weight": lib.ones(2, 2), "foo": lib.ones(1)}, strict=False)
        return log, r.missing_keys, r.unexpected_keys, repr(r)
    t, e = both(run)
    assert t == e
    assert repr(ember.nn.Linear(1, 1).load_state_dict(ember.nn.Linear(1, 1).state_dict())) == \
        "<All keys matched successfully>"


def test_parameter_dict_repr_uses_type_names():
    def run(lib):
        d = lib.nn.ParameterDict({"a": lib.nn.Parameter(lib.ones(2, dtype=lib.float64)),
                                  "b": lib.nn.Parameter(lib.ones(2, 3))})
        return repr(d).replace("torch.", "").replace("ember.", "")
    t, e = both(run)
    assert t == e


def test_pixel_shuffle_fold_modules():
    for build in (lambda m: m.nn.PixelShuffle(2), lambda m: m.nn.PixelUnshuffle(2), lambda m: m.nn.ChannelShuffle(2),
                  lambda m: m.nn.Fold((4, 5), 2), lambda m: m.nn.Unfold(2, padding=1)):
        assert repr(build(torch)) == repr(build(ember))
    x = np.arange(2 * 8 * 4 * 4, dtype=np.float32).reshape(2, 8, 4, 4)
    assert_same(lambda m: m.nn.PixelShuffle(2)(m.tensor(x)))
    assert_same(lambda m: m.nn.PixelUnshuffle(2)(m.tensor(x)))
    assert_same(lambda m: m.nn.ChannelShuffle(4)(m.tensor(x)))
    assert_same(lambda m: m.channel_shuffle(m.tensor(x), 2))
    assert_same(lambda m: m.nn.Unfold(2, padding=1)(m.tensor(x)))
    assert_same(lambda m: m.nn.Fold((4, 4), 2, stride=2)(m.nn.Unfold(2, stride=2)(m.tensor(x))))
    same_error(lambda m: m.nn.functional.channel_shuffle(m.ones(1, 6, 2), 4), exact=True)
    same_error(lambda m: m.nn.functional.channel_shuffle(m.ones(6), 3), exact=True)


# ---- grid_sample / affine_grid / gumbel_softmax -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_torch(mode, padding_mode, align_corners):
    rs = np.random.RandomState(0)
    inp, grid, theta = rs.randn(2, 3, 5, 6), rs.uniform(-1.3, 1.3, (2, 4, 7, 2)), rs.randn(2, 2, 3) * 0.5

    def run(lib):
        F = lib.nn.functional
        x = lib.tensor(inp, requires_grad=True)
        g = lib.tensor(grid, requires_grad=True)
        th = lib.tensor(theta, requires_grad=True)
        gg = F.affine_grid(th, (2, 3, 4, 7), align_corners=align_corners) * 0.5 + g * 0.5
        y = F.grid_sample(x, gg, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
        w = lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))
        (y * w).sum().backward()
        return y, x.grad, g.grad, th.grad
    assert_same(run, atol=1e-9)


def test_grid_sample_and_affine_grid_errors():
    F = "nn.functional"
    th = np.array([[[1.0, 0, 0], [0, 1, 0]]], dtype=np.float32)
    for fn in (lambda m: m.nn.functional.affine_grid(m.tensor(th), (1, 1, 2, 3, 4), align_corners=False),
               lambda m: m.nn.functional.affine_grid(m.tensor(th).long(), (1, 1, 2, 3), align_corners=False),
               lambda m: m.nn.functional.grid_sample(m.ones(1, 1, 2, 3), m.zeros(1, 2, 2, 2), mode="foo"),
               lambda m: m.nn.functional.grid_sample(m.ones(1, 1, 2, 3), m.zeros(1, 2, 2, 2), padding_mode="foo"),
               lambda m: m.nn.functional.grid_sample(m.ones(1, 1, 2, 3), m.zeros(2, 2, 2, 2), align_corners=False),
               lambda m: m.nn.functional.grid_sample(m.ones(1, 1, 2, 3), m.zeros(1, 2, 2, 3), align_corners=False),
               lambda m: m.nn.functional.grid_sample(m.ones(1, 1, 2, 3), m.zeros(1, 2, 2, 2, dtype=m.float64),
                                                     align_corners=False)):
        same_error(fn, exact=True)
    assert F
    for lib in (torch, ember):
        with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
            lib.nn.functional.affine_grid(lib.tensor(th), (1, 1, 2, 3))


def test_gumbel_softmax():
    ember.manual_seed(0)
    logits = ember.zeros(64, 3, requires_grad=True)
    soft = ember.nn.functional.gumbel_softmax(logits, tau=0.5)
    assert np.allclose(soft.sum(-1).detach().numpy(), 1) and (soft.detach().numpy() >= 0).all()
    hard = ember.nn.functional.gumbel_softmax(logits, tau=0.5, hard=True)
    assert set(np.unique(hard.detach().numpy())) <= {0.0, 1.0} and np.allclose(hard.sum(-1).detach().numpy(), 1)
    (hard * ember.arange(3.0)).sum().backward()
    assert logits.grad is not None and np.abs(logits.grad.numpy()).sum() > 0   # straight-through gradient
    counts = np.bincount(hard.argmax(-1).numpy(), minlength=3)
    assert counts.min() > 5                     # uniform logits: every class gets drawn


# ---- parametrizations ----------------------------------------------------------------------------------------


def _init_sin(lib, m, scale=1.0):
    m.load_state_dict({k: lib.tensor((np.sin(np.arange(v.numel()) * scale + 1.0)).reshape(tuple(v.shape)),
                                     dtype=lib.float32) for k, v in m.state_dict().items()})
    return m


def test_weight_norm_parametrization():
    def run(lib):
        P = lib.nn.utils.parametrize
        c = _init_sin(lib, lib.nn.Conv1d(3, 2, 3))
        lib.nn.utils.parametrizations.weight_norm(c)
        x = lib.tensor(np.cos(np.arange(24.0)).reshape(2, 3, 4), dtype=lib.float32)
        y = c(x)
        y.sum().backward()
        grads = [p.grad for _, p in sorted(c.named_parameters())]
        keys = list(c.state_dict().keys())
        name = type(c).__name__
        is_p = P.is_parametrized(c, "weight")
        with lib.no_grad():
            c.weight = lib.ones(2, 3, 3)
        g = c.parametrizations.weight.original0.detach().clone()
        P.remove_parametrizations(c, "weight")
        return y, grads, keys, name, is_p, g, type(c).__name__, list(c.state_dict().keys()), repr(c)
    assert_same(run, atol=1e-5)


def test_spectral_norm_parametrization_and_hook_versions():
    def run(lib):
        s = lib.nn.Linear(4, 3)
        lib.nn.utils.parametrizations.spectral_norm(s)
        keys = sorted(s.state_dict().keys())
        _init_sin(lib, s, 0.7)
        xx = lib.tensor(np.cos(np.arange(8.0)).reshape(2, 4), dtype=lib.float32)
        ys = s(xx)
        ys.sum().backward()
        u = s.parametrizations.weight[0]._u.clone()
        s.eval()
        ye = s(xx)
        o = _init_sin(lib, lib.nn.Linear(4, 3))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.nn.utils.weight_norm(o)
        names = [n for n, _ in o.named_parameters()]
        o(xx).sum().backward()
        gg = o.weight_g.grad
        lib.nn.utils.remove_weight_norm(o)
        q = lib.nn.Linear(4, 3)
        lib.nn.utils.spectral_norm(q)
        qkeys = sorted(q.state_dict().keys())
        _init_sin(lib, q, 0.7)
        yq = q(xx)
        lib.nn.utils.remove_spectral_norm(q)
        return (keys, ys, s.parametrizations.weight.original.grad, u, ye, names, gg,
                sorted(o.state_dict().keys()), qkeys, yq, sorted(q.state_dict().keys()))
    assert_same(run, atol=1e-5)
    same_error(lambda m: m.nn.utils.remove_weight_norm(m.nn.Linear(2, 2)), exact=True)


# ---- optim.swa_utils / utils.checkpoint ------------------------------------------------------------------------


def test_swa_utils_match_torch():
    def run(lib):
        swa = lib.optim.swa_utils
        out = []
        for kind in ("swa", "ema", "avgfn", "buffers"):
            m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 2))
            sd = {k: lib.tensor(np.linspace(-1, 1, max(v.numel(), 1)).reshape(tuple(v.shape)))
                  .to(v.dtype) for k, v in m.state_dict().items()}
            m.load_state_dict(sd)
            kw = {"ema": dict(multi_avg_fn=swa.get_ema_multi_avg_fn(0.9)), "avgfn": dict(avg_fn=swa.get_ema_avg_fn(0.8)),
                  "buffers": dict(use_buffers=True, multi_avg_fn=swa.get_ema_multi_avg_fn(0.5))}.get(kind, {})
            am = swa.AveragedModel(m, **kw)
            opt = lib.optim.SGD(m.parameters(), lr=0.01)
            sched = swa.SWALR(opt, swa_lr=0.05, anneal_epochs=3, anneal_strategy="linear" if kind == "ema" else "cos")
            x = lib.tensor(np.linspace(-2, 2, 24).reshape(8, 3), dtype=lib.float32)
            lrs = []
            for _ in range(5):
                opt.zero_grad()
                m(x).pow(2).mean().backward()
                opt.step()
                sched.step()
                am.update_parameters(m)
                lrs.append(opt.param_groups[0]["lr"])
            out.append((int(am.n_averaged), lrs, [v.float() for v in am.state_dict().values()]))
            swa.update_bn([(x[:4], 0), (x[4:], 1)], am)
            out.append((am.module[1].running_mean, am.module[1].momentum, am.training))
        return out
    assert_same(run, atol=1e-6)


def test_checkpoint_recomputes_with_same_results():
    def run(lib, use_reentrant, x_requires_grad):
        ck = lib.utils.checkpoint
        blk = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 3))
        blk.load_state_dict({k: lib.tensor(np.linspace(-1, 1, v.numel()).reshape(tuple(v.shape)), dtype=lib.float32)
                             for k, v in blk.state_dict().items()})
        x = lib.tensor(np.arange(6.0).reshape(2, 3) / 5, dtype=lib.float32, requires_grad=x_requires_grad)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = ck.checkpoint(blk, x * 1, use_reentrant=use_reentrant)
        if not y.requires_grad:
            return y, None, None
        (y ** 2).sum().backward()
        return y, x.grad, blk[0].weight.grad
    for ur in (True, False):
        for xrg in (True, False):
            t, e = run(torch, ur, xrg), run(ember, ur, xrg)
            assert t[0].requires_grad == e[0].requires_grad
            _assert_same(tuple(v for v in t if v is not None), tuple(v for v in e if v is not None), 1e-6)


def test_checkpoint_preserves_dropout_mask_and_warns():
    ck = ember.utils.checkpoint
    drop = ember.nn.Sequential(ember.nn.Linear(3, 50), ember.nn.Dropout(0.5))
    x = ember.ones(4, 3, requires_grad=True)
    y = ck.checkpoint(drop, x, use_reentrant=False)
    y.sum().backward()
    expected = ((y != 0).float() * 2).matmul(drop[0].weight.detach())
    assert np.allclose(x.grad.numpy(), expected.numpy(), atol=1e-5)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        ck.checkpoint(drop, x)
    seq = ember.nn.Sequential(*[ember.nn.Linear(3, 3) for _ in range(4)])
    x = ember.ones(2, 3, requires_grad=True)
    ck.checkpoint_sequential(seq, 2, x, use_reentrant=False).sum().backward()
    assert x.grad.shape == (2, 3) and all(p.grad is not None for p in seq.parameters())


# ---- distributions -----------------------------------------------------------------------------------------------

_RS = np.random.RandomState(0)
_L = (np.tril(_RS.rand(3, 3)) + np.eye(3)).astype(np.float32)
_COV = (_L @ _L.T).astype(np.float32)
_LOGITS = _RS.randn(2, 4).astype(np.float32)


@pytest.mark.parametrize("fn", [
    lambda m, D: D.Normal(m.tensor([0.0, 1.0]), m.tensor([1.0, 2.0])).log_prob(m.tensor([[0.5, 0.5], [1.0, 2.0]])),
    lambda m, D: D.Normal(m.tensor([0.0, 1.0]), m.tensor([1.0, 2.0])).entropy(),
    lambda m, D: (D.Normal(0.0, 2.0).cdf(m.tensor([0.3, -1.0])), D.Normal(0.0, 2.0).icdf(m.tensor([0.3, 0.9]))),
    lambda m, D: D.kl_divergence(D.Normal(m.tensor([0.0, 1.0]), m.tensor([1.0, 2.0])), D.Normal(m.tensor([0.5]),
                                                                                                  m.tensor([3.0]))),
    lambda m, D: D.Normal(m.tensor([0.0, 1.0]), 1.0).expand((3, 2)).log_prob(m.zeros(3, 2)),
    lambda m, D: D.Categorical(logits=m.tensor(_LOGITS)).log_prob(m.tensor([1, 3])),
    lambda m, D: D.Categorical(probs=m.tensor([0.2, 0.3, 0.5])).log_prob(m.tensor([[0, 1], [2, 2]])),
    lambda m, D: (D.Categorical(logits=m.tensor(_LOGITS)).entropy(), D.Categorical(probs=m.tensor([0.0, 0.5, 0.5]))
                  .entropy(), D.Categorical(logits=m.tensor(_LOGITS)).probs, D.Categorical(probs=m.tensor([1.0, 3.0]))
                  .logits),
    lambda m, D: D.kl_divergence(D.Categorical(logits=m.tensor(_LOGITS)), D.Categorical(probs=m.tensor([0.1, 0.2, 0.3,
                                                                                                        0.4]))),
    lambda m, D: D.kl_divergence(D.Categorical(probs=m.tensor([0.0, 1.0])), D.Categorical(probs=m.tensor([0.5, 0.5]))),
    lambda m, D: (D.Categorical(logits=m.tensor(_LOGITS)).mode, D.Categorical(logits=m.tensor(_LOGITS)).mean,
                  D.Categorical(logits=m.tensor(_LOGITS)).enumerate_support()),
    lambda m, D: D.OneHotCategorical(logits=m.tensor(_LOGITS)).log_prob(m.tensor([[0.0, 1, 0, 0], [0, 0, 0, 1]])),
    lambda m, D: (D.Bernoulli(probs=m.tensor([0.2, 0.7])).log_prob(m.tensor([1.0, 0.0])),
                  D.Bernoulli(logits=m.tensor([0.2, -3.0])).entropy(), D.Bernoulli(probs=m.tensor([0.2, 0.5, 0.7])).mode),
    lambda m, D: D.kl_divergence(D.Bernoulli(probs=m.tensor([0.2, 0.7])), D.Bernoulli(logits=m.tensor([0.2, -3.0]))),
    lambda m, D: (D.Uniform(m.tensor([0.0, 1.0]), m.tensor([2.0, 4.0])).log_prob(m.tensor([1.0, 1.5])),
                  D.Uniform(0.0, 2.0).cdf(m.tensor([0.5, 1.5])),
                  D.Uniform(0.0, 1.0, validate_args=False).log_prob(m.tensor(2.0))),
    lambda m, D: D.kl_divergence(D.Uniform(0.0, 1.0), D.Uniform(m.tensor([-1.0, 0.5]), m.tensor([2.0, 3.0]))),
    lambda m, D: (D.Exponential(m.tensor([0.5, 2.0])).log_prob(m.tensor([1.0, 0.3])), D.Exponential(2.0).entropy(),
                  D.kl_divergence(D.Exponential(m.tensor([0.5, 2.0])), D.Exponential(1.5))),
    lambda m, D: (D.Laplace(m.tensor([0.0, 1.0]), m.tensor([1.0, 2.0])).log_prob(m.tensor([0.5, -1.0])),
                  D.Laplace(0.0, 2.0).cdf(m.tensor([0.4, -1.0])), D.kl_divergence(D.Laplace(0.0, 1.0), D.Laplace(1.0, 2.0))),
    lambda m, D: (D.Independent(D.Normal(m.zeros(2, 3), m.ones(2, 3)), 1).log_prob(m.arange(6.0).view(2, 3)),
                  D.kl_divergence(D.Independent(D.Normal(m.zeros(2, 3), m.ones(2, 3)), 1),
                                  D.Independent(D.Normal(m.ones(2, 3), m.ones(2, 3) * 2), 1))),
    lambda m, D: (D.MultivariateNormal(m.zeros(3), covariance_matrix=m.tensor(_COV)).log_prob(
        m.tensor([[0.5, -0.3, 1.0], [0.0, 0.0, 0.0]])), D.MultivariateNormal(m.ones(2, 3), scale_tril=m.tensor(_L))
        .log_prob(m.tensor([0.5, -0.3, 1.0])), D.MultivariateNormal(m.zeros(2, 3), covariance_matrix=m.tensor(_COV))
        .entropy()),
    lambda m, D: D.kl_divergence(D.MultivariateNormal(m.zeros(3), covariance_matrix=m.tensor(_COV)),
                                 D.MultivariateNormal(m.ones(3), scale_tril=m.tensor(_L * 0.5 + np.eye(3, dtype=np.float32)))),
    lambda m, D: (D.MultivariateNormal(m.zeros(3), precision_matrix=m.tensor(np.linalg.inv(_COV).astype(np.float32)))
                  .log_prob(m.tensor([0.5, -0.3, 1.0])), D.MultivariateNormal(m.zeros(3), scale_tril=m.tensor(_L))
                  .covariance_matrix),
])
def test_distributions_match_torch(fn):
    assert_same(lambda m: fn(m, m.distributions), atol=2e-5)


def test_distribution_shapes_validation_and_gradients():
    for lib in (torch, ember):
        D = lib.distributions
        assert tuple(D.Normal(lib.zeros(3), 1.0).sample((5, 2)).shape) == (5, 2, 3)
        assert tuple(D.Categorical(logits=lib.zeros(2, 4)).sample((5,)).shape) == (5, 2)
        assert D.Categorical(logits=lib.zeros(2, 4)).sample().dtype == lib.int64
        d = D.Independent(D.Normal(lib.zeros(2, 3), lib.ones(2, 3)), 1)
        assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (3,)
        assert tuple(D.MultivariateNormal(lib.zeros(3), scale_tril=lib.tensor(_L)).rsample((4,)).shape) == (4, 3)
    for fn in (lambda m: m.distributions.Normal(m.tensor([0.0]), m.tensor([-1.0])),
               lambda m: m.distributions.Categorical(probs=m.tensor([-0.1, 1.1])),
               lambda m: m.distributions.Categorical(probs=m.tensor([0.5, 0.5])).log_prob(m.tensor(3)),
               lambda m: m.distributions.Bernoulli(probs=m.tensor([0.2])).log_prob(m.tensor([0.5])),
               lambda m: m.distributions.Uniform(2.0, 1.0),
               lambda m: m.distributions.Uniform(0.0, 1.0).log_prob(m.tensor(2.0)),
               lambda m: m.distributions.Categorical(),
               lambda m: m.distributions.Normal(m.zeros(3), 1.0).log_prob(m.zeros(2))):
        same_error(fn, exact=True)
    assert repr(ember.distributions.Normal(ember.zeros(3), 1.0)) == "Normal(loc: ember.Size([3]), scale: ember.Size([3]))"

    def grads(lib):
        D = lib.distributions
        loc = lib.tensor([0.3, -0.2], requires_grad=True)
        sc = lib.tensor([1.5, 0.7], requires_grad=True)
        lg = lib.tensor(_LOGITS, requires_grad=True)
        tot = (D.Normal(loc, sc).log_prob(lib.tensor([1.0, 2.0])).sum() + D.Normal(loc, sc).entropy().sum()
               + D.kl_divergence(D.Categorical(logits=lg), D.Categorical(logits=lg * 0.5)).sum()
               + D.Categorical(logits=lg).entropy().sum() + D.Normal(loc, sc).rsample().sum() * 0)
        tot.backward()
        return loc.grad, sc.grad, lg.grad
    assert_same(grads, atol=1e-5)
    ember.manual_seed(0)
    s = ember.distributions.Normal(ember.tensor(2.0), ember.tensor(0.5)).sample((20000,))
    assert abs(s.mean().item() - 2.0) < 0.02 and abs(s.std().item() - 0.5) < 0.02
    c = ember.distributions.Categorical(probs=ember.tensor([0.2, 0.3, 0.5])).sample((20000,))
    assert np.allclose(np.bincount(c.numpy(), minlength=3) / 20000, [0.2, 0.3, 0.5], atol=0.015)


# ---- torch.func -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [
    lambda m, F, x, y: F.grad(lambda a: (a ** 3).sum())(x),
    lambda m, F, x, y: F.grad(F.grad(lambda a: (a ** 3).sum()))(m.tensor(2.0)),
    lambda m, F, x, y: F.grad_and_value(lambda a, b: (a * b).sin().sum(), argnums=(0, 1))(x, y),
    lambda m, F, x, y: F.grad(lambda a: ((a ** 2).sum(), a.mean()), has_aux=True)(x),
    lambda m, F, x, y: F.grad(lambda d: (d["w"] * d["b"]).sum())({"w": x, "b": y})["w"],
    lambda m, F, x, y: F.vjp(lambda a: a.sin() * 2, x)[1](m.ones(3)),
    lambda m, F, x, y: F.jacrev(lambda a: a.sin() * a.sum())(x),
    lambda m, F, x, y: F.jacrev(lambda a, b: a * b, argnums=(0, 1))(x, y),
    lambda m, F, x, y: F.jacfwd(lambda a: a.exp())(x),
    lambda m, F, x, y: F.hessian(lambda a: (a ** 3).sum() + a.prod())(x),
    lambda m, F, x, y: F.jvp(lambda a: a.sin() * a.sum(), (x,), (y,)),
    lambda m, F, x, y: F.vmap(lambda a, b: a @ b, in_dims=(0, None))(m.ones(3, 2, 2), m.tensor([1.0, 2.0])),
    lambda m, F, x, y: F.vmap(lambda a: (a.sum(), a * 2))(m.arange(6.0).view(2, 3)),
    lambda m, F, x, y: F.vmap(lambda a: a.sum(0), in_dims=1)(m.arange(6.0).view(2, 3)),
    lambda m, F, x, y: F.vmap(F.grad(lambda a: (a ** 2).sum()))(m.arange(6.0).view(2, 3)),
])
def test_func_transforms_match_torch(fn):
    def run(m):
        out = fn(m, m.func, m.tensor([1.0, 2.0, 3.0]), m.tensor([0.5, -1.0, 2.0]))
        return out
    t, e = both(run)
    _assert_same(t, e, 1e-4)
    for a in ember.func._flatten(e)[0]:
        if isinstance(a, ember.Tensor):
            assert not a.requires_grad


def test_func_errors_and_functional_call():
    same_error(lambda m: m.func.grad(lambda a: a ** 2)(m.tensor([1.0, 2.0])), exact=True)
    same_error(lambda m: m.func.vmap(lambda a, b: a + b)(m.ones(2, 3), m.ones(3, 3)), exact=True)

    def run(lib):
        m = lib.nn.Linear(3, 2)
        m.load_state_dict({"weight": lib.ones(2, 3), "bias": lib.zeros(2)})
        x = lib.tensor([1.0, 2.0, 3.0])
        a = lib.func.functional_call(m, {"weight": lib.full((2, 3), 2.0)}, (x,))
        b = lib.func.functional_call(m, ({"weight": lib.full((2, 3), 3.0)}, {"bias": lib.ones(2)}), x)
        return a, b, m(x), lib.func.stack_module_state([m, m])[0]["weight"]
    assert_same(run)
    same_error(lambda m: m.func.functional_call(m.nn.Linear(2, 2), {"weight": m.ones(2, 2)}, m.ones(2), strict=True),
               exact=True)
    same_error(lambda m: m.func.functional_call(m.nn.Linear(2, 2), ({"weight": m.ones(2, 2)}, {"weight": m.ones(2, 2)}),
                                                m.ones(2)), exact=True)

    def closure(lib):            # a closed-over tensor that requires grad keeps the graph
        xr = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        g = lib.func.grad(lambda a: (a ** 2 * xr).sum())(lib.tensor([1.0, 2.0, 3.0]))
        g.sum().backward()
        return g.requires_grad, xr.grad
    assert_same(closure)


def _noop_hook(*args):
    return None


def test_deepcopy_and_pickle_of_parametrized_and_hooked_modules():
    m = ember.nn.Linear(3, 2)
    ember.nn.utils.parametrizations.weight_norm(m)
    c = copy.deepcopy(m)
    x = ember.ones(1, 3)
    assert ember.equal(c(x), m(x)) and type(c).__name__ == "ParametrizedLinear"
    buf = io.BytesIO()
    ember.save(m.state_dict(), buf)
    buf.seek(0)
    m2 = ember.nn.Linear(3, 2)
    ember.nn.utils.parametrizations.weight_norm(m2)
    m2.load_state_dict(ember.load(buf))
    assert ember.equal(m2(x), m(x))
    h = ember.nn.Linear(2, 2)
    h.register_full_backward_hook(_noop_hook)
    h2 = pickle.loads(pickle.dumps(h))
    assert ember.equal(h2(ember.ones(1, 2)), h(ember.ones(1, 2)))


def test_isin_edge_cases():
    assert_same(lambda m: m.isin(m.tensor([1.0, float("nan"), 3.0]), m.tensor([], dtype=m.float32)))
    assert_same(lambda m: m.isin(m.tensor([[1, 5], [3, 2]]), m.tensor([[2, 3], [3, 9]]), invert=True))
    assert_same(lambda m: m.isin(m.tensor([1.5, 2.0]), m.tensor([2, 7])))
    same_error(lambda m: m.isin(m.tensor(True), m.tensor([False])), exact=True)


def test_real_tensor_surface():
    def run(lib):
        x = lib.ones(2, 3)
        return [(x.is_sparse, x.is_quantized, x.is_mkldnn, x.is_nested, x.is_sparse_csr, x.is_inference(),
                 x.is_conj(), x.is_neg()), x.real is x, x.conj() is x, lib.conj(x) is x, x.resolve_neg() is x,
                x.split_with_sizes([1, 2], dim=1)[1], x.narrow_copy(1, 0, 2), [c.shape[1] for c in x.unsafe_chunk(2, 1)],
                lib.tensor([0.0]).is_nonzero(), lib.is_nonzero(lib.tensor(3)), lib.is_same_size(x, lib.ones(3)),
                lib.arange(3.0).apply_(lambda v: v * 2), lib.arange(3.0).map_(lib.ones(3), lambda a, b: a + b),
                lib.real(x) is x]
    assert_same(run)
    for fn in (lambda m: m.ones(2).imag, lambda m: m.imag(m.ones(2)), lambda m: m.tensor([1, 2]).is_nonzero(),
               lambda m: m.tensor([]).is_nonzero(), lambda m: m.ones(3).split_with_sizes([1, 1]),
               lambda m: m.ones(2, requires_grad=True).apply_(lambda v: v)):
        same_error(fn, exact=True)


def test_special_namespace_edge_values():
    assert_same(lambda m: m.special.erfcx(m.tensor([-30.0, -2.0, 0.5, 1.0, 3.0, 20.0, 1e5], dtype=m.float64)),
                atol=1e-12)
    assert_same(lambda m: m.special.log_ndtr(m.tensor([-40.0, -5.0, -1.0, 0.0, 5.0], dtype=m.float64)), atol=1e-10)
    assert_same(lambda m: m.special.i0e(m.tensor([0.0, 1.0, 29.9, 30.0, 800.0, -800.0], dtype=m.float64)), atol=1e-12)
    assert_same(lambda m: m.special.i1e(m.tensor([0.0, -5.0, 31.0, 800.0, -800.0], dtype=m.float64)), atol=1e-12)
    assert_same(lambda m: m.special.entr(m.tensor([-1.0, 0.0, 0.5])))
    assert_same(lambda m: m.special.xlog1py(m.tensor([0.0, 2.0]), m.tensor([-1.0, 1.0])))
    assert_same(lambda m: m.special.xlog1py(m.tensor([2]), 1))
    assert_same(lambda m: m.special.ndtr(m.tensor([1])))
    assert_same(lambda m: m.special.ndtri(m.tensor([0.0, 0.5, 1.0])))
    assert_same(lambda m: m.special.multigammaln(m.tensor([0.5]), 3))
    assert_same(lambda m: m.special.softmax(m.tensor([1, 2]), 0, dtype=m.float32))
    same_error(lambda m: m.special.multigammaln(m.ones(1), 0), exact=True)


def test_gradient_index_reduce_triangular_solve_errors():
    for fn in (lambda m: m.gradient(m.tensor([1.0, 2.0]), edge_order=2),
               lambda m: m.gradient(m.tensor([1.0, 2.0]), edge_order=3),
               lambda m: m.zeros(3, 2).index_reduce(0, m.tensor([0, 0, 2]), m.ones(3, 2), "foo"),
               lambda m: m.zeros(3, 2).index_reduce(0, m.tensor([0, 0]), m.ones(3, 2), "prod"),
               lambda m: m.zeros(3, 2).index_reduce(0, m.tensor([0.0, 0, 2]), m.ones(3, 2), "prod")):
        same_error(fn, exact=True)
    assert_same(lambda m: m.ones(3, 2).index_reduce_(0, m.tensor([0, 0, 2]), m.arange(6.0).view(3, 2), "mean",
                                                     include_self=False))
    with pytest.warns(UserWarning, match="triangular_solve is deprecated"):
        r = ember.triangular_solve(ember.ones(2, 1), ember.eye(2) * 2)
    assert r.solution.tolist() == [[0.5], [0.5]] and r.cloned_coefficient.tolist() == [[2.0, 0.0], [0.0, 2.0]]


def test_ctc_loss_values_and_errors():
    rs = np.random.RandomState(1)
    lp = rs.randn(5, 2, 4)
    assert_same(lambda m: m.nn.functional.ctc_loss(m.tensor(lp).log_softmax(2), m.tensor([[1, 1, 1, 1]] * 2),
                                                   m.tensor([5, 3]), m.tensor([4, 2]), reduction="none"))
    assert_same(lambda m: m.nn.functional.ctc_loss(m.tensor(lp[:, 0]).log_softmax(1), m.tensor([1, 2]), m.tensor(5),
                                                   m.tensor(2)))
    for fn in (lambda m: m.nn.functional.ctc_loss(m.tensor(lp), m.tensor([[1, 2]] * 2), m.tensor([6, 5]),
                                                  m.tensor([2, 2])),
               lambda m: m.nn.functional.ctc_loss(m.tensor(lp), m.tensor([[1, 2]] * 2), m.tensor([5, 5]),
                                                  m.tensor([3, 2]))):
        same_error(fn, exact=True)
    assert repr(ember.nn.CTCLoss(blank=2)) == repr(torch.nn.CTCLoss(blank=2))


def test_post_accumulate_grad_hook_must_return_none():
    same_error(lambda m: (lambda x: (x.register_post_accumulate_grad_hook(lambda p: p.grad.mul_(3)),
                                     (x * 1).sum().backward()))(m.ones(2, requires_grad=True)), exact=True)
    x = ember.ones(2, requires_grad=True)

    def triple(p):
        p.grad.mul_(3)
    x.register_post_accumulate_grad_hook(triple)
    (x * 1).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_data_parallel_on_cpu_and_distributed_queries():
    def run(lib):
        m = lib.nn.DataParallel(_lin(lib))
        return repr(m), list(m.state_dict()), m(lib.ones(2, 3)), m.device_ids
    assert_same(run)
    same_error(lambda m: m.nn.parallel.DistributedDataParallel(m.nn.Linear(2, 2)), exact=True)
    for name in ("get_rank", "get_world_size", "barrier"):
        same_error(lambda m: getattr(m.distributed, name)(), exact=True)
    assert ember.distributed.is_initialized() is torch.distributed.is_initialized() is False
    # is_available() and init_process_group on MPI: tests/test_distributed.py


def test_jit_entry_points_run_eagerly():
    def twice(x):
        return x * 2
    assert ember.jit.script(twice) is twice
    lin = ember.nn.Linear(2, 1)
    assert ember.jit.trace(lin, ember.ones(1, 2)) is lin
    assert ember.jit.ignore(twice) is twice and ember.jit.unused(twice) is twice
    assert ember.jit.ignore(drop=True)(twice) is twice
    assert not ember.jit.is_scripting() and not ember.jit.is_tracing()
    assert ember.jit.annotate(int, 3) == 3
    assert ember.jit.wait(ember.jit.fork(twice, ember.ones(1))).tolist() == [2.0]
    assert not isinstance(lin, ember.jit.ScriptModule)
    with pytest.raises(NotImplementedError, match="state_dict"):
        ember.jit.save(lin, io.BytesIO())
