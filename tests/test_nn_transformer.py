"""Attention and transformer layers against torch: same weights (copied via state_dict), then outputs,
attention weights, input and parameter gradients; masks of every kind; state_dict keys, repr, init,
errors. (Functional scaled_dot_product_attention argument combinations are oracle cases in
tests/optable/nn_attention.py.)"""
import warnings

import numpy as np
import pytest
import torch

import ember
from oracle import same_error_message as _same_error

torch.set_num_threads(1)   # tiny tensors: threading only adds contention

RNG = np.random.default_rng(0)


def _arr(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _pair(name, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_mod = getattr(torch.nn, name)(*args, **kw)
        e_mod = getattr(ember.nn, name)(*args, **kw)
    e_mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})
    return e_mod, t_mod


def _close(e, t, what, atol=2e-5, rtol=2e-4):
    assert (e is None) == (t is None), what
    if t is None:
        return
    assert tuple(e.shape) == tuple(t.shape), f"{what}: shape {tuple(e.shape)} != {tuple(t.shape)}"
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), atol=atol, rtol=rtol, err_msg=what)


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [y for z in x for y in _flat(z)]
    return [x]


def _run(e_mod, t_mod, arrays, kwargs=None, grad=True, same=None, atol=2e-5, rtol=2e-4):
    """Call both modules with tensors made from ``arrays`` (``same`` = index groups sharing one tensor,
    e.g. self-attention query is key is value); compare outputs and all gradients."""
    kwargs = kwargs or {}
    e_in, t_in = [], []
    for i, a in enumerate(arrays):
        if same is not None and same.get(i) is not None:
            e_in.append(e_in[same[i]])
            t_in.append(t_in[same[i]])
            continue
        e_in.append(ember.tensor(a, requires_grad=grad))
        t_in.append(torch.tensor(a, requires_grad=grad))
    ekw, tkw = {}, {}
    for k, v in kwargs.items():
        if isinstance(v, np.ndarray):
            ekw[k], tkw[k] = ember.tensor(v), torch.tensor(v)
        else:
            ekw[k] = tkw[k] = v
    e_out, t_out = _flat(e_mod(*e_in, **ekw)), _flat(t_mod(*t_in, **tkw))
    assert len(e_out) == len(t_out)
    for k, (e, t) in enumerate(zip(e_out, t_out)):
        _close(e, t, f"output {k}", atol, rtol)
    if not grad:
        return
    outs = [(e, t) for e, t in zip(e_out, t_out) if t is not None]
    ws = [_arr(*t.shape) for _, t in outs]
    sum((t * torch.tensor(w)).sum() for (_, t), w in zip(outs, ws)).backward()
    sum((e * ember.tensor(w)).sum() for (e, _), w in zip(outs, ws)).backward()
    for k, (e, t) in enumerate(zip(e_in, t_in)):
        _close(e.grad, t.grad, f"input grad {k}", atol, rtol)
    t_params = dict(t_mod.named_parameters())
    for n, p in e_mod.named_parameters():
        _close(p.grad, t_params[n].grad, f"grad of {n}", atol, rtol)


# ---- MultiheadAttention ---------------------------------------------------------------------------------

L, S, N, E, HEADS = 4, 5, 3, 8, 2


def _bool_mask(*shape, p=0.3):
    m = RNG.random(shape) < p
    m[..., 0] = False          # keep one key per row (a fully masked row is NaN in the weights path)
    return m


def _float_mask(*shape):
    return np.where(_bool_mask(*shape), -np.inf, RNG.standard_normal(shape)).astype(np.float32)


def _mha_inputs(batch_first, batched=True, kdim=E, vdim=E, src=S):
    if not batched:
        return [_arr(L, E), _arr(src, kdim), _arr(src, vdim)]
    if batch_first:
        return [_arr(N, L, E), _arr(N, src, kdim), _arr(N, src, vdim)]
    return [_arr(L, N, E), _arr(src, N, kdim), _arr(src, N, vdim)]


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("masks", ["none", "bool_attn", "float_attn", "bool_kpm", "float_kpm", "both_bool",
                                   "both_float", "attn3d"])
