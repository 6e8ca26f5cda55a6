"""Transformer layers: TransformerEncoder/Decoder(Layer), Transformer (MultiheadAttention is in ``activation``,
where torch has it).

Constructors, parameter names (``in_proj_weight``, ``out_proj.weight``, ``norm1.weight``, ...), the
order of submodules (so ``state_dict`` keys and ``repr`` match torch's), initialisation and forward
semantics follow torch. torch switches to fused "fast path" kernels in inference; they compute the
same function, with one visible difference ember reproduces: a ``TransformerEncoder`` that takes its
nested-tensor path returns zeros at padded positions (before the final norm).
"""
from __future__ import annotations

import copy
import warnings

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap
from .module import Module
from .container import ModuleList
from .linear import Linear
from .activation import MultiheadAttention  # noqa: F401  (its earlier home; torch's transformer imports it too)
from .. import functional as F
from ..functional.attention import _canonical_mask, _none_or_dtype

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder",
           "TransformerEncoderLayer", "TransformerDecoderLayer"]


def _init():
    from .. import init
    return init


# ---- helpers ----------------------------------------------------------------------------------------

def _generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
    import ember
    return ember.triu(ember.full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)


def _get_seq_len(src: Tensor, batch_first: bool):
    size = src.size()
    if len(size) == 2:
        return size[0]
    return size[1 if batch_first else 0]


def _detect_is_causal_mask(mask, is_causal=None, size=None) -> bool:
    """``is_causal`` if given; otherwise whether ``mask`` equals the square causal mask."""
    make_causal = is_causal is True
    if is_causal is None and mask is not None:
        sz = size if size is not None else mask.size(-2)
        causal = _generate_square_subsequent_mask(sz, dtype=mask.dtype)
        if tuple(mask.size()) == tuple(causal.size()):
            make_causal = bool((mask == causal).all())
        else:
            make_causal = False
    return make_causal


def _get_clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _get_activation_fn(activation: str):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _activation_code(activation) -> int:
    """1 for relu, 2 for gelu (function or module), 0 otherwise (torch's activation_relu_or_gelu)."""
    from .activation import ReLU, GELU
    if activation is F.relu or isinstance(activation, ReLU):
        return 1
    if activation is F.gelu or isinstance(activation, GELU):
        return 2
    return 0


def _layer_norm(d_model, eps, bias, device, dtype):
    from .normalization import LayerNorm
    return LayerNorm(d_model, eps=eps, bias=bias, device=device, dtype=dtype)


def _dropout(p):
    from .dropout import Dropout
    return Dropout(p)


def _any_requires_grad(tensors) -> bool:
    import ember
    return ember.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


# ---- transformer layers -----------------------------------------------------------------------------

class _AttentionBlockLayer(Module):
    """What the encoder and decoder layers share: self-attention, feed-forward, LayerNorms and dropouts
    built in torch's attribute order (so state-dict keys match), and the residual sub-blocks."""

    __constants__ = ["norm_first"]
    _FF_DROPOUT = "dropout2"      # the dropout after the feed-forward block (the last of the layer's)

    def _build(self, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
               norm_first, bias, device, dtype, cross: bool) -> None:
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            device=device, dtype=dtype)
        if cross:
            self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first,
                                                     bias=bias, device=device, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, device=device, dtype=dtype)
        self.dropout = _dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, device=device, dtype=dtype)
        self.norm_first = norm_first
        blocks = 3 if cross else 2
        for i in range(1, blocks + 1):
            setattr(self, f"norm{i}", _layer_norm(d_model, layer_norm_eps, bias, device, dtype))
        for i in range(1, blocks + 1):
            setattr(self, f"dropout{i}", _dropout(dropout))
        self.activation = _get_activation_fn(activation) if isinstance(activation, str) else activation

    def __setstate__(self, state):
        state.setdefault("activation", F.relu)
        super().__setstate__(state)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return getattr(self, self._FF_DROPOUT)(x)


