"""The dynamic-shape case of ``python -m ember.bench compile``: a small GPT's forward (inference) at
several sequence lengths, through ONE ``ember.compile`` entry serving every length (automatic dynamic:
the second length traced makes the length symbolic) against a static build per length
(``dynamic=False``, one compiled function per length). The dynamic entry runs ONE native build whose
C takes the length at run time (``native_sym.py``); the static builds have every size a constant.
Steady state: both are warmed at every length first."""
from __future__ import annotations

import ember
from .harness import Case
from . import models as M

LENGTHS = (8, 24, 40, 64)
BATCH = 4


def _model():
    ember.manual_seed(0)
    return M.gpt(ember, M.GPTConfig(block_size=64)).eval()


def _call(fn, idx):
    def run():
        with ember.no_grad():
            return fn(idx)
    return run


def cases(name_filter=None) -> list:
    names = [f"gpt forward, length {n} (one dynamic build vs a static build per length)" for n in LENGTHS]
    if name_filter and not any(name_filter in n for n in names):
        return []
    from ember.compiler import native_sym
    model = _model()
    dynamic = ember.compile(model)
    gen = ember.Generator().manual_seed(0)
    data = {n: ember.randint(0, M.GPTConfig().vocab_size, (BATCH, n), generator=gen) for n in LENGTHS}
    out = []
    shared = native_sym.STATS["shared_builds"]
    for _ in range(3):                              # warm: the static and the symbolic traces, one build
        for n in LENGTHS:
            _call(dynamic, data[n])()
    if native_sym.STATS["shared_builds"] == shared:
        print("compile_dynamic: the dynamic entry did not get a shared build (EMBER_LOGS=dynamic says why)")
    for name, n in zip(names, LENGTHS):
        if name_filter and name_filter not in name:
            continue
        static = ember.compile(model, dynamic=False)
        for _ in range(3):
            _call(static, data[n])()
        out.append(Case(name, "compile", {"ember.compile static": _call(static, data[n]),
                                          "ember.compile dynamic": _call(dynamic, data[n])},
                        unit="ms", per="forward"))
    return out
