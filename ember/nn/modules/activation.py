"""Activation layers (torch.nn's): thin modules over ``ember.nn.functional``'s activations, and
MultiheadAttention (torch keeps it here too).

Constructor arguments, attribute names and ``extra_repr`` text follow torch, so ``repr(model)`` reads
the same in both libraries.
"""
from __future__ import annotations

import inspect
import warnings

from .module import Module
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear
from .. import functional as F
from .. import init
from ..functional.attention import _canonical_mask, _none_or_dtype, multi_head_attention_forward

__all__ = ["Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh", "SiLU", "Mish",
           "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU", "LogSigmoid", "Softplus",
           "Softshrink", "PReLU", "Softsign", "Tanhshrink", "Softmin", "Softmax", "Softmax2d", "LogSoftmax",
           "MultiheadAttention"]


class _Elementwise(Module):
    """An activation that applies ``F.<_fn>(input, *hyperparameters)`` elementwise.

    A subclass names its functional (``_fn``) and its constructor parameters in torch's order with their
    defaults (``_params``); the constructor, ``__constants__``, ``forward`` and ``extra_repr`` follow
    from them. ``extra_repr`` prints ``name=value`` pairs and ``inplace=True`` only when set, as torch;
    ``_bare`` prints the single value alone (the shrink modules), ``_quiet`` prints nothing.
    """

    _fn: str = ""
    _params: tuple = ()            # ((name, default), ...); a default of _REQUIRED has none
    _bare = False
    _quiet = False

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "_params" in cls.__dict__:
            if "__constants__" not in cls.__dict__:
                cls.__constants__ = [n for n, _ in cls._params]
            cls.__signature__ = inspect.Signature(
                [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                   default=inspect.Parameter.empty if d is _REQUIRED else d)
                 for n, d in cls._params])

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()
        names = [n for n, _ in self._params]
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}.__init__() takes {len(names) + 1} positional arguments "
                            f"but {len(args) + 1} were given")
        values = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument '{k}'")
            if k in values:
                raise TypeError(f"{type(self).__name__}.__init__() got multiple values for argument '{k}'")
            values[k] = v
        for n, d in self._params:
            if n not in values:
                if d is _REQUIRED:
                    raise TypeError(f"{type(self).__name__}.__init__() missing 1 required positional "
                                    f"argument: '{n}'")
                values[n] = d
            setattr(self, n, values[n])

    def forward(self, input):
        return getattr(F, self._fn)(input, *[getattr(self, n) for n, _ in self._params])

    def extra_repr(self) -> str:
        if self._quiet:
            return ""
        if self._bare:
            return str(getattr(self, self._params[0][0]))
        parts = [f"{n}={getattr(self, n)!r}" for n, _ in self._params if n != "inplace"]
        if getattr(self, "inplace", False):
            parts.append("inplace=True")
        return ", ".join(parts)


_REQUIRED = object()
_INPLACE = (("inplace", False),)


class Threshold(_Elementwise):
    """``value`` where ``input <= threshold``, else ``input``."""
    _fn, _params = "threshold", (("threshold", _REQUIRED), ("value", _REQUIRED)) + _INPLACE


class ReLU(_Elementwise):
    """max(x, 0)."""
    _fn, _params = "relu", _INPLACE


class RReLU(_Elementwise):
    """Randomized leaky ReLU: negative slopes drawn from U(lower, upper) while training."""
    _params = (("lower", 1.0 / 8), ("upper", 1.0 / 3)) + _INPLACE

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)


class Hardtanh(_Elementwise):
    """Clamp to ``[min_val, max_val]``."""
    _fn, _params = "hardtanh", (("min_val", -1.0), ("max_val", 1.0)) + _INPLACE

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False,
                 min_value: float | None = None, max_value: float | None = None) -> None:
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`", FutureWarning,
                          stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`", FutureWarning,
                          stacklevel=2)
            max_val = max_value
        super().__init__(min_val, max_val, inplace)
        if self.max_val <= self.min_val:
            raise AssertionError(f"max_val ({self.max_val}) must be greater than min_val ({self.min_val})")


Hardtanh.__signature__ = inspect.signature(Hardtanh.__init__).replace(
    parameters=list(inspect.signature(Hardtanh.__init__).parameters.values())[1:])


