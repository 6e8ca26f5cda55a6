"""Regression tests for gaps that more third-party-style programs (examples/compat: dcgan, mixup, flows,
dqn, ...) hit, each checked against torch: Gamma / Beta / Dirichlet, MixtureSameFamily,
TransformedDistribution and its transforms, LogNormal, and the small API aliases those programs use."""
import numpy as np
import pytest
import torch

import ember


def _np(t):
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


def assert_same(fn, atol=1e-6, rtol=1e-5):
    """``fn(lib)`` under torch and under ember give the same values (tuples compared item by item)."""
    t, e = fn(torch), fn(ember)
    if not isinstance(t, (tuple, list)):
        t, e = (t,), (e,)
    assert len(t) == len(e)
    for a, b in zip(t, e):
        assert tuple(np.shape(_np(a))) == tuple(np.shape(_np(b)))
        np.testing.assert_allclose(_np(b).astype(np.float64), _np(a).astype(np.float64), atol=atol, rtol=rtol,
                                   equal_nan=True)


C1 = np.array([0.5, 2.0, 3.0], np.float32)
C0 = np.array([0.7, 1.5, 4.0], np.float32)
V = np.array([0.2, 0.5, 0.9], np.float32)


def _stats(d, value):
    return d.log_prob(value), d.entropy(), d.mean, d.variance, d.mode


@pytest.mark.parametrize("family", ["Beta", "Gamma", "LogNormal"])
def test_two_parameter_families_match_torch(family):
    assert_same(lambda L: _stats(getattr(L.distributions, family)(L.tensor(C1), L.tensor(C0)), L.tensor(V)))


def test_dirichlet_matches_torch():
    # the second row has every concentration < 1: torch's mode is the first class there
    conc = np.array([[0.5, 2.0, 3.0], [0.7, 0.5, 0.9]], np.float32)
    assert_same(lambda L: _stats(L.distributions.Dirichlet(L.tensor(conc)), L.tensor([[0.2, 0.3, 0.5]])))


def test_beta_log_prob_gradient_matches_torch():
    def fn(L):
        a = L.tensor(C1, requires_grad=True)
        b = L.tensor(C0, requires_grad=True)
        L.distributions.Beta(a, b).log_prob(L.tensor(V)).sum().backward()
        return a.grad, b.grad
    assert_same(fn, atol=1e-5)


def test_gamma_family_draws():
    ember.manual_seed(0)
    s = ember.distributions.Beta(ember.tensor(0.4), ember.tensor(0.4)).sample((20000,))
    assert s.shape == (20000,) and s.dtype == ember.float32
    assert float(s.min()) > 0 and float(s.max()) <= 1
    assert abs(s.mean().item() - 0.5) < 0.02 and abs(s.var().item() - 0.4 * 0.4 / (0.8 ** 2 * 1.8)) < 0.01
    ember.manual_seed(1)
    a = ember.distributions.Dirichlet(ember.tensor([1.0, 2.0, 3.0])).sample((4,))
    ember.manual_seed(1)
    b = ember.distributions.Dirichlet(ember.tensor([1.0, 2.0, 3.0])).sample((4,))
    assert a.shape == (4, 3) and np.allclose(_np(a.sum(-1)), 1.0) and np.array_equal(_np(a), _np(b))
    rate = ember.tensor(2.0, requires_grad=True)
    r = ember.distributions.Gamma(ember.tensor(3.0), rate).rsample((50,))
    r.sum().backward()
    assert np.isclose(rate.grad.item(), -(r.sum().item()) / 2.0, rtol=1e-5)   # d(g / rate)/d rate = -x / rate
    assert ember.distributions.Gamma(ember.tensor(3.0, requires_grad=True), 1.0).rsample().requires_grad
    # (the concentration's gradient: tests/test_distributions_reparam_kl.py)
    assert ember.distributions.Gamma(ember.tensor(3.0, requires_grad=True), 1.0).sample().shape == ()


