"""The op table on the OpenCL device against the CPU (``device_optable.run_device_case``), and the
training steps of the MLP, CNN and small GPT with no CPU fallback.

- The ops of common models run as device kernels: the table's cases for them run on the device with no
  fallback and match the CPU (values and gradients).
- ``STILL_ON_CPU`` lists the common-model ops that have no device kernel yet: their cases must still
  match the CPU and their fallback must be counted (so the list is exact: an op that gains a kernel
  fails here until it is taken off).
- Ops outside the common-model list may still fall back (``OTHER_FALLBACKS``: cases whose fallback must be
  counted and whose values must match the CPU).
- The whole table (every registered op, on the device or a counted fallback) builds a few thousand kernels
  (most of an hour on a cold kernel cache), so it is a tool rather than a test:
  ``python tests/device_optable.py [name ...]`` lists every case's fallbacks and mismatches.
"""
import copy

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.devices import opencl as ocl

from device_support import needs_opencl, _quiet_fallback_warnings  # noqa: E402,F401 - autouse fixture
from device_optable import run_device_case
from optable import all_cases

pytestmark = needs_opencl

CASES = {c.name: c for c in all_cases()}

# the op table's cases of the ops the MLP, CNN and GPT (and the list) need, all on the device
ON_DEVICE = [
    "nn_linear", "nn_linear_nd", "nn_conv2d", "nn_conv2d_geometry", "nn_conv2d_depthwise", "nn_conv2d_1x1",
    "nn_conv_transpose2d", "nn_conv_transpose2d_plain", "nn_max_pool2d", "nn_max_pool2d_ceil_dil",
    "nn_max_pool2d_overlap", "nn_avg_pool2d", "nn_avg_pool2d_ceil", "nn_avg_pool2d_divisor",
    "nn_cross_entropy", "nn_cross_entropy_sum_smooth", "nn_cross_entropy_none_kdim", "layer_norm",
    "group_norm", "group_norm_4d", "cumsum", "cumsum_int", "cumsum_dtype", "sort", "sort_stable_ties", "sort_int",
    "sort_nan", "argsort", "topk", "topk_int", "scatter_src", "scatter_value", "nn_bce_logits",
    "nn_bce_logits_sum", "nn_bce", "nn_bce_none", "embedding", "gather_dim1", "index_select", "scatter_add", "index_add_alpha", "argmax", "softmax",
    "log_softmax",
    # recurrent layers (rnn_layer, lstm_layer, gru_layer and their backward ops)
    "tanh_layer", "tanh_layer_reverse", "relu_layer", "relu_layer_nobias", "gru_layer", "gru_layer_reverse",
    "gru_layer_nobias", "lstm_layer", "lstm_layer_reverse", "lstm_layer_nobias", "lstm_layer_proj",
    "lstm_layer_proj_reverse_nobias",
    # ctc_loss and ctc_loss_backward (ember/devices/ctc.py)
    "ctc_loss_mean", "ctc_loss_none_concat_targets", "ctc_loss_zero_infinity_sum",
    # 3-d convolution and pooling, adaptive max pooling (2-d and 3-d)
    "nn_conv3d", "nn_conv3d_same_unbatched", "nn_conv_transpose3d", "nn_max_pool3d", "nn_max_pool3d_ceil_dil",
    "nn_max_pool3d_dd", "nn_avg_pool3d", "nn_avg_pool3d_ceil_nopad", "nn_avg_pool3d_divisor", "nn_avg_pool3d_dd",
    "nn_adaptive_max_pool2d", "nn_adaptive_max_pool2d_dd", "nn_adaptive_max_pool1d", "nn_adaptive_max_pool3d",
    "nn_adaptive_max_pool3d_dd",
    # selections by rank and running max/min
    "kthvalue", "median_all", "median_all_odd", "median_all_ties", "median_dim", "median_int", "median_nan",
    "nanmedian", "cummax", "cummax_ties", "cummax_nan", "cummax_int",
    # scatter_reduce (a masked reduction) and the legacy scatter reduce
    "scatter_reduce_sum_incl", "scatter_reduce_sum_excl", "scatter_reduce_mean_incl", "scatter_reduce_mean_excl",
    "scatter_reduce_amax_incl", "scatter_reduce_amax_excl", "scatter_reduce_amin_incl", "scatter_reduce_amin_excl",
    "scatter_reduce_prod_incl", "scatter_reduce_prod_excl", "scatter_reduce_prod_zeros", "scatter_reduce_inplace_mean",
    "scatter_legacy_reduce",
    # random draws compared on the device; max unpooling
    "bernoulli_01", "bernoulli_method_01", "bernoulli_p", "nn_max_unpool1d", "nn_max_unpool2d", "nn_max_unpool3d",
    "cumprod", "cumprod_zeros", "cumprod_int", "cumprod_inplace", "logcumsumexp", "logcumsumexp_inf",
]

