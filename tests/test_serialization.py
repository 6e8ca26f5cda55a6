"""ember.save / ember.load against torch.save / torch.load, plus the weights-only safety rules."""
from __future__ import annotations

import collections
import copy
import io
import os
import pickle
import warnings
import zipfile

import numpy as np
import pytest
import torch

import ember
import ember.serialization as ser

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool"]


def _np_values(name, shape=(3, 4), seed=0):
    rng = np.random.default_rng(seed)
    if name == "bool":
        return rng.random(shape) > 0.5
    if name in ("float32", "float64", "float16", "bfloat16"):
        return rng.standard_normal(shape).astype(np.float32)
    lo, hi = (0, 255) if name == "uint8" else (-100, 100)
    return rng.integers(lo, hi, shape).astype(np.int64)


def _ember(name, shape=(3, 4), seed=0):
    return ember.tensor(_np_values(name, shape, seed).tolist(), dtype=getattr(ember, name))


def _torch(name, shape=(3, 4), seed=0):
    return torch.tensor(_np_values(name, shape, seed).tolist(), dtype=getattr(torch, name))


def _as_np(t):
    """Values of an ember or torch tensor as float64/bool NumPy (bfloat16/float16 widened)."""
    if isinstance(t, torch.Tensor):
        t = t.detach()
        return t.numpy() if t.dtype == torch.bool else t.to(torch.float64).numpy()
    a = t._data
    return a if a.dtype == np.bool_ else a.astype(np.float64)


def _same(e, t):
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_array_equal(_as_np(e), _as_np(t))


# ---- module-level classes (pickle finds classes by module and name) ---------------------------

class Point:
    def __init__(self, xy, label):
        self.xy = xy
        self.label = label