def _mixture(L, logits):
    D = L.distributions
    mu = L.tensor(np.array([[0.0, 1.0, 2.0], [-1.0, 0, 1]], np.float32))
    sd = L.tensor(np.array([[1.0, 0.5, 2.0], [0.3, 0.4, 0.5]], np.float32))
    return D.MixtureSameFamily(D.Categorical(logits=logits), D.Normal(mu, sd))


def test_mixture_same_family_matches_torch():
    def fn(L):
        logits = L.tensor(np.array([[0.1, 0.5, -0.3], [1.0, 0.0, 0.0]], np.float32), requires_grad=True)
        m = _mixture(L, logits)
        lp = m.log_prob(L.tensor(np.array([[0.3, 0.1], [2.0, -1.0]], np.float32)))   # (sample 2, batch 2)
        lp.sum().backward()
        return lp, m.mean, m.variance, m.cdf(L.tensor([0.5, 0.0])), logits.grad
    assert_same(fn, atol=1e-5)


def test_mixture_of_independent_normals_samples_and_scores():
    def fn(L):
        D = L.distributions
        m = D.MixtureSameFamily(D.Categorical(logits=L.zeros(4, 3)),
                                D.Independent(D.Normal(L.zeros(4, 3, 2), L.ones(4, 3, 2)), 1))
        s = m.sample((5,))
        assert tuple(s.shape) == (5, 4, 2) and m.batch_shape == (4,) and m.event_shape == (2,)
        return m.log_prob(L.ones(5, 4, 2) * 0.3), m.mean
    assert_same(fn)
    with pytest.raises(ValueError):
        ember.distributions.MixtureSameFamily(ember.distributions.Categorical(logits=ember.zeros(2)),
                                              ember.distributions.Normal(ember.zeros(3), ember.ones(3)))


def test_tanh_squashed_normal_matches_torch():
    """SAC's policy: Normal pushed through tanh then an affine rescale; log_prob and its gradient."""
    def fn(L):
        D = L.distributions
        mu = L.tensor(np.array([0.1, -0.4], np.float32), requires_grad=True)
        d = D.TransformedDistribution(D.Normal(mu, L.ones(2)),
                                      [D.transforms.TanhTransform(cache_size=1), D.transforms.AffineTransform(0.5, 2.0)])
        lp = d.log_prob(L.tensor([0.3, 1.1]))
        lp.sum().backward()
        return lp, mu.grad
    assert_same(fn, atol=1e-5)


@pytest.mark.parametrize("name", ["ExpTransform", "SigmoidTransform", "TanhTransform", "SoftplusTransform"])
def test_transforms_match_torch(name):
    def fn(L):
        t = getattr(L.distributions.transforms, name)()
        x = L.tensor([-1.5, -0.2, 0.0, 0.7, 2.0])
        y = t(x)
        return y, t.inv(y), t.log_abs_det_jacobian(x, y)
    assert_same(fn, atol=1e-5)


def test_compose_and_affine_event_dims_match_torch():
    def fn(L):
        T = L.distributions.transforms
        t = T.ComposeTransform([T.AffineTransform(L.tensor([1.0, -1.0]), L.tensor([2.0, 0.5]), event_dim=1),
                                T.ExpTransform()])
        x = L.tensor([[0.1, 0.2], [-0.3, 0.4]])
        y = t(x)
        base = L.distributions.Independent(L.distributions.Normal(L.zeros(2), L.ones(2)), 1)
        d = L.distributions.TransformedDistribution(base, [T.AffineTransform(L.zeros(2), L.ones(2) * 3, event_dim=1)])
        return y, t.inv(y), t.log_abs_det_jacobian(x, y), d.log_prob(x)
    assert_same(fn, atol=1e-5)


def _moments(d, value, entropy=True):
    out = [d.log_prob(value), d.mean, d.variance]
    if entropy:
        out.append(d.entropy())
    return out


@pytest.mark.parametrize("case", ["poisson", "binomial_probs", "binomial_logits", "student_t", "cauchy", "gumbel",
                                  "half_normal"])
