"""Operator gaps found by running unusual but valid calls against torch: dims of 0-d tensors, activations
on 0-d tensors (values, gradients, double gradients), uint8 bilinear/bicubic resampling (torch's
fixed-point path, bit for bit), F.pad with negative padding in every mode, 3-d 'area' interpolation,
``div``'s rounding_mode, and the 3-d modules with autograd."""
import math

import numpy as np
import pytest
import torch

import ember
from oracle import Case, run_case, same_error


def F(m):
    return m.nn.functional


# ---- dims of 0-d tensors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda m: m.tensor(1.).squeeze(10), lambda m: m.tensor(1.).squeeze((0, 3)), lambda m: m.squeeze(m.tensor(1.), -2),
    lambda m: m.tensor(1.).sum(1), lambda m: m.tensor(1.).mean(-2), lambda m: m.tensor(1.).unsqueeze(2),
    lambda m: m.tensor(1.).transpose(0, 1), lambda m: m.transpose(m.tensor(1.), -2, 0), lambda m: m.tensor(1.).flip(1),
    lambda m: m.tensor(1.).softmax(1), lambda m: m.tensor(1.).cumsum(1), lambda m: m.tensor(1.).argmax(1),
    lambda m: m.tensor(1.).max(1), lambda m: m.tensor(1.).std(2), lambda m: m.tensor(1.).logsumexp(1),
    lambda m: m.tensor(1.).squeeze((0, -1)), lambda m: m.ones(2, 1).squeeze((1, -1)),
], ids=["squeeze10", "squeeze-tuple", "squeeze-neg", "sum1", "mean-2", "unsqueeze2", "transpose", "transpose-neg",
        "flip", "softmax", "cumsum", "argmax", "max", "std", "logsumexp", "squeeze-repeated-0d", "squeeze-repeated"])
def test_dims_of_a_0d_tensor_raise_like_torch(call):
    same_error(call)


@pytest.mark.parametrize("call", [
    lambda m, x: x.squeeze(0), lambda m, x: x.squeeze(-1), lambda m, x: x.squeeze((0,)),
    lambda m, x: x.transpose(0, -1), lambda m, x: x.sum(0, keepdim=True), lambda m, x: x.unsqueeze(-1),
], ids=["squeeze0", "squeeze-1", "squeeze-tuple", "transpose", "sum-keepdim", "unsqueeze"])
def test_valid_dims_of_a_0d_tensor(call):
    run_case(Case("zero_d_dims", call, shapes=((),), layouts=("contig",)), "float64")


# ---- activations on 0-d tensors ----------------------------------------------------------------------------

_ACTS = {
    "hardsigmoid": lambda f, x: f.hardsigmoid(x), "hardtanh": lambda f, x: f.hardtanh(x), "relu6": lambda f, x: f.relu6(x),
    "leaky_relu": lambda f, x: f.leaky_relu(x, 0.1), "softshrink": lambda f, x: f.softshrink(x),
    "hardshrink": lambda f, x: f.hardshrink(x), "threshold": lambda f, x: f.threshold(x, 0.1, 2.0),
    "elu": lambda f, x: f.elu(x), "selu": lambda f, x: f.selu(x), "celu": lambda f, x: f.celu(x, 0.5),
    "gelu": lambda f, x: f.gelu(x), "gelu_tanh": lambda f, x: f.gelu(x, approximate="tanh"),
    "silu": lambda f, x: f.silu(x), "mish": lambda f, x: f.mish(x), "softplus": lambda f, x: f.softplus(x),
    "hardswish": lambda f, x: f.hardswish(x), "logsigmoid": lambda f, x: f.logsigmoid(x),
    "softsign": lambda f, x: f.softsign(x), "tanhshrink": lambda f, x: f.tanhshrink(x),
}


