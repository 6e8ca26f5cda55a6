"""Lookup-table layers (torch.nn's): Embedding and EmbeddingBag.

The weight is ``(num_embeddings, embedding_dim)``, initialized N(0, 1) with the ``padding_idx`` row
zeroed; ``from_pretrained`` wraps an existing matrix (frozen by default).
"""
from __future__ import annotations


from ... import dtypes as _dt
from ...tensor import Tensor, _check_device
from ...autograd.grad_mode import no_grad
from .module import Module
from ..parameter import Parameter
from .. import functional as F
from ..functional.sparse import _padding

__all__ = ["Embedding", "EmbeddingBag"]


def _normal_weight(shape, device, dtype) -> Tensor:
    dev = _check_device(device)
    import ember
    return ember.empty(shape, dtype=dtype or _dt.get_default_dtype(), device=dev).normal_()


def _resolve_padding(padding_idx, n: int, msg: str):
    """``padding_idx`` checked and made non-negative (None stays None), as the functional form does."""
    return None if padding_idx is None else _padding(padding_idx, n, msg)


class _Table(Module):
    """What Embedding and EmbeddingBag share: the ``(num_embeddings, embedding_dim)`` weight, N(0, 1)
    with the ``padding_idx`` row zeroed (or the given ``_weight``), and the max-norm settings."""

    def _init_table(self, num_embeddings, embedding_dim, padding_idx, padding_msg, max_norm, norm_type,
                    scale_grad_by_freq, _weight, requires_grad, device, dtype) -> None:
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _resolve_padding(padding_idx, num_embeddings, padding_msg)
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        if _weight is None:
            self.weight = Parameter(_normal_weight((num_embeddings, embedding_dim), device, dtype),
                                    requires_grad=requires_grad)
            self._fill_padding_idx_with_zero()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight, requires_grad=requires_grad)

    # the value at which torch's repr leaves a setting out (mode is always shown)
    _REPR_DEFAULTS = {"padding_idx": None, "max_norm": None, "norm_type": 2, "scale_grad_by_freq": False,
                      "sparse": False}

    def _table_repr(self, names, fmt) -> str:
        s = f"{fmt(self.num_embeddings)}, {fmt(self.embedding_dim)}"
        for k in names:
            v = getattr(self, k)
            default = self._REPR_DEFAULTS.get(k, object())
            if not (v is default if default is None or isinstance(default, bool) else v == default):
                s += f", {k}={fmt(v)}"
        return s

    def reset_parameters(self) -> None:
        with no_grad():
            self.weight.normal_()
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self) -> None:
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)


class Embedding(_Table):
    """A lookup table: ``forward(indices)`` returns the rows ``weight[indices]``."""

    __constants__ = ["num_embeddings", "embedding_dim", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq",
                     "sparse"]

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Tensor | None = None, _freeze: bool = False, device=None,
                 dtype=None) -> None:
        super().__init__()
        self._init_table(num_embeddings, embedding_dim, padding_idx, "Padding_idx must be within num_embeddings",
                         max_norm, norm_type, scale_grad_by_freq, _weight, not _freeze, device, dtype)
        self.sparse = sparse

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        return self._table_repr(("padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"), str)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True, padding_idx: int | None = None,
                        max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> "Embedding":
        """An Embedding whose weight is ``embeddings`` (shared, not copied); ``freeze`` turns off its gradient."""
        if embeddings.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, _freeze=freeze,
                   padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


class EmbeddingBag(_Table):
    """Sums, means or maxima of bags of embeddings: ``forward(input, offsets=None, per_sample_weights=None)``."""

    __constants__ = ["num_embeddings", "embedding_dim", "max_norm", "norm_type", "scale_grad_by_freq", "mode",
                     "sparse", "include_last_offset", "padding_idx"]

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                 _weight: Tensor | None = None, include_last_offset: bool = False, padding_idx: int | None = None,
                 device=None, dtype=None) -> None:
        super().__init__()
        self._init_table(num_embeddings, embedding_dim, padding_idx, "padding_idx must be within num_embeddings",
                         max_norm, norm_type, scale_grad_by_freq, _weight, True, device, dtype)
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def forward(self, input: Tensor, offsets: Tensor | None = None,
                per_sample_weights: Tensor | None = None) -> Tensor:
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights, self.include_last_offset,
                               self.padding_idx)

    def extra_repr(self) -> str:
        return self._table_repr(("max_norm", "norm_type", "scale_grad_by_freq", "mode", "padding_idx"), repr)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> "EmbeddingBag":
        """An EmbeddingBag whose weight is ``embeddings``; ``freeze`` turns off its gradient."""
        if embeddings.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, max_norm=max_norm,
                  norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                  include_last_offset=include_last_offset, padding_idx=padding_idx)
        bag.weight.requires_grad = not freeze
        return bag
