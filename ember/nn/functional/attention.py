"""Attention: ``scaled_dot_product_attention`` and ``multi_head_attention_forward`` (torch.nn.functional's).

Scaled dot-product attention is ``softmax(Q K^T * scale + bias) V``: two batched matrix products and one
fused op, ``sdpa_softmax``, that scales, adds the mask bias and normalises in one pass. Like torch's
math kernel it is a *safe* softmax: a row whose scores are all ``-inf`` (every key masked) gives zero
weights instead of NaN. Boolean masks (True = may attend) become a 0/-inf bias through one ``where``
op (no autograd work; a compiled replay recomputes it from the new mask); float masks are added (and
get a gradient if they require one).

``multi_head_attention_forward`` follows torch's reference implementation step by step (in-projection,
bias_k/bias_v, zero attention, mask merging, and the explicit-weights path with ``baddbmm`` + softmax
when ``need_weights=True``), so that ``nn.MultiheadAttention`` gives torch's numbers.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor, wrap
from ...autograd.grad_mode import GRAD
from ...ops.registry import register, apply

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward",
           # torch.nn.functional's private helpers that custom transformer layers copied from torch call
           "_canonical_mask", "_none_or_dtype", "_mha_shape_check", "_in_projection_packed", "_in_projection"]


def _E():
    import ember
    return ember


# ---- the fused, masked, scaled, safe softmax -------------------------------------------------------

_LOW = {np.dtype(np.float16)}


def _sdpa_softmax_kernel(x, bias, scale=1.0):
    dt = x.dtype
    if dt in _LOW or dt.kind != "f":
        x = x.astype(np.float32)            # half / bfloat16: compute in float32 like torch's opmath
    s = x * scale if scale != 1.0 else x.copy()
    if bias is not None:
        s = s + (bias.astype(s.dtype, copy=False) if bias.dtype != s.dtype else bias)
    m = np.max(s, axis=-1, keepdims=True) if s.shape[-1] else np.zeros(s.shape[:-1] + (1,), s.dtype)
    dead = np.isneginf(m)                   # every score -inf: the row attends to nothing -> zeros
    if dead.any():
        m = np.where(dead, 0, m)
    s -= m
    np.exp(s, out=s)
    den = s.sum(axis=-1, keepdims=True)
    if dead.any():
        den = np.where(dead, 1, den)
    s /= den
    return s.astype(dt, copy=False)


def _sdpa_softmax_bw(ctx, g):
    p = ctx.output
    scale = ctx.attrs.get("scale", 1.0)
    need_x, need_b = ctx.edges[0] is not None, ctx.edges[1] is not None
    if GRAD[0]:
        # create_graph: the softmax derivative in ember ops, differentiable again
        gp = g * p
        ds = gp - p * gp.sum(-1, keepdim=True)
        gx = (ds * scale if scale != 1.0 else ds) if need_x else None
        return gx, (ds if need_b else None)
    gx, gb = apply(SDPA_SOFTMAX_BW, (g, p), {"scale": scale, "need_x": need_x, "need_b": need_b})
    return (gx if need_x else None), (gb if need_b else None)


def _sdpa_softmax_bw_kernel(g, p, scale=1.0, need_x=True, need_b=False):
    dt = p.dtype
    if dt in _LOW or dt.kind != "f":
        g, p = g.astype(np.float32), p.astype(np.float32)
    gp = g * p
    ds = gp - p * gp.sum(axis=-1, keepdims=True)
    gx = (ds * ds.dtype.type(scale)).astype(dt, copy=False) if need_x else np.empty(0, dt)
    return gx, (ds.astype(dt, copy=False) if need_b else np.empty(0, dt))


SDPA_SOFTMAX = register("sdpa_softmax", _sdpa_softmax_kernel, _sdpa_softmax_bw, save="o")
SDPA_SOFTMAX_BW = register("sdpa_softmax_backward", _sdpa_softmax_bw_kernel, nout=2, differentiable=False)


def _bool_bias(mask: Tensor, dtype, masked_if: bool) -> Tensor:
    """-inf where ``mask`` equals ``masked_if``, else 0, in ``dtype``: one ``where`` op on the mask, so a
    compiled replay recomputes it from the mask it is given (no gradient: the mask is boolean)."""
    from ...ops.binary import WHERE
    ninf, zero = dtype.np.type(-np.inf), dtype.np.type(0)
    return apply(WHERE, (mask, ninf, zero) if masked_if else (mask, zero, ninf))     # (typed scalars: no cast)


def _mask_to_bias(mask: Tensor, dtype) -> Tensor:
    """A boolean "may attend" mask as an additive 0 / -inf bias."""
    return _bool_bias(mask, dtype, False)


def _causal_bias(L: int, S: int, dtype, device=None) -> Tensor:
    """-inf above the diagonal (top-left aligned), as torch's ``ones(L, S).tril()`` mask."""
    from ...ops.registry import FACTORY
    if FACTORY[0] is not None or (device is not None and device.type != "cpu"):
        # while ember.compile captures, built from ember ops so that L and S may stay symbolic sizes
        # (and on another device, e.g. meta, made there)
        from ...ops.creation import full
        return full((L, S), float("-inf"), dtype=dtype, device=device).triu(1)
    return wrap(np.triu(np.full((L, S), -np.inf, dtype=dtype.np), k=1), dtype)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale=None, enable_gqa: bool = False) -> Tensor:
    """``softmax(query @ key.transpose(-2, -1) * scale + mask) @ value`` (torch's semantics).

    query (..., L, E), key (..., S, E), value (..., S, Ev). ``attn_mask`` broadcastable to (..., L, S):
    boolean (True = take part in attention) or float (added to the scores). ``is_causal`` applies a
    lower-triangular mask (and then ``attn_mask`` must be None). ``scale`` defaults to 1/sqrt(E).
    ``enable_gqa`` lets key/value have fewer heads (dim -3) than query, repeated to match.
    Dropout with probability ``dropout_p`` is applied to the attention weights (always, as torch).

        >>> q = ember.randn(2, 4, 8)
        >>> F.scaled_dot_product_attention(q, q, q, is_causal=True).shape
        ember.Size([2, 4, 8])
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError("Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
                           f"{query.dim()} key.dim: {key.dim()} and value.dim: {value.dim()} instead.")
    dt = query.dtype
    if key.dtype is not dt or value.dtype is not dt:
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{_cname(dt)} key.dtype: {_cname(key.dtype)} and value.dtype: {_cname(value.dtype)} instead.")
    if not dt.is_floating_point:
        raise RuntimeError(f"scaled_dot_product_attention: expected a floating-point query, got {dt}")
    if attn_mask is not None:
        if attn_mask.dtype is not _dt.bool and attn_mask.dtype is not dt:
            raise RuntimeError("Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                               f"attn_mask.dtype: {_cname(attn_mask.dtype)} and  query.dtype: {_cname(dt)} instead.")
        if is_causal:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if enable_gqa and query.dim() >= 3 and key.dim() >= 3:
        hq, hk, hv = query.size(-3), key.size(-3), value.size(-3)
        if hk != hv or hq % hk != 0:
            raise RuntimeError("Number of heads in key and value must divide the number of heads in ")
        if hq != hk:
            key = key.repeat_interleave(hq // hk, -3)
            value = value.repeat_interleave(hq // hv, -3)
    E = query.size(-1)
    if key.size(-1) != E:
        nb = _batch(query)
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{nb}, {E}] but got: "
                           f"[{nb}, {key.size(-1)}].")
    if key.size(-2) != value.size(-2):
        nb = _batch(query)
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{nb}, {key.size(-2)}] "
                           f"but got: [{nb}, {value.size(-2)}].")
    L, S = query.size(-2), key.size(-2)
    scale_factor = 1.0 / math.sqrt(E) if scale is None else float(scale)
    bias = None
    if is_causal:
        bias = _causal_bias(L, S, dt, query.device)
    elif attn_mask is not None:
        bias = _mask_to_bias(attn_mask, dt) if attn_mask.dtype is _dt.bool else attn_mask
    E_ = _E()
    scores = E_.matmul(query, key.transpose(-2, -1))
    if bias is not None:
        _check_bias_shape(scores, bias)
    attn = apply(SDPA_SOFTMAX, (scores, bias), {"scale": scale_factor})
    if dropout_p > 0.0:
        from .dropout import dropout
        attn = dropout(attn, p=dropout_p, training=True)
    return E_.matmul(attn, value)


def _batch(t):
    n = 1
    for s in t.shape[:-2]:
        n *= s
    return n


def _check_bias_shape(scores, bias):
    """The mask is added in place to the scores in torch: it must broadcast to the scores' shape."""
    a, b = tuple(scores.shape), tuple(bias.shape)
    n = max(len(a), len(b))
    for i in range(1, min(len(a), len(b)) + 1):
        x, y = a[-i], b[-i]
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                               f"non-singleton dimension {n - i}")
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    full = tuple(max(x, y) for x, y in zip(pa, pb))
    if full != a:
        raise RuntimeError(f"output with shape [{', '.join(map(str, a))}] doesn't match the broadcast shape "
                           f"[{', '.join(map(str, full))}]")