@pytest.mark.parametrize("name", sorted(_ACTS))
@pytest.mark.parametrize("value", [0.3, -4.0, 4.0])
def test_activation_on_a_0d_tensor(name, value):
    fn = _ACTS[name]
    # hardsigmoid has no double backward in torch (nor in ember: see the test below)
    run_case(Case(name, lambda m, x: fn(F(m), x), make=lambda rng, dt: [np.array(value, dtype=dt)],
                  layouts=("contig",), double_backward=name != "hardsigmoid"), "float64")
    run_case(Case(name, lambda m, x: fn(F(m), x), make=lambda rng, dt: [np.array(value, dtype=dt)],
                  layouts=("contig",)), "float32")


def test_hardsigmoid_backward_on_a_0d_tensor():
    x = ember.tensor(0.5, requires_grad=True)
    F(ember).hardsigmoid(x).backward()
    assert x.grad.shape == () and abs(x.grad.item() - 1 / 6) < 1e-7


def test_hardsigmoid_double_backward_raises_as_torch():
    def dd(m):
        x = m.tensor([0.5, -4.0], requires_grad=True)
        g, = m.autograd.grad(m.nn.functional.hardsigmoid(x).sum(), x, create_graph=True)
        assert g.requires_grad
        return m.autograd.grad(g.sum(), x)
    same_error(dd)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_clamping_activations_keep_half_dtypes(dt):
    for name in ("hardtanh", "relu6"):
        for shape in ((), (3,)):
            y = getattr(F(ember), name)(ember.zeros(shape, dtype=getattr(ember, dt)))
            assert y.dtype is getattr(ember, dt) and tuple(y.shape) == shape


def test_elu_second_derivative_at_zero_is_torchs():
    run_case(Case("elu0", lambda m, x: F(m).elu(x) + F(m).selu(x) + F(m).celu(x, 2.0),
                  make=lambda rng, dt: [np.array([0.0, -1.0, 1.0], dtype=dt)], layouts=("contig",),
                  double_backward=True), "float64")


# ---- uint8 bilinear / bicubic --------------------------------------------------------------------------------

def _uint8_cases():
    rng = np.random.default_rng(7)
    for k in range(32):
        mode = ("bilinear", "bicubic")[k % 2]
        ac = bool(k % 4 >= 2)
        n, c = int(rng.integers(1, 3)), int(rng.choice([1, 3, 4, 5, 8]))
        h, w = (int(v) for v in rng.integers(1, 9, size=2))
        if k % 3 == 0:
            kw = {"scale_factor": (float(rng.choice([0.5, 1.0, 1.5, 2.0, 0.7, 3.3])),
                                   float(rng.choice([0.5, 1.5, 2.0, 1.3])))}
            if min(math.floor(h * kw["scale_factor"][0]), math.floor(w * kw["scale_factor"][1])) < 1:
                kw = {"scale_factor": (2.0, 1.5)}
        else:
            kw = {"size": tuple(int(v) for v in rng.integers(1, 12, size=2))}
        yield mode, ac, (n, c, h, w), kw


@pytest.mark.parametrize("mode,ac,shape,kw", list(_uint8_cases()))
def test_uint8_bilinear_bicubic_bit_for_bit(mode, ac, shape, kw):
    # the reference is torch on a channels-last input: torch 2.13's contiguous-input kernel repeats the
    # first output row when the output width is 1 and there are more than 4 channels (its own channels-last
    # kernel, its float path and ember agree with each other there)
    a = np.random.default_rng(sum(shape)).integers(0, 256, size=shape).astype(np.uint8)
    t_in = torch.from_numpy(a).contiguous(memory_format=torch.channels_last)
    want = torch.nn.functional.interpolate(t_in, mode=mode, align_corners=ac, **kw)
    got = F(ember).interpolate(ember.from_numpy(a), mode=mode, align_corners=ac, **kw)
    assert got.dtype is ember.uint8 and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    if got.shape[-1] > 1 or shape[1] <= 4:
        contiguous = torch.nn.functional.interpolate(torch.from_numpy(a), mode=mode, align_corners=ac, **kw)
        np.testing.assert_array_equal(got.numpy(), contiguous.numpy())


