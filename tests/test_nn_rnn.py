"""Recurrent layers against torch: same weights (copied via state_dict), then outputs, final states,
input/state/parameter gradients, second derivatives, state_dict keys, repr, init and errors."""
import itertools
import warnings

import numpy as np
import pytest
import torch

import ember
from oracle import same_error_message as _same_error

torch.set_num_threads(1)   # tiny tensors: threading only adds contention

RNG = np.random.default_rng(0)


def _copy(e_mod, t_mod):
    e_mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})


def _pair(name, *args, dtype="float32", **kw):
    t_mod = getattr(torch.nn, name)(*args, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e_mod = getattr(ember.nn, name)(*args, **kw)
    if dtype == "float64":
        t_mod = t_mod.double()
        e_mod = e_mod.double()
        e_mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})
    else:
        _copy(e_mod, t_mod)
    return e_mod, t_mod


def _leaf(arr):
    return ember.tensor(arr, requires_grad=True), torch.tensor(arr, requires_grad=True)


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [y for z in x for y in _flat(z)]
    return [x]


def _close(e, t, what, atol=1e-5, rtol=1e-4):
    assert tuple(e.shape) == tuple(t.shape), f"{what}: shape {tuple(e.shape)} != {tuple(t.shape)}"
    assert str(e.dtype).replace("ember.", "") == str(t.dtype).replace("torch.", ""), what
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), atol=atol, rtol=rtol, err_msg=what)


def _check(e_mod, t_mod, inputs, atol=1e-5, rtol=1e-4):
    """Run both modules on the same inputs (arrays or tuples of arrays); compare outputs and gradients."""
    e_in, t_in, e_leaves, t_leaves = [], [], [], []
    for a in inputs:
        if a is None:
            e_in.append(None)
            t_in.append(None)
        elif isinstance(a, tuple):
            pairs = [_leaf(x) for x in a]
            e_in.append(tuple(p[0] for p in pairs))
            t_in.append(tuple(p[1] for p in pairs))
            e_leaves += [p[0] for p in pairs]
            t_leaves += [p[1] for p in pairs]
        else:
            e, t = _leaf(a)
            e_in.append(e)
            t_in.append(t)
            e_leaves.append(e)
            t_leaves.append(t)
    e_out, t_out = e_mod(*e_in), t_mod(*t_in)
    e_flat, t_flat = _flat(e_out), _flat(t_out)
    assert len(e_flat) == len(t_flat)
    for k, (e, t) in enumerate(zip(e_flat, t_flat)):
        _close(e, t, f"output {k}", atol, rtol)
    ws = [RNG.standard_normal(tuple(t.shape)).astype(t.detach().numpy().dtype) for t in t_flat]
    sum((t * torch.tensor(w)).sum() for t, w in zip(t_flat, ws)).backward()
    sum((e * ember.tensor(w)).sum() for e, w in zip(e_flat, ws)).backward()
    for k, (e, t) in enumerate(zip(e_leaves, t_leaves)):
        _close(e.grad, t.grad, f"input grad {k}", atol, rtol)
    t_params = dict(t_mod.named_parameters())
    for n, p in e_mod.named_parameters():
        _close(p.grad, t_params[n].grad, f"grad of {n}", atol, rtol)
    return e_out, t_out


def _seq(T, B, I, batch_first=False, batched=True, dtype=np.float32):
    shape = (B, T, I) if batch_first else (T, B, I)
    if not batched:
        shape = (T, I)
    return RNG.standard_normal(shape).astype(dtype)


# ---- full layers --------------------------------------------------------------------------------------

# every (layers, bidirectional) pair, each with batch_first/bias on and off
CONFIGS = [(n, d, bf, not bf) for n, d, bf in itertools.product([1, 2], [False, True], [False, True])]


@pytest.mark.parametrize("name,kw", [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("GRU", {}), ("LSTM", {}),
                                     ("LSTM", {"proj_size": 3})])
