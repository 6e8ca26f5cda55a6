"""CPU autocast runs losses, cdist, grid_sample, 3-d pooling and reflection/replication padding in float32,
as torch's autocast does: result dtypes and values from bfloat16 activations match torch's."""
import numpy as np
import pytest
import torch

import ember

_RNG = np.random.default_rng(0)
X, Y = _RNG.standard_normal((4, 5)).astype(np.float32), _RNG.standard_normal((4, 5)).astype(np.float32)
P = _RNG.uniform(0.05, 0.95, (4, 5)).astype(np.float32)

CASES = {
    "cross_entropy": lambda L, F, x, y, p: F.cross_entropy(x, L.tensor([0, 1, 2, 3])),
    "cross_entropy_module": lambda L, F, x, y, p: L.nn.CrossEntropyLoss(label_smoothing=0.1)(x, L.tensor([0, 1, 2, 3])),
    "nll_loss": lambda L, F, x, y, p: F.nll_loss(x, L.tensor([0, 1, 2, 3])),
    "mse_loss": lambda L, F, x, y, p: F.mse_loss(x, y),
    "l1_loss": lambda L, F, x, y, p: F.l1_loss(x, y),
    "smooth_l1_loss": lambda L, F, x, y, p: F.smooth_l1_loss(x, y),
    "huber_loss": lambda L, F, x, y, p: F.huber_loss(x, y),
    "bce": lambda L, F, x, y, p: F.binary_cross_entropy(p, p),
    "bce_logits_module": lambda L, F, x, y, p: L.nn.BCEWithLogitsLoss()(x, p),
    "kl_div": lambda L, F, x, y, p: F.kl_div(x, p, reduction="batchmean"),
    "cosine_embedding": lambda L, F, x, y, p: F.cosine_embedding_loss(x, y, L.ones(4)),
    "margin_ranking": lambda L, F, x, y, p: F.margin_ranking_loss(x, y, L.ones(4, 5)),
    "poisson_nll": lambda L, F, x, y, p: F.poisson_nll_loss(x, p),
    "triplet_margin": lambda L, F, x, y, p: F.triplet_margin_loss(x, y, p),
    "multi_margin": lambda L, F, x, y, p: F.multi_margin_loss(x, L.tensor([0, 1, 2, 3])),
    "multilabel_soft_margin": lambda L, F, x, y, p: F.multilabel_soft_margin_loss(x, p),   # stays low precision
    "cdist": lambda L, F, x, y, p: L.cdist(x, y),
    "max_pool3d": lambda L, F, x, y, p: F.max_pool3d(x.reshape(1, 1, 2, 2, 5), (1, 2, 2)),
    "avg_pool3d": lambda L, F, x, y, p: F.avg_pool3d(x.reshape(1, 1, 2, 2, 5), (1, 2, 1)),
    "adaptive_avg_pool3d": lambda L, F, x, y, p: F.adaptive_avg_pool3d(x.reshape(1, 1, 2, 2, 5), 1),
    "reflection_pad": lambda L, F, x, y, p: F.pad(x.reshape(1, 4, 5), (1, 2), mode="reflect"),
    "circular_pad": lambda L, F, x, y, p: F.pad(x.reshape(1, 4, 5), (1, 2), mode="circular"),   # stays low
    "grid_sample": lambda L, F, x, y, p: F.grid_sample(x.reshape(1, 1, 4, 5), (p.reshape(1, 2, 5, 2) - 0.5),
                                                       align_corners=False),
    "linear_stays_low": lambda L, F, x, y, p: F.linear(x.float(), y.float()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_autocast_result_dtype_and_value_match_torch(name):
    res = {}
    for lib in (torch, ember):
        x, y, p = (lib.tensor(a).bfloat16() for a in (X, Y, P))
        with lib.autocast("cpu", dtype=lib.bfloat16):
            out = CASES[name](lib, lib.nn.functional, x, y, p)
        res[lib.__name__] = (str(out.dtype).split(".")[-1], out.detach().float().numpy())
    assert res["ember"][0] == res["torch"][0]
    np.testing.assert_allclose(res["ember"][1], res["torch"][1], rtol=2e-2, atol=2e-2)


def test_losses_keep_input_dtype_outside_autocast():
    x = ember.tensor(X).bfloat16()
    assert ember.nn.functional.mse_loss(x, x).dtype is ember.bfloat16
    assert ember.nn.functional.cross_entropy.__name__ == "cross_entropy"