def test_mha_masks(batch_first, need_weights, average, masks):
    e_mod, t_mod = _pair("MultiheadAttention", E, HEADS, batch_first=batch_first)
    kw = {"need_weights": need_weights, "average_attn_weights": average}
    if masks in ("bool_attn", "both_bool"):
        kw["attn_mask"] = _bool_mask(L, S)
    if masks in ("float_attn", "both_float"):
        kw["attn_mask"] = _float_mask(L, S)
    if masks == "attn3d":
        kw["attn_mask"] = _bool_mask(N * HEADS, L, S)
    if masks in ("bool_kpm", "both_bool"):
        kw["key_padding_mask"] = _bool_mask(N, S)
    if masks in ("float_kpm", "both_float"):
        kw["key_padding_mask"] = _float_mask(N, S)
    _run(e_mod, t_mod, _mha_inputs(batch_first), kw)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_self_attention_shares_projection(batch_first, need_weights):
    e_mod, t_mod = _pair("MultiheadAttention", E, HEADS, batch_first=batch_first)
    x = _arr(N, L, E) if batch_first else _arr(L, N, E)
    _run(e_mod, t_mod, [x, x, x], {"need_weights": need_weights}, same={1: 0, 2: 0})
    # key is value (cross-attention on one memory tensor)
    m = _arr(N, S, E) if batch_first else _arr(S, N, E)
    _run(e_mod, t_mod, [x, m, m], {"need_weights": need_weights}, same={2: 1})


@pytest.mark.parametrize("kw", [{"kdim": 3, "vdim": 6}, {"bias": False}, {"add_bias_kv": True},
                                {"add_zero_attn": True}, {"add_bias_kv": True, "add_zero_attn": True, "kdim": 5},
                                {"dropout": 0.0, "bias": False, "vdim": 4}])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("with_masks", [False, True])
def test_mha_options(kw, need_weights, with_masks):
    e_mod, t_mod = _pair("MultiheadAttention", E, HEADS, **kw)
    assert list(e_mod.state_dict()) == list(t_mod.state_dict())
    assert repr(e_mod) == repr(t_mod)
    call = {"need_weights": need_weights}
    if with_masks:
        call["attn_mask"] = _bool_mask(L, S)
        call["key_padding_mask"] = _bool_mask(N, S)
    _run(e_mod, t_mod, _mha_inputs(False, kdim=kw.get("kdim", E), vdim=kw.get("vdim", E)), call)


@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_unbatched(need_weights):
    e_mod, t_mod = _pair("MultiheadAttention", E, HEADS, batch_first=True)
    kw = {"need_weights": need_weights, "attn_mask": _bool_mask(L, S), "key_padding_mask": _bool_mask(S)}
    _run(e_mod, t_mod, _mha_inputs(True, batched=False), kw)
    kw["attn_mask"] = _float_mask(HEADS, L, S)
    kw["key_padding_mask"] = _float_mask(S)
    _run(e_mod, t_mod, _mha_inputs(True, batched=False), kw)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("kpm", [False, True])
def test_mha_is_causal(need_weights, kpm):
    e_mod, t_mod = _pair("MultiheadAttention", E, HEADS)
    mask = np.triu(np.full((L, L), -np.inf, np.float32), 1)
    kw = {"need_weights": need_weights, "attn_mask": mask, "is_causal": True}
    if kpm:
        kw["key_padding_mask"] = _float_mask(N, L)
    x = _mha_inputs(False, src=L)
    _run(e_mod, t_mod, x, kw)


def test_mha_eval_and_inference_path():
    # torch's inference fast path (eval, no grad, batch_first, self-attention) computes the same values
    e_mod, t_mod = _pair("MultiheadAttention", E, HEADS, batch_first=True, dropout=0.3)
    e_mod.eval()
    t_mod.eval()
    x = _arr(N, L, E)
    kpm = _bool_mask(N, L)
    for need in (True, False):
        with torch.no_grad():
            t_out, t_w = t_mod(*(torch.tensor(x),) * 3, key_padding_mask=torch.tensor(kpm), need_weights=need)
        ex = ember.tensor(x)
        with ember.no_grad():
            e_out, e_w = e_mod(ex, ex, ex, key_padding_mask=ember.tensor(kpm), need_weights=need)
        _close(e_out, t_out, "output")
        _close(e_w, t_w, "weights")
    _run(e_mod, t_mod, [x, x, x], {}, same={1: 0, 2: 0})


