"""ember.onnx.export: exported models run in onnxruntime and match ember's outputs."""
import io
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
import ember.onnx

onnx = pytest.importorskip("onnx", reason="needs the onnx package (make test-deps installs it)")
ort = pytest.importorskip("onnxruntime", reason="needs the onnxruntime package (make test-deps installs it)")


def _flat(x, out):
    """The tensors of a nested structure, in order, as NumPy arrays."""
    if isinstance(x, (tuple, list)):
        for i in x:
            _flat(i, out)
    elif isinstance(x, dict):
        for i in x.values():
            _flat(i, out)
    elif isinstance(x, ember.Tensor):
        out.append(x.numpy())
    return out


def _export(model, args, **kw):
    f = io.BytesIO()
    mp = ember.onnx.export(model, args, f, **kw)
    assert f.getvalue() == mp.SerializeToString()
    sess = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    return mp, sess


def _check(model, args, new_args=None, rtol=1e-4, atol=1e-5, **kw):
    """Export with ``args``, run the file in onnxruntime on ``new_args`` (default: ``args``) and compare
    with ember's eval-mode outputs."""
    args = args if isinstance(args, tuple) else (args,)
    mp, sess = _export(model, args, **kw)
    run_args = new_args if new_args is not None else args
    feeds = {i.name: a for i, a in zip(sess.get_inputs(), _flat(run_args, []))}
    got = sess.run(None, feeds)
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    with ember.no_grad():
        want = _flat(model(*run_args), [])
    if hasattr(model, "train"):
        model.train(was_training)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return mp


def _dims(vi):
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


@pytest.fixture(autouse=True)
def _seed():
    ember.manual_seed(0)


def test_mlp_defaults_opset_names_and_checker(tmp_path):
    model = nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.Dropout(0.5), nn.Linear(16, 3), nn.LogSoftmax(-1))
    model.train()                                    # exported in eval mode: dropout off
    path = tmp_path / "mlp.onnx"
    mp = ember.onnx.export(model, (ember.randn(5, 4),), path)
    assert model.training                            # the module's mode is restored
    loaded = onnx.load(str(path))
    onnx.checker.check_model(loaded, full_check=True)
    assert [o.version for o in loaded.opset_import if o.domain in ("", "ai.onnx")] == [20]
    assert ember.onnx.DEFAULT_OPSET == 20
    assert sorted(t.name for t in loaded.graph.initializer if t.name in model.state_dict()) == \
        sorted(model.state_dict())
    assert [i.name for i in mp.graph.input] == ["input"] and [o.name for o in mp.graph.output] == ["output"]
    assert "Gelu" in [n.op_type for n in mp.graph.node]
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = ember.randn(5, 4)
    model.eval()
    with ember.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(sess.run(None, {"input": x.numpy()})[0], want, rtol=1e-4, atol=1e-5)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.avg = nn.AvgPool2d(2)
        self.fc = nn.Linear(8 * 2 * 2, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.relu(self.bn2(self.conv2(x)), inplace=True)
        x = self.avg(F.pad(x, (0, 1, 0, 1))[..., :4, :4])
        return self.fc(ember.flatten(x, 1))


def _trained_bn(model, shape):
    model.train()
    with ember.no_grad():
        for _ in range(3):                          # running statistics that differ from 0 / 1
            model(ember.randn(*shape) * 2 + 1)
    return model


def test_cnn_matches_and_batch_is_dynamic():
    model = _trained_bn(CNN(), (4, 3, 16, 16))
    mp = _check(model, ember.randn(2, 3, 16, 16), input_names=["images"], output_names=["logits"],
                dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
    ops = {n.op_type for n in mp.graph.node}
    assert {"Conv", "BatchNormalization", "MaxPool", "AveragePool", "Gemm"} <= ops
    assert _dims(mp.graph.input[0]) == ["batch", 3, 16, 16] and _dims(mp.graph.output[0]) == ["batch", 10]
    # the same file runs other batch sizes
    sess = ort.InferenceSession(mp.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 7):
        x = ember.randn(n, 3, 16, 16)
        with ember.no_grad():
            want = model.eval()(x).numpy()
        np.testing.assert_allclose(sess.run(None, {"images": x.numpy()})[0], want, rtol=1e-4, atol=1e-5)


def test_cnn_without_dynamic_axes_is_fixed_size():
    model = _trained_bn(CNN(), (4, 3, 16, 16))
    mp, sess = _export(model, ember.randn(2, 3, 16, 16))
    assert [i.name for i in mp.graph.input] == ["x"] and _dims(mp.graph.input[0]) == [2, 3, 16, 16]
    with pytest.raises(Exception, match="invalid dimensions for input: x"):
        sess.run(None, {"x": np.zeros((3, 3, 16, 16), np.float32)})


def test_lstm_outputs_and_dynamic_batch_and_sequence():
    model = nn.LSTM(6, 12, num_layers=2, batch_first=True)
    _check(model, ember.randn(3, 5, 6))
    x, new = ember.randn(3, 5, 6), ember.randn(4, 9, 6)
    mp = _check(model, x, (new,), input_names=["x"], output_names=["y", "h", "c"],
                dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}})
    assert "LSTM" in {n.op_type for n in mp.graph.node}
    assert _dims(mp.graph.output[1]) == [2, "batch", 12]


