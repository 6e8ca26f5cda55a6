"""Whole-model pickles between torch and ember: ``torch.save(model)`` loads with ``ember.load`` into ember
modules, and ``ember.save(model)`` loads with ``torch.load`` into torch modules, with
``weights_only=False`` or with the classes allow-listed under ``weights_only=True``; the loaded model
computes what the saved one does (forward, and a training step after loading)."""
import pickle
import pickletools
import sys
import types
import zipfile

import numpy as np
import pytest
import torch

import ember


def _build(lib, kind):
    nn = lib.nn
    lib.manual_seed(0)
    if kind == "mlp":
        return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
    if kind == "cnn":
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(4, 6, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3))
    if kind == "lstm":
        return nn.LSTM(6, 8, num_layers=2, batch_first=True, bidirectional=True)
    if kind == "transformer":
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, activation="gelu")
        return nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8), enable_nested_tensor=False)
    raise ValueError(kind)


INPUTS = {"mlp": (4, 6), "cnn": (2, 1, 8, 8), "lstm": (3, 5, 6), "transformer": (2, 5, 8)}
KINDS = sorted(INPUTS)


def _allowed(lib):
    """What a user allow-lists to load these models with weights_only=True."""
    nn = lib.nn
    return [nn.Sequential, nn.Linear, nn.ReLU, nn.Dropout, nn.Conv2d, nn.BatchNorm2d, nn.MaxPool2d, nn.Flatten,
            nn.AdaptiveAvgPool2d, nn.LSTM, nn.TransformerEncoder, nn.TransformerEncoderLayer, nn.MultiheadAttention,
            nn.modules.linear.NonDynamicallyQuantizableLinear, nn.LayerNorm, nn.ModuleList, lib.nn.functional.gelu]


def _x(kind):
    return np.random.default_rng(1).standard_normal(INPUTS[kind]).astype(np.float32)


def _out(model, lib, x):
    y = model(lib.tensor(x))
    return (y[0] if isinstance(y, tuple) else y).detach().numpy()


def _prime(model, lib, kind):
    """One training-mode forward (BatchNorm running stats move away from their initial values), then eval."""
    if kind == "cnn":
        model.train()
        model(lib.tensor(_x(kind) * 2 + 1))
    return model.eval()


def _globals_in(path):
    with zipfile.ZipFile(path) as z:
        data = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    return {a for op, a, _ in pickletools.genops(data) if op.name == "GLOBAL"}


def _assert_same_model(loaded, lib, saved, saved_lib, kind):
    """``loaded`` (a ``lib`` module) is ``saved`` (a ``saved_lib`` module): class, mode, every submodule
    a ``lib`` module, outputs and state."""
    assert type(loaded).__module__.startswith(lib.__name__ + ".nn.modules.")
    assert type(loaded).__name__ == type(saved).__name__ and loaded.training == saved.training
    assert all(isinstance(m, lib.nn.Module) for m in loaded.modules())
    np.testing.assert_allclose(_out(loaded, lib, _x(kind)), _out(saved, saved_lib, _x(kind)), rtol=1e-5, atol=1e-5)
    assert loaded.state_dict().keys() == saved.state_dict().keys()
    for k, v in saved.state_dict().items():
        np.testing.assert_array_equal(loaded.state_dict()[k].numpy(), v.numpy())