class Evil:
    """Unpickling this runs a shell command: a weights-only load must refuse it."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class Net(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = ember.nn.Parameter(ember.arange(6, dtype=ember.float32).reshape(2, 3))
        self.bias = ember.nn.Parameter(ember.zeros(2))
        self.register_buffer("steps", ember.tensor([3]))
        self.inner = ember.nn.Sequential()


# ---- round trips ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", DTYPES)
def test_roundtrip_all_dtypes(tmp_path, name):
    e = _ember(name)
    ember.save({"x": e, "row": e.select(0, 1)}, tmp_path / "e.pt")
    # ember -> ember
    back = ember.load(tmp_path / "e.pt")
    assert back["x"].dtype is e.dtype
    np.testing.assert_array_equal(_as_np(back["x"]), _as_np(e))
    # ember -> torch
    t = torch.load(tmp_path / "e.pt", weights_only=True)
    _same(e, t["x"])
    _same(e.select(0, 1), t["row"])
    assert t["row"].untyped_storage().data_ptr() == t["x"].untyped_storage().data_ptr()
    # torch -> ember
    tt = _torch(name, seed=1)
    torch.save({"x": tt, "col": tt[:, 2]}, tmp_path / "t.pt")
    got = ember.load(tmp_path / "t.pt")
    _same(got["x"], tt)
    _same(got["col"], tt[:, 2])


def test_ember_views_load_as_shared_storage_in_torch(tmp_path):
    x = ember.arange(24, dtype=ember.float32).reshape(4, 6)
    views = {"x": x, "t": x.t(), "narrow": x.narrow(1, 2, 3), "row": x.select(0, 2),
             "diag": x.diagonal(), "chunk": x.chunk(2, 1)[1], "strided": x.as_strided((2, 2), (7, 1), 3)}
    ember.save(views, tmp_path / "v.pt")
    tx = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    want = {"x": tx, "t": tx.t(), "narrow": tx.narrow(1, 2, 3), "row": tx.select(0, 2),
            "diag": tx.diagonal(), "chunk": tx.chunk(2, 1)[1], "strided": tx.as_strided((2, 2), (7, 1), 3)}
    got = torch.load(tmp_path / "v.pt", weights_only=True)
    ptr = got["x"].untyped_storage().data_ptr()
    for k, w in want.items():
        assert torch.equal(got[k], w), k
        assert got[k].untyped_storage().data_ptr() == ptr, k
        assert got[k].stride() == w.stride() and got[k].storage_offset() == w.storage_offset(), k
    with zipfile.ZipFile(tmp_path / "v.pt") as z:  # one storage for all seven tensors
        assert [n for n in z.namelist() if "/data/" in n] == ["v/data/0"]
    got["row"].fill_(-1.0)  # a write through one alias shows in the others
    assert got["x"][2].eq(-1).all() and got["t"][:, 2].eq(-1).all() and got["diag"][2] == -1


def test_torch_views_load_as_shared_memory_in_ember(tmp_path):
    tx = torch.arange(20, dtype=torch.float64).reshape(4, 5)
    other = torch.ones(3, dtype=torch.int16)
    torch.save({"x": tx, "sub": tx[1:, ::2], "t": tx.t(), "e": tx.expand(2, 4, 5), "o": other, "o2": other[1:]},
               tmp_path / "t.pt")
    got = ember.load(tmp_path / "t.pt")
    for k, w in {"x": tx, "sub": tx[1:, ::2], "t": tx.t(), "e": tx.expand(2, 4, 5)}.items():
        _same(got[k], w)
        assert got[k].stride() == w.stride() and got[k].storage_offset() == w.storage_offset(), k
    got["sub"].fill_(7.0)  # writes through one alias are visible via the others
    tx[1:, ::2] = 7.0
    _same(got["x"], tx)
    _same(got["t"], tx.t())
    _same(got["e"], tx.expand(2, 4, 5))
    got["o2"].zero_()
    assert got["o"].tolist() == [1, 0, 0]
    # saving again keeps the sharing: torch sees one storage per original storage
    ember.save(got, tmp_path / "again.pt")
    back = torch.load(tmp_path / "again.pt", weights_only=True)
    assert back["sub"].untyped_storage().data_ptr() == back["x"].untyped_storage().data_ptr()
    assert back["o2"].untyped_storage().data_ptr() == back["o"].untyped_storage().data_ptr()
    assert back["o"].untyped_storage().data_ptr() != back["x"].untyped_storage().data_ptr()
    assert torch.equal(back["x"], tx)


def test_nested_plain_values_both_ways(tmp_path):
    def build(lib):
        return {
            "model": collections.OrderedDict(w=lib.ones(2, 2), b=lib.zeros(2)),
            "optimizer": {"state": {0: {"step": 3, "exp_avg": lib.full((2,), 0.5)}},
                          "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1],
                                            "nesterov": False, "name": None}]},
            "epoch": 7, "loss": 0.125, "tag": "run-α", "flags": [True, False, None], "big": 2 ** 70,
            "neg": -(2 ** 40), "tuple": (1, (2, 3)), "empty": {}, "blob": b"\x00\xff", "set": {1, 2},
            "c": 1 + 2j, "shape": lib.Size([2, 3]), "dtype": lib.float16, "dev": lib.device("cpu"),
        }

    e = build(ember)
    ember.save(e, tmp_path / "e.pt")
    t = torch.load(tmp_path / "e.pt", weights_only=True)
    tw = build(torch)
    torch.save(tw, tmp_path / "t.pt")
    for got, want_t in ((t, tw), (ember.load(tmp_path / "t.pt"), tw), (ember.load(tmp_path / "e.pt"), tw)):
        for k in ("epoch", "loss", "tag", "flags", "big", "neg", "tuple", "empty", "blob", "set", "c"):
            assert got[k] == want_t[k] and type(got[k]) is type(want_t[k]), k
        assert got["optimizer"]["param_groups"] == want_t["optimizer"]["param_groups"]
        assert got["optimizer"]["state"][0]["step"] == 3
        _same(got["optimizer"]["state"][0]["exp_avg"], want_t["optimizer"]["state"][0]["exp_avg"])
        assert isinstance(got["model"], collections.OrderedDict) and list(got["model"]) == ["w", "b"]
        assert tuple(got["shape"]) == (2, 3) and type(got["shape"]).__name__ == "Size"
        assert str(got["dtype"]).endswith("float16") and str(got["dev"]) == "cpu"


def test_parameters_and_requires_grad(tmp_path):
    p = ember.nn.Parameter(ember.ones(2, 2))
    frozen = ember.nn.Parameter(ember.zeros(3), requires_grad=False)
    leaf = ember.ones(2).requires_grad_()
    buf = ember.nn.Buffer(ember.arange(3))
    ember.save({"p": p, "frozen": frozen, "leaf": leaf, "nonleaf": leaf * 2, "buf": buf, "scalar": ember.tensor(2.5)},
               tmp_path / "e.pt")
    t = torch.load(tmp_path / "e.pt", weights_only=True)
    assert type(t["buf"]) is torch.Tensor and t["buf"].tolist() == [0, 1, 2]
    assert t["scalar"].shape == () and t["scalar"].item() == 2.5
    assert type(t["p"]) is torch.nn.Parameter and t["p"].requires_grad
    assert type(t["frozen"]) is torch.nn.Parameter and not t["frozen"].requires_grad
    assert type(t["leaf"]) is torch.Tensor and t["leaf"].requires_grad
    assert t["nonleaf"].requires_grad and t["nonleaf"].is_leaf and t["nonleaf"].tolist() == [2.0, 2.0]
    torch.save(t, tmp_path / "t.pt")
    e = ember.load(tmp_path / "t.pt")
    assert type(e["p"]) is ember.nn.Parameter and e["p"].requires_grad
    assert type(e["frozen"]) is ember.nn.Parameter and not e["frozen"].requires_grad
    assert type(e["leaf"]) is ember.Tensor and e["leaf"].requires_grad and e["leaf"].is_leaf


def test_tensor_attributes_roundtrip(tmp_path):
    x = ember.ones(2)
    x.note = "hello"
    ember.save([x], tmp_path / "e.pt")
    t = torch.load(tmp_path / "e.pt", weights_only=True)[0]
    assert t.note == "hello" and t.tolist() == [1.0, 1.0]
    torch.save([t], tmp_path / "t.pt")
    e = ember.load(tmp_path / "t.pt")[0]
    assert type(e) is ember.Tensor and e.note == "hello"


def test_module_state_dict_to_torch(tmp_path):
    net = Net()
    sd = net.state_dict()
    ember.save(sd, tmp_path / "sd.pt")
    t = torch.load(tmp_path / "sd.pt", weights_only=True)
    assert list(t) == ["weight", "bias", "steps"]
    np.testing.assert_array_equal(t["weight"].numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))
    assert t["steps"].dtype == torch.int64
    if hasattr(sd, "_metadata"):
        assert t._metadata == sd._metadata
    lin = torch.nn.Linear(3, 2)
    lin.load_state_dict({"weight": t["weight"], "bias": t["bias"]})
    torch.save(lin.state_dict(), tmp_path / "lin.pt")
    back = ember.load(tmp_path / "lin.pt")
    net.weight.data = back["weight"]
    np.testing.assert_array_equal(net.weight._data, np.arange(6, dtype=np.float32).reshape(2, 3))


# ---- weights_only safety ----------------------------------------------------------------------

def _handmade_checkpoint(path, obj):
    """A checkpoint written with the stdlib (zipfile + pickle), as an attacker could."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps(obj, protocol=2))
        z.writestr("archive/version", "3\n")
        z.writestr("archive/byteorder", "little")