class ReLU6(Hardtanh):
    """min(max(x, 0), 6)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


ReLU6.__signature__ = inspect.signature(ReLU6.__init__).replace(
    parameters=list(inspect.signature(ReLU6.__init__).parameters.values())[1:])


class Sigmoid(_Elementwise):
    """1 / (1 + exp(-x))."""
    _fn = "sigmoid"


class Hardsigmoid(_Elementwise):
    """relu6(x + 3) / 6."""
    _fn, _params, _quiet = "hardsigmoid", _INPLACE, True


class Tanh(_Elementwise):
    """Hyperbolic tangent."""
    _fn = "tanh"


class SiLU(_Elementwise):
    """x * sigmoid(x)."""
    _fn, _params = "silu", _INPLACE


class Mish(_Elementwise):
    """x * tanh(softplus(x))."""
    _fn, _params = "mish", _INPLACE


class Hardswish(_Elementwise):
    """x * relu6(x + 3) / 6."""
    _fn, _params, _quiet = "hardswish", _INPLACE, True


class ELU(_Elementwise):
    """x for x > 0, else alpha * (exp(x) - 1)."""
    _fn, _params = "elu", (("alpha", 1.0),) + _INPLACE


class CELU(_Elementwise):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    _fn, _params = "celu", (("alpha", 1.0),) + _INPLACE


class SELU(_Elementwise):
    """Scaled ELU with the self-normalising constants."""
    _fn, _params = "selu", _INPLACE


class GLU(_Elementwise):
    """Gated linear unit over the two halves of ``dim``."""
    _fn, _params = "glu", (("dim", -1),)


class GELU(_Elementwise):
    """x * Phi(x); ``approximate='tanh'`` for the tanh formula."""
    _fn, _params = "gelu", (("approximate", "none"),)


class Hardshrink(_Elementwise):
    """x where |x| > lambd, else 0."""
    _fn, _params, _bare = "hardshrink", (("lambd", 0.5),), True


class LeakyReLU(_Elementwise):
    """x where positive, else negative_slope * x."""
    _fn, _params = "leaky_relu", (("negative_slope", 1e-2),) + _INPLACE
    __constants__ = ["inplace", "negative_slope"]


class LogSigmoid(_Elementwise):
    """log(sigmoid(x))."""
    _fn = "logsigmoid"


class Softplus(_Elementwise):
    """log(1 + exp(beta * x)) / beta, linear above ``threshold``."""
    _fn, _params = "softplus", (("beta", 1.0), ("threshold", 20.0))


class Softshrink(_Elementwise):
    """x - lambd above lambd, x + lambd below -lambd, 0 in between."""
    _fn, _params, _bare = "softshrink", (("lambd", 0.5),), True


class PReLU(Module):
    """Leaky ReLU with learned slopes: one shared, or one per channel (``num_parameters``)."""

    __constants__ = ["num_parameters"]

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None) -> None:
        from ...ops.creation import empty
        self.num_parameters = num_parameters
        super().__init__()
        self.init = init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Fill every slope with ``init``."""
        from ...autograd.grad_mode import no_grad
        with no_grad():
            self.weight.fill_(self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Softsign(_Elementwise):
    """x / (1 + |x|)."""
    _fn = "softsign"


class Tanhshrink(_Elementwise):
    """x - tanh(x)."""
    _fn = "tanhshrink"


class _SoftmaxBase(Module):
    __constants__ = ["dim"]

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "dim"):
            self.dim = None

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmin(_SoftmaxBase):
    """softmax(-x) along ``dim``."""

    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)


class Softmax(_SoftmaxBase):
    """exp(x) / sum(exp(x)) along ``dim``."""

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)


class LogSoftmax(_SoftmaxBase):
    """log(softmax(x)) along ``dim``."""

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)


class Softmax2d(Module):
    """Softmax over the channel dim (-3) of a 3-d or 4-d input."""

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D instead")
        return F.softmax(input, -3, _stacklevel=5)


def _empty(shape, dtype, device):
    import ember
    return ember.empty(shape, dtype=dtype, device=device)


class MultiheadAttention(Module):
    """Multi-head attention ``MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True,
    add_bias_kv=False, add_zero_attn=False, kdim=None, vdim=None, batch_first=False)``.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (attn_output, attn_weights or None)``.
    """

    __constants__ = ["batch_first"]

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != self.embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(_empty((embed_dim, embed_dim), dtype, device))
            self.k_proj_weight = Parameter(_empty((embed_dim, self.kdim), dtype, device))
            self.v_proj_weight = Parameter(_empty((embed_dim, self.vdim), dtype, device))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(_empty((3 * embed_dim, embed_dim), dtype, device))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(_empty(3 * embed_dim, dtype, device))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(_empty((1, 1, embed_dim), dtype, device))
            self.bias_v = Parameter(_empty((1, 1, embed_dim), dtype, device))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def __setstate__(self, state):
        state.setdefault("_qkv_same_embed_dim", True)
        super().__setstate__(state)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True, attn_mask=None,
                average_attn_weights: bool = True, is_causal: bool = False):
        """Attend from ``query`` to ``key``/``value``; see the class docstring for shapes and masks."""
        is_batched = query.dim() == 3
        key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", _none_or_dtype(attn_mask),
                                           "attn_mask", query.dtype)
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        if self.batch_first and is_batched:
            # sequence-first for the functional form; keep identity so self-attention projects once
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = (x.transpose(1, 0) for x in (query, key))
                    value = key
            else:
                query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        common = dict(training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
                      attn_mask=attn_mask, average_attn_weights=average_attn_weights, is_causal=is_causal)
        if not self._qkv_same_embed_dim:
            out, weights = multi_head_attention_forward(
                query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
                self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight,
                self.out_proj.bias, use_separate_proj_weight=True, q_proj_weight=self.q_proj_weight,
                k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight, **common)
        else:
            out, weights = multi_head_attention_forward(
                query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
                self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight,
                self.out_proj.bias, **common)
        if self.batch_first and is_batched:
            return out.transpose(1, 0), weights
        return out, weights

    def merge_masks(self, attn_mask, key_padding_mask, query):
        """One (N, heads, L, S) mask from ``attn_mask`` and ``key_padding_mask`` and its type code
        (0: attn mask only, 1: padding mask only, 2: merged), as torch's fast path uses."""
        mask_type = None
        merged = None
        if key_padding_mask is not None:
            mask_type = 1
            merged = key_padding_mask
        if attn_mask is not None:
            batch_size, seq_len, _ = query.shape
            mask_type = 2
            if attn_mask.dim() == 3:
                attn_mask_expanded = attn_mask.reshape(batch_size, -1, seq_len, seq_len)
            else:
                attn_mask_expanded = attn_mask.reshape(1, 1, seq_len, seq_len).expand(batch_size, self.num_heads,
                                                                                     -1, -1)
            merged = attn_mask_expanded
            if key_padding_mask is not None:
                kpm = key_padding_mask.reshape(batch_size, 1, 1, seq_len).expand(-1, self.num_heads, -1, -1)
                merged = attn_mask_expanded + kpm
        return merged, mask_type
