"""torch.nn.functional's lookup ops: embedding, embedding_bag and one_hot.

``embedding`` is one op (a row gather). Its derivative is a second op, ``embedding_dense_backward``,
that adds each gradient row into the row it was read from (skipping ``padding_idx``, optionally
dividing by how often the index occurs in the batch). That op is linear in the gradient, so its own
derivative is again a gather (``embedding``) times the same per-position factor: double backward works.
``embedding_bag`` is built from these two ops: a gather, then the same scatter-add over bag ids.
"""
from __future__ import annotations

import sys

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap
from ...ops.registry import register, apply, dtype_name, node_class, rename
from ...ops._along import first_out_of_range
from ...memory import _check_new

__all__ = ["embedding", "embedding_bag", "one_hot"]


# ---- ops ----------------------------------------------------------------------------------------------

def _embedding_kernel(w, idx, padding_idx=-1, scale_grad_by_freq=False):
    if first_out_of_range(idx, w.shape[0], False) is not None:   # (one reduction, not min and max)
        raise IndexError("index out of range in self")
    return w.take(idx, axis=0)


def _position_factor(idx: np.ndarray, num_weights: int, padding_idx: int, scale_grad_by_freq: bool, dtype):
    """Per-position multiplier of the gradient: 0 at padding_idx, 1/count with scale_grad_by_freq; None if 1."""
    if padding_idx < 0 and not scale_grad_by_freq:
        return None
    ids = idx.reshape(-1)
    f = np.ones(ids.shape, dtype)
    if scale_grad_by_freq:
        counts = np.bincount(ids, minlength=num_weights)
        f /= counts[ids]
    if padding_idx >= 0:
        f[ids == padding_idx] = 0
    return f.reshape(idx.shape + (1,))


def _embedding_backward(ctx, g):
    idx = ctx.inputs[1]
    a = ctx.attrs
    gw = apply(EMBEDDING_DENSE_BACKWARD, (g, idx), {"num_weights": ctx.in_shape(0)[0],
                                                     "padding_idx": a.get("padding_idx", -1),
                                                     "scale_grad_by_freq": a.get("scale_grad_by_freq", False)})
    return gw, None


EMBEDDING = register("embedding", _embedding_kernel, _embedding_backward, save="1")


_LOW = (np.dtype(_dt.float16.np), np.dtype(_dt.bfloat16.np))    # accumulated in float32


def _dense_backward_kernel(g, idx, num_weights, padding_idx=-1, scale_grad_by_freq=False):
    d = g.shape[-1]
    ids = idx.reshape(-1).astype(np.intp, copy=False)
    acc = np.float32 if g.dtype in _LOW else g.dtype
    rows = g.reshape(ids.size, d).astype(acc, copy=False)
    f = _position_factor(ids, num_weights, padding_idx, scale_grad_by_freq, acc)
    if f is not None:
        rows = rows * f.reshape(-1, 1)
    out = np.zeros((num_weights, d), acc)
    if ids.size:
        # sort-and-segment sum: vectorized, and its summation order does not depend on the input order
        order = np.argsort(ids, kind="stable")
        sid = ids[order]
        starts = np.flatnonzero(np.concatenate(((True,), sid[1:] != sid[:-1])))
        out[sid[starts]] = np.add.reduceat(rows[order], starts, axis=0)
    return out.astype(g.dtype, copy=False)


def _dense_backward_backward(ctx, gg):
    idx = ctx.inputs[1]
    a = ctx.attrs
    r = apply(EMBEDDING, (gg, idx))
    f = _position_factor(idx._data.astype(np.intp, copy=False), a["num_weights"], a["padding_idx"],
                         a["scale_grad_by_freq"], gg._data.dtype)
    if f is not None:
        r = r * wrap(f, gg._dtype)
    return r, None


EMBEDDING_DENSE_BACKWARD = register("embedding_dense_backward", _dense_backward_kernel, _dense_backward_backward,
                                    save="1")


# ---- embedding ------------------------------------------------------------------------------------------

def _check_indices(t, what: str, op: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}(): argument '{what}' must be Tensor, not {type(t).__name__}")
    if t._dtype not in (_dt.int64, _dt.int32):
        raise RuntimeError(f"Expected tensor for argument #1 '{what}' to have one of the following scalar types: "
                           f"Long, Int; but got torch.{dtype_name(t._dtype)}Tensor instead (while checking "
                           f"arguments for {op})")