@pytest.mark.parametrize("writer", ["torch", "ember", "handmade"])
def test_malicious_pickle_is_refused(tmp_path, writer):
    marker = tmp_path / "pwned"
    payload = {"state": [ember.ones(1) if writer == "ember" else 1, Evil(marker)]}
    path = tmp_path / "evil.pt"
    if writer == "torch":
        torch.save(payload, path)
    elif writer == "ember":
        ember.save(payload, path)
    else:
        _handmade_checkpoint(path, payload)
    refused = r"(?s)Weights only load failed.*Unsupported global: GLOBAL posix\.system"
    with pytest.raises(pickle.UnpicklingError, match=refused):
        ember.load(path)
    with pytest.raises(pickle.UnpicklingError, match="posix.system"):
        ember.deserialize(path.read_bytes())
    # blocked even when the user allowlists it
    with ser.safe_globals([os.system]):
        with pytest.raises(pickle.UnpicklingError, match="whose module posix is blocked"):
            ember.load(path)
    assert not marker.exists()
    assert "posix.system" in ser.get_unsafe_globals_in_checkpoint(path)


class _Sneaky:
    """REDUCE on an allowed class whose instance is callable must still be refused."""

    def __reduce__(self):
        return (eval, ("1 + 1",))


def test_other_globals_refused(tmp_path):
    _handmade_checkpoint(tmp_path / "a.pt", [_Sneaky()])
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL eval was not an allowed global"):
        ember.load(tmp_path / "a.pt")
    _handmade_checkpoint(tmp_path / "b.pt", collections.deque([1]))
    with pytest.raises(pickle.UnpicklingError, match="collections.deque"):
        ember.load(tmp_path / "b.pt")
    # an allowed global called with a non-storage persistent id is refused too
    with zipfile.ZipFile(tmp_path / "c.pt", "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02X\x03\x00\x00\x00abcQ.")  # BINPERSID('abc')
    with pytest.raises(pickle.UnpicklingError, match="Only persistent_load of storage"):
        ember.load(tmp_path / "c.pt")