@pytest.mark.parametrize("layers,bidir,batch_first,bias", CONFIGS)
def test_layer_matches_torch(name, kw, layers, bidir, batch_first, bias):
    e_mod, t_mod = _pair(name, 4, 5, num_layers=layers, bidirectional=bidir, batch_first=batch_first,
                         bias=bias, **kw)
    assert list(e_mod.state_dict()) == list(t_mod.state_dict())
    _check(e_mod, t_mod, [_seq(6, 3, 4, batch_first)])


@pytest.mark.parametrize("name,kw", [("RNN", {}), ("GRU", {}), ("LSTM", {}), ("LSTM", {"proj_size": 2})])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("batch_first", [False, True])
def test_layer_with_initial_state(name, kw, batched, batch_first):
    layers, dirs, B, H = 2, 2, 3, 5
    e_mod, t_mod = _pair(name, 4, H, num_layers=layers, bidirectional=True, batch_first=batch_first, **kw)
    hs = kw.get("proj_size", H)
    hshape = (layers * dirs, B, hs) if batched else (layers * dirs, hs)
    h0 = RNG.standard_normal(hshape).astype(np.float32)
    if name == "LSTM":
        cshape = (layers * dirs, B, H) if batched else (layers * dirs, H)
        state = (h0, RNG.standard_normal(cshape).astype(np.float32))
    else:
        state = h0
    _check(e_mod, t_mod, [_seq(5, B, 4, batch_first, batched), state])


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_layer_unbatched_without_state(name):
    e_mod, t_mod = _pair(name, 4, 5, num_layers=2)
    _check(e_mod, t_mod, [_seq(5, 1, 4, batched=False)])


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_layer_float64(name):
    e_mod, t_mod = _pair(name, 3, 4, num_layers=2, bidirectional=True, dtype="float64")
    _check(e_mod, t_mod, [_seq(4, 2, 3, dtype=np.float64)], atol=1e-10, rtol=1e-9)


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_dropout_between_layers(name):
    e_mod, t_mod = _pair(name, 4, 5, num_layers=3, dropout=0.5)
    assert repr(e_mod) == repr(t_mod)
    e_mod.eval()
    t_mod.eval()
    _check(e_mod, t_mod, [_seq(5, 2, 4)])
    # in training mode dropout changes the result and keeps the shapes
    e_mod.train()
    x = ember.tensor(_seq(5, 2, 4))
    out = e_mod(x)[0]
    e_mod.eval()
    ref = e_mod(x)[0]
    assert out.shape == ref.shape
    assert not np.allclose(out.detach().numpy(), ref.detach().numpy())


def test_only_some_inputs_need_grad():
    e_mod, t_mod = _pair("LSTM", 3, 4, num_layers=2)
    x = _seq(5, 2, 3)
    e_out = e_mod(ember.tensor(x))[0]
    t_out = t_mod(torch.tensor(x))[0]
    e_out.sum().backward()
    t_out.sum().backward()
    for n, p in t_mod.named_parameters():
        _close(getattr(e_mod, n).grad, p.grad, n)
    # gradient flows only to the states when the weights are frozen
    for p in e_mod.parameters():
        p.requires_grad_(False)
    h0 = ember.zeros(2, 2, 4, requires_grad=True)
    out, (h, c) = e_mod(ember.tensor(x), (h0, ember.zeros(2, 2, 4)))
    c.sum().backward()
    assert h0.grad is not None and h0.grad.shape == (2, 2, 4)


def test_grad_of_final_cell_state_only():
    e_mod, t_mod = _pair("LSTM", 3, 4, bidirectional=True)
    x = _seq(5, 2, 3)
    ex, tx = _leaf(x)
    e_mod(ex)[1][1].sum().backward()
    t_mod(tx)[1][1].sum().backward()
    _close(ex.grad, tx.grad, "input grad")