def test_more_families_match_torch(case):
    loc = np.array([0.0, 1.0, -2.0], np.float32)
    scale = np.array([1.0, 0.5, 2.0], np.float32)
    x = np.array([0.3, 1.7, -1.0], np.float32)
    k = np.array([0.0, 2.0, 5.0], np.float32)
    make = {
        "poisson": lambda L: (L.distributions.Poisson(L.tensor([0.5, 2.0, 4.0])), L.tensor(k), False),
        "binomial_probs": lambda L: (L.distributions.Binomial(L.tensor([5.0, 5.0, 8.0]), probs=L.tensor([0.2, 0.5, 0.9])),
                                     L.tensor(k), False),
        "binomial_logits": lambda L: (L.distributions.Binomial(6, logits=L.tensor([-1.0, 0.3, 2.0])), L.tensor(k), False),
        "student_t": lambda L: (L.distributions.StudentT(L.tensor([0.8, 1.5, 5.0]), L.tensor(loc), L.tensor(scale)),
                                L.tensor(x), True),
        "cauchy": lambda L: (L.distributions.Cauchy(L.tensor(loc), L.tensor(scale)), L.tensor(x), True),
        "gumbel": lambda L: (L.distributions.Gumbel(L.tensor(loc), L.tensor(scale)), L.tensor(x), True),
        "half_normal": lambda L: (L.distributions.HalfNormal(L.tensor(scale)), L.tensor(np.abs(x)), True),
    }[case]

    def fn(L):
        d, v, ent = make(L)
        out = _moments(d, v, ent)
        if case in ("cauchy", "gumbel", "half_normal"):
            out += [d.cdf(v), d.icdf(L.tensor([0.1, 0.5, 0.8]))]
        if case.startswith("binomial"):
            out.append(d.mode)
        return out
    assert_same(fn, atol=1e-5)


def test_more_families_sample():
    D = ember.distributions
    ember.manual_seed(0)
    p = D.Poisson(ember.tensor([3.0])).sample((4000,))
    assert p.shape == (4000, 1) and abs(p.mean().item() - 3.0) < 0.15 and bool((p == p.round()).all())
    b = D.Binomial(10, probs=ember.tensor(0.3)).sample((4000,))
    assert abs(b.mean().item() - 3.0) < 0.15 and float(b.max()) <= 10
    t = D.StudentT(ember.tensor(30.0)).rsample((4000,))
    assert abs(t.std().item() - (30 / 28) ** 0.5) < 0.06
    loc = ember.tensor(0.5, requires_grad=True)
    g = D.Gumbel(loc, ember.tensor(2.0)).rsample((4000,))
    assert abs(g.mean().item() - (0.5 + 2.0 * 0.5772)) < 0.15
    g.sum().backward()
    assert loc.grad.item() == 4000
    h = D.HalfNormal(ember.tensor(2.0)).sample((4000,))
    assert float(h.min()) >= 0 and abs(h.mean().item() - 2.0 * (2 / np.pi) ** 0.5) < 0.1
    c = D.Cauchy(ember.tensor(0.0), ember.tensor(1.0)).sample((4000,))
    assert abs(float(c.median())) < 0.1


# ---- small API paths: torch.testing, torch.vmap, nn.utils.stateless, autograd.profiler --------------------------

def _close_cases(L):
    f32, f64 = L.float32, L.float64
    return [
        (L.ones(3), L.ones(3) + 5e-6), (L.ones(3), L.ones(3) + 2e-5),                         # f32 atol 1e-5
        (L.ones(3, dtype=f64), L.ones(3, dtype=f64) + 5e-8), (L.ones(3, dtype=f64), L.ones(3, dtype=f64) + 1e-6),
        (L.ones(3), L.ones(3, dtype=f64)), (L.ones(3), L.ones(2)), (L.tensor([1, 2]), L.tensor([1, 3])),
        (L.tensor([float("nan")]), L.tensor([float("nan")])), (1.0, 1.0 + 1e-9), (2, 3),
        ([L.ones(2), {"a": L.zeros(1)}], [L.ones(2), {"a": L.zeros(1)}]),
        ([L.ones(2), {"a": L.zeros(1)}], [L.ones(2), {"a": L.ones(1)}]),
        ({"a": L.ones(1)}, {"b": L.ones(1)}), ([L.ones(1)], [L.ones(1), L.ones(1)]),
        (L.ones(3, dtype=f32) * 1000, L.ones(3, dtype=f32) * 1000 + 1e-3),                   # inside rtol
    ]


