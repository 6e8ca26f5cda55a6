"""Model definitions shared by the benchmark suites, the compiler tests and the demo.

Every builder takes the library as an argument (``lib`` is ``ember`` or ``torch``), so one definition
builds the same model in both; with :func:`copy_weights` both start from identical weights, and with
:func:`mlp_batch` / :func:`gpt_batch` both see identical data, so they do the same arithmetic.

- :func:`mlp`: Linear(784,256)-Softshrink-Linear(256,256)-Softshrink-Linear(256,256)-Softshrink-
  Linear(256,10), for flattened 28x28 images and 10 classes.
- :func:`cnn`: Conv2d(1,8,3)-ReLU-MaxPool2d(2)-Conv2d(8,16,3)-ReLU-MaxPool2d(2)-Flatten-Linear(400,10).
- :func:`gpt`: a small character-level GPT (:class:`GPTConfig`: 4 layers, 128 wide, 4 heads, context
  64, vocabulary 65): token and position embeddings, pre-LayerNorm blocks of causal self-attention
  (written with matmuls, ``masked_fill(-inf)`` and softmax: no fused attention op, no dropout) and a
  GELU MLP, a final LayerNorm and an lm head whose weight is the token embedding (weight tying).
  Everything it does is capturable by ``ember.compile``: positions come from a registered buffer
  sliced with a Python int, the causal mask is a registered boolean buffer, and no random numbers are
  drawn in ``forward``.

>>> import ember
>>> from ember.bench.models import gpt, GPTConfig, gpt_batch
>>> model = gpt(ember, GPTConfig(n_layer=1))
>>> x, y = gpt_batch(ember, batch=2, block_size=8)
>>> logits, loss = model(x, y)
>>> tuple(logits.shape)
(2, 8, 65)
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np


# ---- MLP and CNN ----------------------------------------------------------------------------------------------

def mlp(lib):
    """The benchmark MLP built with ``lib`` (ember or torch)."""
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 256), nn.Softshrink(), nn.Linear(256, 256), nn.Softshrink(),
                         nn.Linear(256, 256), nn.Softshrink(), nn.Linear(256, 10))


def cnn(lib):
    """The small benchmark CNN built with ``lib`` (ember or torch), for 1x28x28 images."""
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 5 * 5, 10))


# ---- GPT ------------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GPTConfig:
    """Size of the small GPT (the defaults are the benchmark's: about 0.8 M parameters)."""
    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 4
    block_size: int = 64      # context length (the longest sequence the model accepts)
    vocab_size: int = 65      # e.g. the characters of tiny-shakespeare


_CLASSES: dict = {}


def _gpt_classes(lib):
    """The GPT module classes for ``lib``, made once per library (they subclass ``lib.nn.Module``)."""
    key = lib.__name__
    if key in _CLASSES:
        return _CLASSES[key]
    nn, F = lib.nn, lib.nn.functional

    class CausalSelfAttention(nn.Module):
        """Multi-head self-attention where position t attends to positions <= t."""

        def __init__(self, cfg: GPTConfig):
            super().__init__()
            self.n_head = cfg.n_head
            self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
            self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
            # True above the diagonal: the future, masked out (a buffer, so it moves with the module)
            future = np.triu(np.ones((cfg.block_size, cfg.block_size), dtype=bool), k=1)
            self.register_buffer("future", lib.tensor(future), persistent=False)

        def forward(self, x):
            B, T, C = x.shape
            H = self.n_head
            q, k, v = self.qkv(x).split(C, dim=2)
            q = q.view(B, T, H, C // H).transpose(1, 2)          # (B, H, T, D)
            k = k.view(B, T, H, C // H).transpose(1, 2)
            v = v.view(B, T, H, C // H).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            att = att.masked_fill(self.future[:T, :T], float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.proj(y)

    class FeedForward(nn.Module):
        """Linear(C, 4C)-GELU-Linear(4C, C)."""

        def __init__(self, cfg: GPTConfig):
            super().__init__()
            self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
            self.act = nn.GELU()
            self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

        def forward(self, x):
            return self.proj(self.act(self.fc(x)))

    class Block(nn.Module):
        """A pre-LayerNorm transformer block with residual connections."""

        def __init__(self, cfg: GPTConfig):
            super().__init__()
            self.ln1 = nn.LayerNorm(cfg.n_embd)
            self.attn = CausalSelfAttention(cfg)
            self.ln2 = nn.LayerNorm(cfg.n_embd)
            self.mlp = FeedForward(cfg)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        """``forward(idx, targets=None) -> (logits, loss)``; ``loss`` is None without targets."""

        def __init__(self, cfg: GPTConfig):
            super().__init__()
            self.config = cfg
            self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
            self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd)
            self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
            self.ln_f = nn.LayerNorm(cfg.n_embd)
            self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
            self.lm_head.weight = self.tok_emb.weight          # weight tying
            self.register_buffer("pos", lib.arange(cfg.block_size), persistent=False)
            self.apply(self._init_weights)

        @staticmethod
        def _init_weights(m):
            # GPT-2's initialisation: N(0, 0.02) weights, zero biases
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

        def forward(self, idx, targets=None):
            B, T = idx.shape
            if T > self.config.block_size:
                raise ValueError(f"GPT: sequence length {T} exceeds the context length {self.config.block_size}")
            x = self.tok_emb(idx) + self.pos_emb(self.pos[:T])
            for block in self.blocks:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))
            return logits, loss

    _CLASSES[key] = GPT
    return GPT


def gpt(lib, config: GPTConfig | None = None):
    """The small GPT built with ``lib`` (ember or torch); ``config`` defaults to :class:`GPTConfig`."""
    return _gpt_classes(lib)(config or GPTConfig())


# ---- weights, optimizers and data -----------------------------------------------------------------------------

def state_dict_numpy(model) -> dict:
    """The model's state_dict as NumPy arrays (copies), from a torch or an ember model."""
    out = {}
    for k, v in model.state_dict().items():
        v = v.detach()
        out[k] = np.array(v.numpy() if hasattr(v, "numpy") else v, copy=True)
    return out


def load_numpy(lib, model, arrays: dict):
    """Load NumPy arrays (by state_dict key) into a ``lib`` model; returns the model."""
    model.load_state_dict({k: lib.tensor(v) for k, v in arrays.items()})
    return model


def copy_weights(src, dst, lib):
    """Copy ``src``'s weights (a torch or ember model) into ``dst`` built with ``lib``; returns ``dst``.

    Tied weights stay tied: both keys load into the same parameter.
    """
    return load_numpy(lib, dst, state_dict_numpy(src))


def optimizer(lib, name: str, params):
    """The optimizer the suites use: ``sgd`` (lr 0.01, momentum 0.9), ``adam`` (lr 1e-3) or ``adamw``
    (lr 3e-4, weight decay 0.1)."""
    if name == "sgd":
        return lib.optim.SGD(params, lr=0.01, momentum=0.9)
    if name == "adam":
        return lib.optim.Adam(params, lr=1e-3)
    if name == "adamw":
        return lib.optim.AdamW(params, lr=3e-4, weight_decay=0.1)
    raise ValueError(f"unknown optimizer '{name}'; supported: sgd, adam, adamw")


def mlp_batch(lib, batch: int, seed: int = 0, kind: str = "mlp"):
    """A deterministic synthetic batch ``(x, y)`` for the MLP (``kind="mlp"``: x is (batch, 784)) or the
    CNN (``kind="cnn"``: x is (batch, 1, 28, 28)); y holds class indices in [0, 10)."""
    rng = np.random.default_rng(seed)
    shape = (batch, 784) if kind == "mlp" else (batch, 1, 28, 28)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, 10, size=batch).astype(np.int64)
    return lib.tensor(x), lib.tensor(y)


def gpt_batch(lib, batch: int, block_size: int = 64, vocab_size: int = 65, seed: int = 0):
    """A deterministic synthetic language-model batch ``(idx, targets)``, both (batch, block_size) int64:
    windows of one random token stream, with targets the next token."""
    rng = np.random.default_rng(seed)
    stream = rng.integers(0, vocab_size, size=batch * (block_size + 1)).astype(np.int64)
    windows = stream.reshape(batch, block_size + 1)
    return lib.tensor(windows[:, :-1].copy()), lib.tensor(windows[:, 1:].copy())
