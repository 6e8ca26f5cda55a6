"""``ember.nn.utils.stateless``: torch's older home of ``functional_call`` (now ``ember.func``)."""
from ...func import functional_call  # noqa: F401

__all__ = ["functional_call"]
