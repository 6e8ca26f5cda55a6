"""Everyday PyTorch idioms in one small attention-pooling sequence classifier: device selection with
torch.cuda.is_available(), .to(device), torch.manual_seed, x.view(x.size(0), -1), permute(...).contiguous(),
torch.arange(n, device=x.device), x.new_zeros / new_full / new_tensor, torch.full_like, torch.where,
torch.einsum, masked_fill_, triu(ones).bool(), F.pad, register_buffer, nn.init in _init_weights applied
with model.apply, named_parameters filtering, param.requires_grad freezing, gradient accumulation,
clip_grad_norm_, state_dict save/load through a file, model.eval() + no_grad evaluation, item(),
tolist(), f-string formatting of tensors and of tensor.item(), argmax accuracy, cat / stack of batches,
type_as, expand, chunk, unbind, sort/argsort, cumsum, one_hot, numel, detach().cpu().numpy().
"""
import os
import tempfile

import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=3, deterministic=False, log=print):
    torch.manual_seed(42)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.RandomState(0)
    n, T, V, D = 256, 10, 16, 24
    tokens = rng.randint(1, V, size=(n, T))
    lengths = rng.randint(4, T + 1, size=n)
    for i, L in enumerate(lengths):
        tokens[i, L:] = 0                    # 0 pads
    labels = (np.array([(row[:L] > V // 2).sum() for row, L in zip(tokens, lengths)]) * 2 > lengths).astype(np.int64)
    X, Y, Ls = torch.from_numpy(tokens), torch.from_numpy(labels), torch.from_numpy(lengths)

    class AttnPool(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.query = nn.Parameter(torch.randn(d) * 0.1)
            self.register_buffer("scale", torch.tensor(d ** -0.5))

        def forward(self, h, pad_mask):          # h: (B, T, D), pad_mask: (B, T) True at pads
            scores = torch.einsum("btd,d->bt", h, self.query) * self.scale
            scores = scores.masked_fill(pad_mask, float("-inf"))
            w = scores.softmax(dim=-1)
            return torch.einsum("bt,btd->bd", w, h), w

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=0)
            self.conv = nn.Conv1d(D, D, kernel_size=3)
            self.pool = AttnPool(D)
            self.norm = nn.LayerNorm(D)
            self.head = nn.Sequential(nn.Linear(2 * D, D), nn.Tanh(), nn.Linear(D, 2))
            self.apply(self._init_weights)

        @staticmethod
        def _init_weights(m):
            if isinstance(m, (nn.Linear, nn.Conv1d)):
                nn.init.xavier_normal_(m.weight, gain=nn.init.calculate_gain("tanh"))
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0.01)
            elif isinstance(m, nn.Embedding):
                nn.init.uniform_(m.weight, -0.1, 0.1)
                with torch.no_grad():
                    m.weight[m.padding_idx].fill_(0)

        def forward(self, x, lengths):
            B, T = x.shape
            pad_mask = torch.arange(T, device=x.device).unsqueeze(0) >= lengths.unsqueeze(1)
            h = self.emb(x)                                   # (B, T, D)
            c = self.conv(F.pad(h.permute(0, 2, 1), (1, 1)))   # same-length conv
            h = self.norm(h + c.permute(0, 2, 1).contiguous())
            pooled, w = self.pool(h, pad_mask)
            mean = h.masked_fill(pad_mask.unsqueeze(-1), 0.0).sum(1) / lengths.unsqueeze(1).type_as(h)
            feats = torch.cat([pooled, mean], dim=-1)
            return self.head(feats.view(feats.size(0), -1)), w

    model = Classifier().to(device)
    init_state = sync_init(torch, model, init)
    decay = [p for n_, p in model.named_parameters() if p.dim() >= 2 and "emb" not in n_]
    other = [p for n_, p in model.named_parameters() if not (p.dim() >= 2 and "emb" not in n_)]
    assert len(decay) + len(other) == len(list(model.parameters()))
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": other, "weight_decay": 0.0}], lr=3e-3)
    accum = 2
    losses = []
    order = torch.arange(n) if deterministic else torch.randperm(n)
    for epoch in range(epochs):
        model.train()
        optimizer.zero_grad()
        for i, idx in enumerate(order.split(32)):
            xb, yb, lb = X[idx].to(device), Y[idx].to(device), Ls[idx].to(device)
            logits, _ = model(xb, lb)
            loss = F.cross_entropy(logits, yb) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=2.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item() * accum)

    # evaluation with stacked / concatenated batches
    model.eval()
    all_logits, all_w = [], []
    with torch.no_grad():
        for xb, lb in zip(X.chunk(4), Ls.chunk(4)):
            logits, w = model(xb, lb)
            all_logits.append(logits)
            all_w.append(w)
    logits = torch.cat(all_logits)
    attn = torch.stack(all_w)              # (4, 64, T)
    preds = logits.argmax(dim=-1)
    acc = (preds == Y).float().mean()
    correct = preds.eq(Y).sum().item()
    assert abs(correct / n - acc.item()) < 1e-6
    assert torch.allclose(attn.sum(-1), torch.ones(4, n // 4))
    log(f"accuracy: {acc:.3f} ({correct}/{n}), loss {losses[-1]:.4f}")
    log(f"attention row: {attn[0, 0, :3]}")

    # assorted tensor idioms, checked against plain NumPy
    x = torch.arange(12, dtype=torch.float32).view(3, 4)
    z = x.new_zeros(2, 4)
    f = torch.full_like(x, 7.0)
    w = torch.where(x > 5, x, f)
    causal = torch.triu(torch.ones(4, 4), diagonal=1).bool()
    m = x.clone()
    m[:, :].masked_fill_(causal[:3], -1.0)
    onehot = F.one_hot(torch.tensor([0, 2, 1]), num_classes=3)
    vals, idx = torch.sort(x[:, 1], descending=True)
    stats = {
        "z": z.tolist(), "w": w.tolist(), "m": m.tolist(), "onehot": onehot.tolist(),
        "sorted": vals.tolist(), "argsort": torch.argsort(x[:, 1]).tolist(), "cumsum": x.cumsum(1)[:, -1].tolist(),
        "new_full": x.new_full((2,), 3.5).tolist(), "new_tensor": x.new_tensor([1, 2]).dtype == torch.float32,
        "expand": x[:, :1].expand(-1, 3).sum().item(), "unbind": [t.sum().item() for t in x.unbind(1)],
        "numel": x.numel(), "padded": F.pad(x, (1, 0, 0, 1), value=-2.0).shape == (4, 5),
        "np": x.detach().cpu().numpy().sum().item(), "einsum": torch.einsum("ij,kj->ik", x, x).trace().item(),
    }
    assert stats["np"] == 66.0 and stats["einsum"] == float((np.arange(12.0) ** 2).sum())
    log(f"max logit {logits.max():.3f}; mean {logits.mean().item():.4f}; shape {tuple(logits.shape)}; {x.dtype}")

    # checkpoint through a real file, load into a fresh model, same predictions
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.pt")
        torch.save(model.state_dict(), path)
        model2 = Classifier()
        missing = model2.load_state_dict(torch.load(path, map_location=device))
        assert not missing.missing_keys and not missing.unexpected_keys
    model2.eval()
    with torch.no_grad():
        same = torch.equal(model2(X[:16], Ls[:16])[0], model(X[:16], Ls[:16])[0])
    # freeze the embedding and fine-tune the head only
    for p in model.emb.parameters():
        p.requires_grad = False
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"losses": losses, "acc": acc.item(), "same_after_reload": same, "trainable": trainable,
            "stats": stats, "init": init_state}


if __name__ == "__main__":
    main(run)