# common-model ops with no device kernel yet (case -> the op that falls back): none left
STILL_ON_CPU: dict = {}
# ops outside the common-model list that still run on the CPU (case -> the op that falls back): their
# fallback is counted and their values match (the list is exact: an op that gains a kernel fails here)
OTHER_FALLBACKS = {"masked_scatter": "masked_scatter"}      # (masked_select: a data-dependent shape)


@pytest.mark.parametrize("name", ON_DEVICE)
def test_common_model_op_runs_on_the_device(name):
    r = run_device_case(CASES[name])
    assert r.portable and not r.error, f"{name}: {r.error}"
    assert not r.fallbacks, f"{name}: fell back to the CPU: {r.fallbacks}"


@pytest.mark.parametrize("name", sorted({**STILL_ON_CPU, **OTHER_FALLBACKS}))
def test_listed_fallbacks_are_counted_and_correct(name):
    op = {**STILL_ON_CPU, **OTHER_FALLBACKS}[name]
    r = run_device_case(CASES[name])
    assert r.portable and not r.error, f"{name}: {r.error}"
    assert r.fallbacks.get(op, 0) >= 1, f"{name}: {op} no longer falls back ({r.fallbacks}): take it off the list"


def test_batch_norm_training_runs_on_the_device():
    ember.manual_seed(0)
    bn = ember.nn.BatchNorm2d(3)
    bn_d = copy.deepcopy(bn).to("opencl")
    x = ember.randn(4, 3, 5, 5)
    xd = x.to("opencl").requires_grad_()
    x.requires_grad_()
    ocl.reset_fallback_counts()
    y, y_d = bn(x), bn_d(xd)
    (y * y).sum().backward()
    (y_d * y_d).sum().backward()
    assert ocl.fallback_counts() == {}
    np.testing.assert_allclose(y_d.detach().cpu().numpy(), y.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(xd.grad.cpu().numpy(), x.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(bn_d.running_var.cpu().numpy(), bn.running_var.numpy(), rtol=1e-5)
    np.testing.assert_allclose(bn_d.weight.grad.cpu().numpy(), bn.weight.grad.numpy(), rtol=1e-4, atol=1e-4)


def _same_on_device(fn, *inputs):
    """``fn`` on CPU tensors and on their device copies gives the same values; returns the fallbacks."""
    cpu = fn(*inputs)
    ocl.reset_fallback_counts()
    dev = fn(*[t.to("opencl") for t in inputs])
    fb = ocl.fallback_counts()
    for c, d in zip(cpu if isinstance(cpu, tuple) else (cpu,), dev if isinstance(dev, tuple) else (dev,)):
        assert d.device.type == "opencl"
        np.testing.assert_allclose(d.detach().cpu().numpy(), c.detach().numpy(), rtol=1e-4, atol=1e-5)
    return fb


def test_library_code_keeps_device_tensors_on_the_device():
    """Functions that build helper tensors or check values on the host work on device tensors."""
    F = ember.nn.functional
    ember.manual_seed(0)
    x, img = ember.randn(4, 5), ember.randn(1, 2, 4, 4)
    assert _same_on_device(lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"), img) == {}
    idx, offs = ember.tensor([0, 1, 2, 3]), ember.tensor([0, 2])
    for mode in ("sum", "mean", "max"):
        _same_on_device(lambda i, w, o: F.embedding_bag(i, w, o, mode=mode), idx, x, offs)
    _same_on_device(lambda t, i: t.clone().index_put_((i,), ember.zeros(5, device=t.device)), x, ember.tensor([0, 2]))
    p = ember.full((6,), 0.5, device="opencl")
    assert set(ember.bernoulli(p).cpu().tolist()) <= {0.0, 1.0}
    with pytest.raises(RuntimeError):
        ember.bernoulli(ember.full((2,), 1.5, device="opencl"))
    for mod in (ember.nn.RNN(5, 3), ember.nn.GRU(5, 3), ember.nn.LSTM(5, 3)):
        dev = copy.deepcopy(mod).to("opencl")
        out, out_d = mod(x.unsqueeze(1))[0], dev(x.unsqueeze(1).to("opencl"))[0]
        np.testing.assert_allclose(out_d.detach().cpu().numpy(), out.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bad", [1.5, -0.25, float("nan")])
def test_binary_cross_entropy_checks_its_ranges_on_the_device(bad):
    """The device kernel raises torch's RuntimeError for a probability or target outside [0, 1] (NaN
    included), eagerly and compiled, with no fallback; the inputs stay as they were."""
    x, t = ember.rand(6, 5), ember.rand(6, 5)
    for which in ("input", "target"):
        xb, tb = x.clone(), t.clone()
        (xb if which == "input" else tb)[2, 3] = bad
        xd, td = xb.to("opencl"), tb.to("opencl")
        ocl.reset_fallback_counts()
        for fn in (F.binary_cross_entropy, ember.compile(lambda a, b: F.binary_cross_entropy(a, b))):
            with pytest.raises(RuntimeError, match=f"all elements of {which} should be between 0 and 1"):
                fn(xd, td)
        assert ocl.fallback_counts() == {}
        np.testing.assert_array_equal(xd.cpu().numpy(), xb.numpy())
    good = ember.compile(lambda a, b: F.binary_cross_entropy(a, b))(x.to("opencl"), t.to("opencl"))
    np.testing.assert_allclose(good.cpu().item(), F.binary_cross_entropy(x, t).item(), rtol=1e-5)


# ---- training steps ----------------------------------------------------------------------------------------

def _train(kind, opt_name, steps=3):
    from ember.bench import models as M
    cfg = M.GPTConfig(n_layer=1, n_embd=32, n_head=2, block_size=16)
    ember.manual_seed(0)
    model = M.mlp(ember) if kind == "mlp" else M.cnn(ember) if kind == "cnn" else M.gpt(ember, cfg)
    data = (M.gpt_batch(ember, 2, block_size=cfg.block_size, vocab_size=cfg.vocab_size) if kind == "gpt"
            else M.mlp_batch(ember, 8, kind=kind))
    dev_model = copy.deepcopy(model).to("opencl")
    dev_data = tuple(t.to("opencl") for t in data)
    runs = []
    for m, (x, y) in ((model, data), (dev_model, dev_data)):
        opt = M.optimizer(ember, opt_name, m.parameters())
        ocl.reset_fallback_counts()
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            if kind == "gpt":
                _, loss = m(x, y)
            else:
                loss = ember.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach().cpu().item()))
        runs.append((losses, [p.detach().cpu().numpy() for p in m.parameters()], ocl.fallback_counts()))
    return runs


@pytest.mark.parametrize("kind,opt_name", [("mlp", "sgd"), ("cnn", "sgd"), ("gpt", "adamw")])
def test_training_step_has_no_fallbacks_and_matches_the_cpu(kind, opt_name):
    (cpu_losses, cpu_params, _), (dev_losses, dev_params, fallbacks) = _train(kind, opt_name)
    assert fallbacks == {}, f"{kind}: CPU fallbacks per 3 steps: {fallbacks}"
    np.testing.assert_allclose(dev_losses, cpu_losses, rtol=1e-4, atol=1e-5)
    for a, b in zip(dev_params, cpu_params):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("name,kw", [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, maximize=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.01, betas=(0.3, 0.9))),
])
def test_optimizer_steps_on_the_device_match_the_cpu(name, kw):
    ember.manual_seed(0)
    m = ember.nn.Sequential(ember.nn.Linear(5, 7), ember.nn.Tanh(), ember.nn.Linear(7, 3))
    md = copy.deepcopy(m).to("opencl")
    opt, opt_d = getattr(ember.optim, name)(m.parameters(), **kw), getattr(ember.optim, name)(md.parameters(), **kw)
    sched = ember.optim.lr_scheduler.StepLR(opt_d, 1, gamma=0.5)       # lr changes every step on the device
    sched_c = ember.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    x = ember.randn(4, 5)
    ocl.reset_fallback_counts()
    for _ in range(4):
        for mm, oo, xx, ss in ((m, opt, x, sched_c), (md, opt_d, x.to("opencl"), sched)):
            oo.zero_grad()
            (mm(xx) ** 2).sum().backward()
            oo.step()
            ss.step()
    assert ocl.fallback_counts() == {}
    for a, b in zip(m.parameters(), md.parameters()):
        np.testing.assert_allclose(b.detach().cpu().numpy(), a.detach().numpy(), rtol=1e-4, atol=1e-5)
    for p, q in zip(m.parameters(), md.parameters()):
        for k, v in opt.state[p].items():
            dv = opt_d.state[q][k]
            assert dv.device.type == ("cpu" if k == "step" else "opencl")
            np.testing.assert_allclose(dv.cpu().numpy(), v.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_recurrent_modules_packed_bidirectional_on_the_device(kind):
    """Two bidirectional layers over a packed batch of different lengths (LSTM with a projection):
    outputs, final states and every gradient match the CPU, and nothing falls back."""
    from ember.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    ember.manual_seed(0)
    extra = {"proj_size": 3} if kind == "LSTM" else {}
    cpu = getattr(ember.nn, kind)(5, 6, num_layers=2, bidirectional=True, **extra)
    dev = copy.deepcopy(cpu).to("opencl")
    x = ember.randn(10, 4, 5)                 # more steps than the device's cat/stack kernels take inputs
    lengths = [10, 7, 7, 2]
    results = []
    ocl.reset_fallback_counts()
    for m, xx in ((cpu, x), (dev, x.to("opencl"))):
        xx = xx.clone().requires_grad_(True)
        out, state = m(pack_padded_sequence(xx, lengths))
        padded, _ = pad_packed_sequence(out)
        hs = state if isinstance(state, tuple) else (state,)
        loss = (padded * padded).sum() + sum((h * h).sum() for h in hs)
        loss.backward()
        results.append([padded, *hs, xx.grad] + [p.grad for p in m.parameters()])
    assert ocl.fallback_counts() == {}
    for c, d in zip(*results):
        np.testing.assert_allclose(d.detach().cpu().numpy(), c.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape,dim,dtype", [((3, 5000), 1, "float32"), ((9001,), 0, "float32"),
                                             ((4100, 3), 0, "int64"), ((2, 140000), -1, "float32")])
