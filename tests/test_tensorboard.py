"""ember.utils.tensorboard.SummaryWriter: event files read back by tensorboard's own EventAccumulator."""
import glob
import io
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.utils.tensorboard import SummaryWriter

pytest.importorskip("tensorboard", reason="needs the tensorboard package (make test-deps installs it)")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.plugins.hparams import plugin_data_pb2  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402
from PIL import Image  # noqa: E402


def _load(path):
    acc = EventAccumulator(str(path), size_guidance={"images": 0, "tensors": 0, "histograms": 0, "scalars": 0})
    acc.Reload()
    return acc


def _png(img_event):
    return np.asarray(Image.open(io.BytesIO(img_event.encoded_image_string)))


def test_scalar_and_context_manager(tmp_path):
    with SummaryWriter(tmp_path) as w:
        assert w.log_dir == str(tmp_path) and w.get_logdir() == str(tmp_path)
        for step in range(5):
            w.add_scalar("loss/train", 1.0 / (step + 1), step)
        w.add_scalar("t", ember.tensor(2.5), 7, walltime=123.0)
        w.add_scalar("new", np.float64(0.125), 1, new_style=True)
    acc = _load(tmp_path)
    ev = acc.Scalars("loss/train")
    assert [e.step for e in ev] == [0, 1, 2, 3, 4]
    np.testing.assert_allclose([e.value for e in ev], [1, 1 / 2, 1 / 3, 1 / 4, 1 / 5], rtol=1e-6)
    t = acc.Scalars("t")[0]
    assert (t.step, t.value, t.wall_time) == (7, 2.5, 123.0)
    new = acc.Tensors("new")[0]
    assert float(tensor_util.make_ndarray(new.tensor_proto)) == 0.125
    assert acc.SummaryMetadata("new").plugin_data.plugin_name == "scalars"
    with pytest.raises(ValueError, match="single number"):
        SummaryWriter(tmp_path / "x").add_scalar("bad", ember.ones(3))


def test_default_log_dir_and_comment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_lr0.1")
    w.close()
    assert w.log_dir.startswith("runs" + os.sep) and w.log_dir.endswith("_lr0.1")
    import socket
    assert socket.gethostname() in w.log_dir
    assert glob.glob(os.path.join(w.log_dir, "events.out.tfevents.*"))


def test_add_scalars_writes_subruns(tmp_path):
    w = SummaryWriter(tmp_path, filename_suffix=".ember")
    for step in range(3):
        w.add_scalars("run/loss", {"train": step * 1.0, "val": step * 2.0}, step)
    w.close()
    for key, scale in (("train", 1.0), ("val", 2.0)):
        sub = tmp_path / f"run_loss_{key}"
        assert glob.glob(str(sub / "events.out.tfevents.*.ember"))
        ev = _load(sub).Scalars("run/loss")
        assert [e.value for e in ev] == [0.0, scale, 2 * scale]


def test_histogram_values(tmp_path):
    rng = np.random.default_rng(0)
    vals = rng.normal(size=1000).astype(np.float32)
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("w", ember.tensor(vals), 3)
        w.add_histogram("fixed", np.array([0.5, 1.5, 1.5, 3.5]), 0, bins=[0, 1, 2, 3, 4])
        w.add_histogram("merged", np.arange(10.0), 0, bins=10, max_bins=3)
    acc = _load(tmp_path)
    h = acc.Histograms("w")[0]
    assert h.step == 3
    hv = h.histogram_value
    v64 = vals.astype(np.float64)
    assert hv.num == 1000 and hv.min == pytest.approx(v64.min()) and hv.max == pytest.approx(v64.max())
    assert hv.sum == pytest.approx(v64.sum()) and hv.sum_squares == pytest.approx(v64 @ v64)
    assert sum(hv.bucket) == 1000 and list(hv.bucket_limit) == sorted(hv.bucket_limit)
    f = acc.Histograms("fixed")[0].histogram_value
    # right edges, with an empty leading bucket keeping the left edge of the first non-empty one
    assert list(f.bucket_limit) == [0, 1, 2, 3, 4] and list(f.bucket) == [0, 1, 2, 0, 1]
    m = acc.Histograms("merged")[0].histogram_value
    assert sum(m.bucket) == 10 and len(m.bucket) <= 4


