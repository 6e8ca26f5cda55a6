"""The native backend's op coverage: every registered op decomposes to primitives or is an extern call."""
import numpy as np
import pytest

import ember
from ember.ops.registry import REGISTRY
from ember.compiler import prims
from ember.compiler.decompose import DECOMPOSITIONS, EXTERN_OPS, Builder, Unsupported


def test_every_registered_op_is_decomposed_or_extern():
    missing = sorted(n for n in REGISTRY if n not in DECOMPOSITIONS and n not in EXTERN_OPS)
    assert not missing, f"ops with neither a decomposition nor an extern entry: {missing}"


def test_no_op_is_both_decomposed_and_extern():
    both = sorted(set(DECOMPOSITIONS) & set(EXTERN_OPS))
    assert not both, both


def test_tables_name_only_registered_ops():
    unknown = sorted(n for n in list(DECOMPOSITIONS) + list(EXTERN_OPS) if n not in REGISTRY)
    assert not unknown, unknown


def test_training_path_ops_are_native():
    # the MLP / GPT training paths must not leave native code
    for name in ("linear", "matmul", "relu", "gelu", "gelu_backward", "softshrink", "activation_mask_backward",
                 "softmax", "log_softmax", "cross_entropy", "cross_entropy_backward", "native_layer_norm",
                 "norm_stats", "embedding", "embedding_dense_backward", "sum", "mean", "add", "sub", "mul", "div",
                 "sqrt", "pow_scalar_tensor", "to_dtype", "sdpa_softmax", "sdpa_softmax_backward", "permute",
                 "view", "expand", "getitem_basic", "where", "tril", "masked_fill", "copy_", "zero_", "fill_"):
        assert name in DECOMPOSITIONS, name


def test_elementwise_templates_cover_their_classes():
    for name, table in prims.ELEMENTWISE.items():
        assert table, name
        for cls, tpl in table.items():
            assert cls in "fiub", (name, cls)
            nargs = 1 if name in prims.UNARY else 2 if name in prims.BINARY else 3
            ops = [f"a{i}" for i in range(nargs)]
            dt = {"f": np.float32, "i": np.int64, "u": np.uint8, "b": np.bool_}[cls]
            assert prims.render(name, dt, ops)


def test_literals_round_trip_exactly():
    for v in (0.1, 1e-8, 0.9, 1 / 3, -2.5, 3e38):
        s = prims.literal(v, np.float32)
        assert np.float32(s.rstrip("f")) == np.float32(v), (v, s)
        s = prims.literal(v, np.float64)
        assert float(s) == v, (v, s)
    assert prims.literal(float("nan"), np.float32) == "((float)NAN)"
    assert prims.literal(True, np.bool_) == "1"


def test_builder_broadcasting_and_casts():
    b = Builder()
    buf = b.buffer("arg", (3, 1), np.float32)
    x = b.load(buf)
    y = b.ew("add", x, b.full(1, (4,), np.float64))
    assert y.shape == (3, 4) and y.dtype == np.float64
    assert b.ew("lt", x, 0.5).dtype == np.bool_
    with pytest.raises(Unsupported):
        b.ew("div", b.load(b.buffer("arg", (2,), np.complex64)), 2)


def test_builder_hash_conses_equal_nodes():
    b = Builder()
    x = b.load(b.buffer("arg", (5,), np.float32))
    assert b.ew("exp", x) is b.ew("exp", x)
    cp = b.checkpoint()
    z = b.ew("tanh", x)
    b.rollback(cp)
    assert b.ew("tanh", x) is not z