def test_long_cumsum_is_a_block_scan_on_the_device(shape, dim, dtype):
    """Scans longer than one masked sum (2048) run as block scans with carries: no fallback, values and
    the gradient (a reversed scan) match the CPU."""
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(shape) * 3).astype(dtype) if dtype != "int64" else rng.integers(-9, 9, shape)
    x = ember.from_numpy(a)
    xd = x.to("opencl")
    grad = dtype == "float32"
    if grad:
        xd.requires_grad_()
    ocl.reset_fallback_counts()
    out = ember.cumsum(xd, dim)
    if grad:
        w = rng.standard_normal(shape).astype(np.float32)
        (out * ember.from_numpy(w).to("opencl")).sum().backward()
    assert ocl.fallback_counts() == {}
    want = np.cumsum(a.astype(np.float64), axis=dim)
    if grad:
        np.testing.assert_allclose(out.detach().cpu().numpy(), want, rtol=1e-4, atol=1e-3)
        want_g = np.flip(np.cumsum(np.flip(w.astype(np.float64), dim), axis=dim), dim)
        np.testing.assert_allclose(xd.grad.cpu().numpy(), want_g, rtol=1e-4, atol=1e-3)
    else:
        np.testing.assert_array_equal(out.cpu().numpy(), want.astype(np.int64))