def test_safe_globals_flow(tmp_path):
    obj = Point(ember.tensor([1.0, 2.0]), "origin")
    ember.save(obj, tmp_path / "p.pt")
    assert ser.get_unsafe_globals_in_checkpoint(tmp_path / "p.pt") == [f"{__name__}.Point"]
    with pytest.raises(pickle.UnpicklingError, match=rf"GLOBAL {__name__}\.Point was not an allowed global"):
        ember.load(tmp_path / "p.pt")
    with ser.safe_globals([Point]):
        assert Point in ser.get_safe_globals()
        got = ember.load(tmp_path / "p.pt")
        assert ser.get_unsafe_globals_in_checkpoint(tmp_path / "p.pt") == []
    assert Point not in ser.get_safe_globals()
    assert type(got) is Point and got.label == "origin" and got.xy.tolist() == [1.0, 2.0]
    with pytest.raises(pickle.UnpicklingError):
        ember.load(tmp_path / "p.pt")
    try:
        ser.add_safe_globals([(Point, f"{__name__}.Point")])
        assert ember.load(tmp_path / "p.pt").label == "origin"
    finally:
        ser.clear_safe_globals()
    assert ser.get_safe_globals() == []
    # weights_only=False loads any pickle (the user's responsibility)
    assert ember.load(tmp_path / "p.pt", weights_only=False).label == "origin"
    with pytest.raises(ValueError):
        ser.add_safe_globals([(Point, "a", "b")])


def test_whole_module_checkpoint(tmp_path):
    net = Net()
    ember.save(net, tmp_path / "net.pt")
    with pytest.raises(pickle.UnpicklingError, match="Net"):
        ember.load(tmp_path / "net.pt")
    with ser.safe_globals([Net, ember.nn.Sequential]):
        got = ember.load(tmp_path / "net.pt")
    assert type(got) is Net and type(got.weight) is ember.nn.Parameter and got.weight.requires_grad
    assert list(got.state_dict()) == ["weight", "bias", "steps"]
    np.testing.assert_array_equal(got.weight._data, net.weight._data)
    loaded = ember.load(tmp_path / "net.pt", weights_only=False)
    assert type(loaded.inner) is ember.nn.Sequential


