"""Suite ``train``: one training step (forward, cross-entropy, backward, optimizer step), ember eager
against torch eager, interleaved.

Cases:

- ``mlp_b{64,512}_{sgd,adam}``: Linear(784,256)-Softshrink-Linear(256,256)-Softshrink-Linear(256,256)-
  Softshrink-Linear(256,10) on a batch of 64 or 512 flattened 28x28 images;
- ``cnn_b64_{sgd,adam}``: Conv2d(1,8,3)-ReLU-MaxPool2d(2)-Conv2d(8,16,3)-ReLU-MaxPool2d(2)-Flatten-
  Linear(400,10) on a batch of 64 1x28x28 images;
- ``gpt_b16_adamw``: the small GPT (``models.gpt``: 4 layers, 128 wide, 4 heads, context 64) on a batch
  of 16 sequences, AdamW (lr 3e-4, weight decay 0.1).

Both libraries start from the same weights (torch's initialisation copied into ember) and the same data,
so both do exactly the same arithmetic; SGD uses lr=0.01 with momentum 0.9, Adam lr=1e-3. The ``eager``
suite times the GPT's exp-bound ops (gelu, softmax, layer_norm, cross_entropy) one by one. Times are
per step (``per="step"``), printed with steps/s. With JAX importable the MLP cases add a ``jax.jit``
variant (jax_steps.py); ``--threads 1,2`` times ember on each count and ``--busy`` adds a competing busy
loop (threads.py).
"""
from __future__ import annotations

import numpy as np

import ember
from .harness import Case
from . import jax_steps as _jax_steps, threads as _threads
from .models import mlp, cnn, gpt, gpt_batch, optimizer as _gpt_optimizer  # (models.py: shared with other suites)


def _try_torch():
    try:
        import torch
        return torch
    except Exception:
        return None


def _optimizer(lib, name, params):
    if name == "sgd":
        return lib.optim.SGD(params, lr=0.01, momentum=0.9)
    if name == "adam":
        return lib.optim.Adam(params, lr=1e-3)
    raise ValueError(f"unknown optimizer '{name}'")


def _data(kind, batch, seed=0):
    rng = np.random.default_rng(seed)
    shape = (batch, 784) if kind == "mlp" else (batch, 1, 28, 28)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, 10, size=batch).astype(np.int64)
    return x, y


def make_step(lib, kind: str, batch: int, opt_name: str, state_dict=None):
    """A zero-argument training step for ``lib`` and the model that it trains.

    ``state_dict`` (NumPy arrays by name) sets the initial weights, so ember and torch can start equal.
    Each call returns nothing; ``step.losses`` collects the losses when ``step.keep_losses`` is true.
    """
    model = {"mlp": mlp, "cnn": cnn, "gpt": gpt}[kind](lib)
    if state_dict is not None:
        model.load_state_dict({k: lib.tensor(v) for k, v in state_dict.items()})
    opt = (_gpt_optimizer if kind == "gpt" else _optimizer)(lib, opt_name, model.parameters())
    if kind == "gpt":
        x, y = gpt_batch(lib, batch)
    else:
        xn, yn = _data(kind, batch)
        x, y = lib.tensor(xn), lib.tensor(yn)
    cross_entropy = lib.nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        loss = model(x, y)[1] if kind == "gpt" else cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if step.keep_losses:
            step.losses.append(float(loss.item()))
    step.keep_losses = False
    step.losses = []
    step.model = model
    return step


SPECS = [("mlp", 64, "sgd"), ("mlp", 64, "adam"), ("mlp", 512, "sgd"), ("mlp", 512, "adam"),
         ("cnn", 64, "sgd"), ("cnn", 64, "adam"), ("gpt", 16, "adamw")]


def case_name(kind, batch, opt_name) -> str:
    return f"{kind}_b{batch}_{opt_name}"


def make_case(kind, batch, opt_name, torch=None) -> Case:
    """One ``train`` case: ember (and torch, when installed) from identical weights and data."""
    variants = {}
    if torch is not None:
        torch.manual_seed(0)
        tstep = make_step(torch, kind, batch, opt_name)
        sd = {k: v.detach().numpy().copy() for k, v in tstep.model.state_dict().items()}
        variants.update(_threads.variants("ember", lambda: make_step(ember, kind, batch, opt_name, sd)))
        variants["torch"] = tstep
    else:
        ember.manual_seed(0)
        sd = {k: v.detach().numpy().copy() for k, v in mlp(ember).state_dict().items()} if kind == "mlp" else None
        if kind == "gpt":
            sd = {k: v.detach().numpy().copy() for k, v in gpt(ember).state_dict().items()}
        variants.update(_threads.variants("ember", lambda: make_step(ember, kind, batch, opt_name, sd)))
    if kind == "mlp" and _jax_steps.available():
        variants["jax.jit"] = _jax_steps.make_step(kind, opt_name, sd, _data(kind, batch))
    return Case(case_name(kind, batch, opt_name), "train", variants, number=0, unit="ms", per="step")


def cases() -> list[Case]:
    torch = _try_torch()
    if not _jax_steps.available():
        print("train: jax.jit baseline skipped: JAX is not installed (pip install \"jax[cpu]\")")
    return [make_case(k, b, o, torch) for k, b, o in SPECS]


def report(results) -> dict:
    """Thread-count variants and the jax.jit baseline (MLP cases), after the results table."""
    return _threads.report(results, "train")
