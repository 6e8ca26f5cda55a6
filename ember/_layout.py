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


class SparseLayoutError(NotImplementedError):
    """An op that ember runs only on strided tensors met a sparse COO tensor."""

    def __init__(self, what: str):
        self.what = what
        super().__init__(f"Could not run '{what}' with arguments from the 'SparseCPU' backend: ember supports "
                         "it only for strided tensors, and this tensor has layout ember.sparse_coo (call "
                         ".to_dense() first)")

    def for_op(self, op_name: str) -> NotImplementedError:
        """torch's error for the registered op ``op_name`` whose kernel met the sparse data."""
        return NotImplementedError(
            f"Could not run '{op_name}' with arguments from the 'SparseCPU' backend: ember runs '{op_name}' only "
            "on strided tensors, and an argument has layout ember.sparse_coo (call .to_dense() first, or use "
            "the ops ember.sparse lists)")