@pytest.mark.parametrize("name,kw", [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("GRU", {}), ("LSTM", {}),
                                     ("LSTM", {"proj_size": 2})])
def test_second_derivatives(name, kw):
    e_mod, t_mod = _pair(name, 3, 4, bidirectional=True, dtype="float64", **kw)
    x = _seq(4, 2, 3, dtype=np.float64)
    ex, tx = _leaf(x)
    e_out, t_out = _flat(e_mod(ex)), _flat(t_mod(tx))
    ws = [RNG.standard_normal(tuple(t.shape)) for t in t_out]
    e_loss = sum((o * ember.tensor(w)).sum() for o, w in zip(e_out, ws))
    t_loss = sum((o * torch.tensor(w)).sum() for o, w in zip(t_out, ws))
    e_params, t_params = [ex] + list(e_mod.parameters()), [tx] + list(t_mod.parameters())
    eg = ember.autograd.grad(e_loss, e_params, create_graph=True)
    tg = torch.autograd.grad(t_loss, t_params, create_graph=True)
    for k, (a, b) in enumerate(zip(eg, tg)):
        _close(a, b, f"grad {k}", 1e-10, 1e-8)
    e_s = sum((g * g).sum() for g in eg)
    t_s = sum((g * g).sum() for g in tg)
    egg = ember.autograd.grad(e_s, e_params, allow_unused=True)
    tgg = torch.autograd.grad(t_s, t_params, allow_unused=True)
    for k, (a, b) in enumerate(zip(egg, tgg)):
        if b is None:
            assert a is None or np.allclose(a.numpy(), 0)
            continue
        _close(a, b, f"second derivative {k}", 1e-9, 1e-7)


def test_state_dict_keys_and_shapes():
    for name, kw in [("LSTM", {"proj_size": 2}), ("GRU", {}), ("RNN", {"bias": False})]:
        e_mod, t_mod = _pair(name, 3, 4, num_layers=2, bidirectional=True, **kw)
        es, ts = e_mod.state_dict(), t_mod.state_dict()
        assert list(es) == list(ts)
        for k in ts:
            assert tuple(es[k].shape) == tuple(ts[k].shape), k
        assert [[tuple(p.shape) for p in ws] for ws in e_mod.all_weights] == \
               [[tuple(p.shape) for p in ws] for ws in t_mod.all_weights]


@pytest.mark.parametrize("args,kw", [
    ((3, 4), {}), ((3, 4, 2), {"bidirectional": True, "batch_first": True, "dropout": 0.5}),
    ((3, 4), {"bias": False}), ((3, 4), {"proj_size": 2, "num_layers": 3}), ((3, 4), {"nonlinearity": "relu"})])
def test_repr(args, kw):
    for name in ("RNN", "LSTM", "GRU"):
        if ("proj_size" in kw and name != "LSTM") or ("nonlinearity" in kw and name != "RNN"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert repr(getattr(ember.nn, name)(*args, **kw)) == repr(getattr(torch.nn, name)(*args, **kw))


def test_cell_repr():
    for name, kw in [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu", "bias": False}), ("LSTMCell", {}),
                     ("GRUCell", {"bias": False})]:
        assert repr(getattr(ember.nn, name)(3, 4, **kw)) == repr(getattr(torch.nn, name)(3, 4, **kw))


def test_default_init_bounds():
    ember.manual_seed(0)
    m = ember.nn.LSTM(10, 25, num_layers=2)
    bound = 1 / 25 ** 0.5
    vals = np.concatenate([p.detach().numpy().ravel() for p in m.parameters()])
    assert vals.min() >= -bound and vals.max() <= bound
    assert abs(vals.mean()) < 0.01 and abs(vals.std() - bound / 3 ** 0.5) < 0.01
    c = ember.nn.GRUCell(10, 16)
    vals = np.concatenate([p.detach().numpy().ravel() for p in c.parameters()])
    assert vals.min() >= -0.25 and vals.max() <= 0.25 and vals.max() > 0.24


# ---- cells --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,kw", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("LSTMCell", {}),
                                     ("GRUCell", {}), ("GRUCell", {"bias": False}), ("LSTMCell", {"bias": False})])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_state", [True, False])