def test_lstm_with_initial_state_and_reverse_gru():
    lstm = nn.LSTM(4, 5)
    x, h0, c0 = ember.randn(7, 2, 4), ember.randn(1, 2, 5), ember.randn(1, 2, 5)
    _check(lstm, (x, (h0, c0)))
    gru = nn.GRU(4, 6, batch_first=True, bidirectional=True)
    mp = _check(gru, ember.randn(2, 5, 4))
    assert [n.attribute[0].s for n in mp.graph.node if n.op_type == "GRU" and n.attribute[0].name == "direction"] \
        == [b"forward", b"reverse"]
    _check(nn.RNN(4, 3, nonlinearity="relu"), ember.randn(5, 2, 4))


class TinyTransformer(nn.Module):
    def __init__(self, vocab=20, d=16, heads=4, max_len=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(ember.randn(max_len, d) * 0.1)
        self.layer = nn.TransformerEncoderLayer(d, heads, 32, dropout=0.1, batch_first=True,
                                                activation="gelu")
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        h = self.emb(tokens) + self.pos[:tokens.shape[1]]
        return self.head(self.norm(self.layer(h)))


def test_transformer_encoder_layer_matches():
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True)
    mp = _check(layer, ember.randn(2, 6, 16))
    ops = [n.op_type for n in mp.graph.node]
    assert "LayerNormalization" in ops and "Softmax" in ops and ops.count("MatMul") >= 2


def test_small_transformer_dynamic_batch_and_sequence():
    model = TinyTransformer()
    tokens = ember.randint(0, 20, (2, 5))
    _check(model, tokens)
    new = ember.randint(0, 20, (3, 11))
    mp = _check(model, tokens, (new,), input_names=["tokens"], output_names=["logits"],
                dynamic_axes={"tokens": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}})
    assert mp.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
    assert _dims(mp.graph.output[0]) == ["batch", "seq", 20]


