"""ember.load stays bounded in memory on hostile checkpoints (issue 9, item 4).

Each hostile file is small on disk; the tests check the error and, with tracemalloc, that the load
gave up before allocating what the file asked for.
"""
from __future__ import annotations

import collections
import functools
import io
import pickle
import struct
import tracemalloc
import zipfile
import zlib

import pytest
import torch

import ember
import ember.serialization as ser

GiB = 1 << 30
SMALL = 16 << 20  # what a refused load may allocate at its peak


# ---- building files by hand -------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _zeros_deflated(n: int) -> tuple[bytes, int]:
    """(raw deflate stream, CRC-32) of ``n`` zero bytes (``n`` a multiple of 1 MiB), built in ms: after a
    full flush the compressor's output for the next 1 MiB of zeros is the same block again."""
    chunk = bytes(1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH) == block
    crc = 0
    for _ in range(n >> 20):
        crc = zlib.crc32(chunk, crc)
    return block * (n >> 20) + c.flush(), crc


def _zip(members) -> bytes:
    """A zip archive of ``(name, data_on_disk, method, crc, size)`` members; sizes are whatever is given."""
    out, central = io.BytesIO(), []
    for name, data, method, crc, size in members:
        fn = name.encode()
        central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, len(data),
                                   size, len(fn), 0, 0, 0, 0, 0, out.tell()) + fn)
        out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(data), size, len(fn), 0))
        out.write(fn + data)
    cd = out.tell()
    out.write(b"".join(central))
    out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), out.tell() - cd, cd, 0))
    return out.getvalue()


def _stored(name: str, data: bytes):
    return (name, data, zipfile.ZIP_STORED, zlib.crc32(data), len(data))


def _bomb(name: str, n: int):
    data, crc = _zeros_deflated(n)
    return (name, data, zipfile.ZIP_DEFLATED, crc, n)


class _Storage:
    """Pickled as the persistent id of a float32 storage of ``numel`` elements (key "0")."""

    def __init__(self, numel):
        self.numel = numel


class _Tensor:
    def __init__(self, storage, size, stride):
        self.args = (storage, 0, size, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class _Reduce:
    def __init__(self, func, args):
        self.rv = (func, args)

    def __reduce__(self):
        return self.rv


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            return ("storage", torch.FloatStorage, "0", "cpu", obj.numel)
        return None


def _tensor_pickle(numel: int, size: int) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=2).dump({"w": _Tensor(_Storage(numel), (size,), (1,))})
    return buf.getvalue()


def _write(path, *members):
    """A checkpoint of ``members`` plus the version record torch.load insists on."""
    path.write_bytes(_zip([*members, _stored("archive/version", b"3\n")]))
    return path


def _raises_within(exc, match, fn, limit=SMALL):
    """``fn()`` raises ``exc`` matching ``match`` and the traced peak allocation stays below ``limit``."""
    tracemalloc.start()
    try:
        with pytest.raises(exc, match=match) as info:
            fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < limit, f"peak allocation {peak} bytes"
    return info


# ---- zip members inflating past their bounds ----------------------------------------------------

def test_deflate_builder_is_honest():
    data, crc = _zeros_deflated(4 << 20)
    assert zlib.decompress(data, -15) == bytes(4 << 20) and crc == zlib.crc32(bytes(4 << 20))


def test_pickle_bomb_refused_before_inflating(tmp_path):
    path = _write(tmp_path / "bomb.pt", _bomb("archive/data.pkl", GiB))
    assert path.stat().st_size < 1_100_000  # a 1 MB file whose data.pkl claims (and inflates to) 1 GiB
    match = r"zip member archive/data\.pkl declares 1073741824 bytes inflated from \d+ compressed bytes"
    for kw in ({}, {"mmap": True}, {"weights_only": False}):
        _raises_within(pickle.UnpicklingError, match, lambda: ember.load(path, **kw))
    _raises_within(pickle.UnpicklingError, match, lambda: ser.get_unsafe_globals_in_checkpoint(path))