def test_assert_close_passes_and_fails_like_torch():
    for i, ((ta, te), (ea, ee)) in enumerate(zip(_close_cases(torch), _close_cases(ember))):
        outcomes = []
        for fn, a, e in ((torch.testing.assert_close, ta, te), (ember.testing.assert_close, ea, ee)):
            try:
                fn(a, e)
                outcomes.append("pass")
            except Exception as exc:            # noqa: BLE001 - the exception type is what is compared
                outcomes.append(type(exc).__name__)
        assert outcomes[0] == outcomes[1], f"case {i}: torch {outcomes[0]}, ember {outcomes[1]}"
    for lib in (torch, ember):
        lib.testing.assert_close(lib.ones(2), lib.ones(2, dtype=lib.float64), check_dtype=False)
        lib.testing.assert_close(lib.tensor([float("nan")]), lib.tensor([float("nan")]), equal_nan=True)
        lib.testing.assert_close(lib.ones(2), lib.ones(2) + 0.01, rtol=0.0, atol=0.02)
        with pytest.raises(ValueError):
            lib.testing.assert_close(lib.ones(2), lib.ones(2), rtol=0.1)
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 3"):
        ember.testing.assert_close(ember.tensor([1.0, 2.0, 3.0]), ember.tensor([1.0, 2.5, 3.0]))


def test_vmap_stateless_and_autograd_profiler_paths():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    assert_same(lambda L: L.vmap(lambda r: (r * r).sum())(L.tensor(x)))
    assert_same(lambda L: L.nn.utils.stateless.functional_call(
        L.nn.Linear(2, 1), {"weight": L.ones(1, 2), "bias": L.zeros(1)}, (L.tensor(x),)))
    import ember.autograd.profiler as legacy     # noqa: F401  (torch's import path)
    with ember.autograd.profiler.profile(record_shapes=True, use_cuda=False) as prof:
        with ember.autograd.profiler.record_function("block"):
            (ember.ones(3) * 2).sum()
    names = {e.key for e in prof.key_averages()}
    assert "block" in names and "ember::mul" in names
    with ember.autograd.profiler.profile(enabled=False) as off:
        ember.ones(2).sum()
    assert off is not None


@pytest.mark.parametrize("kind", ["conv2d", "conv_transpose2d", "linear", "conv1d_no_bias_no_affine"])
def test_fuse_bn_eval_matches_torch(kind):
    def build(L):
        nn = L.nn
        rng = np.random.RandomState(0)
        if kind == "conv2d":
            layer, bn, x = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), rng.randn(2, 3, 6, 6)
        elif kind == "conv_transpose2d":
            layer, bn, x = nn.ConvTranspose2d(3, 4, 3, stride=2), nn.BatchNorm2d(4), rng.randn(2, 3, 4, 4)
        elif kind == "linear":
            layer, bn, x = nn.Linear(5, 4), nn.BatchNorm1d(4), rng.randn(6, 5)
        else:
            layer, bn, x = nn.Conv1d(3, 4, 3, bias=False), nn.BatchNorm1d(4, affine=False), rng.randn(2, 3, 7)
        return layer, bn, x

    def fn(L):
        layer, bn, x = build(L)
        r = np.random.RandomState(1)
        with L.no_grad():
            layer.weight.copy_(L.tensor(r.randn(*layer.weight.shape).astype(np.float32)))
            if layer.bias is not None:
                layer.bias.copy_(L.tensor(r.randn(4).astype(np.float32)))
            bn.running_mean.copy_(L.tensor(r.randn(4).astype(np.float32)))
            bn.running_var.copy_(L.tensor(r.uniform(0.5, 2, 4).astype(np.float32)))
            if bn.weight is not None:
                bn.weight.copy_(L.tensor(r.uniform(0.5, 2, 4).astype(np.float32)))
                bn.bias.copy_(L.tensor(r.randn(4).astype(np.float32)))
        layer.eval()
        bn.eval()
        x = L.tensor(x.astype(np.float32))
        U = L.nn.utils
        if kind == "linear":
            fused = U.fuse_linear_bn_eval(layer, bn)
        else:
            fused = U.fusion.fuse_conv_bn_eval(layer, bn, transpose=kind == "conv_transpose2d")
        assert isinstance(fused.weight, L.nn.Parameter) and fused.weight.requires_grad
        with L.no_grad():
            return fused(x), bn(layer(x)), fused.bias
    t, e = fn(torch), fn(ember)
    for a, b in zip(t, e):
        np.testing.assert_allclose(_np(b), _np(a), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(e[0]), _np(e[1]), rtol=1e-4, atol=1e-4)     # fused == conv then bn
    layer, bn, _ = build(ember)
    with pytest.raises(AssertionError, match="eval"):
        ember.nn.utils.fuse_conv_bn_eval(layer, bn) if kind != "linear" else ember.nn.utils.fuse_linear_bn_eval(layer, bn)


