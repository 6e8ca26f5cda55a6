"""Arena memory touched ahead of the first native call (ember/compiler/prefault.py): the plan cache notes a
runner's arena sizes by the function's name, the next first trace of that name touches that much memory
in the background, and the runner's arena takes it (zeroed, same results); a stale or bogus note changes
nothing but where the arena comes from. Speed is measured in ``python -m ember.bench compile``."""
import os

import numpy as np

import ember
import ember.nn as nn
from ember.compiler import native, prefault
from compile_support import _reset, cache  # noqa: F401  (fresh compiler state; a private cache per test)
from test_compiler_plan_cache import _step


def _train(steps=3):
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
    opt = ember.optim.AdamW(m.parameters(), lr=1e-2)
    x, y = ember.randn(8, 6), ember.randn(8, 3)
    f = ember.compile(_step)
    losses = [float(f(m, opt, x, y)) for _ in range(steps)]
    return losses, [p.detach().numpy().copy() for p in m.parameters()], f


def _note_file(cache_dir):
    return os.path.join(cache_dir, "kernels", "plans", "_step.arena")


def test_a_stored_plan_notes_its_arena_and_the_next_process_takes_touched_memory(cache, monkeypatch):
    losses, params, f = _train()
    runner = f.entries[0].runner.native
    sizes = [native.arena_bytes(c) for c in runner.parts]
    with open(_note_file(cache)) as fh:
        assert [int(s) for s in fh.read().split()] == sizes
    # a new process: the first trace starts the toucher, the runner's arena is its buffer
    ember.compiler.reset()
    prefault._NOTED.clear()
    taken = []
    real_take = prefault.take

    def spy(n):
        a = real_take(n)
        taken.append(a)
        return a
    monkeypatch.setattr(prefault, "take", spy)
    losses2, params2, f2 = _train()
    assert taken and taken[0] is not None and taken[0].size == sizes[0]
    assert f2.entries[0].runner.native.fwd.arena is taken[0]
    assert losses2 == losses
    for a, b in zip(params, params2):
        np.testing.assert_array_equal(a, b)


def test_taken_memory_is_zero_and_a_misfit_is_dropped(cache):
    prefault.note("_probe", [1 << 20])
    prefault._NOTED.clear()
    prefault.start("_probe")
    a = prefault.take(1 << 20)
    assert a is not None and a.dtype == np.uint8 and a.size == 1 << 20 and not a.any()
    assert prefault.take(1 << 20) is None          # (taken once)
    prefault.note("_probe2", [1 << 16, 1 << 17, 1 << 16])
    prefault._NOTED.clear()
    prefault.start("_probe2")                      # (equal-sized buffers: each taken once, by identity)
    got = [prefault.take(n) for n in (1 << 17, 1 << 16, 1 << 16)]
    assert [g.size for g in got] == [1 << 17, 1 << 16, 1 << 16] and got[1].base is not got[2].base
    assert prefault._PENDING == {}
    prefault.start("_probe")
    assert prefault.take(1 << 22) is None          # too small for this arena: dropped, not kept
    assert prefault._PENDING == {}
    prefault.start("_probe")
    assert prefault.take(1 << 18) is None          # more than twice the arena: not worth holding
    assert prefault._PENDING == {}


def test_a_bogus_or_missing_note_starts_nothing(cache):
    prefault.start("_never_noted")
    assert prefault._PENDING == {}
    prefault.note("_bogus", [1 << 20])
    with open(os.path.join(cache, "kernels", "plans", "_bogus.arena"), "w") as fh:
        fh.write("not numbers")
    prefault._NOTED.clear()
    prefault.start("_bogus")
    assert prefault._PENDING == {}
    with open(os.path.join(cache, "kernels", "plans", "_bogus.arena"), "w") as fh:
        fh.write(str(prefault.MAX_BYTES + 1))
    prefault.start("_bogus")
    assert prefault._PENDING == {}
    assert prefault.take(64) is None
