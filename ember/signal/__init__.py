"""``ember.signal``: torch.signal (its ``windows`` module)."""
from . import windows  # noqa: F401

__all__ = ["windows"]