def test_mha_dropout_in_training():
    e_mod, _ = _pair("MultiheadAttention", E, HEADS, dropout=0.5)
    q = ember.tensor(_arr(L, N, E))
    out, w = e_mod(q, q, q, average_attn_weights=False)
    assert out.shape == (L, N, E) and w.shape == (N, HEADS, L, L)
    # dropped weights are exact zeros, kept ones scaled by 2: rows no longer sum to 1
    assert (w.detach().numpy() == 0).any()
    e_mod.eval()
    out2, w2 = e_mod(q, q, q, average_attn_weights=False)
    np.testing.assert_allclose(w2.detach().numpy().sum(-1), 1, rtol=1e-5)


def test_mha_default_init():
    ember.manual_seed(0)
    m = ember.nn.MultiheadAttention(64, 4, add_bias_kv=True)
    bound = (6 / (64 + 192)) ** 0.5
    w = m.in_proj_weight.detach().numpy()
    assert w.min() >= -bound and w.max() <= bound and w.max() > 0.95 * bound
    assert (m.in_proj_bias.detach().numpy() == 0).all() and (m.out_proj.bias.detach().numpy() == 0).all()
    ob = 1 / 64 ** 0.5
    assert np.abs(m.out_proj.weight.detach().numpy()).max() <= ob
    assert m.bias_k.shape == (1, 1, 64) and m.bias_k.detach().numpy().std() > 0
    assert type(m.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    assert isinstance(m.out_proj, ember.nn.Linear)


def test_mha_errors():
    _same_error(lambda: ember.nn.MultiheadAttention(10, 3), lambda: torch.nn.MultiheadAttention(10, 3))
    _same_error(lambda: ember.nn.MultiheadAttention(0, 3), lambda: torch.nn.MultiheadAttention(0, 3))
    e_mod, t_mod = _pair("MultiheadAttention", E, HEADS)
    x = _arr(L, N, E)

    def both(fn):
        _same_error(lambda: fn(ember, e_mod), lambda: fn(torch, t_mod))
    both(lambda m, mod: mod(m.tensor(x), m.tensor(x), m.tensor(x), attn_mask=m.zeros(L, L), is_causal=False,
                            key_padding_mask=m.zeros(N, L + 1)))
    both(lambda m, mod: mod(m.tensor(x), m.tensor(x), m.tensor(x), is_causal=True))
    both(lambda m, mod: mod(m.tensor(x), m.tensor(x), m.tensor(x), attn_mask=m.zeros(L, L + 1)))
    both(lambda m, mod: mod(m.tensor(x), m.tensor(x), m.tensor(x), attn_mask=m.zeros(3, L, L)))
    both(lambda m, mod: mod(m.tensor(x), m.tensor(x), m.tensor(x), attn_mask=m.zeros(L, L, dtype=m.int64)))
    both(lambda m, mod: mod(m.tensor(x), m.tensor(x[0]), m.tensor(x)))
    both(lambda m, mod: mod(m.tensor(x), m.tensor(x), m.tensor(x[:2])))
    both(lambda m, mod: mod(m.tensor(x[0, 0]), m.tensor(x), m.tensor(x)))
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask is deprecated"):
        q = ember.tensor(x)
        e_mod(q, q, q, attn_mask=ember.zeros(L, L), key_padding_mask=ember.zeros(N, L, dtype=ember.bool))


# ---- transformer layers ---------------------------------------------------------------------------------

D, FF = 8, 16


def _layer_kw(norm_first, activation, batch_first, bias=True):
    act = {"relu": "relu", "gelu": "gelu", "fn": None, "module_gelu": None}[activation]
    return dict(dim_feedforward=FF, dropout=0.0, norm_first=norm_first, batch_first=batch_first, bias=bias,
                **({"activation": act} if act else {}))


def _activation_pair(activation):
    if activation == "fn":
        return (lambda x: ember.tanh(x) * 2), (lambda x: torch.tanh(x) * 2)
    return ember.nn.GELU(), torch.nn.GELU()


def _pair_layer(name, act_kind, *args, **kw):
    if act_kind in ("fn", "module_gelu"):
        ea, ta = _activation_pair(act_kind)
        t_mod = getattr(torch.nn, name)(*args, activation=ta, **kw)
        e_mod = getattr(ember.nn, name)(*args, activation=ea, **kw)
        e_mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})
        return e_mod, t_mod
    return _pair(name, *args, **kw)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu", "fn", "module_gelu"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("train", [True, False])
