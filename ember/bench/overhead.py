"""Suite ``overhead``: what one operator call costs from Python, ember against torch (eager).

Cases: a 16-element float32 add (with and without requires_grad), a 10-op elementwise chain forward
and backward, a 256x256 matmul forward and backward, and a 10,000-op chain backward (depth test).
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
    return out