# ---- formats and files ------------------------------------------------------------------------

def test_archive_layout_matches_torch(tmp_path):
    ember.save({"a": ember.ones(3)}, tmp_path / "model.pt")
    torch.save({"a": torch.ones(3)}, tmp_path / "torch.pt")
    with zipfile.ZipFile(tmp_path / "model.pt") as z, zipfile.ZipFile(tmp_path / "torch.pt") as zt:
        assert z.testzip() is None
        names = [n.split("/", 1)[1] for n in z.namelist()]
        assert names == [n.split("/", 1)[1] for n in zt.namelist()]
        assert z.namelist()[0] == "model/data.pkl"
        raw = (tmp_path / "model.pt").read_bytes()
        for info in z.infolist():  # every record's data is 64-byte aligned, as torch writes it
            n, m = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little"), \
                int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
            assert (info.header_offset + 30 + n + m) % 64 == 0
        assert z.read("model/byteorder") == b"little" and z.read("model/version") == b"3\n"
    buf = io.BytesIO()
    ember.save([1], buf)
    assert zipfile.ZipFile(buf).namelist()[0] == "archive/data.pkl"


def test_serialize_deserialize():
    x = ember.arange(6, dtype=ember.int32).reshape(2, 3)
    data = ember.serialize({"x": x, "t": x.t(), "n": 1})
    assert isinstance(data, bytes) and data[:4] == b"PK\x03\x04"
    got = ember.deserialize(data)
    np.testing.assert_array_equal(got["t"]._data, x._data.T)
    got["x"].fill_(0)
    assert got["t"].tolist() == [[0, 0], [0, 0], [0, 0]]
    t = torch.load(io.BytesIO(data), weights_only=True)
    assert torch.equal(t["x"], torch.arange(6, dtype=torch.int32).reshape(2, 3))
    buf = io.BytesIO()
    torch.save({"y": torch.ones(2)}, buf)
    assert ember.deserialize(buf.getvalue())["y"].tolist() == [1.0, 1.0]
    with pytest.raises(TypeError):
        ember.deserialize("not bytes")


def test_file_objects_and_streams(tmp_path):
    with open(tmp_path / "f.pt", "wb") as fh:
        ember.save({"x": ember.ones(2)}, fh)
    with open(tmp_path / "f.pt", "rb") as fh:
        assert ember.load(fh)["x"].tolist() == [1.0, 1.0]

    class Stream(io.RawIOBase):  # not seekable
        def __init__(self, data):
            self._b = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, b):
            return self._b.readinto(b)

    assert ember.load(Stream((tmp_path / "f.pt").read_bytes()))["x"].tolist() == [1.0, 1.0]


def test_map_location(tmp_path):
    torch.save({"x": torch.arange(3)}, tmp_path / "t.pt")
    for ml in (None, "cpu", ember.device("cpu"), {"cuda:0": "cpu"}, lambda s, loc: s, lambda s, loc: None):
        assert ember.load(tmp_path / "t.pt", map_location=ml)["x"].tolist() == [0, 1, 2]
    seen = []
    ember.load(tmp_path / "t.pt", map_location=lambda s, loc: seen.append((loc, s.dtype, s.size())) or s)
    assert seen == [("cpu", ember.int64, 3)]
    with pytest.raises(RuntimeError, match="cpu"):
        ember.load(tmp_path / "t.pt", map_location="cuda")
    with pytest.raises(TypeError):
        ember.load(tmp_path / "t.pt", map_location=3)