def _cname(d) -> str:
    """torch's C type names used in SDPA messages (float, double, long int, ...)."""
    return {_dt.float32: "float", _dt.float64: "double", _dt.float16: "c10::Half", _dt.bfloat16: "c10::BFloat16",
            _dt.int64: "long int", _dt.int32: "int", _dt.bool: "bool", _dt.int16: "short int",
            _dt.int8: "signed char", _dt.uint8: "unsigned char"}.get(d, str(d))


# ---- multi-head attention -------------------------------------------------------------------------

def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads) -> bool:
    """Validate the shapes (torch's messages); True when the input is batched (3-D)."""
    nd = query.dim()
    if nd not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {nd}-D query tensor")
    which = "batched (3-D)" if nd == 3 else "unbatched (2-D)"
    if key.dim() != nd or value.dim() != nd:
        raise AssertionError(f"For {which} `query`, expected `key` and `value` to be {nd}-D but found "
                             f"{key.dim()}-D and {value.dim()}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.dim() != nd - 1:
        raise AssertionError(f"For {which} `query`, expected `key_padding_mask` to be `None` or {nd - 1}-D but "
                             f"found {key_padding_mask.dim()}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.dim() not in (2, 3):
            raise AssertionError(f"For {which} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                                 f"found {attn_mask.dim()}-D tensor instead")
        if nd == 2 and attn_mask.dim() == 3:
            expected = (num_heads, query.shape[0], key.shape[0])
            if tuple(attn_mask.shape) != expected:
                raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}")
    return nd == 3


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """A bool mask (True = masked out) becomes a float 0/-inf mask of ``target_type``; float masks pass."""
    if mask is None:
        return None
    if mask.dtype is not _dt.bool and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype is not other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for "
                      "both instead.", stacklevel=3)
    if mask.dtype is _dt.bool:
        return _bool_bias(mask, target_type, True)
    return mask


def _none_or_dtype(input):
    if input is None:
        return None
    if isinstance(input, Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or torch.Tensor")


def _linear(x, w, b):
    from .conv import linear
    return linear(x, w, b)


def _in_projection_packed(q, k, v, w, b=None):
    """q, k, v projected with the packed (3E, E) weight: one matrix product when q is k is v."""
    E = q.size(-1)
    if k is v:
        if q is k:
            proj = _linear(q, w, b)
            return proj.chunk(3, -1)
        w_q, w_kv = w.split([E, E * 2])
        b_q, b_kv = (None, None) if b is None else b.split([E, E * 2])
        kv = _linear(k, w_kv, b_kv).chunk(2, -1)
        return _linear(q, w_q, b_q), kv[0], kv[1]
    w_q, w_k, w_v = w.chunk(3)
    b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
    return _linear(q, w_q, b_q), _linear(k, w_k, b_k), _linear(v, w_v, b_v)


def _in_projection(q, k, v, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None):
    """Separate projections (kdim / vdim differ from embed_dim), with torch's shape checks."""
    Eq, Ek, Ev = q.size(-1), k.size(-1), v.size(-1)
    if tuple(w_q.shape) != (Eq, Eq):
        raise AssertionError(f"expecting query weights shape of {(Eq, Eq)}, but got {w_q.shape}")
    if tuple(w_k.shape) != (Eq, Ek):
        raise AssertionError(f"expecting key weights shape of {(Eq, Ek)}, but got {w_k.shape}")
    if tuple(w_v.shape) != (Eq, Ev):
        raise AssertionError(f"expecting value weights shape of {(Eq, Ev)}, but got {w_v.shape}")
    for name, bb in (("query", b_q), ("key", b_k), ("value", b_v)):
        if bb is not None and tuple(bb.shape) != (Eq,):
            raise AssertionError(f"expecting {name} bias shape of {(Eq,)}, but got {bb.shape}")
    return _linear(q, w_q, b_q), _linear(k, w_k, b_k), _linear(v, w_v, b_v)


def _pad_last(t, n=1):
    """Append ``n`` zero columns on the last dim (F.pad(t, (0, n)))."""
    E_ = _E()
    z = E_.zeros(tuple(t.shape[:-1]) + (n,), dtype=t.dtype)
    return E_.cat([t, z], -1)


def _check_key_padding_mask(mask, bsz: int, src_len: int) -> None:
    """torch's check that ``key_padding_mask`` is (batch, source length)."""
    if mask.shape[0] != bsz:
        raise AssertionError(f"Expected key_padded_mask.shape[0] to be {bsz}, but got {mask.shape[0]}")
    if mask.shape[1] != src_len:
        raise AssertionError(f"Expected key_padded_mask.shape[1] to be {src_len}, but got {mask.shape[1]}")


def _heads_of(x, static, name: str, batch_heads: int, head_dim: int):
    """Keys or values with the heads moved into the batch, ``(N * heads, S, head_dim)``: ``x`` reshaped,
    or the caller's ``static_k``/``static_v`` after checking its size."""
    if static is None:
        return x.reshape(x.shape[0], batch_heads, head_dim).transpose(0, 1)
    if static.size(0) != batch_heads:
        raise AssertionError(f"expecting {name}.size(0) of {batch_heads}, but got {static.size(0)}")
    if static.size(2) != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {static.size(2)}")
    return static


def multi_head_attention_forward(query, key, value, embed_dim_to_check: int, num_heads: int, in_proj_weight,
                                 in_proj_bias, bias_k, bias_v, add_zero_attn: bool, dropout_p: float,
                                 out_proj_weight, out_proj_bias, training: bool = True, key_padding_mask=None,
                                 need_weights: bool = True, attn_mask=None, use_separate_proj_weight: bool = False,
                                 q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights: bool = True, is_causal: bool = False):
    """Multi-head attention on sequence-first inputs (L, N, E) (or unbatched (L, E)), as torch's.

    Returns ``(attn_output, attn_weights)``; weights are None unless ``need_weights`` (then averaged
    over heads unless ``average_attn_weights=False``). Masks: bool (True = masked out) or float (added).
    """
    E_ = _E()
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", _none_or_dtype(attn_mask),
                                       "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        # SDPA applies the causal mask itself
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        if key_padding_mask is not None:
            # the merged mask is no longer causal
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match value's "
                                 f"{value.shape[:2]}")
    elif tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")

    # ---- attention mask to 3-D
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    if not training:
        dropout_p = 0.0
    if (not need_weights and not use_separate_proj_weight and in_proj_weight is not None and bias_k is None
            and bias_v is None
            and not add_zero_attn and static_k is None and static_v is None):
        # the common case, with fewer reshapes: heads split by one view + permute straight into SDPA's layout
        return _mha_sdpa(query, key, value, num_heads, in_proj_weight, in_proj_bias, out_proj_weight,
                         out_proj_bias, attn_mask, key_padding_mask, dropout_p, is_causal, is_batched)

    # ---- in-projection
    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    else:
        for n, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {n}_proj_weight is None")
        b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = _in_projection(query, key, value, q_proj_weight, k_proj_weight, v_proj_weight, b_q, b_k, b_v)

    # ---- learned bias key/value appended along the sequence
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = E_.cat([k, bias_k.repeat(1, bsz, 1)])
        v = E_.cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = _pad_last(attn_mask)
        if key_padding_mask is not None:
            key_padding_mask = _pad_last(key_padding_mask)
    else:
        if bias_k is not None:
            raise AssertionError("bias_k is set but bias_v is None")
        if bias_v is not None:
            raise AssertionError("bias_v is set but bias_k is None")

    # ---- heads into the batch: (N * heads, L, head_dim)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = _heads_of(k, static_k, "static_k", bsz * num_heads, head_dim)
    v = _heads_of(v, static_v, "static_v", bsz * num_heads, head_dim)
    if add_zero_attn:
        zshape = (bsz * num_heads, 1, head_dim)
        k = E_.cat([k, E_.zeros(zshape, dtype=k.dtype)], 1)
        v = E_.cat([v, E_.zeros(zshape, dtype=v.dtype)], 1)
        if attn_mask is not None:
            attn_mask = _pad_last(attn_mask)
        if key_padding_mask is not None:
            key_padding_mask = _pad_last(key_padding_mask)
    src_len = k.size(1)

    # ---- merge the key padding mask into the attention mask
    if key_padding_mask is not None:
        _check_key_padding_mask(key_padding_mask, bsz, src_len)
        key_padding_mask = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1) \
                                           .reshape(bsz * num_heads, 1, src_len)
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask

    if need_weights:
        _, _, E = q.shape
        q_scaled = q * math.sqrt(1.0 / float(E))
        if is_causal and attn_mask is None:
            raise AssertionError("FIXME: is_causal not implemented for need_weights")
        if attn_mask is not None:
            weights = E_.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
        else:
            weights = E_.bmm(q_scaled, k.transpose(-2, -1))
        weights = E_.softmax(weights, dim=-1)
        if dropout_p > 0.0:
            from .dropout import dropout
            weights = dropout(weights, p=dropout_p)
        out = E_.bmm(weights, v)
        out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = _linear(out, out_proj_weight, out_proj_bias)
        out = out.reshape(tgt_len, bsz, out.size(1))
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not is_batched:
            out = out.squeeze(1)
            weights = weights.squeeze(0)
        return out, weights

    if attn_mask is not None:
        if attn_mask.size(0) == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = _linear(out, out_proj_weight, out_proj_bias)
    out = out.reshape(tgt_len, bsz, out.size(1))
    if not is_batched:
        out = out.squeeze(1)
    return out, None