def test_causal_attention_and_opset_17():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(8, 24)
            self.out = nn.Linear(8, 8)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            q, k, v = (t.view(t.shape[0], t.shape[1], 2, 4).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return F.gelu(self.out(y.transpose(1, 2).reshape(x.shape[0], x.shape[1], 8)), approximate="tanh")

    mp = _check(Block(), ember.randn(2, 5, 8), opset_version=17)
    ops = {n.op_type for n in mp.graph.node}
    assert "Gelu" not in ops and "Tanh" in ops                  # Gelu is an opset-20 op: decomposed
    assert [o.version for o in mp.opset_import] == [17]


def test_elementwise_reductions_and_norms():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.gn = nn.GroupNorm(2, 4)
            self.ln = nn.LayerNorm([3, 5], elementwise_affine=False)

        def forward(self, x, mask):
            y = self.gn(x).flatten(2)[..., :15].view(2, 4, 3, 5)
            y = self.ln(y) * 2 - 1 / (1 + y.abs())
            y = y.masked_fill(mask, -1.0).clamp(-2, 2) ** 2
            z = ember.where(y > 0.5, y.exp(), y.sigmoid()) + F.silu(y) + F.softplus(y, beta=2) + F.elu(y)
            stats = ember.stack([z.mean((-1, -2)), z.var(-1).sum(-1), z.std(-1, correction=0).amax(-1),
                                 z.norm(dim=(-1, -2)), z.logsumexp(-1).amin(-1)], -1)
            top = z.flatten(2).topk(3, dim=-1).values.sum(-1, keepdim=True)
            return stats, top, z.max(-1).indices, (z > 1).any(-1), z.cumsum(-1).flip(-1)[..., ::2]

    x = ember.randn(2, 4, 4, 4)
    mask = ember.rand(2, 4, 3, 5) > 0.7
    _check(M(), (x, mask))


def test_in_place_ops_and_non_tensor_outputs():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x, scale: float = 2.0):
            y = self.fc(x)
            y.relu_()
            y += x * scale
            return {"y": y, "pair": (y.sum(-1), x.transpose(0, 1))}

    _check(M(), (ember.randn(4, 3), 3.0))


_X = (2, 3, 4)
_OP_CASES = {
    "unary": (lambda x: [x.abs().rsqrt(), x.square(), x.abs().log1p(), x.expm1(), x.abs().log2(), x.exp2(),
                         F.mish(x), F.logsigmoid(x), F.hardsigmoid(x), F.hardswish(x), x.frac(), x.trunc(),
                         ember.sinc(x), x.round(), x.sign(), x.erf(), x.atan(), F.relu6(x), F.softshrink(x),
                         F.hardshrink(x), F.threshold(x, 0.1, 20.0), F.selu(x), F.celu(x, 0.5),
                         F.leaky_relu(x, 0.2), x.isfinite(), F.gelu(x)], "f"),
    "integer": (lambda a: [a % 3, a // 3, ember.fmod(a, 3), a / 2, a.float().remainder(1.5),
                           ember.div(a.float(), 1.5, rounding_mode="trunc"), a.sum(-1), a.float().mean()], "i"),
    "compare": (lambda a, b: [a == b, a != b, a <= b, (a > 0) & (b > 0), (a > 0) ^ (b > 0), ~(a > 0),
                              ember.maximum(a, b), a ** 2, 2 ** a, ember.lerp(a, b, 0.3),
                              ember.addcdiv(a, a, b.abs() + 1, value=2)], "ff"),
    "index": (lambda a: [a.index_select(1, ember.tensor([2, 0])), a.repeat(1, 2, 1), a.tril(1), a.triu(-1),
                         a[:, None, 1:, -1], a[..., ::2], a.argmax(), a.argmin(-1, keepdim=True),
                         a.sort(-1, descending=True)[0], a.amax(), a.prod(-1), (a > 0).all(),
                         a.transpose(0, 2).contiguous()], "f"),
    "norms": (lambda a: [a.norm(p=1, dim=-1), a.norm(p=float("inf")), a.norm(p=3, dim=(0, 2)),
                         F.normalize(a, dim=-1), F.rms_norm(a, (4,)), F.instance_norm(a), F.layer_norm(a, (3, 4)),
                         ember.einsum("bij,bkj->bik", a, a), a.bmm(a.transpose(1, 2))], "f"),
}


@pytest.mark.parametrize("opset", [20, 14])
@pytest.mark.parametrize("case", sorted(_OP_CASES))
def test_op_coverage(case, opset):
    fn, kinds = _OP_CASES[case]
    args = tuple(ember.randint(-5, 5, _X) if k == "i" else ember.randn(*_X) for k in kinds)
    mp = _check(fn, args, opset_version=opset)
    assert [o.version for o in mp.opset_import] == [opset]


def test_conv_transpose_conv1d_adaptive_pools():
    _check(nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1), ember.randn(1, 3, 5, 5))
    m = _trained_bn(nn.Sequential(nn.Conv1d(3, 4, 3, padding=1), nn.BatchNorm1d(4), nn.ReLU(),
                                  nn.AdaptiveAvgPool1d(1)), (4, 3, 8))
    _check(m, ember.randn(2, 3, 8))
    _check(nn.Sequential(nn.AdaptiveAvgPool2d((2, 2)), nn.AdaptiveMaxPool2d(1)), ember.randn(1, 2, 6, 6))