@pytest.mark.parametrize("shape,dim,descending,dtype", [((5000,), 0, False, "float32"), ((3, 3000), 1, True, "float32"),
                                                        ((2500, 2), 0, False, "int64"), ((2, 2100), -1, True, "ties"),
                                                        ((4097,), 0, False, "nan")])
def test_long_sort_merges_on_the_device(shape, dim, descending, dtype):
    """Dims longer than one ranking (2048) are sorted by ranked blocks and merge levels on the device:
    sort (stable, NaN last), argsort and topk match the CPU exactly, with no fallback."""
    rng = np.random.default_rng(1)
    if dtype == "int64":
        a = rng.integers(-50, 50, shape)
    elif dtype == "ties":
        a = rng.integers(0, 7, shape).astype(np.float32)
    else:
        a = rng.standard_normal(shape).astype(np.float32)
        if dtype == "nan":
            a[rng.integers(0, shape[0], 40)] = np.nan
    x = ember.from_numpy(a)
    xd = x.to("opencl")
    ocl.reset_fallback_counts()
    v, i = ember.sort(xd, dim, descending=descending, stable=True)
    tv, ti = ember.topk(xd, 5, dim, largest=not descending)
    assert ocl.fallback_counts() == {}
    cv, ci = ember.sort(x, dim, descending=descending, stable=True)
    np.testing.assert_array_equal(i.cpu().numpy(), ci.numpy())
    np.testing.assert_array_equal(v.cpu().numpy(), cv.numpy())
    ctv, cti = ember.topk(x, 5, dim, largest=not descending)
    np.testing.assert_array_equal(tv.cpu().numpy(), ctv.numpy())
    if dtype != "ties":              # (topk does not promise an order among equal values)
        np.testing.assert_array_equal(ti.cpu().numpy(), cti.numpy())