def test_uint8_linear_modes_and_other_ints_refused_like_torch():
    same_error(lambda m: F(m).interpolate(m.ones(1, 1, 4, dtype=m.uint8), scale_factor=2, mode="linear"))
    same_error(lambda m: F(m).interpolate(m.ones(1, 1, 4, 4, dtype=m.int16), scale_factor=2, mode="bilinear"),
               exact=False)


def test_area_interpolation_in_3d():
    run_case(Case("area3d", lambda m, x: F(m).interpolate(x, size=(2, 3, 5), mode="area"), shapes=((2, 3, 5, 6, 7),)))


# ---- F.pad with negative padding ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad,shape", [((-1, 2), (2, 3, 6)), ((2, -1, -1, 1), (2, 3, 5, 6)),
                                       ((-2, -1, 1, -1), (1, 2, 5, 6)), ((1, -1, -1, 2, 0, -1), (1, 2, 4, 5, 6)),
                                       ((3, -2), (2, 5)), ((4, -3), (1, 2, 5)), ((-3, 2), (1, 2, 5)),
                                       ((0, 0, 0, 0, 2, -2), (1, 2, 3, 4, 5)), ((-1, 2, 1, -1, 2, -2), (1, 2, 3, 4, 5))])
def test_pad_with_negative_padding(mode, pad, shape):
    pairs = [(pad[i], pad[i + 1], shape[-1 - i // 2]) for i in range(0, len(pad), 2)]
    if mode == "circular" and any(max(a, b) > n - max(-a, 0) - max(-b, 0) for a, b, n in pairs):
        # torch 2.13 leaves part of its output uninitialised when a circular pad is longer than what the
        # negative pad leaves; ember wraps the cropped input again, checked against NumPy's wrap
        x = np.random.default_rng(0).standard_normal(shape)
        want = x
        for i, (a, b, _) in enumerate(pairs):
            d = x.ndim - 1 - i
            want = np.moveaxis(np.moveaxis(want, d, 0)[max(-a, 0):want.shape[d] - max(-b, 0)], 0, d)
            want = np.pad(want, [(0, 0)] * d + [(max(a, 0), max(b, 0))] + [(0, 0)] * (x.ndim - 1 - d), mode="wrap")
        np.testing.assert_array_equal(F(ember).pad(ember.tensor(x), pad, mode="circular").numpy(), want)
        return
    run_case(Case(f"pad_{mode}", lambda m, x: F(m).pad(x, pad, mode=mode), shapes=(shape,)))


def test_pad_that_removes_everything_is_refused_like_torch():
    same_error(lambda m: F(m).pad(m.ones(1, 2, 3), (-2, -2), mode="reflect"), exact=False)
    same_error(lambda m: F(m).pad(m.ones(1, 2, 3), (-2, -2), mode="replicate"), exact=False)


# ---- div rounding modes --------------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda m: m.div(m.ones(2), m.ones(2), rounding_mode="bad"), lambda m: m.ones(2).div(2, rounding_mode="floor "),
    lambda m: m.ones(2).div_(m.ones(2), rounding_mode="round"), lambda m: m.divide(m.ones(2), 3, rounding_mode=""),
], ids=["fn", "method-scalar", "inplace", "divide"])
def test_div_with_a_bad_rounding_mode(call):
    same_error(call)


# ---- the 3-d modules -----------------------------------------------------------------------------------------

def test_3d_modules_match_torch_with_gradients():
    torch.manual_seed(0)
    layers = [("Conv3d", (2, 4, (3, 2, 3)), {"stride": (1, 2, 1), "padding": 1, "padding_mode": "circular"}),
              ("MaxPool3d", (2,), {"ceil_mode": True}), ("AvgPool3d", (2, 1, 1), {"count_include_pad": False}),
              ("ConvTranspose3d", (4, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
              ("AdaptiveMaxPool3d", ((3, 2, 4),), {}), ("AdaptiveAvgPool3d", ((2, 1, 3),), {})]
    t_mods = [getattr(torch.nn, n)(*a, **k) for n, a, k in layers]
    e_mods = [getattr(ember.nn, n)(*a, **k) for n, a, k in layers]
    for tm, em in zip(t_mods, e_mods):
        assert repr(tm) == repr(em)
        em.load_state_dict({k: ember.from_numpy(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 2, 6, 9, 7)).astype(np.float32)
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    ty, ey = tx, ex
    for tm, em in zip(t_mods, e_mods):
        ty, ey = tm(ty), em(ey)
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
    ty.square().sum().backward()
    ey.square().sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    for tm, em in zip(t_mods, e_mods):
        for (n, tp), (_, ep) in zip(tm.named_parameters(), em.named_parameters()):
            np.testing.assert_allclose(ep.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=n)


def test_max_unpool3d_module_and_pool_indices():
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 6, 4)).astype(np.float32)
    outs = []
    for m in (torch, ember):
        pool, unpool = m.nn.MaxPool3d(2, return_indices=True), m.nn.MaxUnpool3d(2)
        v, i = pool(m.tensor(x))
        outs.append((v.numpy(), i.numpy(), unpool(v, i).numpy(), repr(unpool)))
    for a, b in zip(*outs):
        if isinstance(a, str):
            assert a == b
        else:
            np.testing.assert_array_equal(a, b)


def test_3d_autograd_node_names():
    for fn in (lambda m, x: F(m).max_pool3d(x, 2), lambda m, x: F(m).avg_pool3d(x, 2),
               lambda m, x: F(m).adaptive_avg_pool3d(x, 2), lambda m, x: F(m).adaptive_max_pool3d(x, (2, 3, 3)),
               lambda m, x: F(m).conv3d(x, m.ones(2, 2, 1, 1, 1)), lambda m, x: F(m).max_pool3d(x[0], 2)):
        names = [fn(m, m.ones(1, 2, 4, 4, 4, requires_grad=True)).grad_fn.name() for m in (torch, ember)]
        assert names[0] == names[1]


# ---- found by the fuzz of unusual arguments --------------------------------------------------------------

@pytest.mark.parametrize("op", ["floor_divide", "remainder", "fmod", "div_trunc", "div_floor"])
def test_integer_division_with_an_empty_result_divides_nothing(op):
    def call(m, a, b):
        if op.startswith("div_"):
            return m.div(a, b, rounding_mode=op[4:])
        return getattr(m, op)(a, b)
    run_case(Case(op, call, make=lambda rng, dt: [np.zeros((0, 3), dtype=np.int64), np.array([0, 1, 2])],
                  dtypes=("int64",), layouts=("contig",)), "int64")
    same_error(lambda m: call(m, m.ones(3, dtype=m.int64), m.tensor([0, 1, 2])))


@pytest.mark.parametrize("dt", ["int64", "int32", "int16", "uint8", "float32"])
def test_median_of_an_empty_tensor(dt):
    run_case(Case("median_empty", lambda m, x: (m.median(x), m.nanmedian(x)),
                  make=lambda rng, _: [np.zeros((0, 3), dtype=dt)], dtypes=(dt,), grad=False,
                  layouts=("contig",)), dt)


@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_amin_out_must_have_the_input_dtype(op):
    same_error(lambda m: getattr(m, op)(m.ones(3, 4), 0, out=m.empty(4, dtype=m.float64)))
    same_error(lambda m: getattr(m, op)(m.ones(3, 4), 0, out=m.empty(4, dtype=m.int64)))


@pytest.mark.parametrize("call", [
    lambda m, x: F(m).conv_transpose3d(x[:0], m.ones(2, 3, 2, 2, 2)),
    lambda m, x: F(m).conv_transpose2d(x[:0, :, 0], m.ones(2, 3, 2, 2)),
    lambda m, x: F(m).adaptive_avg_pool3d(x[:0], (2, 3, 4)),
    lambda m, x: F(m).max_pool3d(x[:0], 2), lambda m, x: F(m).avg_pool3d(x[:0], 2),
    lambda m, x: F(m).conv3d(x[:0], m.ones(3, 2, 2, 2, 2)),
], ids=["conv_transpose3d", "conv_transpose2d", "adaptive_avg_pool3d", "max_pool3d", "avg_pool3d", "conv3d"])
def test_empty_batches(call):
    run_case(Case("empty_batch", call, shapes=((1, 2, 4, 5, 6),), layouts=("contig",)), "float32")


@pytest.mark.parametrize("nsp", [1, 2, 3])
def test_lp_pool_with_infinite_norm_is_max_pooling_of_magnitudes(nsp):
    shape = ((2, 3, 7), (2, 3, 5, 6), (1, 2, 4, 5, 6))[nsp - 1]
    run_case(Case("lp_inf", lambda m, x: getattr(F(m), f"lp_pool{nsp}d")(x, float("inf"), 2), shapes=(shape,)))


@pytest.mark.parametrize("call", [
    lambda m: F(m).avg_pool3d(m.ones(1, 1, 2, 2, 2, dtype=m.float16), 2),
    lambda m: F(m).avg_pool3d(m.ones(1, 1, 2, 2, 2, dtype=m.bfloat16), 2),
    lambda m: F(m).avg_pool3d(m.ones(2, 2), 2), lambda m: F(m).max_pool3d(m.ones(2, 2), 2),
    lambda m: F(m).adaptive_avg_pool3d(m.ones(2, 2, 2, 2, 2), (2, 2)),
    lambda m: F(m).conv3d(m.ones(1, 2, 3, 3, 3), m.ones(2, 3, 3, 3, 3)),
    lambda m: F(m).conv3d(m.ones(1, 2, 3, 3, 3), m.ones(2, 2, 4, 3, 3)),
    lambda m: F(m).conv_transpose3d(m.ones(1, 2, 3, 3, 3), m.ones(2, 2, 3, 3, 3), stride=2, output_padding=2),
    lambda m: F(m).conv_transpose3d(m.ones(1, 2, 1, 1, 1), m.ones(2, 2, 1, 1, 1), padding=1),
    lambda m: F(m).max_pool3d(m.ones(1, 2, 1, 3, 3), 2),
    lambda m: F(m).max_pool3d(m.ones(1, 2, 4, 4, 4), 2, padding=2),
], ids=["avg3d-half", "avg3d-bf16", "avg3d-2d", "max3d-2d", "adaptive3d-len2", "conv3d-channels",
        "conv3d-kernel", "conv_t3d-opad", "conv_t3d-size", "max3d-size", "max3d-pad"])
def test_3d_bad_input_raises_like_torch(call):
    same_error(call, exact=False)


def test_compiled_3d_model_matches_eager():
    import copy
    nn = ember.nn
    ember.manual_seed(0)
    m = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool3d(2), nn.Conv3d(4, 4, 3, padding=1),
                      nn.AvgPool3d(2), nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(4, 3))
    m2 = copy.deepcopy(m)
    x, y = ember.randn(2, 2, 8, 8, 8), ember.tensor([0, 2])

    def step(model, x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss
    want = step(m, x, y)
    got = ember.compile(step)(m2, x, y)
    assert abs(float(want) - float(got)) < 1e-6
    for p, q in zip(m.parameters(), m2.parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,out_dt", [("sum", "int64"), ("sum", "float64"), ("sum", "float16"), ("sum", "bool"),
                                       ("mean", "float64"), ("nansum", "float64"), ("prod", "int64")])
def test_reductions_compute_in_the_dtype_of_out(op, out_dt):
    x = np.array([[0.6, 0.6, -2.5], [0.7, 0.9, 3.1]], dtype=np.float32)
    got = [getattr(m, op)(m.from_numpy(x.copy()), 0, out=m.empty(3, dtype=getattr(m, out_dt))) for m in (torch, ember)]
    assert str(got[1].dtype).split(".")[-1] == out_dt
    np.testing.assert_array_equal(got[1].numpy(), got[0].numpy())


def test_mean_into_an_integer_out_is_refused_like_torch():
    same_error(lambda m: m.mean(m.ones(2, 3), 0, out=m.empty(3, dtype=m.int64)))