def test_storages_saved_on_gpu_land_on_cpu(tmp_path, monkeypatch):
    # a checkpoint whose storages say 'cuda:0' (as one saved from a GPU) loads on the CPU
    orig = ser._SaveContext._new_entry

    def gpu_entry(self, *args):
        e = orig(self, *args)
        e.pid = e.pid[:3] + ("cuda:0",) + e.pid[4:]
        return e
    monkeypatch.setattr(ser._SaveContext, "_new_entry", gpu_entry)
    ember.save({"x": ember.ones(2)}, tmp_path / "g.pt")
    monkeypatch.undo()
    locs = []
    got = ember.load(tmp_path / "g.pt", map_location=lambda s, loc: locs.append(loc))
    assert locs == ["cuda:0"] and got["x"].tolist() == [1.0, 1.0]
    assert ember.load(tmp_path / "g.pt")["x"].device == ember.device("cpu")
    assert ember.load(tmp_path / "g.pt", map_location={"cuda:0": "cpu"})["x"].tolist() == [1.0, 1.0]


def test_mmap(tmp_path):
    tx = torch.arange(10, dtype=torch.float32)
    torch.save({"x": tx, "v": tx[2:5]}, tmp_path / "t.pt")
    ember.save({"x": ember.arange(10, dtype=ember.float32)}, tmp_path / "e.pt")
    got = ember.load(tmp_path / "t.pt", mmap=True)
    assert got["x"].tolist() == list(range(10)) and got["v"].tolist() == [2.0, 3.0, 4.0]
    got["v"].fill_(-1.0)  # copy-on-write: shared in memory, the file is untouched
    assert got["x"].tolist()[2:5] == [-1.0, -1.0, -1.0]
    assert torch.equal(torch.load(tmp_path / "t.pt")["x"], tx)
    assert ember.load(tmp_path / "e.pt", mmap=True)["x"].tolist() == list(range(10))
    with open(tmp_path / "e.pt", "rb") as fh, pytest.raises(ValueError, match="mmap"):
        ember.load(fh, mmap=True)


def test_torch_mmap_and_computed_offsets_read_ember_files(tmp_path):
    from torch.utils.serialization import config
    sd = {f"w{i}": ember.full((i + 1, 3), float(i)) for i in range(4)}
    sd["empty"] = ember.zeros(0)
    ember.save(sd, tmp_path / "e.pt")
    for calc in (False, True):  # True: torch predicts record offsets from miniz's layout
        old = config.load.calculate_storage_offsets
        config.load.calculate_storage_offsets = calc
        try:
            t = torch.load(tmp_path / "e.pt", mmap=True, weights_only=True)
        finally:
            config.load.calculate_storage_offsets = old
        for i in range(4):
            assert torch.equal(t[f"w{i}"], torch.full((i + 1, 3), float(i)))
        assert t["empty"].shape == (0,)


def test_zip64_records(tmp_path, monkeypatch):
    monkeypatch.setattr(ser._writer, "_ZIP64_LIMIT", 300)  # pretend 300 bytes is 4 GiB
    sd = {"a": ember.arange(100, dtype=ember.float64), "b": ember.ones(3), "c": ember.arange(90, dtype=ember.int32)}
    ember.save(sd, tmp_path / "z.pt")
    with zipfile.ZipFile(tmp_path / "z.pt") as z:
        assert z.testzip() is None
    t = torch.load(tmp_path / "z.pt", weights_only=True)
    assert torch.equal(t["a"], torch.arange(100, dtype=torch.float64)) and torch.equal(t["b"], torch.ones(3))
    e = ember.load(tmp_path / "z.pt")
    assert e["c"].tolist() == list(range(90))