def test_images_chw_hwc_float_uint8(tmp_path):
    rng = np.random.default_rng(1)
    chw = rng.random((3, 4, 5)).astype(np.float32)
    hwc_u8 = rng.integers(0, 256, (4, 5, 3), dtype=np.uint8)
    gray = rng.random((1, 2, 3)).astype(np.float32)
    batch = rng.integers(0, 256, (3, 3, 2, 2), dtype=np.uint8)
    with SummaryWriter(tmp_path) as w:
        w.add_image("chw", ember.tensor(chw), 0)
        w.add_image("hwc", hwc_u8, 1, dataformats="HWC")
        w.add_image("gray", gray, 2)
        w.add_images("batch", batch, 3)
        with pytest.raises(ValueError, match="dataformats 'NCHW' has 4 dims"):
            w.add_image("bad", chw, 0, dataformats="NCHW")
        with pytest.raises(ValueError, match="1, 3 or 4 channels, got 5"):
            w.add_image("bad", chw, 0, dataformats="HWC")
    acc = _load(tmp_path)
    img = acc.Images("chw")[0]
    assert (img.width, img.height, img.step) == (5, 4, 0)
    expect = np.clip(chw.transpose(1, 2, 0) * 255, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(_png(img), expect)
    np.testing.assert_array_equal(_png(acc.Images("hwc")[0]), hwc_u8)
    g = _png(acc.Images("gray")[0])
    assert g.shape == (2, 3, 3) and (g[..., 0] == g[..., 1]).all()
    np.testing.assert_array_equal(g[..., 0], (gray[0] * 255).astype(np.uint8))
    grid = _png(acc.Images("batch")[0])            # 3 images in one row of a grid
    assert grid.shape == (2, 6, 3)
    for i in range(3):
        np.testing.assert_array_equal(grid[:, 2 * i:2 * i + 2], batch[i].transpose(1, 2, 0))


def test_add_figure(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(2, 1), dpi=50)
    fig.patch.set_facecolor((1.0, 0.0, 0.0))
    with SummaryWriter(tmp_path) as w:
        w.add_figure("fig", fig, 4)
    assert not plt.fignum_exists(fig.number)          # closed by default
    img = _load(tmp_path).Images("fig")[0]
    px = _png(img)
    assert (img.width, img.height) == (100, 50) and px.shape == (50, 100, 3)
    assert tuple(px[0, 0]) == (255, 0, 0)


def test_add_text(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_text("notes", "héllo **world**", 2)
    acc = _load(tmp_path)
    ev = acc.Tensors("notes/text_summary")[0]
    assert ev.step == 2
    assert tensor_util.make_ndarray(ev.tensor_proto).tolist() == ["héllo **world**".encode()]
    assert acc.SummaryMetadata("notes/text_summary").plugin_data.plugin_name == "text"


def test_add_hparams(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_hparams({"lr": 0.1, "opt": "sgd", "bn": True, "bs": ember.tensor(32)}, {"hp/acc": 0.75},
                      hparam_domain_discrete={"opt": ["sgd", "adam"]}, run_name="trial1")
    acc = _load(tmp_path / "trial1")
    content = acc.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    hp = start.session_start_info.hparams
    assert hp["lr"].number_value == 0.1 and hp["opt"].string_value == "sgd" and hp["bn"].bool_value is True
    assert hp["bs"].number_value == 32
    exp = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert [m.name.tag for m in exp.metric_infos] == ["hp/acc"]
    infos = {i.name: i for i in exp.hparam_infos}
    assert [v.string_value for v in infos["opt"].domain_discrete.values] == ["sgd", "adam"]
    end = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_end_info"])
    assert end.session_end_info.status == 1                       # STATUS_SUCCESS
    assert acc.Scalars("hp/acc")[0].value == 0.75


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def test_add_graph(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_graph(Net(), ember.randn(3, 4))
    g = _load(tmp_path).Graph()
    nodes = {n.name: n for n in g.node}
    ops = [n.op for n in g.node]
    assert ops.count("linear") == 2 and ops.count("relu") == 1
    assert "input/x" in nodes and nodes["input/x"].op == "IO Node"
    assert nodes["Net/Linear[fc1]/weight"].op == "Parameter"
    fc1 = [n for n in g.node if n.op == "linear" and n.name.startswith("Net/Linear[fc1]/")]
    assert len(fc1) == 1 and list(fc1[0].input) == ["input/x", "Net/Linear[fc1]/weight", "Net/Linear[fc1]/bias"]
    assert [d.size for d in fc1[0].attr["_output_shapes"].list.shape[0].dim] == [3, 8]
    relu = next(n for n in g.node if n.op == "relu")
    assert relu.name.startswith("Net/ReLU[act]/") and list(relu.input) == [fc1[0].name]
    out = nodes["output/output.0"]
    assert len(out.input) == 1 and out.input[0].startswith("Net/Linear[fc2]/linear")
    assert [d.size for d in out.attr["_output_shapes"].list.shape[0].dim] == [3, 2]


def test_flush_close_reopen(tmp_path):
    w = SummaryWriter(tmp_path, flush_secs=10000, max_queue=1000)
    w.add_scalar("a", 1.0, 0)
    w.flush()
    assert [e.value for e in _load(tmp_path).Scalars("a")] == [1.0]
    w.close()
    w.close()                                   # a second close is a no-op
    w.add_scalar("a", 2.0, 1)                   # reopens a new event file
    w.close()
    assert len(glob.glob(str(tmp_path / "events.out.tfevents.*"))) == 2
    assert sorted(e.value for e in _load(tmp_path).Scalars("a")) == [1.0, 2.0]


def test_purge_step(tmp_path):
    with SummaryWriter(tmp_path) as w:
        for s in range(5):
            w.add_scalar("x", float(s), s)
    with SummaryWriter(tmp_path, purge_step=3) as w:
        w.add_scalar("x", 30.0, 3)
    ev = _load(tmp_path).Scalars("x")
    assert [(e.step, e.value) for e in ev] == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 30.0)]


def test_import_without_tensorboard_says_what_to_install(tmp_path):
    code = ("import sys; sys.modules['tensorboard'] = None\n"
            "from ember.utils.tensorboard import SummaryWriter\n"
            "try:\n    SummaryWriter(sys.argv[1])\nexcept ImportError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "pip install tensorboard" in r.stdout