def test_encoder_layer(norm_first, activation, batch_first, train):
    e_mod, t_mod = _pair_layer("TransformerEncoderLayer", activation, D, HEADS,
                               **_layer_kw(norm_first, activation, batch_first))
    assert repr(e_mod) == repr(t_mod)
    assert list(e_mod.state_dict()) == list(t_mod.state_dict())
    e_mod.train(train)
    t_mod.train(train)
    src = _arr(N, L, D) if batch_first else _arr(L, N, D)
    _run(e_mod, t_mod, [src], {"src_key_padding_mask": _bool_mask(N, L),
                               "src_mask": np.triu(np.full((L, L), -np.inf, np.float32), 1)})
    _run(e_mod, t_mod, [src])


def test_encoder_layer_no_bias_and_unbatched():
    e_mod, t_mod = _pair("TransformerEncoderLayer", D, HEADS, **_layer_kw(False, "relu", True, bias=False))
    assert list(e_mod.state_dict()) == list(t_mod.state_dict())
    _run(e_mod, t_mod, [_arr(L, D)], {"src_key_padding_mask": _bool_mask(L)})


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu", "fn"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer(norm_first, activation, batch_first):
    e_mod, t_mod = _pair_layer("TransformerDecoderLayer", activation, D, HEADS,
                               **_layer_kw(norm_first, activation, batch_first))
    assert repr(e_mod) == repr(t_mod)
    assert list(e_mod.state_dict()) == list(t_mod.state_dict())
    tgt = _arr(N, L, D) if batch_first else _arr(L, N, D)
    mem = _arr(N, S, D) if batch_first else _arr(S, N, D)
    kw = {"tgt_mask": np.triu(np.full((L, L), -np.inf, np.float32), 1), "memory_mask": _bool_mask(L, S),
          "tgt_key_padding_mask": _bool_mask(N, L), "memory_key_padding_mask": _bool_mask(N, S)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")    # mixed mask types warn in both libraries
        _run(e_mod, t_mod, [tgt, mem], kw)
    _run(e_mod, t_mod, [tgt, mem], {"tgt_mask": kw["tgt_mask"], "tgt_is_causal": True})
    e_mod.eval()
    t_mod.eval()
    _run(e_mod, t_mod, [tgt, mem])


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_stack(batch_first, norm_first):
    layer_t = torch.nn.TransformerEncoderLayer(D, HEADS, FF, 0.0, batch_first=batch_first, norm_first=norm_first)
    layer_e = ember.nn.TransformerEncoderLayer(D, HEADS, FF, 0.0, batch_first=batch_first, norm_first=norm_first)
    with warnings.catch_warnings(record=True) as tw:
        warnings.simplefilter("always")
        t_mod = torch.nn.TransformerEncoder(layer_t, 3, norm=torch.nn.LayerNorm(D))
    with warnings.catch_warnings(record=True) as ew:
        warnings.simplefilter("always")
        e_mod = ember.nn.TransformerEncoder(layer_e, 3, norm=ember.nn.LayerNorm(D))
    assert [str(w.message) for w in ew] == [str(w.message) for w in tw]
    assert e_mod.use_nested_tensor == t_mod.use_nested_tensor
    e_mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})
    assert repr(e_mod) == repr(t_mod)
    src = _arr(N, L, D) if batch_first else _arr(L, N, D)
    causal = np.triu(np.full((L, L), -np.inf, np.float32), 1)
    _run(e_mod, t_mod, [src], {"src_key_padding_mask": _bool_mask(N, L)})
    _run(e_mod, t_mod, [src], {"mask": causal})
    _run(e_mod, t_mod, [src], {"mask": causal, "is_causal": True})