def test_atomic_save_keeps_original_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    ember.save({"x": ember.ones(1000)}, path)
    before = path.read_bytes()
    real = ser._ZipWriter._write_data
    calls = []

    def failing(self, mv):
        calls.append(1)
        if len(calls) == 5:  # midway through the storage record
            self._write(mv[: mv.nbytes // 2])
            raise OSError("disk full")
        return real(self, mv)
    monkeypatch.setattr(ser._ZipWriter, "_write_data", failing)
    with pytest.raises(OSError, match="disk full"):
        ember.save({"x": ember.zeros(1000)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert ember.load(path)["x"].tolist() == [1.0] * 1000
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]  # no temp file left behind
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        ember.save({"f": lambda: 0}, path)  # unpicklable: fails before touching the file
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["ckpt.pt"]
    with pytest.raises(RuntimeError, match="Parent directory"):
        ember.save({}, tmp_path / "missing" / "x.pt")


def test_save_errors():
    x = ember.arange(4, dtype=ember.float32)
    with pytest.raises(RuntimeError, match="view the same data as different types"):
        ember.serialize([x, x.view(ember.int32)])
    with pytest.raises(AttributeError):
        ember.save({}, 3)


def test_load_errors(tmp_path):
    (tmp_path / "junk").write_bytes(b"hello world")
    with pytest.raises(pickle.UnpicklingError, match="not a PyTorch zip checkpoint"):
        ember.load(tmp_path / "junk")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(EOFError):
        ember.load(tmp_path / "empty")
    torch.save({"x": torch.ones(1)}, tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(RuntimeError, match="legacy"):
        ember.load(tmp_path / "old.pt")
    torch.save({"z": torch.ones(2, dtype=torch.uint16)}, tmp_path / "c.pt")
    with pytest.raises(pickle.UnpicklingError, match="torch.uint16"):
        ember.load(tmp_path / "c.pt")
    with pytest.raises(RuntimeError, match="pickle_module"):
        ember.load(tmp_path / "c.pt", pickle_module=pickle)
    with pytest.raises(TypeError, match="deserialize"):
        ember.load(b"PK\x03\x04")


def test_out_of_bounds_tensor_refused(tmp_path):
    # a crafted checkpoint whose tensor claims more elements than its storage holds
    ctx = ser._SaveContext()
    entry = ctx.storage_for(ember.ones(4))[0]
    bogus = ser._TensorRebuild((ser._g("torch._utils", "_rebuild_tensor_v2"),
                                (entry, 2, (10,), (1,), False, collections.OrderedDict())))
    buf = io.BytesIO()
    ser._CheckpointPickler(buf, 2, ctx).dump(bogus)
    out = io.BytesIO()
    ser._write_checkpoint(out, "archive", buf.getvalue(), ctx.entries)
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 16"):
        ember.deserialize(out.getvalue())
    with pytest.raises(RuntimeError):  # torch refuses it too
        torch.load(io.BytesIO(out.getvalue()), weights_only=True)


def test_bare_storage(tmp_path):
    torch.save(torch.arange(4, dtype=torch.int16).untyped_storage(), tmp_path / "s.pt")
    s = ember.load(tmp_path / "s.pt")
    assert isinstance(s, ser.CheckpointStorage) and s.nbytes() == 8 and s.dtype is ember.uint8
    ember.save(s, tmp_path / "s2.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that TypedStorage is deprecated
        assert torch.load(tmp_path / "s2.pt", weights_only=True).nbytes() == 8


def test_plain_pickle_of_tensors():
    x = ember.arange(6, dtype=ember.bfloat16).reshape(2, 3).t()
    y = pickle.loads(pickle.dumps(x))
    assert y.dtype is ember.bfloat16 and y.tolist() == x.tolist() and y.shape == (3, 2)
    p = ember.nn.Parameter(ember.ones(2))
    q = pickle.loads(pickle.dumps(p))
    assert type(q) is ember.nn.Parameter and q.requires_grad and q.tolist() == [1.0, 1.0]
    r = ember.ones(2).requires_grad_()
    r.tag = 5
    c = copy.copy(r)
    assert c.requires_grad and c.tag == 5 and c._data is not r._data


# ---- safetensors ------------------------------------------------------------------------------

def test_safetensors_roundtrip(tmp_path):
    import safetensors
    import safetensors.torch
    tensors = {name: _ember(name, (2, 3)) for name in DTYPES}
    tensors["view"] = tensors["float32"].t()
    ember.serialization.save_safetensors(tensors, tmp_path / "e.safetensors", metadata={"format": "pt"})
    t = safetensors.torch.load_file(tmp_path / "e.safetensors")
    for k, v in tensors.items():
        _same(v, t[k])
    with safetensors.safe_open(tmp_path / "e.safetensors", framework="pt") as f:
        assert f.metadata() == {"format": "pt"}
    safetensors.torch.save_file({name: _torch(name, (3, 2), seed=4) for name in DTYPES}, tmp_path / "t.safetensors")
    got = ember.serialization.load_safetensors(tmp_path / "t.safetensors")
    for name in DTYPES:
        _same(got[name], _torch(name, (3, 2), seed=4))
    got["float32"].fill_(1.0)  # loaded tensors own writable memory
    with pytest.raises(TypeError):
        ember.serialization.save_safetensors({"x": np.ones(2)}, tmp_path / "bad.safetensors")
    assert not (tmp_path / "bad.safetensors").exists()


def _rewrite_zip(src, dst, edit):
    """Copy a checkpoint record by record with the stdlib's zipfile, letting ``edit(name, bytes)`` change data."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            zout.writestr(name, edit(name, zin.read(name)))


def test_big_endian_checkpoint(tmp_path):
    x = ember.arange(6, dtype=ember.float32).reshape(2, 3)
    y = ember.tensor([1, -2, 300], dtype=ember.int16)
    ember.save({"x": x, "y": y, "xt": x.t()}, tmp_path / "le.pt")
    dtypes = {"0": np.float32, "1": np.int16}

    def to_big(name, data):
        if name.endswith("/byteorder"):
            return b"big"
        key = name.rsplit("/", 1)[1]
        if "/data/" in name:
            return np.frombuffer(data, dtypes[key]).byteswap().tobytes()
        return data
    _rewrite_zip(tmp_path / "le.pt", tmp_path / "be.pt", to_big)
    got = ember.load(tmp_path / "be.pt")
    assert got["x"].tolist() == x.tolist() and got["y"].tolist() == [1, -2, 300]
    assert got["xt"].tolist() == x.t().tolist()
    t = torch.load(tmp_path / "be.pt", weights_only=True)
    assert t["x"].tolist() == x.tolist() and t["y"].tolist() == [1, -2, 300]


def test_pickle_protocols(tmp_path):
    x = ember.arange(4, dtype=ember.float32)
    for proto in (2, 3, 4, 5):
        ember.save({"x": x, "v": x.narrow(0, 1, 2), "s": "é" * 300, "b": b"xyz"}, tmp_path / "p.pt",
                   pickle_protocol=proto)
        got = ember.load(tmp_path / "p.pt")
        assert got["v"].tolist() == [1.0, 2.0] and got["s"] == "é" * 300 and got["b"] == b"xyz"
        assert got["v"].storage_offset() == 1
    with pytest.raises(ValueError):
        ember.save({}, tmp_path / "p.pt", pickle_protocol=1)


def test_save_through_symlink(tmp_path):
    target = tmp_path / "real.pt"
    ember.save([1], target)
    link = tmp_path / "link.pt"
    link.symlink_to(target)
    ember.save([2], link)
    assert link.is_symlink() and ember.load(target) == [2]


def test_obj_opcode_on_disallowed_callable_refused(tmp_path):
    # MARK, GLOBAL collections.OrderedDict, OBJ: an allowed class is instantiated
    data = b"\x80\x02(ccollections\nOrderedDict\no."
    with zipfile.ZipFile(tmp_path / "a.pt", "w") as z:
        z.writestr("archive/data.pkl", data)
    assert ember.load(tmp_path / "a.pt") == collections.OrderedDict()
    data = b"\x80\x02(]o."  # OBJ with a list as the "class": refused before calling it
    with zipfile.ZipFile(tmp_path / "b.pt", "w") as z:
        z.writestr("archive/data.pkl", data)
    with pytest.raises(pickle.UnpicklingError, match="unrecognized class"):
        ember.load(tmp_path / "b.pt")
