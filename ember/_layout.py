"""torch.layout: the memory layout of a tensor (``ember.strided`` for dense tensors, ``ember.sparse_coo``
for the COO sparse tensors of ``ember.sparse``). One object per layout, compared by identity as torch does;
a layout also equals its bare name (``t.layout == "strided"``) for code written against older ember."""
from __future__ import annotations


class layout:
    """A tensor layout; ``ember.strided`` and ``ember.sparse_coo`` are the two that exist."""

    __slots__ = ("name",)
    _ALL: dict = {}

    def __new__(cls, name: str):
        obj = cls._ALL.get(name)
        if obj is None:
            obj = object.__new__(cls)
            obj.name = name
            cls._ALL[name] = obj
        return obj

    def __repr__(self):
        return f"ember.{self.name}"

    def __eq__(self, other):
        if isinstance(other, str):
            return other in (self.name, f"torch.{self.name}", f"ember.{self.name}")
        return self is other

    def __hash__(self):
        return hash(self.name)

    def __reduce__(self):
        return (layout, (self.name,))


strided = layout("strided")
sparse_coo = layout("sparse_coo")
