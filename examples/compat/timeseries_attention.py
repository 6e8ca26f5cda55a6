"""Multi-step time-series forecasting with three model styles on noisy sine mixtures:
a causal dilated TCN (Conv1d with left-only F.pad, weight-normalised residual blocks via
nn.utils.parametrizations.weight_norm), an encoder-decoder with nn.LSTMCell / nn.GRUCell unrolled by
hand with teacher forcing, and a transformer encoder (batch_first, norm_first) read out by
nn.MultiheadAttention pooling with key_padding_mask and F.scaled_dot_product_attention(is_causal=True).
Uses HuberLoss, torch.stack over time steps, Adam with CosineAnnealingLR, and sliding windows with
Tensor.unfold.
"""
import math

import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=3, deterministic=False, log=print):
    torch.manual_seed(0)
    t = np.arange(600) * 0.1
    rng = np.random.RandomState(0)
    series = (np.sin(t) + 0.5 * np.sin(3.1 * t + 1) + 0.1 * rng.randn(len(t))).astype(np.float32)
    x_all = torch.from_numpy(series)
    window, horizon = 24, 6
    windows = x_all.unfold(0, window + horizon, 7)            # (n_windows, window + horizon)
    inputs, targets = windows[:, :window], windows[:, window:]

    class CausalConv1d(nn.Module):
        def __init__(self, cin, cout, k, dilation):
            super().__init__()
            self.left = (k - 1) * dilation
            self.conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(cin, cout, k, dilation=dilation))

        def forward(self, x):
            return self.conv(F.pad(x, (self.left, 0)))

    class TCN(nn.Module):
        def __init__(self, c=16):
            super().__init__()
            self.inp = nn.Conv1d(1, c, 1)
            self.blocks = nn.ModuleList([CausalConv1d(c, c, 3, d) for d in (1, 2, 4)])
            self.out = nn.Linear(c, horizon)

        def forward(self, x):                       # x: (B, T)
            h = self.inp(x.unsqueeze(1))
            for blk in self.blocks:
                h = h + F.relu(blk(h))
            return self.out(h[:, :, -1])

    class Seq2Seq(nn.Module):
        def __init__(self, hidden=24):
            super().__init__()
            self.enc = nn.LSTMCell(1, hidden)
            self.dec = nn.GRUCell(1, hidden)
            self.proj = nn.Linear(hidden, 1)

        def forward(self, x, y=None, teacher_forcing=True):
            B = x.size(0)
            h = x.new_zeros(B, self.enc.hidden_size)
            c = torch.zeros_like(h)
            for step in range(x.size(1)):
                h, c = self.enc(x[:, step:step + 1], (h, c))
            prev = x[:, -1:]
            outs = []
            for step in range(horizon):
                h = self.dec(prev, h)
                pred = self.proj(h)
                outs.append(pred)
                prev = y[:, step:step + 1] if (teacher_forcing and y is not None) else pred
            return torch.stack(outs, dim=1).squeeze(-1)

    class AttnForecaster(nn.Module):
        def __init__(self, d=32, heads=4):
            super().__init__()
            self.embed = nn.Linear(1, d)
            self.pos = nn.Parameter(torch.randn(1, window, d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0, batch_first=True,
                                               norm_first=True, activation="gelu")
            self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
            self.query = nn.Parameter(torch.zeros(1, 1, d))
            self.pool = nn.MultiheadAttention(d, heads, batch_first=True)
            self.qkv = nn.Linear(d, 3 * d)
            self.head = nn.Linear(d, horizon)
            self.heads = heads

        def forward(self, x, pad_mask=None):
            h = self.encoder(self.embed(x.unsqueeze(-1)) + self.pos)
            B, T, D = h.shape
            q, k, v = self.qkv(h).chunk(3, dim=-1)
            q, k, v = (z.view(B, T, self.heads, D // self.heads).transpose(1, 2) for z in (q, k, v))
            h = h + F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, D)
            pooled, weights = self.pool(self.query.expand(B, -1, -1), h, h, key_padding_mask=pad_mask)
            return self.head(pooled.squeeze(1)), weights

    models = nn.ModuleDict({"tcn": TCN(), "s2s": Seq2Seq(), "attn": AttnForecaster()})
    init_state = sync_init(torch, models, init)
    optimizer = torch.optim.Adam(models.parameters(), lr=3e-3)
    n_batches = math.ceil(60 / 20)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * n_batches)
    loss_fn = nn.HuberLoss(delta=0.5)
    losses = []
    pad_mask = torch.zeros(20, window, dtype=torch.bool)
    pad_mask[:, :4] = True                         # pretend the first steps are padding
    for epoch in range(epochs):
        models.train()
        for i in range(0, 60, 20):
            xb, yb = inputs[i:i + 20], targets[i:i + 20]
            p1 = models["tcn"](xb)
            p2 = models["s2s"](xb, yb, teacher_forcing=True)
            p3, w = models["attn"](xb, pad_mask[:len(xb)])
            loss = loss_fn(p1, yb) + loss_fn(p2, yb) + loss_fn(p3, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
    assert torch.allclose(w[:, :, :4].sum(), torch.tensor(0.0))
    models.eval()
    with torch.no_grad():
        xt, yt = inputs[60:], targets[60:]
        errs = [F.mse_loss(models["tcn"](xt), yt).item(),
                F.mse_loss(models["s2s"](xt, teacher_forcing=False), yt).item(),
                F.mse_loss(models["attn"](xt)[0], yt).item()]
    wn = models["tcn"].blocks[0].conv
    names = sorted(n for n, _ in wn.named_parameters())
    log(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; test mse tcn/s2s/attn {[round(e, 4) for e in errs]}; {names}")
    return {"losses": losses, "errs": errs, "wn_params": names, "init": init_state}


if __name__ == "__main__":
    main(run)