@pytest.mark.parametrize("xs,isz", [((100, 3), (5000, 3)), ((6000,), (6000,))])
def test_long_overwriting_scatter_on_the_device(xs, isz):
    """A scatter longer than the quadratic count (4096) sorts its targets on the device; repeated
    targets keep the last write (NumPy's and torch's CPU rule), untouched positions keep the input."""
    rng = np.random.default_rng(2)
    x, s = ember.randn(*xs), ember.randn(*isz)
    i = ember.from_numpy(rng.integers(0, xs[0], isz))
    ocl.reset_fallback_counts()
    r = x.to("opencl").scatter(0, i.to("opencl"), s.to("opencl"))
    assert ocl.fallback_counts() == {}
    np.testing.assert_array_equal(r.cpu().numpy(), x.scatter(0, i, s).numpy())


def test_bernoulli_on_the_device_draws_the_cpu_numbers():
    """Same seed, same 0/1 draws as on the CPU (the uniforms come from the same generator), no fallback,
    and the (zero) gradient of the probabilities lives on the device."""
    p = ember.rand(200, 300)
    ember.manual_seed(3)
    want = ember.bernoulli(p)
    pd = p.to("opencl").requires_grad_()
    ocl.reset_fallback_counts()
    ember.manual_seed(3)
    got = ember.bernoulli(pd)
    got.sum().backward()
    assert ocl.fallback_counts() == {}
    np.testing.assert_array_equal(got.detach().cpu().numpy(), want.numpy())
    assert pd.grad.device.type == "opencl" and not pd.grad.cpu().numpy().any()
