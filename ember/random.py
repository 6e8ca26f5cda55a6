"""Random number generation: ``Generator`` objects and the default generator behind ``manual_seed``.

ember draws from NumPy's PCG64 bit generator. The same seed gives the same numbers in ember, run after
run; the numbers are not torch's (torch uses a Mersenne Twister with its own transforms).
"""
from __future__ import annotations

import numpy as np

from .tensor import Tensor, wrap

_DEFAULT_SEED = 67280421310721


class Generator:
    """``ember.Generator(device="cpu")`` with manual_seed / seed / initial_seed / get_state / set_state."""

    def __init__(self, device="cpu"):
        self.device = device
        self._seed = _DEFAULT_SEED
        self._np = np.random.Generator(np.random.PCG64(self._seed))

    def manual_seed(self, seed: int) -> "Generator":
        seed = int(seed)
        if seed < -0x8000_0000_0000_0000 or seed > 0xFFFF_FFFF_FFFF_FFFF:
            raise RuntimeError(f"Overflow when unpacking long long")
        self._seed = seed & 0xFFFF_FFFF_FFFF_FFFF
        self._np = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def seed(self) -> int:
        s = int(np.random.SeedSequence().entropy) & 0xFFFF_FFFF_FFFF_FFFF
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        import pickle
        raw = pickle.dumps((self._seed, self._np.bit_generator.state))
        return wrap(np.frombuffer(raw, dtype=np.uint8).copy())

    def set_state(self, state: Tensor) -> "Generator":
        import pickle
        seed, st = pickle.loads(state._data.tobytes())  # our own state bytes, produced by get_state
        self._seed = seed
        self._np = np.random.Generator(np.random.PCG64())
        self._np.bit_generator.state = st
        return self

    def clone_state(self):
        return self.get_state()


default_generator = Generator()


_GEN_HOOK = [None]   # set by ember.compiler while capturing: sees every draw


def _gen(generator) -> np.random.Generator:
    if _GEN_HOOK[0] is not None:
        _GEN_HOOK[0](generator)
    return (generator or default_generator)._np


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (and return it, as torch does)."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    default_generator.set_state(new_state)


class fork_rng:
    """Context manager that restores the default generator's state on exit."""

    def __init__(self, devices=None, enabled=True, **kw):
        self.enabled = enabled

    def __enter__(self):
        if self.enabled:
            self.state = get_rng_state()
        return self

    def __exit__(self, *a):
        if self.enabled:
            set_rng_state(self.state)
        return False
