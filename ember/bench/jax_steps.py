"""The benchmark's training steps written in JAX, for a ``jax.jit`` baseline (only when JAX is importable:
it is never a dependency of ember, and the tests never import it).

The same arithmetic as the ember and torch steps (models.py): the MLP (Linear-Softshrink x3, Linear) and
the small GPT (pre-LayerNorm blocks, causal attention written with matmuls, exact GELU, tied lm head),
mean cross-entropy, and torch's update rules for SGD with momentum, Adam and AdamW, starting from the
same NumPy weights (``models.state_dict_numpy``) on the same batch. One jitted function does forward,
backward and the update; its buffers are donated, so parameters are updated in place as in the other
libraries. Each call blocks until the loss is ready (JAX dispatches asynchronously).

XLA's CPU thread pool is sized once, at JAX's start, to the CPUs the process may use: run under
``taskset -c 0`` for a one-core comparison.
"""
from __future__ import annotations

import math

import numpy as np


def available() -> bool:
    try:
        import jax  # noqa: F401
        return True
    except Exception:
        return False


def _mlp_loss(jnp, jax):
    def softshrink(x, lam=0.5):
        return jnp.where(x > lam, x - lam, jnp.where(x < -lam, x + lam, 0.0))

    def loss_fn(p, x, y):
        h = x
        for i in (0, 2, 4):
            h = softshrink(h @ p[f"{i}.weight"].T + p[f"{i}.bias"])
        logits = h @ p["6.weight"].T + p["6.bias"]
        return _cross_entropy(jnp, jax, logits, y)
    return loss_fn


def _cross_entropy(jnp, jax, logits, y):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def _gpt_loss(jnp, jax, n_layer=4, n_head=4):
    def layer_norm(x, w, b, eps=1e-5):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + eps) * w + b

    def linear(x, p, name, bias=True):
        y = x @ p[name + ".weight"].T
        return y + p[name + ".bias"] if bias else y

    def loss_fn(p, idx, targets):
        B, T = idx.shape
        x = p["tok_emb.weight"][idx] + p["pos_emb.weight"][:T]
        future = jnp.triu(jnp.ones((T, T), dtype=bool), k=1)
        for i in range(n_layer):
            pre = f"blocks.{i}."
            h = layer_norm(x, p[pre + "ln1.weight"], p[pre + "ln1.bias"])
            C = h.shape[-1]
            qkv = linear(h, p, pre + "attn.qkv")
            q, k, v = (t.reshape(B, T, n_head, C // n_head).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, axis=-1))
            att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(C // n_head))
            att = jax.nn.softmax(jnp.where(future, -jnp.inf, att), axis=-1)
            y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
            x = x + linear(y, p, pre + "attn.proj")
            h = layer_norm(x, p[pre + "ln2.weight"], p[pre + "ln2.bias"])
            x = x + linear(jax.nn.gelu(linear(h, p, pre + "mlp.fc"), approximate=False), p, pre + "mlp.proj")
        x = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
        logits = x @ p["tok_emb.weight"].T                      # the tied lm head
        return _cross_entropy(jnp, jax, logits.reshape(B * T, -1), targets.reshape(B * T))
    return loss_fn


def _update(jnp, opt_name):
    """(init(params) -> state, update(params, grads, state) -> (params, state)) with torch's rules."""
    if opt_name == "sgd":
        lr, mom = 0.01, 0.9

        def init(p):
            return {"buf": {k: jnp.zeros_like(v) for k, v in p.items()}, "t": jnp.zeros((), jnp.int32)}

        def update(p, g, s):
            first = s["t"] == 0
            buf = {k: jnp.where(first, g[k], mom * s["buf"][k] + g[k]) for k in p}
            return {k: p[k] - lr * buf[k] for k in p}, {"buf": buf, "t": s["t"] + 1}
        return init, update
    lr, wd = (1e-3, 0.0) if opt_name == "adam" else (3e-4, 0.1)
    b1, b2, eps = 0.9, 0.999, 1e-8

    def init(p):
        return {"m": {k: jnp.zeros_like(v) for k, v in p.items()}, "v": {k: jnp.zeros_like(v) for k, v in p.items()},
                "t": jnp.zeros((), jnp.float32)}

    def update(p, g, s):
        t = s["t"] + 1
        m = {k: b1 * s["m"][k] + (1 - b1) * g[k] for k in p}
        v = {k: b2 * s["v"][k] + (1 - b2) * g[k] * g[k] for k in p}
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        out = {}
        for k in p:
            q = p[k] * (1 - lr * wd) if wd else p[k]
            out[k] = q - (lr / c1) * m[k] / (jnp.sqrt(v[k] / c2) + eps)
        return out, {"m": m, "v": v, "t": t}
    return init, update


def make_step(kind: str, opt_name: str, weights: dict, data):
    """A zero-argument step (returns the loss as a float) of ``kind`` ("mlp" or "gpt") with ``opt_name``,
    from ``weights`` (NumPy arrays by torch state_dict key) on ``data`` (two NumPy arrays)."""
    import jax
    import jax.numpy as jnp
    params = {k: jnp.asarray(v) for k, v in weights.items() if k != "lm_head.weight"}
    loss_fn = _mlp_loss(jnp, jax) if kind == "mlp" else _gpt_loss(jnp, jax)
    init, update = _update(jnp, opt_name)

    def train_step(p, s, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        p, s = update(p, g, s)
        return p, s, loss

    jitted = jax.jit(train_step, donate_argnums=(0, 1))
    x, y = (jnp.asarray(np.asarray(a)) for a in data)
    state = {"p": params, "s": init(params)}

    def step():
        state["p"], state["s"], loss = jitted(state["p"], state["s"], x, y)
        return float(loss.block_until_ready())
    return step