class TransformerEncoderLayer(_AttentionBlockLayer):
    """Self-attention block then feed-forward block, each with residual connection and LayerNorm
    (post-norm, or pre-norm with ``norm_first=True``).

    ``TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=relu,
    layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True)``;
    ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation=F.relu, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self._build(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                    bias, device, dtype, cross=False)
        self.activation_relu_or_gelu = _activation_code(self.activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               _none_or_dtype(src_mask), "src_mask", src.dtype)
        src_mask = _canonical_mask(src_mask, "src_mask", None, "", src.dtype, check_other=False)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal=is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal=is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x


class TransformerDecoderLayer(_AttentionBlockLayer):
    """Self-attention, cross-attention over ``memory``, then feed-forward; residual + LayerNorm each.

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``.
    """

    _FF_DROPOUT = "dropout3"

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation=F.relu, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self._build(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                    bias, device, dtype, cross=True)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False, memory_is_causal: bool = False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)


class TransformerEncoder(Module):
    """A stack of ``num_layers`` deep copies of ``encoder_layer`` (then ``norm`` if given).

    ``TransformerEncoder(encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True)``;
    ``forward(src, mask=None, src_key_padding_mask=None, is_causal=None)``.
    """

    __constants__ = ["norm"]

    def __init__(self, encoder_layer, num_layers: int, norm=None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False because {why}",
                          stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask", _none_or_dtype(mask),
                                               "mask", src.dtype)
        mask = _canonical_mask(mask, "mask", None, "", src.dtype, check_other=False)
        first = self.layers[0]
        batch_first = first.self_attn.batch_first
        # torch's inference path runs padded sequences as nested tensors and pads the result with zeros
        pad_rows = None
        layer_kpm = src_key_padding_mask
        if self._takes_nested_path(src, mask, src_key_padding_mask):
            # a nested tensor drops the padded tokens entirely: mask them as keys, zero them at the end
            pad_rows = _padded(src_key_padding_mask)
            layer_kpm = wrap(pad_rows, _dt.bool)
        seq_len = _get_seq_len(src, batch_first)
        is_causal = _detect_is_causal_mask(mask, is_causal, seq_len)
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal, src_key_padding_mask=layer_kpm)
        if pad_rows is not None:
            output = output.masked_fill(wrap(np.ascontiguousarray(pad_rows[..., None]), _dt.bool), 0.0)
        if self.norm is not None:
            output = self.norm(output)
        return output

    def _takes_nested_path(self, src, mask, kpm) -> bool:
        """torch's conditions for its nested-tensor ("sparsity") fast path."""
        first = self.layers[0]
        if not getattr(self, "use_nested_tensor", False) or first.training or src.dim() != 3 or kpm is None:
            return False
        if mask is not None:
            return False
        if getattr(self, "mask_check", True) and not _left_aligned(~_padded(kpm)):
            return False
        sa = first.self_attn
        args = (src, sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias, first.norm1.weight,
                first.norm1.bias, first.norm2.weight, first.norm2.bias, first.linear1.weight, first.linear1.bias,
                first.linear2.weight, first.linear2.bias)
        return not _any_requires_grad(args)


def _padded(kpm) -> np.ndarray:
    """Padding positions of a canonical (float) key padding mask: torch takes ``mask.logical_not()`` as
    the tokens to keep, so every non-zero entry is padding."""
    return np.ascontiguousarray(kpm._data != 0)


def _left_aligned(keep: np.ndarray) -> bool:
    """Every row of the "keep" mask is a run of True followed by False (torch's left-aligned check)."""
    if keep.ndim != 2:
        return False
    n = keep.sum(axis=1)
    return bool(np.all(keep == (np.arange(keep.shape[1])[None, :] < n[:, None])))


def _why_not_nested(layer) -> str:
    enc = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{enc} was not TransformerEncoderLayer"
    if layer.norm_first:
        return f"{enc}.norm_first was True"
    if not layer.self_attn.batch_first:
        return f"{enc}.self_attn.batch_first was not True(use batch_first for better inference performance)"
    if not layer.self_attn._qkv_same_embed_dim:
        return f"{enc}.self_attn._qkv_same_embed_dim was not True"
    if layer.self_attn.in_proj_bias is None:
        return f"{enc}.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return f"{enc}.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return f"{enc}.norm1.eps was not equal to {enc}.norm2.eps"
    if layer.self_attn.num_heads % 2 == 1:
        return f"{enc}.self_attn.num_heads is odd"
    return ""


class TransformerDecoder(Module):
    """A stack of ``num_layers`` deep copies of ``decoder_layer`` (then ``norm`` if given)."""

    __constants__ = ["norm"]

    def __init__(self, decoder_layer, num_layers: int, norm=None) -> None:
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal: bool = False):
        output = tgt
        seq_len = _get_seq_len(tgt, self.layers[0].self_attn.batch_first)
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """The encoder-decoder transformer of "Attention Is All You Need".

    ``Transformer(d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
    dropout=0.1, activation=relu, custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
    batch_first=False, norm_first=False, bias=True)``.
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation=F.relu, custom_encoder=None, custom_decoder=None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        def stack(custom, layer_cls, stack_cls, num_layers):
            if custom is not None:
                return custom
            layer = layer_cls(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                              norm_first, bias, device=device, dtype=dtype)
            return stack_cls(layer, num_layers, _layer_norm(d_model, layer_norm_eps, bias, device, dtype))
        self.encoder = stack(custom_encoder, TransformerEncoderLayer, TransformerEncoder, num_encoder_layers)
        self.decoder = stack(custom_decoder, TransformerDecoderLayer, TransformerDecoder, num_decoder_layers)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal: bool = False):
        is_batched = src.dim() == 3
        if not self.batch_first and src.size(1) != tgt.size(1) and is_batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if self.batch_first and src.size(0) != tgt.size(0) and is_batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """A float (sz, sz) mask: -inf above the diagonal, 0 on and below it."""
        return _generate_square_subsequent_mask(sz, dtype=dtype, device=device)

    def _reset_parameters(self) -> None:
        init = _init()
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
