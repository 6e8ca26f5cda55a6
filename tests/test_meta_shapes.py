"""The meta device sizes layers (convolutions, poolings, normalizations, attention, losses, reductions,
activations, recurrent layers) with shape rules, never by running their kernels: a huge meta forward and
backward allocates nothing real, and shapes, dtypes and strides match torch's meta tensors."""
import collections
import tracemalloc

import numpy as np
import pytest
import torch

import ember
import ember.devices.meta as M
from ember.tensor import Tensor


def _layers(lib, x):
    nn, F = lib.nn, lib.nn.functional
    outs = {}
    outs["conv2d"] = F.conv2d(x, lib.empty(16, 3, 3, 3), padding=1)
    outs["conv2d_s2"] = F.conv2d(x, lib.empty(6, 1, 5, 5), stride=2, groups=3)
    outs["conv_t"] = F.conv_transpose2d(x, lib.empty(3, 4, 3, 3), stride=2, output_padding=1)
    outs["max_pool"] = F.max_pool2d(x, 3, 2, 1)
    outs["max_pool_idx"] = F.max_pool2d(x, 2, return_indices=True)[1]
    outs["avg_pool"] = F.avg_pool2d(x, 3, 2, ceil_mode=True)
    outs["adaptive_avg"] = F.adaptive_avg_pool2d(x, (3, 5))
    outs["adaptive_max"] = F.adaptive_max_pool2d(x, 3)
    outs["batch_norm"] = F.batch_norm(x, None, None, training=True)
    outs["group_norm"] = F.group_norm(x, 3)
    outs["layer_norm"] = F.layer_norm(x, x.shape[-2:])
    outs["gelu"] = F.gelu(x)
    outs["silu"] = F.silu(x)
    outs["interp"] = F.interpolate(x, scale_factor=2, mode="bilinear")
    outs["sum"] = x.sum((2, 3))
    outs["mean_keep"] = x.mean(1, keepdim=True)
    outs["amax"] = x.amax(-1)
    outs["var"] = x.var(0)
    outs["ce"] = F.cross_entropy(x.flatten(1), lib.empty(x.shape[0], dtype=lib.int64))
    outs["ce_none"] = F.cross_entropy(x, lib.empty(x.shape[0], *x.shape[2:], dtype=lib.int64), reduction="none")
    return outs


@pytest.mark.parametrize("fmt", ["contiguous_format", "channels_last"])
def test_layer_outputs_match_torch_meta(fmt):
    res = {}
    for lib in (torch, ember):
        with lib.device("meta"):
            x = lib.empty(2, 3, 16, 12).contiguous(memory_format=getattr(lib, fmt))
            res[lib.__name__] = {k: (tuple(v.shape), str(v.dtype).split(".")[-1], v.stride(), v.device.type)
                                 for k, v in _layers(lib, x).items()}
    for k, want in res["torch"].items():
        assert res["ember"][k] == want, k


def test_meta_conv_net_gradients_match_torch_meta():
    grads = {}
    for lib in (torch, ember):
        nn = lib.nn
        with lib.device("meta"):
            m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(8, 4, 3, groups=2), nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Linear(4, 10))
            x = lib.empty(4, 3, 20, 20).requires_grad_()
            lib.nn.functional.cross_entropy(m(x), lib.empty(4, dtype=lib.int64)).backward()
        grads[lib.__name__] = [(tuple(p.grad.shape), p.grad.stride()) for p in m.parameters()] + \
            [(tuple(x.grad.shape), x.grad.stride())]
    assert grads["ember"] == grads["torch"]


def _no_kernel_runs(monkeypatch):
    """Record every op the meta device sizes by running its kernel."""
    ran = collections.Counter()
    orig = M._sized

    def sized(op, args, attrs):
        if op.name not in M._SHAPES and (op.meta is None or op.name in M._SIZE_ONLY_RULES):
            ran[op.name] += 1
        return orig(op, args, attrs)
    monkeypatch.setattr(M, "_sized", sized)
    return ran