def test_3d_convolutions_and_pools():
    m = nn.Sequential(nn.Conv3d(2, 4, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 2), dilation=(1, 1, 2)),
                      nn.ReLU(), nn.MaxPool3d(2, ceil_mode=True), nn.AvgPool3d(2, 1, 1),
                      nn.ConvTranspose3d(4, 3, 3, stride=2, padding=1, output_padding=(1, 0, 1)),
                      nn.AdaptiveAvgPool3d((2, 3, 1)), nn.AdaptiveMaxPool3d(1))
    mp = _check(m, ember.randn(2, 2, 6, 9, 7))
    assert {"Conv", "MaxPool", "AveragePool", "ConvTranspose", "MatMul"} <= {n.op_type for n in mp.graph.node}


def test_dynamic_sizes_used_as_numbers_and_aranges():
    def f(x):
        pos = ember.arange(x.shape[1]).float()[:, None]
        causal = ember.triu(ember.ones(x.shape[1], x.shape[1]), 1)
        return (x + pos) * x.shape[0] + ember.ones(x.shape[0], 1, 1) + causal @ x

    x = ember.randn(2, 5, 3)
    mp = _check(f, x, (ember.randn(4, 7, 3),), dynamic_axes={"x": {0: "n", 1: "t"}})
    assert {"Range", "ConstantOfShape", "Shape", "Trilu"} <= {n.op_type for n in mp.graph.node}


def test_dynamic_axis_the_exporter_cannot_express_is_an_error():
    def f(x):
        return x * ember.tensor([float(i) ** 2 for i in range(x.shape[1])])

    with pytest.raises(ember.onnx.UnsupportedOperatorError, match=r"constant tensor the model makes \(shape \[3\]"):
        ember.onnx.export(f, ember.randn(2, 3), dynamic_axes={"x": {1: "t"}})
    with pytest.raises(ember.onnx.UnsupportedOperatorError, match="argument 1 of op 'mul'"):
        ember.onnx.export(lambda x: x * (1.0 / x.shape[0]), ember.randn(2, 3), dynamic_axes={"x": [0]})


def test_unsupported_op_names_op_and_opset():
    class M(nn.Module):
        def forward(self, x):
            return ember.cummax(x, 0).values

    with pytest.raises(ember.onnx.UnsupportedOperatorError, match=r"op 'cummax' has no ONNX mapping at opset 18"):
        ember.onnx.export(M(), (ember.randn(3, 2),), None, opset_version=18)
    assert "linear" in ember.onnx.supported_ops() and "cummax" not in ember.onnx.supported_ops()


def test_unsupported_pieces_are_errors():
    lstm = nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ember.onnx.UnsupportedOperatorError, match=r"'lstm_layer' \(LSTM with proj_size\).*opset 20"):
        ember.onnx.export(lstm, ember.randn(2, 1, 3))
    with pytest.raises(ember.onnx.UnsupportedOperatorError, match="max_pool2d"):
        ember.onnx.export(lambda x: F.max_pool2d(x, 2, return_indices=True)[1].float(), ember.randn(1, 1, 4, 4))
    with pytest.raises(ValueError, match="opset_version 9 is not supported"):
        ember.onnx.export(nn.Linear(2, 2), ember.randn(1, 2), opset_version=9)
    with pytest.raises(ValueError, match="neither an input nor an output"):
        ember.onnx.export(nn.Linear(2, 2), ember.randn(1, 2), dynamic_axes={"nope": [0]})
    with pytest.raises(RuntimeError, match="one graph"):
        ember.onnx.export(lambda x: x * float(x.sum()), ember.randn(3))


def test_import_without_onnx_says_what_to_install():
    code = ("import sys; sys.modules['onnx'] = None\n"
            "import ember, ember.onnx\n"
            "from ember.onnx import export\n"
            "try:\n    export(ember.nn.Linear(2, 2), ember.randn(1, 2), None)\n"
            "except ImportError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "pip install onnx" in r.stdout