def _prune_run(L):
    import importlib
    P = importlib.import_module(L.__name__ + ".nn.utils.prune")
    r = np.random.RandomState(0)
    lin, conv = L.nn.Linear(6, 5), L.nn.Conv2d(3, 4, 3)
    l2, l3 = L.nn.Linear(4, 3), L.nn.Linear(3, 2)
    with L.no_grad():
        for m in (lin, conv, l2, l3):
            m.weight.copy_(L.tensor(r.randn(*m.weight.shape).astype(np.float32)))
            m.bias.zero_()
    P.l1_unstructured(lin, "weight", amount=0.3)
    m1 = lin.weight_mask.clone()
    P.l1_unstructured(lin, "weight", amount=4)          # iterative: 4 more of the remaining entries
    P.ln_structured(conv, "weight", amount=0.5, n=2, dim=0)
    m3 = conv.weight_mask.clone()
    P.ln_structured(conv, "weight", amount=1, n=1, dim=0)
    y = lin(L.ones(2, 6))
    keys = sorted(lin.state_dict().keys())
    pruned = P.is_pruned(lin)
    P.remove(lin, "weight")
    P.global_unstructured([(l2, "weight"), (l3, "weight")], pruning_method=P.L1Unstructured, amount=0.5)
    P.custom_from_mask(l3, "bias", L.tensor([1.0, 0.0]))
    return {"masks": [m1, m3, conv.weight_mask, l2.weight_mask, l3.weight_mask, l3.bias_mask],
            "values": [y, lin.weight, conv(L.ones(1, 3, 3, 3))],
            "meta": [keys, sorted(lin.state_dict().keys()), pruned, P.is_pruned(lin), P.is_pruned(l3),
                     type(lin.weight).__name__, sorted(n for n, _ in l3.named_parameters())]}


def test_prune_matches_torch():
    import torch.nn.utils.prune  # noqa: F401  (torch does not import it with torch.nn.utils)
    t, e = _prune_run(torch), _prune_run(ember)
    for a, b in zip(t["masks"] + t["values"], e["masks"] + e["values"]):
        np.testing.assert_allclose(_np(b), _np(a), rtol=1e-5, atol=1e-6)
    assert t["meta"] == e["meta"]
    lin = ember.nn.Linear(3, 3)
    with pytest.raises(ValueError):
        ember.nn.utils.prune.l1_unstructured(lin, "weight", amount=1.5)
    with pytest.raises(ValueError):
        ember.nn.utils.prune.l1_unstructured(lin, "weight", amount=10)
    with pytest.raises(ValueError):
        ember.nn.utils.prune.remove(lin, "bias")
    assert sorted(n for n, _ in lin.named_parameters()) == ["bias", "weight"] and not list(lin.buffers())
    ember.manual_seed(0)
    ember.nn.utils.prune.random_unstructured(lin, "weight", amount=4)
    assert int((lin.weight_mask == 0).sum()) == 4
    ember.nn.utils.prune.random_structured(ember.nn.Linear(3, 4), "weight", amount=2, dim=0)