def test_encoder_nested_tensor_inference_path():
    # eval + no grad + batch_first + a left-aligned padding mask: torch runs nested tensors and returns zeros
    # at the padded positions (before the final norm)
    layer_t = torch.nn.TransformerEncoderLayer(D, HEADS, FF, 0.1, batch_first=True)
    layer_e = ember.nn.TransformerEncoderLayer(D, HEADS, FF, 0.1, batch_first=True)
    for norm in (False, True):
        t_mod = torch.nn.TransformerEncoder(layer_t, 2, norm=torch.nn.LayerNorm(D) if norm else None)
        e_mod = ember.nn.TransformerEncoder(layer_e, 2, norm=ember.nn.LayerNorm(D) if norm else None)
        e_mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})
        e_mod.eval()
        t_mod.eval()
        src = _arr(N, L, D)
        lengths = [4, 2, 3]
        kpm = np.arange(L)[None, :] >= np.array(lengths)[:, None]
        for mask in (kpm, np.where(kpm, -np.inf, 0).astype(np.float32)):
            with torch.no_grad():
                t_out = t_mod(torch.tensor(src), src_key_padding_mask=torch.tensor(mask))
            with ember.no_grad():
                e_out = e_mod(ember.tensor(src), src_key_padding_mask=ember.tensor(mask))
            _close(e_out, t_out, f"nested path (norm={norm})")
        # with gradients required the ordinary path runs (no zeroing) in both
        _run(e_mod, t_mod, [src], {"src_key_padding_mask": kpm})


@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_stack(batch_first):
    layer_t = torch.nn.TransformerDecoderLayer(D, HEADS, FF, 0.0, batch_first=batch_first)
    layer_e = ember.nn.TransformerDecoderLayer(D, HEADS, FF, 0.0, batch_first=batch_first)
    t_mod = torch.nn.TransformerDecoder(layer_t, 2, norm=torch.nn.LayerNorm(D))
    e_mod = ember.nn.TransformerDecoder(layer_e, 2, norm=ember.nn.LayerNorm(D))
    e_mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})
    assert repr(e_mod) == repr(t_mod)
    tgt = _arr(N, L, D) if batch_first else _arr(L, N, D)
    mem = _arr(N, S, D) if batch_first else _arr(S, N, D)
    causal = np.triu(np.full((L, L), -np.inf, np.float32), 1)
    _run(e_mod, t_mod, [tgt, mem], {"tgt_mask": causal, "memory_key_padding_mask": _bool_mask(N, S)})


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer(batch_first, norm_first):
    e_mod, t_mod = _pair("Transformer", D, HEADS, 2, 2, FF, 0.0, batch_first=batch_first, norm_first=norm_first)
    assert list(e_mod.state_dict()) == list(t_mod.state_dict())
    assert repr(e_mod) == repr(t_mod)
    src = _arr(N, S, D) if batch_first else _arr(S, N, D)
    tgt = _arr(N, L, D) if batch_first else _arr(L, N, D)
    tgt_mask = ember.nn.Transformer.generate_square_subsequent_mask(L)
    ref = torch.nn.Transformer.generate_square_subsequent_mask(L)
    np.testing.assert_array_equal(tgt_mask.numpy(), ref.numpy())
    kw = {"tgt_mask": ref.numpy(), "src_key_padding_mask": _bool_mask(N, S),
          "memory_key_padding_mask": _bool_mask(N, S), "tgt_key_padding_mask": _bool_mask(N, L)}
    _run(e_mod, t_mod, [src, tgt], kw)
    e_mod.eval()
    t_mod.eval()
    _run(e_mod, t_mod, [src, tgt], {"tgt_mask": ref.numpy(), "tgt_is_causal": True})


def test_transformer_unbatched_and_errors():
    e_mod, t_mod = _pair("Transformer", D, HEADS, 1, 1, FF, 0.0)
    _run(e_mod, t_mod, [_arr(S, D), _arr(L, D)])
    _same_error(lambda: e_mod(ember.zeros(S, 2, D), ember.zeros(L, 3, D)),
                lambda: t_mod(torch.zeros(S, 2, D), torch.zeros(L, 3, D)))
    _same_error(lambda: e_mod(ember.zeros(S, 2, D + 1), ember.zeros(L, 2, D)),
                lambda: t_mod(torch.zeros(S, 2, D + 1), torch.zeros(L, 2, D)))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        ember.nn.TransformerEncoderLayer(D, HEADS, activation="tanh")


def test_transformer_init_and_mask_helper():
    ember.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = ember.nn.Transformer(16, 2, 1, 1, 32)
    w = m.encoder.layers[0].linear1.weight.detach().numpy()
    bound = (6 / (16 + 32)) ** 0.5
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    mask = ember.nn.Transformer.generate_square_subsequent_mask(3, dtype=ember.float64)
    assert mask.dtype is ember.float64
    np.testing.assert_array_equal(mask.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(3).numpy())
    assert m.d_model == 16 and m.nhead == 2 and m.batch_first is False