def _padding(padding_idx, n: int, msg: str = "Padding_idx must be within num_embeddings") -> int:
    if padding_idx is None:
        return -1
    if padding_idx > 0:
        if padding_idx >= n:
            raise AssertionError(msg)
    elif padding_idx < 0:
        if padding_idx < -n:
            raise AssertionError(msg)
        padding_idx = n + padding_idx
    return int(padding_idx)


def _renorm_(weight: Tensor, idx: Tensor, max_norm: float, norm_type: float) -> None:
    """torch's ``embedding_renorm_``: rescale, in place and outside autograd, each looked-up row whose
    ``norm_type``-norm exceeds ``max_norm`` to norm ``max_norm``."""
    ids = np.unique(idx._data.reshape(-1))
    if ids.size == 0:
        return
    n = weight._data.shape[0]
    if ids[0] < 0 or ids[-1] >= n:
        raise IndexError("index out of range in self")
    rows = weight._data[ids].astype(np.float64)
    norms = np.linalg.norm(rows, ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        scale = max_norm / (norms[big] + 1e-7)
        weight._data[ids[big]] = (rows[big] * scale[:, None]).astype(weight._data.dtype)
        weight._bump()


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` selected by the integer tensor ``input`` (result shape ``input.shape + (D,)``).

    ``padding_idx``'s row gets no gradient; ``max_norm`` renormalizes the looked-up rows in place first;
    ``scale_grad_by_freq`` divides each row's gradient by the index's frequency in the batch.
    """
    if not isinstance(weight, Tensor):
        raise TypeError(f"embedding(): argument 'weight' must be Tensor, not {type(weight).__name__}")
    if sparse:
        raise NotImplementedError("embedding: sparse=True (sparse gradients) is not supported by ember; "
                                  "use sparse=False")
    pad = _padding(padding_idx, weight._data.shape[0])
    _check_indices(input, "indices", "embedding")
    if weight._data.ndim != 2:
        raise RuntimeError(f"'weight' must be 2-D")
    if max_norm is not None:
        _renorm_(weight, input, max_norm, norm_type)
    return apply(EMBEDDING, (weight, input), {"padding_idx": pad, "scale_grad_by_freq": bool(scale_grad_by_freq)})


def _torch_embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """``torch.embedding(weight, indices, padding_idx=-1, ...)`` (the ATen op's argument order)."""
    return embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                     scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


# ---- embedding_bag ------------------------------------------------------------------------------------

def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type: float = 2, scale_grad_by_freq: bool = False,
                  mode: str = "mean", sparse: bool = False, per_sample_weights=None, include_last_offset: bool = False,
                  padding_idx=None) -> Tensor:
    """Sums, means or maxima of bags of embeddings, without materializing the per-index embeddings'
    output. Bags are the rows of a 2-D ``input``, or slices of a 1-D ``input`` starting at ``offsets``;
    empty bags give zeros; ``padding_idx`` entries are left out of their bag."""
    import ember
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, "
                         f"then it must have the same shape as the input ({input.shape})")
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    _check_indices(input, "indices", "embedding_bag")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets)}")
        b, length = input.shape
        offs = np.arange(0, b * length, length if length else 1, dtype=np.int64)[:b]
        include_last_offset = False
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        offs = offsets.cpu()._data.astype(np.int64)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max":
        if scale_grad_by_freq:
            raise ValueError("max mode does not support scaling the gradient by the frequency")
        if sparse:
            raise ValueError("max mode does not support sparse weights")
    if sparse:
        raise NotImplementedError("embedding_bag: sparse=True (sparse gradients) is not supported by ember; "
                                  "use sparse=False")
    if max_norm is not None:
        _renorm_(weight, input, max_norm, norm_type)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                  "on GitHub.")
    pad = _padding(padding_idx, weight.shape[0], "padding_idx must be within num_embeddings")
    n = input.shape[0]
    if offs.size and offs[0] != 0:
        raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                           f"from position 0. However, got {offs[0]}")
    if offs.size and offs[-1] > n:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {n}, but got offsets[-1] of "
                           f"{offs[-1]}")
    if include_last_offset:
        if offs.size < 1:
            raise RuntimeError("include_last_offset: number of offset should be at least 1")
        nbags, end = offs.size - 1, offs[-1]
        starts = offs[:-1]
    else:
        nbags, end, starts = offs.size, n, offs
    pos = np.arange(n)
    bag = np.searchsorted(starts, pos, side="right") - 1
    idx_np = input.cpu()._data if pad >= 0 else None      # (host values: only for padding)
    # entries outside every bag, and padding entries, go to an extra bag that is dropped at the end
    drop = (pos >= end) | (bag < 0)
    if pad >= 0:
        drop |= idx_np == pad
    bag = np.where(drop, nbags, bag).astype(np.int64)
    emb = embedding(input, weight, pad if pad >= 0 else None, scale_grad_by_freq=scale_grad_by_freq)
    d = weight.shape[1]
    if per_sample_weights is not None:
        emb = emb * per_sample_weights.unsqueeze(-1)
    bag_t = wrap(bag).to(weight.device)          # (computed on the host; next to a device weight)
    if mode == "max":
        index = bag_t.unsqueeze(-1).expand(n, d)
        base = ember.zeros((nbags + 1, d), dtype=weight.dtype, device=weight.device)
        out = base.scatter_reduce(0, index, emb, "amax", include_self=False)
    else:
        out = apply(EMBEDDING_DENSE_BACKWARD, (emb, bag_t), {"num_weights": nbags + 1, "padding_idx": -1,
                                                            "scale_grad_by_freq": False})
        if mode == "mean":
            counts = np.bincount(bag, minlength=nbags + 1).astype(weight._data.dtype)
            out = out / wrap(np.maximum(counts, 1).reshape(-1, 1), weight._dtype).to(weight.device)
    return rename(out[:nbags], node_class("EmbeddingBagBackward0"))


# ---- one_hot --------------------------------------------------------------------------------------------

def one_hot(input, num_classes: int = -1) -> Tensor:  # noqa: A002 - torch's keyword
    """int64 tensor of shape ``input.shape + (num_classes,)`` with a 1 at each index
    (``num_classes=-1`` infers ``max + 1``)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"one_hot(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if input._dtype is not _dt.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    whole = isinstance(num_classes, (int, np.integer)) and not isinstance(num_classes, (bool, np.bool_))
    if isinstance(num_classes, Tensor):      # (a one-element integer tensor, as torch takes it)
        whole = num_classes.numel() == 1 and not num_classes.dtype.is_floating_point
    if not whole:
        raise TypeError(f"one_hot(): argument 'num_classes' (position 2) must be int, not "
                        f"{type(num_classes).__name__}")
    num_classes = int(num_classes)
    a = input._data
    if type(a) is not np.ndarray and not getattr(a, "is_meta", False):
        return _one_hot_device(input, num_classes)
    if num_classes == -1:
        if a.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(input.max()) + 1      # (a Tensor read: ember.compile guards the value)
    elif num_classes < -1:
        raise RuntimeError("num_classes should be positive")
    if a.size:
        if a.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if a.max() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    # the result is sized (and limit-checked, naming one_hot) before the ops below allocate anything
    _check_new(a.shape + (num_classes,), np.int64)
    # as ops (compare with the class numbers), so ember.compile records it like any other op
    from ...ops.creation import arange
    return (input.unsqueeze(-1) == arange(num_classes)).to(_dt.int64)


def _one_hot_device(input, num_classes: int) -> Tensor:
    """``one_hot`` of a device tensor: the checks read its min and max (one small copy, as torch's
    device kernels read them), the result is a scatter of ones on the device."""
    from ...ops.creation import zeros
    a = input._data
    lo = hi = None
    if a.size:
        lo, hi = (int(v) for v in _min_max_host(input))
    if num_classes == -1:
        if not a.size:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = hi + 1
    elif num_classes < -1:
        raise RuntimeError("num_classes should be positive")
    if a.size:
        if lo < 0:
            raise RuntimeError("Class values must be non-negative.")
        if hi >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    out = zeros(a.shape + (num_classes,), dtype=_dt.int64, device=input.device)
    return out.scatter_(-1, input.unsqueeze(-1), 1)


def _min_max_host(t: Tensor) -> list:
    """[min, max] of a tensor read back in one copy."""
    from ...ops.shape_join import stack
    return stack([t.min(), t.max()]).tolist()


_pkg = sys.modules["ember"]
if not hasattr(_pkg, "embedding"):
    _torch_embedding.__name__ = "embedding"
    _pkg.embedding = _torch_embedding
