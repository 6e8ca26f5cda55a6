"""Variable-length sequence utilities: pad_sequence, PackedSequence and packing/unpacking (torch's layout).

Everything is built from differentiable ember ops (cat, stack, narrow, reshape, index_select), so
gradients flow from padded or packed outputs back to the original sequences. The layout depends on the
lengths' values: they are read in Python with ``tolist`` (under ``ember.compile`` a guarded read, so a call
with other lengths retraces), and the index tensors derived from them are constants.

A PackedSequence holds the time-major concatenation of a batch sorted by decreasing length:
``data[sum(batch_sizes[:t]) : sum(batch_sizes[:t+1])]`` are the ``batch_sizes[t]`` sequences still
running at time step ``t``.

While ``ember.compile`` captures, ``pack_padded_sequence`` given the lengths as a tensor returns a
``_PaddedPackedSequence`` instead: the same sequences kept as the length-sorted, time-major padded batch
plus the lengths tensor, whose shapes do not depend on the lengths' values. The recurrent layers and
``pad_packed_sequence`` work on that form directly (the lengths enter the layer ops as a traced tensor),
so a compiled program serves every set of lengths; reading ``data`` or ``batch_sizes`` (or unpacking the
tuple) makes the packed rows then, with the guarded read of the lengths the eager layout needs.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap
from ...ops.registry import FACTORY

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "unpad_sequence", "pack_sequence", "unpack_sequence"]


def _ops():
    import ember
    return ember


def _capturing() -> bool:
    from ...library import _capturing as capturing
    return capturing()


class PackedSequence_(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(PackedSequence_):
    """Packed batch of variable-length sequences (made by :func:`pack_padded_sequence` / :func:`pack_sequence`).

    Fields: ``data`` (sum of lengths, *), ``batch_sizes`` (int64, one per time step), ``sorted_indices``
    and ``unsorted_indices`` (the permutation applied to sort the batch by length, and its inverse; None
    when the batch was already sorted).
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> "PackedSequence":
        """``data.to(...)``; returns ``self`` when nothing changes (the index tensors stay int64)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def pin_memory(self) -> "PackedSequence":
        return self

    def cpu(self, *args, **kwargs) -> "PackedSequence":
        return self.to(*args, **kwargs)

    def cuda(self, *args, **kwargs):
        raise RuntimeError("ember has no CUDA device: use the 'cpu' device")

    def double(self) -> "PackedSequence":
        return self.to(dtype=_dt.float64)

    def float(self) -> "PackedSequence":
        return self.to(dtype=_dt.float32)

    def half(self) -> "PackedSequence":
        return self.to(dtype=_dt.float16)

    def long(self) -> "PackedSequence":
        return self.to(dtype=_dt.int64)

    def int(self) -> "PackedSequence":
        return self.to(dtype=_dt.int32)

    def short(self) -> "PackedSequence":
        return self.to(dtype=_dt.int16)

    def char(self) -> "PackedSequence":
        return self.to(dtype=_dt.int8)

    def byte(self) -> "PackedSequence":
        return self.to(dtype=_dt.uint8)

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False


class _PaddedPackedSequence(PackedSequence):
    """A PackedSequence made while ember.compile captures (see the module docstring): ``padded`` (T, B, *)
    sorted by decreasing length and time-major, ``lengths`` (B,) int64 in that order. The packed fields
    are made from them when first read."""

    def __new__(cls, padded, lengths, sorted_indices=None, unsorted_indices=None):
        self = tuple.__new__(cls, (None, None, sorted_indices, unsorted_indices))
        self.__dict__.update(padded=padded, lengths=lengths, _packed=None, _checked=False)
        return self

    def check(self) -> None:
        """The lengths are positive, decreasing and at most the padded length (one guarded check; when
        they are not, making the eager layout raises torch's error)."""
        if self._checked:
            return
        lens = self.lengths
        bad = (lens[-1:] <= 0) | (lens[:1] > self.padded.shape[0]) | (lens[:-1] < lens[1:]).any().reshape(1)
        if bool(bad.any()):
            self.packed()
        self.__dict__["_checked"] = True

    def packed(self) -> PackedSequence:
        """The eager layout (reads the lengths: a guarded read under ember.compile)."""
        if self._packed is None:
            p = pack_padded_sequence(self.padded, _lengths_array(self.lengths), enforce_sorted=True)
            self._packed = PackedSequence(p.data, p.batch_sizes, tuple.__getitem__(self, 2),
                                          tuple.__getitem__(self, 3))
        return self._packed

    data = property(lambda self: self.packed().data)
    batch_sizes = property(lambda self: self.packed().batch_sizes)

    def __iter__(self):
        return iter(tuple.__iter__(self.packed()))

    def __getitem__(self, i):
        return tuple.__getitem__(self.packed(), i)

    def __reduce__(self):
        return (PackedSequence, tuple(self))

    def _replace(self, **kw):
        return self.packed()._replace(**kw)

    def _asdict(self):
        return self.packed()._asdict()

    def step_batch_sizes(self) -> Tensor:
        """(T,) int64: how many sequences run at each step of ``padded`` (0 past the longest)."""
        E = _ops()
        self.check()
        T = self.padded.shape[0]
        return (E.arange(T).unsqueeze(1) < self.lengths.unsqueeze(0)).sum(1)


def _pack_captured(input, lengths, batch_first, enforce_sorted):
    """``pack_padded_sequence`` while ember.compile captures, lengths given as a tensor: the padded form
    (no read of the lengths' values; their check waits for the first use, ``_PaddedPackedSequence.check``)."""
    E = _ops()
    lens = lengths.reshape(-1).long()
    batch_dim = 0 if batch_first else 1
    if input.dim() < 2 or lens.shape[0] != input.shape[batch_dim] or lens.shape[0] == 0:
        return None
    sorted_indices = unsorted_indices = None
    if not enforce_sorted:
        sorted_indices = E.argsort(lens, descending=True, stable=True)
        unsorted_indices = invert_permutation(sorted_indices)
        lens = lens.index_select(0, sorted_indices)
        input = input.index_select(batch_dim, sorted_indices.to(input.device))
    if batch_first:
        input = input.transpose(0, 1)
    return _PaddedPackedSequence(input, lens, sorted_indices, unsorted_indices)


def _pad_captured(sequence, batch_first, padding_value, total_length):
    """``pad_packed_sequence`` of a _PaddedPackedSequence: zero (``padding_value``) past each length; the
    time dim is the longest length (the padded one when they are equal: a guarded check)."""
    E = _ops()
    sequence.check()
    padded, lens = sequence.padded, sequence.lengths
    T = padded.shape[0]
    steps = E.arange(T, device=padded.device).unsqueeze(1) < lens.to(padded.device).unsqueeze(0)     # (T, B)
    mask = steps.reshape(tuple(steps.shape) + (1,) * (padded.dim() - 2))
    out = E.where(mask, padded, E.full((), padding_value, dtype=padded.dtype))
    longest = T if bool(lens[0] == T) else int(lens[0])
    if total_length is not None:
        if total_length < longest:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {longest}")
        longest = total_length
    if longest < T:
        out = out.narrow(0, 0, longest)
    elif longest > T:       # (a slice of a fill of the whole length: its size follows T under ember.compile)
        out = E.cat([out, E.full((longest,) + tuple(out.shape[1:]), padding_value, dtype=out.dtype)[T:]], 0)
    if batch_first:
        out = out.transpose(0, 1)
    idx = sequence.unsorted_indices
    if idx is not None:
        out = out.index_select(0 if batch_first else 1, idx.to(out.device))
        lens = lens.index_select(0, idx)
    return out, lens


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of an index permutation (None stays None): ``out[perm[i]] = i``, one scatter op."""
    if permutation is None:
        return None
    E = _ops()
    perm = permutation if permutation._dtype is _dt.int64 else permutation.long()
    n = perm.numel()
    return E.zeros_like(permutation).scatter(0, perm, E.arange(n, dtype=permutation._dtype))


def _const(arr: np.ndarray, dtype) -> Tensor:
    """Wrap an array computed from sizes and lengths Python holds: a constant for a compiled replay (the
    lengths it came from are guarded)."""
    if FACTORY[0] is not None:
        FACTORY[0](arr)
    t = wrap(arr, dtype)
    t._host_const = True        # the device dispatcher copies it next to device operands
    return t


def _int64(a) -> Tensor:
    return _const(np.ascontiguousarray(a, dtype=np.int64), _dt.int64)


def _fill(shape, value, dtype) -> Tensor:
    """A constant block (no gradient) used for padding; the value is cast like torch.full's."""
    return _const(np.full(shape, value, dtype=dtype.np), dtype)


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack variable-length sequences (each ``(L_i, *)``) into one ``(max L, B, *)`` tensor
    (``(B, max L, *)`` with ``batch_first``), filling with ``padding_value`` on ``padding_side``.

    The result has the first sequence's dtype; the others' trailing dims must broadcast to its.
    """
    try:
        sequences = tuple(sequences)
    except TypeError:
        raise RuntimeError("pad_sequence: Expected iterable for input sequences, but got arg of type: "
                           f"{type(sequences)}") from None
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if len(sequences) == 0:
        raise RuntimeError("received an empty list of sequences")
    E = _ops()
    for s in sequences:
        if not isinstance(s, Tensor):
            raise TypeError(f"pad_sequence: expected a sequence of Tensors, but got {type(s).__name__}")
        if s.dim() == 0:
            raise RuntimeError("pad_sequence: every sequence needs at least one dimension (the time dimension), "
                               "but got a 0-dim tensor")
    first = sequences[0]
    dtype = first._dtype
    trail = tuple(first.shape[1:])
    max_len = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        n = s.shape[0]
        if tuple(s.shape[1:]) != trail:
            _check_broadcast(s.shape, (n,) + trail)
            s = s.expand((n,) + trail)
        if s._dtype is not dtype:
            s = s.to(dtype)
        if n < max_len:
            pad = _fill((max_len - n,) + trail, padding_value, dtype)
            s = E.cat([s, pad] if padding_side == "right" else [pad, s], 0)
        padded.append(s)
    return E.stack(padded, 0 if batch_first else 1)


def _check_broadcast(src, dst) -> None:
    """Raise torch's copy error unless shape ``src`` broadcasts to ``dst``."""
    if len(src) <= len(dst):
        for i in range(1, len(src) + 1):
            a, b = dst[-i], src[-i]
            if b != a and b != 1:
                raise RuntimeError(f"The size of tensor a ({a}) must match the size of tensor b ({b}) at "
                                   f"non-singleton dimension {len(dst) - i}")
        return
    raise RuntimeError(f"pad_sequence: sequence of shape {list(src)} does not fit the padded slot of shape "
                       f"{list(dst)}")


def _lengths_array(lengths) -> np.ndarray:
    """The lengths' values in NumPy; a tensor's are read with ``tolist`` (a guarded read when compiled)."""
    if isinstance(lengths, Tensor):
        return np.asarray(lengths.tolist(), dtype=lengths._dtype.np).astype(np.int64).reshape(-1)
    return np.asarray(lengths).astype(np.int64).reshape(-1)


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,  # noqa: A002
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) whose sequences have ``lengths``.

    With ``enforce_sorted`` the lengths must be decreasing; otherwise the batch is sorted here and the
    permutation recorded in the result.
    """
    E = _ops()
    if isinstance(lengths, Tensor) and isinstance(input, Tensor) and _capturing():
        packed = _pack_captured(input, lengths, batch_first, enforce_sorted)
        if packed is not None:
            return packed
    lens = _lengths_array(lengths)
    sorted_indices = unsorted_indices = None
    batch_dim = 0 if batch_first else 1
    if not enforce_sorted:
        order = np.argsort(-lens, kind="stable")        # decreasing, ties keep their order
        lens = lens[order]
        sorted_indices = _int64(order)
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        unsorted_indices = _int64(inverse)
        input = input.index_select(batch_dim, sorted_indices)
    if input.dim() < 2:
        raise RuntimeError(f"pack_padded_sequence: expected a padded input with at least 2 dimensions (time and "
                           f"batch), but got {input.dim()}")
    if batch_first:
        input = input.transpose(0, 1)
    T, B = input.shape[0], input.shape[1]
    if lens.size != B:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {lens.size} "
                           f"(batch_size={B})")
    if lens.size == 0 or lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if np.any(lens[:-1] < lens[1:]):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You "
                           "can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                           "sidestep this requirement if you do not need ONNX exportability.")
    if lens[0] > T:
        raise RuntimeError(f"pack_padded_sequence: a sequence length ({int(lens[0])}) exceeds the padded length "
                           f"of the input ({T})")
    # batch size at step t = number of sequences longer than t
    batch_sizes = (lens[None, :] > np.arange(int(lens[0]))[:, None]).sum(1)
    trail = tuple(input.shape[2:])
    pieces = []
    t = 0
    while t < batch_sizes.size:
        bs = int(batch_sizes[t])
        t1 = t
        while t1 < batch_sizes.size and batch_sizes[t1] == bs:
            t1 += 1
        # a run of steps with the same batch size is one rectangular block of the input
        pieces.append(input[t:t1, :bs].reshape((-1,) + trail))
        t = t1
    data = pieces[0] if len(pieces) == 1 else E.cat(pieces, 0)
    return PackedSequence(data, _int64(batch_sizes), sorted_indices, unsorted_indices)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple:
    """Undo :func:`pack_padded_sequence`: returns ``(padded, lengths)`` in the original batch order."""
    if type(sequence) is _PaddedPackedSequence:
        return _pad_captured(sequence, batch_first, padding_value, total_length)
    E = _ops()
    bsz = _lengths_array(sequence.batch_sizes)
    max_seq_length = bsz.size
    if total_length is not None:
        if total_length < max_seq_length:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {max_seq_length}")
        max_seq_length = total_length
    data = sequence.data
    dtype = data._dtype
    trail = tuple(data.shape[1:])
    B = int(bsz[0]) if bsz.size else 0
    blocks = []
    t, off = 0, 0
    while t < bsz.size:
        bs = int(bsz[t])
        t1 = t
        while t1 < bsz.size and bsz[t1] == bs:
            t1 += 1
        n = (t1 - t) * bs
        block = data.narrow(0, off, n).reshape((t1 - t, bs) + trail)
        if bs < B:
            block = E.cat([block, _fill((t1 - t, B - bs) + trail, padding_value, dtype)], 1)
        blocks.append(block)
        off += n
        t = t1
    if max_seq_length > bsz.size:
        blocks.append(_fill((max_seq_length - bsz.size, B) + trail, padding_value, dtype))
    padded = blocks[0] if len(blocks) == 1 else E.cat(blocks, 0)
    lengths = (bsz[None, :] > np.arange(B)[:, None]).sum(1)
    if batch_first:
        padded = padded.transpose(0, 1)
    lengths_t = _int64(lengths)
    if sequence.unsorted_indices is not None:
        idx = sequence.unsorted_indices
        padded = padded.index_select(0 if batch_first else 1, idx)
        lengths_t = lengths_t.index_select(0, idx)
    return padded, lengths_t


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    """Split a padded batch back into a list of sequences of the given ``lengths``.

    (torch transposes a time-major input in place here; ember leaves the input untouched.)
    """
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    lens = _lengths_array(lengths)
    if lens.size != padded_sequences.shape[0]:
        raise ValueError(f"unpad_sequence: got {lens.size} lengths for a batch of {padded_sequences.shape[0]}")
    return [padded_sequences[i].narrow(0, 0, int(n)).clone() for i, n in enumerate(lens)]


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of variable-length sequences (``pad_sequence`` then ``pack_padded_sequence``)."""
    lengths = [v.size(0) for v in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """Undo :func:`pack_sequence`: the list of the original sequences."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