def test_transformer_dropout_trains_differently():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = ember.nn.Transformer(D, HEADS, 1, 1, FF, dropout=0.5)
    src, tgt = ember.randn(S, N, D), ember.randn(L, N, D)
    a = m(src, tgt)
    m.eval()
    b, c = m(src, tgt), m(src, tgt)
    np.testing.assert_array_equal(b.detach().numpy(), c.detach().numpy())
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())


# ---- scaled_dot_product_attention: errors, dropout, dtypes ------------------------------------------------

def test_sdpa_errors_match_torch():
    q, k, v = _arr(2, 3, 4), _arr(2, 5, 4), _arr(2, 5, 6)
    cases = [
        lambda m: m.nn.functional.scaled_dot_product_attention(m.tensor(q), m.tensor(k), m.tensor(v),
                                                               attn_mask=m.ones(3, 5, dtype=m.bool), is_causal=True),
        lambda m: m.nn.functional.scaled_dot_product_attention(m.tensor(q), m.tensor(k), m.tensor(v).double()),
        lambda m: m.nn.functional.scaled_dot_product_attention(m.tensor(q), m.tensor(k[:, :, :3]), m.tensor(v)),
        lambda m: m.nn.functional.scaled_dot_product_attention(m.tensor(q), m.tensor(k[:, :4]), m.tensor(v)),
        lambda m: m.nn.functional.scaled_dot_product_attention(m.tensor(q[0, 0]), m.tensor(k[0, 0]),
                                                               m.tensor(v[0, 0])),
        lambda m: m.nn.functional.scaled_dot_product_attention(m.tensor(q), m.tensor(k), m.tensor(v),
                                                               attn_mask=m.ones(3, 5, dtype=m.int64)),
        lambda m: m.nn.functional.scaled_dot_product_attention(m.tensor(q), m.tensor(k), m.tensor(v),
                                                               attn_mask=m.ones(4, 5)),
        lambda m: m.nn.functional.scaled_dot_product_attention(m.tensor(q), m.tensor(k), m.tensor(v),
                                                               attn_mask=m.ones(3, 3, 5)),
        lambda m: m.nn.functional.scaled_dot_product_attention(m.randn(1, 6, 3, 4), m.randn(1, 4, 5, 4),
                                                               m.randn(1, 4, 5, 4), enable_gqa=True),
    ]
    for fn in cases:
        _same_error(lambda: fn(ember), lambda: fn(torch))


def test_sdpa_bool_mask_broadcast_and_fully_masked():
    q, k, v = _arr(2, 3, 4, 8), _arr(2, 3, 5, 8), _arr(2, 3, 5, 8)
    mask = RNG.random((2, 1, 4, 5)) < 0.5
    mask[0, 0, 1] = False           # nothing to attend to: zeros (torch's math kernel, not NaN)
    t = torch.nn.functional.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v),
                                                         attn_mask=torch.tensor(mask))
    e = ember.nn.functional.scaled_dot_product_attention(ember.tensor(q), ember.tensor(k), ember.tensor(v),
                                                         attn_mask=ember.tensor(mask))
    _close(e, t, "sdpa")
    assert (e.numpy()[0, :, 1] == 0).all()


def test_sdpa_dropout():
    q, k, v = (ember.tensor(_arr(2, 16, 8)) for _ in range(3))
    ref = ember.nn.functional.scaled_dot_product_attention(q, k, v)
    ember.manual_seed(3)
    a = ember.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    ember.manual_seed(3)
    b = ember.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert a.shape == ref.shape and not np.allclose(a.numpy(), ref.numpy())
    # unbiased: averaged over many draws the output approaches the dropout-free one
    acc = sum(ember.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.3).numpy() for _ in range(400))
    assert np.abs(acc / 400 - ref.numpy()).mean() < 0.05


def test_sdpa_float16():
    q, k, v = _arr(2, 3, 8), _arr(2, 5, 8), _arr(2, 5, 8)
    mask = RNG.random((3, 5)) < 0.7
    mask[:, 0] = True
    t = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(a).half() for a in (q, k, v)),
                                                         attn_mask=torch.tensor(mask))
    e = ember.nn.functional.scaled_dot_product_attention(*(ember.tensor(a).half() for a in (q, k, v)),
                                                         attn_mask=ember.tensor(mask))
    assert e.dtype is ember.float16
    np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), atol=5e-3, rtol=5e-3)
