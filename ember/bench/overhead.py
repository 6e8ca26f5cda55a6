"""Suite ``overhead``: what one operator call costs from Python, ember against torch (eager).

Cases: a 16-element float32 add (with and without requires_grad), a 10-op elementwise chain forward
and backward, a 256x256 matmul forward and backward, and a 10,000-op chain backward (depth test).
Then the common ops real programs call (``op/<name>``: views, indexing, joins, reductions, selection,
creation, nn.functional) on 16x16 float32 tensors, one call each, and a few of them forward+backward
with requires_grad (``op_grad/<name>``): what one call costs where the data is too small to matter.
"""
from __future__ import annotations

import numpy as np

import ember
from .harness import Case


def _try_torch():
    try:
        import torch
        torch.set_num_threads(max(1, torch.get_num_threads()))
        return torch
    except Exception:
        return None


def _add16(lib, rg):
    a = lib.ones(16, requires_grad=rg)
    b = lib.ones(16)
    return lambda: a + b


def _chain(lib, rg):
    x0 = lib.ones(16, requires_grad=True)

    def step():
        x = x0
        for _ in range(5):
            x = x * 1.01
            x = x + 0.5
        x.sum().backward()
    return step


def _matmul(lib, n=256):
    rng = np.random.default_rng(0)
    a = lib.tensor(rng.standard_normal((n, n)).astype(np.float32), requires_grad=True)
    b = lib.tensor(rng.standard_normal((n, n)).astype(np.float32), requires_grad=True)

    def step():
        (a @ b).sum().backward()
    return step


def _deep(lib, n=10_000):
    x0 = lib.ones(4, requires_grad=True)

    def step():
        x = x0
        for _ in range(n):
            x = x * 1.0
        x.sum().backward()
    return step


def _common_ops(lib) -> dict:
    """name -> zero-argument call of one common op on small tensors (the same calls for ember and torch)."""
    g = np.random.default_rng(0)
    a = lib.tensor(g.standard_normal((16, 16)).astype(np.float32))
    b = lib.tensor(g.standard_normal((16, 16)).astype(np.float32))
    v = lib.tensor(g.standard_normal(16).astype(np.float32))
    i = lib.tensor([1, 3, 5])
    ie = i.expand(16, 3)
    m = a > 0
    t0 = i.new_zeros(16)
    F = lib.nn.functional
    return {
        "view": lambda: a.view(256), "reshape": lambda: a.reshape(4, 64), "unsqueeze": lambda: a.unsqueeze(0),
        "permute": lambda: a.permute(1, 0), "t": lambda: a.t(), "expand": lambda: v.expand(16, 16),
        "index_int": lambda: a[3], "index_slice": lambda: a[:, 2:8], "index_tensor": lambda: a[i],
        "index_mask": lambda: a[m], "cat": lambda: lib.cat([a, b]), "stack": lambda: lib.stack([a, b]),
        "chunk": lambda: a.chunk(4, 0), "sum": lambda: a.sum(), "sum_dim": lambda: a.sum(1),
        "mean_keepdim": lambda: a.mean(-1, keepdim=True), "max_dim": lambda: a.max(1),
        "argmax": lambda: a.argmax(-1), "topk": lambda: a.topk(3), "sort": lambda: a.sort(-1),
        "cumsum": lambda: a.cumsum(0), "where": lambda: lib.where(m, a, b),
        "masked_fill": lambda: a.masked_fill(m, 0.0), "gather": lambda: a.gather(1, ie),
        "tril": lambda: a.tril(), "full": lambda: lib.full((4, 4), 2.0), "arange": lambda: lib.arange(16),
        "pow": lambda: a ** 2, "matmul": lambda: a @ b, "einsum": lambda: lib.einsum("ij,jk->ik", a, b),
        "relu": lambda: F.relu(a), "softmax": lambda: F.softmax(a, -1),
        "layer_norm": lambda: F.layer_norm(a, (16,)), "linear": lambda: F.linear(a, b, v),
        "embedding": lambda: F.embedding(i, a), "cross_entropy": lambda: F.cross_entropy(a, t0),
    }


def _common_grad_ops(lib) -> dict:
    """name -> one op on a 16x16 leaf that requires grad, then ``sum().backward()`` (node recording and
    the op's derivative; the sum and backward are the same for every op)."""
    g = np.random.default_rng(0)
    a = lib.tensor(g.standard_normal((16, 16)).astype(np.float32), requires_grad=True)
    i = lib.tensor([1, 3, 5])
    ops = {"sum_only": lambda: a, "view": lambda: a.view(256), "t": lambda: a.t(), "index_tensor": lambda: a[i],
           "stack": lambda: lib.stack([a, a]), "softmax": lambda: lib.nn.functional.softmax(a, -1),
           "max_dim": lambda: a.max(1)[0], "gather": lambda: a.gather(1, i.expand(16, 3))}

    def step(f):
        def run():
            f().sum().backward()
        return run
    return {k: step(f) for k, f in ops.items()}


def cases() -> list[Case]:
    torch = _try_torch()
    out = []
    specs = [
        ("add16", lambda lib: _add16(lib, False), 0),
        ("add16_requires_grad", lambda lib: _add16(lib, True), 0),
        ("chain10_fwd_bwd", lambda lib: _chain(lib, True), 0),
        ("matmul256_fwd_bwd", lambda lib: _matmul(lib), 0),
        ("chain10000_bwd", lambda lib: _deep(lib), 1),
    ]
    for name, make, number in specs:
        variants = {"ember": make(ember)}
        if torch is not None:
            variants["torch"] = make(torch)
        out.append(Case(name, "overhead", variants, number=number, unit="us" if number == 0 else "ms"))
    for prefix, make in (("op", _common_ops), ("op_grad", _common_grad_ops)):
        libs = {"ember": make(ember)}
        if torch is not None:
            libs["torch"] = make(torch)
        for name in libs["ember"]:
            out.append(Case(f"{prefix}/{name}", "overhead", {k: ops[name] for k, ops in libs.items()}))
    return out