def _heads(x, seq, bsz, n, num_heads, head_dim):
    """(seq, bsz, n * E) projections -> n tensors (bsz, heads, seq, head_dim)."""
    x = x.reshape(seq, bsz, n, num_heads, head_dim).permute(2, 1, 3, 0, 4)
    return x.unbind(0)


def _mha_sdpa(query, key, value, num_heads, w, b, out_w, out_b, attn_mask, key_padding_mask, dropout_p, is_causal,
              is_batched):
    """multi_head_attention_forward's need_weights=False path without bias_k/v, zero attention or static
    k/v: the same computation as torch's, in fewer ops."""
    tgt_len, bsz, E = query.shape
    src_len = key.shape[0]
    hd = E // num_heads
    if key is value:
        if query is key:
            q, k, v = _heads(_linear(query, w, b), tgt_len, bsz, 3, num_heads, hd)
        else:
            w_q, w_kv = w.split([E, E * 2])
            b_q, b_kv = (None, None) if b is None else b.split([E, E * 2])
            (q,) = _heads(_linear(query, w_q, b_q), tgt_len, bsz, 1, num_heads, hd)
            k, v = _heads(_linear(key, w_kv, b_kv), src_len, bsz, 2, num_heads, hd)
    else:
        w_q, w_k, w_v = w.chunk(3)
        b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
        (q,) = _heads(_linear(query, w_q, b_q), tgt_len, bsz, 1, num_heads, hd)
        (k,) = _heads(_linear(key, w_k, b_k), src_len, bsz, 1, num_heads, hd)
        (v,) = _heads(_linear(value, w_v, b_v), src_len, bsz, 1, num_heads, hd)
    mask = None
    if attn_mask is not None:
        # (1, L, S) or (N * heads, L, S)
        mask = attn_mask.unsqueeze(0) if attn_mask.size(0) == 1 else attn_mask.reshape(bsz, num_heads, tgt_len,
                                                                                          src_len)
    if key_padding_mask is not None:
        _check_key_padding_mask(key_padding_mask, bsz, src_len)
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len)
        mask = kpm if mask is None else mask + kpm
    out = scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal)
    out = _linear(out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, E), out_w, out_b)
    if not is_batched:
        out = out.squeeze(1)
    return out, None