def test_storage_record_bomb_refused_before_inflating(tmp_path):
    n = GiB // 4  # float32 elements: the pickle honestly declares a 1 GiB storage and tensor
    path = _write(tmp_path / "bomb.pt", _stored("archive/data.pkl", _tensor_pickle(n, n)),
                  _bomb("archive/data/0", GiB))
    match = r"zip member archive/data/0 declares 1073741824 bytes inflated from"
    for kw in ({}, {"mmap": True}, {"weights_only": False}):
        err = _raises_within(pickle.UnpicklingError, match, lambda: ember.load(path, **kw))
        assert "Weights only load failed" not in str(err.value)  # weights_only=False would not help


def test_inflate_bound_is_configurable_and_honest_files_load(tmp_path, monkeypatch):
    # a legitimately compressed checkpoint (torch.save's file re-zipped with deflate) loads
    torch.save({"x": torch.arange(6, dtype=torch.float32), "z": torch.zeros(1 << 18)}, tmp_path / "t.pt")
    with zipfile.ZipFile(tmp_path / "t.pt") as src, \
            zipfile.ZipFile(tmp_path / "d.pt", "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    for kw in ({}, {"mmap": True}):
        got = ember.load(tmp_path / "d.pt", **kw)
        assert got["x"].tolist() == [0, 1, 2, 3, 4, 5] and got["z"].shape == (1 << 18,)
    # the 1 MiB zero record inflates ~1000x: past the bound once the allowance is lowered ...
    monkeypatch.setattr(ser, "INFLATE_ALLOWANCE", 1 << 16)
    with pytest.raises(pickle.UnpicklingError, match=r"zip member t/data/1 declares 1048576 bytes"):
        ember.load(tmp_path / "d.pt")
    # ... and loads again with a larger ratio
    monkeypatch.setattr(ser, "MAX_INFLATE_RATIO", 2000)
    assert ember.load(tmp_path / "d.pt")["z"].sum().item() == 0


def test_record_size_must_match_declared_storage(tmp_path, monkeypatch):
    # the pickle declares 4 floats; the record inflates to 1 GiB; the tensor reads 2**28 elements of it
    path = _write(tmp_path / "big.pt", _stored("archive/data.pkl", _tensor_pickle(4, GiB // 4)),
                  _bomb("archive/data/0", GiB))
    match = r"record data/0 has 1073741824 bytes but its storage is declared as 4 elements of ember\.float32 \(16 bytes\)"
    monkeypatch.setattr(ser, "MAX_INFLATE_RATIO", 10 ** 6, raising=False)  # the size check alone refuses it
    for kw in ({}, {"mmap": True}, {"weights_only": False}):
        _raises_within(RuntimeError, match, lambda: ember.load(path, **kw))
    # smaller and larger stored records, as torch.load refuses them (RuntimeError)
    for nbytes in (8, 32):
        p = _write(tmp_path / f"r{nbytes}.pt", _stored("archive/data.pkl", _tensor_pickle(4, 4)),
                   _stored("archive/data/0", bytes(nbytes)))
        with pytest.raises(RuntimeError, match=rf"record data/0 has {nbytes} bytes"):
            ember.load(p)
        with pytest.raises(RuntimeError, match="record size"):
            torch.load(p, weights_only=True)
    ok = _write(tmp_path / "ok.pt", _stored("archive/data.pkl", _tensor_pickle(4, 4)),
                _stored("archive/data/0", struct.pack("<4f", 1, 2, 3, 4)))
    assert ember.load(ok)["w"].tolist() == [1, 2, 3, 4] == torch.load(ok, weights_only=True)["w"].tolist()
    # a tensor reaching past its declared storage is refused (the storage is 4 floats, not the record)
    past = _write(tmp_path / "past.pt", _stored("archive/data.pkl", _tensor_pickle(4, 5)),
                  _stored("archive/data/0", bytes(16)))
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 16"):
        ember.load(past)


def test_member_past_end_of_file_refused(tmp_path):
    # a stored record whose directory entry claims 1 GiB in a file of a few hundred bytes
    pkl = _tensor_pickle(GiB // 4, GiB // 4)
    path = _write(tmp_path / "short.pt", _stored("archive/data.pkl", pkl),
                  ("archive/data/0", bytes(64), zipfile.ZIP_STORED, 0, GiB))
    _raises_within(pickle.UnpicklingError, r"zip member archive/data/0 .*1073741824 bytes",
                   lambda: ember.load(path))
    raw = bytearray(path.read_bytes())  # and a claim of 1 GiB of data past the end of the file
    entry = raw.find(b"archive/data/0", raw.find(b"PK\x01\x02")) - 46  # its central directory entry
    struct.pack_into("<II", raw, entry + 20, GiB, GiB)  # compressed and uncompressed sizes
    path.write_bytes(bytes(raw))
    _raises_within(pickle.UnpicklingError, r"zip member archive/data/0 declares 1073741824 bytes of data .*past the end",
                   lambda: ember.load(path))


def test_unsupported_compression_refused(tmp_path):
    torch.save({"x": torch.ones(2)}, tmp_path / "t.pt")
    with zipfile.ZipFile(tmp_path / "t.pt") as src, \
            zipfile.ZipFile(tmp_path / "b.pt", "w", compression=zipfile.ZIP_BZIP2) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    with pytest.raises(RuntimeError, match="compression method 12"):
        ember.load(tmp_path / "b.pt")
    with pytest.raises(RuntimeError):  # torch's reader (miniz) has no bzip2 either
        torch.load(tmp_path / "b.pt", weights_only=True)


# ---- allocations through allowed globals --------------------------------------------------------

def _pkl_file(tmp_path, name, data: bytes):
    return _write(tmp_path / name, _stored("archive/data.pkl", data))


BIG = 768 << 20


def test_bytearray_allocation_refused(tmp_path):
    path = _pkl_file(tmp_path, "ba.pt", b"\x80\x02c__builtin__\nbytearray\nJ" + struct.pack("<i", BIG) + b"\x85R.")
    assert path.stat().st_size < 700
    _raises_within(pickle.UnpicklingError, rf"builtins\.bytearray\({BIG}\) would allocate {BIG} bytes",
                   lambda: ember.load(path))
    n = struct.pack("<i", BIG)
    for name, data, shown in [
        ("bytes", b"\x80\x02c__builtin__\nbytes\nJ" + n + b"\x85R.", "builtins.bytes"),  # REDUCE
        ("newobj", b"\x80\x02c__builtin__\nbytes\nJ" + n + b"\x85\x81.", "builtins.bytes"),  # NEWOBJ
        ("newobj_ex", b"\x80\x04c__builtin__\nbytes\nJ" + n + b"\x85}\x92.", "builtins.bytes"),  # NEWOBJ_EX
        ("inst", b"(I%d\nibuiltins\nbytes\n." % BIG, "builtins.bytes"),  # INST (protocol 0)
        ("obj", b"\x80\x02(cbuiltins\nbytearray\nJ" + n + b"o.", "builtins.bytearray"),  # OBJ (protocol 1)
        ("tensor", b"\x80\x02ctorch\nTensor\nJ" + struct.pack("<i", BIG // 4) + b"\x85R.", "torch.Tensor"),
    ]:
        _raises_within(pickle.UnpicklingError, rf"{shown}\(\d+\) would allocate {BIG} bytes",
                       lambda: ember.load(_pkl_file(tmp_path, name + ".pt", data)))
    # small allocations still load, as in torch
    small = _pkl_file(tmp_path, "small.pt", b"\x80\x02c__builtin__\nbytearray\nK\x0a\x85R.")
    assert ember.load(small) == bytearray(10) == torch.load(small, weights_only=True)


def test_iterating_a_huge_zero_stride_view_refused(tmp_path):
    # a 1-element storage viewed as 2**40 elements (stride 0) is a valid tensor, but set() would
    # iterate all of them
    buf = io.BytesIO()
    p = _Pickler(buf, protocol=2)
    p.dump(_Reduce(set, (_Tensor(_Storage(1), (1 << 40,), (0,)),)))
    path = _write(tmp_path / "set.pt", _stored("archive/data.pkl", buf.getvalue()),
                  _stored("archive/data/0", bytes(4)))
    _raises_within(pickle.UnpicklingError, r"builtins\.set\(<Tensor>\) would allocate 4398046511104 bytes",
                   lambda: ember.load(path))


def test_allocation_bound_is_configurable(tmp_path, monkeypatch):
    path = _pkl_file(tmp_path, "ba.pt", b"\x80\x02c__builtin__\nbytearray\nJ" + struct.pack("<i", 1 << 20) + b"\x85R.")
    assert ember.load(path) == bytearray(1 << 20)
    monkeypatch.setattr(ser, "MAX_CALL_ALLOCATION", 1 << 10)
    with pytest.raises(pickle.UnpicklingError, match=r"bytearray\(1048576\)"):
        ember.load(path)


# ---- opcodes and the static globals scan --------------------------------------------------------

def test_unknown_opcode_is_unpickling_error(tmp_path):
    path = _pkl_file(tmp_path, "op.pt", b"\x80\x02\xff.")
    with pytest.raises(pickle.UnpicklingError, match="Unsupported operand 255"):
        ember.load(path)
    with pytest.raises(pickle.UnpicklingError, match="Unsupported operand 255"):
        torch.load(path, weights_only=True)
    with pytest.raises(pickle.UnpicklingError):
        ember.load(path, weights_only=False)
    with pytest.raises(pickle.UnpicklingError):
        ser.get_unsafe_globals_in_checkpoint(path)


class _A:
    pass


class _B:
    pass


def test_unsafe_globals_through_inst_obj_and_memo(tmp_path):
    inst = _pkl_file(tmp_path, "inst.pt", b"(S'id'\nios\nsystem\n.")  # INST: protocol 0
    assert ser.get_unsafe_globals_in_checkpoint(inst) == ["os.system"]
    obj = _pkl_file(tmp_path, "obj.pt", b"(cos\nsystem\nS'id'\no.")  # OBJ: protocol 1
    assert ser.get_unsafe_globals_in_checkpoint(obj) == ["os.system"]
    # protocol 4 memoizes "collections"/__name__ and fetches them (BINGET) for the next global
    data = pickle.dumps([_A(), _B(), collections.OrderedDict(), collections.deque()], protocol=4)
    p4 = _pkl_file(tmp_path, "p4.pt", data)
    assert ser.get_unsafe_globals_in_checkpoint(p4) == [f"{__name__}._A", f"{__name__}._B", "collections.deque"]
    for path in (inst, obj, p4):
        with pytest.raises(pickle.UnpicklingError):
            ember.load(path)


# ---- mmap verifies CRCs like the other paths --------------------------------------------------

@pytest.mark.parametrize("member", ["data/0", "data.pkl"])
@pytest.mark.parametrize("writer", ["torch", "ember"])
def test_mmap_checks_crc(tmp_path, writer, member):
    path = tmp_path / "c.pt"
    if writer == "torch":
        torch.save({"x": torch.arange(8, dtype=torch.float32)}, path)
    else:
        ember.save({"x": ember.arange(8, dtype=ember.float32)}, path)
    assert ember.load(path, mmap=True)["x"].tolist() == list(range(8))
    with zipfile.ZipFile(path) as z:
        info = next(i for i in z.infolist() if i.filename.endswith("/" + member))
    raw = bytearray(path.read_bytes())
    name_len, extra_len = struct.unpack_from("<HH", raw, info.header_offset + 26)
    raw[info.header_offset + 30 + name_len + extra_len + 5] ^= 0x01
    path.write_bytes(bytes(raw))
    for kw in ({}, {"mmap": True}):
        with pytest.raises(zipfile.BadZipFile, match=rf"Bad CRC-32 for file '{info.filename}'"):
            ember.load(path, **kw)