def test_cell_matches_torch(name, kw, batched, with_state):
    e_mod, t_mod = _pair(name, 4, 5, **kw)
    assert list(e_mod.state_dict()) == list(t_mod.state_dict())
    x = RNG.standard_normal((3, 4) if batched else (4,)).astype(np.float32)
    hshape = (3, 5) if batched else (5,)
    state = None
    if with_state:
        h = RNG.standard_normal(hshape).astype(np.float32)
        state = (h, RNG.standard_normal(hshape).astype(np.float32)) if name == "LSTMCell" else h
    _check(e_mod, t_mod, [x, state])


def test_cell_unrolled_matches_layer():
    # an LSTMCell stepped by hand gives the LSTM layer's output
    torch.manual_seed(0)
    layer = ember.nn.LSTM(3, 4)
    cell = ember.nn.LSTMCell(3, 4)
    cell.load_state_dict({k[:-3]: v for k, v in layer.state_dict().items()})
    x = ember.randn(6, 2, 3)
    out, (h_n, c_n) = layer(x)
    h = c = ember.zeros(2, 4)
    for t in range(6):
        h, c = cell(x[t], (h, c))
        np.testing.assert_allclose(h.detach().numpy(), out[t].detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(c.detach().numpy(), c_n[0].detach().numpy(), atol=1e-6)


# ---- errors -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_forward_errors(name):
    e_mod, t_mod = _pair(name, 3, 4)
    for shape in [(5, 2, 4), (5, 2, 3, 1), (0, 2, 3)]:
        x = np.zeros(shape, np.float32)
        _same_error(lambda: e_mod(ember.tensor(x)), lambda: t_mod(torch.tensor(x)))
    _same_error(lambda: e_mod(ember.zeros(5, 2, 3, dtype=ember.float64)),
                lambda: t_mod(torch.zeros(5, 2, 3, dtype=torch.float64)))
    if name == "LSTM":
        _same_error(lambda: e_mod(ember.zeros(5, 2, 3), (ember.zeros(1, 3, 4), ember.zeros(1, 2, 4))),
                    lambda: t_mod(torch.zeros(5, 2, 3), (torch.zeros(1, 3, 4), torch.zeros(1, 2, 4))))
        _same_error(lambda: e_mod(ember.zeros(5, 2, 3), (ember.zeros(1, 2, 4), ember.zeros(1, 2, 5))),
                    lambda: t_mod(torch.zeros(5, 2, 3), (torch.zeros(1, 2, 4), torch.zeros(1, 2, 5))))
        _same_error(lambda: e_mod(ember.zeros(5, 2, 3), (ember.zeros(2, 4), ember.zeros(2, 4))),
                    lambda: t_mod(torch.zeros(5, 2, 3), (torch.zeros(2, 4), torch.zeros(2, 4))))
    else:
        _same_error(lambda: e_mod(ember.zeros(5, 2, 3), ember.zeros(1, 3, 4)),
                    lambda: t_mod(torch.zeros(5, 2, 3), torch.zeros(1, 3, 4)))
        _same_error(lambda: e_mod(ember.zeros(5, 2, 3), ember.zeros(2, 4)),
                    lambda: t_mod(torch.zeros(5, 2, 3), torch.zeros(2, 4)))
        _same_error(lambda: e_mod(ember.zeros(5, 3), ember.zeros(1, 2, 4)),
                    lambda: t_mod(torch.zeros(5, 3), torch.zeros(1, 2, 4)))


def test_constructor_errors():
    cases = [(("LSTM", 3, 4), {"proj_size": 4}), (("GRU", 3, 4), {"proj_size": 2}), (("RNN", 3, 4), {"dropout": 1.5}),
             (("RNN", 3, 4), {"nonlinearity": "sigmoid"}), (("LSTM", 0, 4), {}), (("LSTM", 3, 4), {"num_layers": 0}),
             (("LSTM", 3, 4), {"bias": 1}), (("LSTM", 3.0, 4), {})]
    for (name, *args), kw in cases:
        _same_error(lambda: getattr(ember.nn, name)(*args, **kw), lambda: getattr(torch.nn, name)(*args, **kw))
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        ember.nn.LSTM(3, 4, dropout=0.2)


@pytest.mark.parametrize("name", ["RNNCell", "GRUCell", "LSTMCell"])
def test_cell_errors(name):
    e_mod, t_mod = _pair(name, 3, 4)
    two = name == "LSTMCell"

    def st(lib, *shape):
        z = lib.zeros(*shape)
        return (z, z) if two else z
    _same_error(lambda: e_mod(ember.zeros(2, 5)), lambda: t_mod(torch.zeros(2, 5)))
    _same_error(lambda: e_mod(ember.zeros(2, 3, 1)), lambda: t_mod(torch.zeros(2, 3, 1)))
    _same_error(lambda: e_mod(ember.zeros(2, 3), st(ember, 3, 4)), lambda: t_mod(torch.zeros(2, 3), st(torch, 3, 4)))
    _same_error(lambda: e_mod(ember.zeros(2, 3), st(ember, 2, 5)), lambda: t_mod(torch.zeros(2, 3), st(torch, 2, 5)))
    _same_error(lambda: e_mod(ember.zeros(2, 3, dtype=ember.float64)),
                lambda: t_mod(torch.zeros(2, 3, dtype=torch.float64)))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_low_precision_keeps_dtype(name, dtype):
    t_mod = getattr(torch.nn, name)(3, 4).to(getattr(torch, dtype))
    e_mod = getattr(ember.nn, name)(3, 4).to(getattr(ember, dtype))
    e_mod.load_state_dict({k: ember.tensor(v.float().numpy()).to(getattr(ember, dtype))
                           for k, v in t_mod.state_dict().items()})
    x = _seq(5, 2, 3)
    t_out = t_mod(torch.tensor(x).to(getattr(torch, dtype)))[0]
    ex = ember.tensor(x).to(getattr(ember, dtype)).requires_grad_()
    e_out = e_mod(ex)[0]
    e_out.sum().backward()
    assert e_out.dtype is getattr(ember, dtype) and ex.grad.dtype is getattr(ember, dtype)
    assert e_mod.weight_hh_l0.grad.dtype is getattr(ember, dtype)
    np.testing.assert_allclose(e_out.detach().float().numpy(), t_out.detach().float().numpy(), atol=1e-2)


# ---- packed (variable-length) sequences ------------------------------------------------------------------

@pytest.mark.parametrize("name,kw", [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("GRU", {}), ("LSTM", {}),
                                     ("LSTM", {"proj_size": 3})])
@pytest.mark.parametrize("enforce_sorted,with_state", [(True, False), (False, True), (False, False)])
def test_packed_sequence(name, kw, enforce_sorted, with_state):
    layers, dirs, B, H = 2, 2, 4, 5
    e_mod, t_mod = _pair(name, 3, H, num_layers=layers, bidirectional=True, batch_first=True, **kw)
    lengths = [6, 4, 4, 1] if enforce_sorted else [3, 6, 1, 4]
    x = _seq(6, B, 3, batch_first=True)
    ex, tx = _leaf(x)
    e_pk = ember.nn.utils.rnn.pack_padded_sequence(ex, lengths, batch_first=True, enforce_sorted=enforce_sorted)
    t_pk = torch.nn.utils.rnn.pack_padded_sequence(tx, lengths, batch_first=True, enforce_sorted=enforce_sorted)
    e_args, t_args, e_states, t_states = [e_pk], [t_pk], [], []
    if with_state:
        hs = kw.get("proj_size", H)
        shapes = [(layers * dirs, B, hs)] + ([(layers * dirs, B, H)] if name == "LSTM" else [])
        pairs = [_leaf(RNG.standard_normal(s).astype(np.float32)) for s in shapes]
        e_states, t_states = [p[0] for p in pairs], [p[1] for p in pairs]
        e_args.append(tuple(e_states) if name == "LSTM" else e_states[0])
        t_args.append(tuple(t_states) if name == "LSTM" else t_states[0])
    e_out, e_h = e_mod(*e_args)
    t_out, t_h = t_mod(*t_args)
    assert type(e_out).__name__ == "PackedSequence"
    np.testing.assert_array_equal(e_out.batch_sizes.numpy(), t_out.batch_sizes.numpy())
    e_res, t_res = [e_out.data] + _flat(e_h), [t_out.data] + _flat(t_h)
    for k, (e, t) in enumerate(zip(e_res, t_res)):
        _close(e, t, f"result {k}")
    ws = [RNG.standard_normal(tuple(t.shape)).astype(np.float32) for t in t_res]
    sum((t * torch.tensor(w)).sum() for t, w in zip(t_res, ws)).backward()
    sum((e * ember.tensor(w)).sum() for e, w in zip(e_res, ws)).backward()
    _close(ex.grad, tx.grad, "input grad")
    for k, (e, t) in enumerate(zip(e_states, t_states)):
        _close(e.grad, t.grad, f"state grad {k}")
    t_params = dict(t_mod.named_parameters())
    for n, p in e_mod.named_parameters():
        _close(p.grad, t_params[n].grad, f"grad of {n}")
    # padded round trip matches torch's
    e_pad, e_len = ember.nn.utils.rnn.pad_packed_sequence(e_out, batch_first=True)
    t_pad, t_len = torch.nn.utils.rnn.pad_packed_sequence(t_out, batch_first=True)
    _close(e_pad, t_pad, "padded output")


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_packed_second_derivatives(name):
    e_mod, t_mod = _pair(name, 3, 4, bidirectional=True, dtype="float64")
    x = _seq(5, 3, 3, dtype=np.float64)
    ex, tx = _leaf(x)
    lengths = [5, 3, 2]
    e_out = _flat(e_mod(ember.nn.utils.rnn.pack_padded_sequence(ex, lengths))[1])
    t_out = _flat(t_mod(torch.nn.utils.rnn.pack_padded_sequence(tx, lengths))[1])
    eg = ember.autograd.grad(sum((o * o).sum() for o in e_out), [ex] + list(e_mod.parameters()), create_graph=True)
    tg = torch.autograd.grad(sum((o * o).sum() for o in t_out), [tx] + list(t_mod.parameters()), create_graph=True)
    for k, (a, b) in enumerate(zip(eg, tg)):
        _close(a, b, f"grad {k}", 1e-10, 1e-8)
    egg = ember.autograd.grad(sum((g * g).sum() for g in eg), [ex])[0]
    tgg = torch.autograd.grad(sum((g * g).sum() for g in tg), [tx])[0]
    _close(egg, tgg, "second derivative", 1e-9, 1e-7)


def test_packed_cell_state_grad_only():
    e_mod, t_mod = _pair("LSTM", 3, 4)
    x = _seq(5, 3, 3)
    ex, tx = _leaf(x)
    e_mod(ember.nn.utils.rnn.pack_padded_sequence(ex, [5, 2, 1]))[1][1].sum().backward()
    t_mod(torch.nn.utils.rnn.pack_padded_sequence(tx, [5, 2, 1]))[1][1].sum().backward()
    _close(ex.grad, tx.grad, "input grad")
