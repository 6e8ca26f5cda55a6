"""The random state of the OpenCL devices: one ``ember.Generator`` per device."""
from __future__ import annotations

from ._devices import _index

_GENERATORS: dict = {}
_SEED: list = [None]       # the last manual_seed, given to generators created afterwards


def default_generator(device=None):
    """The ``ember.Generator`` holding the random state of ``device`` (created on first use)."""
    i = _index(device)
    g = _GENERATORS.get(i)
    if g is None:
        from ember.random import Generator
        g = _GENERATORS[i] = Generator(device=f"opencl:{i}")
        if _SEED[0] is not None:
            g.manual_seed(_SEED[0])
    return g


def manual_seed_all(seed: int) -> None:
    """Seed every OpenCL device's generator (also those created later)."""
    seed = int(seed)
    _SEED[0] = seed
    for g in _GENERATORS.values():
        g.manual_seed(seed)
