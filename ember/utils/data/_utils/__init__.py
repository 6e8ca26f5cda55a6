"""Helpers behind ``ember.utils.data.DataLoader`` (collation, fetching, worker processes)."""
from . import collate, fetch, worker  # noqa: F401
