"""Suite ``eager``: the exp-bound composites of a transformer step, one op forward (``_fwd``) and
forward+backward (``_fwd_bwd``) at the small GPT's shapes (batch 16, context 64, width 128, 4 heads),
ember against torch, interleaved.

Cases: ``gelu`` on (16, 64, 512), ``softmax`` on the causal attention scores (16, 4, 64, 64) with -inf
above the diagonal, ``layer_norm`` on (16, 64, 128) with weight and bias, ``cross_entropy`` of (1024, 65)
logits, ``split`` of the (16, 64, 384) qkv projection into q, k, v (computing ``q * k + v``). Variants:
``ember`` (the native eager kernels, ``ember/_native``), ``ember numpy`` (the same call with them
switched off: the NumPy composites; for ``split`` instead ``ember narrows``: one narrow view and node
per piece, not one split node) and ``torch``. The whole training steps are in the ``train`` suite
(``gpt_b16_adamw`` and the MLP cases).
"""
from __future__ import annotations

import numpy as np

import ember
from .harness import Case
from .._native import eager_kernels as _native
from ..ops.shape_split import split_by_narrows


def _try_torch():
    try:
        import torch
        return torch
    except Exception:
        return None


def _inputs(lib, name: str):
    """Identical inputs for ``lib``: (function of the tensors, tensors requiring grad, the other tensors)."""
    rng = np.random.default_rng(0)
    F = lib.nn.functional
    if name == "gelu":
        return (lambda x: F.gelu(x)), [lib.tensor(rng.standard_normal((16, 64, 512)).astype(np.float32))], []
    if name == "softmax":
        s = rng.standard_normal((16, 4, 64, 64)).astype(np.float32) * 3
        s = np.where(np.triu(np.ones((64, 64), bool), k=1), -np.inf, s).astype(np.float32)
        return (lambda x: F.softmax(x, dim=-1)), [lib.tensor(s)], []
    if name == "layer_norm":
        x = rng.standard_normal((16, 64, 128)).astype(np.float32)
        w, b = rng.standard_normal(128).astype(np.float32), rng.standard_normal(128).astype(np.float32)
        return (lambda x, w, b: F.layer_norm(x, (128,), w, b)), [lib.tensor(a) for a in (x, w, b)], []
    if name in ("split", "split_narrows"):
        # the GPT block's q, k, v = qkv.split(C, dim=2), each piece used; split_narrows (ember only):
        # one narrow view and node per piece, as ember.compile captures it
        cut = (lambda x: x.split(128, dim=2)) if name == "split" else (
            lambda x: split_by_narrows(x, 2, (128, 128, 128)))

        def qkv(x):
            q, k, v = cut(x)
            return q * k + v
        return qkv, [lib.tensor(rng.standard_normal((16, 64, 384)).astype(np.float32))], []
    if name == "cross_entropy":
        x = rng.standard_normal((1024, 65)).astype(np.float32)
        y = lib.tensor(rng.integers(0, 65, 1024).astype(np.int64))
        return (lambda x: F.cross_entropy(x, y)), [lib.tensor(x)], []
    raise ValueError(f"unknown eager case '{name}'")


def _call(lib, name: str, backward: bool):
    fn, leaves, _ = _inputs(lib, name)
    if not backward:
        return lambda: fn(*leaves)
    for t in leaves:
        t.requires_grad_(True)
    out = fn(*leaves)
    grad = lib.ones_like(out) if out.ndim else None

    def step():
        for t in leaves:
            t.grad = None
        fn(*leaves).backward(grad)
    return step


def _numpy_path(f):
    """``f`` with the native eager kernels switched off for the call."""
    def run():
        _native.set_enabled(False)
        try:
            f()
        finally:
            _native.set_enabled(True)
    return run


OPS = ("gelu", "softmax", "layer_norm", "cross_entropy", "split")


def cases() -> list[Case]:
    torch = _try_torch()
    out = []
    native = _native.available()
    if not native:
        print("eager: the native eager kernels are unavailable (no C compiler?): 'ember' is the NumPy path")
    for name in OPS:
        for backward in (False, True):
            variants = {"ember": _call(ember, name, backward)}
            if name == "split":
                variants["ember narrows"] = _call(ember, "split_narrows", backward)
            elif native:
                variants["ember numpy"] = _numpy_path(_call(ember, name, backward))
            if torch is not None:
                variants["torch"] = _call(torch, name, backward)
            out.append(Case(f"{name}_{'fwd_bwd' if backward else 'fwd'}", "eager", variants, unit="us"))
    return out