def test_huge_meta_layers_allocate_nothing(monkeypatch):
    """Tens of gigabytes of meta activations, forward and backward: no kernel runs, nothing is allocated."""
    ran = _no_kernel_runs(monkeypatch)
    nn, F = ember.nn, ember.nn.functional
    with ember.device("meta"):
        conv = nn.Conv2d(64, 128, 3, padding=1)
        ln = nn.LayerNorm(4096)
        x = ember.empty(32, 64, 512, 512, requires_grad=True)
        h = ember.empty(64, 2048, 4096, requires_grad=True)
        logits = ember.empty(16, 1024, 50257, requires_grad=True)
        tracemalloc.start()
        try:
            y = F.max_pool2d(F.relu(conv(x)), 2)
            z = F.avg_pool2d(y, 2) + F.adaptive_avg_pool2d(y, 128)
            a = F.gelu(ln(h)).sum()
            loss = F.cross_entropy(logits.flatten(0, 1), ember.empty(16 * 1024, dtype=ember.int64))
            (z.mean() + a + loss).backward()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert y.shape == (32, 128, 256, 256) and z.shape == (32, 128, 128, 128)
    assert x.grad.shape == x.shape and conv.weight.grad.shape == conv.weight.shape and h.grad.shape == h.shape
    assert logits.grad.shape == logits.shape and x.grad.is_meta
    assert not ran, dict(ran)
    assert peak < 4 << 20, peak


def test_rules_agree_with_the_kernels(monkeypatch):
    """Every rule gives the shapes and dtypes the kernel (run on stand-ins) gives, on a small model mix."""
    bad, checked = [], collections.Counter()
    orig = M._sized

    def sized(op, args, attrs):
        res = orig(op, args, attrs)
        rule = M._SHAPES.get(op.name)
        if rule is not None:
            saved = dict(M._SHAPES)
            M._SHAPES.clear()
            try:
                ref = orig(op, args, attrs)
            finally:
                M._SHAPES.update(saved)
            checked[op.name] += 1
            for r, g in zip(ref, res):
                if r.shape != g.shape or r.dtype != g.dtype:
                    bad.append((op.name, r.shape, r.dtype, g.shape, g.dtype))
        return res
    monkeypatch.setattr(M, "_sized", sized)
    nn, F = ember.nn, ember.nn.functional
    with ember.device("meta"):
        cnn = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(16, 16, 3, stride=2), nn.GroupNorm(4, 16), nn.SiLU(), nn.AvgPool2d(2),
                            nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(16, 10))
        F.cross_entropy(cnn(ember.empty(8, 3, 32, 32)), ember.empty(8, dtype=ember.int64)).backward()
        m3 = nn.Sequential(nn.Conv3d(3, 8, 3), nn.MaxPool3d(2), nn.ConvTranspose3d(8, 2, 2, stride=2))
        m3(ember.empty(2, 3, 8, 8, 8)).mean().backward()
        enc = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=True)
        emb = nn.Embedding(100, 32)
        out = enc(emb(ember.empty(4, 10, dtype=ember.int64)), src_mask=nn.Transformer.generate_square_subsequent_mask(10),
                  is_causal=True)
        F.gelu(out).sum().backward()
        for rnn in (nn.LSTM(8, 16, batch_first=True), nn.GRU(8, 4, 2, bidirectional=True)):
            rnn(ember.empty(2, 5, 8))[0].sum().backward()
        x = ember.empty(3, 5, requires_grad=True)
        F.nll_loss(F.log_softmax(x, 1), ember.empty(3, dtype=ember.int64)).backward()
        (x.var(1).sum() + x.std() + x.amax(0).sum() + x.prod() + x.logsumexp(1).sum()).backward()
        F.cross_entropy(x, ember.empty(3, dtype=ember.int64), reduction="none", label_smoothing=0.1).sum().backward()
        for act in (F.elu, F.mish, F.hardswish, F.softplus, F.leaky_relu, F.hardtanh, F.hardsigmoid, F.logsigmoid):
            act(x).sum().backward()
        ember.empty(4, 6, dtype=ember.int32).sum(0)
    assert not bad, bad
    for name in ("conv2d", "conv2d_weight", "conv_transpose3d", "max_pool2d", "native_batch_norm", "norm_stats",
                 "native_layer_norm", "sdpa_softmax", "cross_entropy", "lstm_layer", "gru_layer", "sum", "mean"):
        assert checked[name], name


def test_meta_deepcopy_keeps_meta():
    """copy.deepcopy of meta modules (TransformerEncoder clones its layer) stays on meta, as torch's."""
    import copy
    with ember.device("meta"):
        enc = ember.nn.TransformerEncoder(ember.nn.TransformerEncoderLayer(16, 2, 32), 2)
    assert all(p.is_meta for p in enc.parameters())
    t = ember.empty(2, 3, device="meta").t()
    c = copy.deepcopy(t)
    assert c.is_meta and c.shape == (3, 2) and c.stride() == t.stride()