@pytest.mark.parametrize("kind", KINDS)
def test_torch_pickle_loads_into_ember(kind, tmp_path):
    tm = _prime(_build(torch, kind), torch, kind)
    torch.save(tm, tmp_path / "m.pt")
    _assert_same_model(ember.load(tmp_path / "m.pt", weights_only=False), ember, tm, torch, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_ember_pickle_loads_into_torch(kind, tmp_path):
    em = _prime(_build(ember, kind), ember, kind)
    ember.save(em, tmp_path / "m.pt")
    names = _globals_in(tmp_path / "m.pt")
    assert not any(n.startswith("ember") for n in names), names
    _assert_same_model(torch.load(tmp_path / "m.pt", weights_only=False), torch, em, ember, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_weights_only_with_allowlisted_classes(kind, tmp_path):
    tm = _prime(_build(torch, kind), torch, kind)
    torch.save(tm, tmp_path / "t.pt")
    with pytest.raises(pickle.UnpicklingError, match="torch.nn.modules"):
        ember.load(tmp_path / "t.pt")  # nothing allow-listed: refused, naming the class
    with ember.serialization.safe_globals(_allowed(ember)):
        em = ember.load(tmp_path / "t.pt")
    np.testing.assert_allclose(_out(em, ember, _x(kind)), _out(tm, torch, _x(kind)), rtol=1e-5, atol=1e-5)

    ember.save(em, tmp_path / "e.pt")
    with torch.serialization.safe_globals(_allowed(torch)):
        tm2 = torch.load(tmp_path / "e.pt")
    np.testing.assert_allclose(_out(tm2, torch, _x(kind)), _out(tm, torch, _x(kind)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_loaded_model_trains_like_the_original(kind, tmp_path):
    """A torch model saved whole, loaded into ember: one SGD step on both gives the same weights."""
    tm = _build(torch, kind).train()
    torch.save(tm, tmp_path / "m.pt")
    em = ember.load(tmp_path / "m.pt", weights_only=False)
    assert em.training
    if kind == "mlp":  # dropout draws differ between the libraries
        tm.eval()
        em.eval()
    for lib, m in ((torch, tm), (ember, em)):
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        y = m(lib.tensor(_x(kind)))
        (y[0] if isinstance(y, tuple) else y).pow(2).mean().backward()
        opt.step()
    for (k, a), (k2, b) in zip(tm.named_parameters(), em.named_parameters()):
        assert k == k2
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=k)


def hook_count(module, args, output):  # a module-level forward hook: pickled by reference
    module.calls = getattr(module, "calls", 0) + 1


NET_SOURCE = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.rnn = nn.GRU(6, 8, batch_first=True)
        self.head = nn.Linear(8, 4)
        self.register_buffer("scale", torch.ones(4) * 2)

    def forward(self, ids):
        out, _ = self.rnn(self.embed(ids))
        return self.head(out[:, -1]) * self.scale
'''


def _netdefs(lib):
    """A user's module ``netdefs`` defining ``Net`` on ``lib`` (``import ember as torch`` or torch)."""
    mod = types.ModuleType("netdefs")
    mod.torch, mod.nn = lib, lib.nn
    exec(NET_SOURCE, mod.__dict__)
    return mod


@pytest.mark.parametrize("src,dst", [(torch, ember), (ember, torch)], ids=["torch_to_ember", "ember_to_torch"])
def test_user_module_class_with_hook(src, dst, tmp_path, monkeypatch):
    """The user's class is pickled by its own path; its submodules, buffers and hooks cross over."""
    monkeypatch.setitem(sys.modules, "netdefs", _netdefs(src))
    src.manual_seed(0)
    net = sys.modules["netdefs"].Net()
    net.head.register_forward_hook(hook_count)
    ids = np.array([[1, 2, 3], [4, 5, 9]])
    want = net(src.tensor(ids)).detach().numpy()
    src.save(net, tmp_path / "net.pt")
    monkeypatch.setitem(sys.modules, "netdefs", _netdefs(dst))
    loaded = dst.load(tmp_path / "net.pt", weights_only=False)
    assert isinstance(loaded, sys.modules["netdefs"].Net) and isinstance(loaded.rnn, dst.nn.GRU)
    assert list(loaded.head._forward_hooks.values()) == [hook_count]
    np.testing.assert_allclose(loaded(dst.tensor(ids)).detach().numpy(), want, rtol=1e-5, atol=1e-6)
    assert loaded.head.calls == 1 + getattr(net.head, "calls", 0)


def test_ember_round_trip_keeps_ember_classes(tmp_path):
    m = _build(ember, "transformer")
    ember.save(m, tmp_path / "m.pt")
    back = ember.load(tmp_path / "m.pt", weights_only=False)
    assert type(back) is ember.nn.TransformerEncoder
    assert back.layers[0].activation is ember.nn.functional.gelu
    np.testing.assert_array_equal(_out(back.eval(), ember, _x("transformer")), _out(m.eval(), ember, _x("transformer")))


def test_functions_cross_by_torchs_names(tmp_path):
    """Functions stored on modules: F.relu, F.gelu (a torch._C._nn builtin in torch), ember.tanh."""
    em = ember.nn.Linear(2, 2)
    em.fns = [ember.nn.functional.relu, ember.nn.functional.gelu, ember.tanh]
    ember.save(em, tmp_path / "m.pt")
    assert {"torch.nn.functional relu", "torch._C._nn gelu", "torch tanh"} <= _globals_in(tmp_path / "m.pt")
    tm = torch.load(tmp_path / "m.pt", weights_only=False)
    assert tm.fns == [torch.nn.functional.relu, torch.nn.functional.gelu, torch.tanh]
    torch.save(tm, tmp_path / "t.pt")  # torch writes torch.tanh as getattr(torch._C._VariableFunctionsClass, "tanh")
    back = ember.load(tmp_path / "t.pt", weights_only=False)
    assert back.fns == [ember.nn.functional.relu, ember.nn.functional.gelu, ember.tanh]
