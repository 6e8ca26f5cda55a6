"""Two small models users often write first:

- a siamese network on pairs of synthetic "signatures": a shared embedding net, the Hadsell et al.
  contrastive loss written by hand with F.pairwise_distance and torch.clamp(margin - d, min=0.0),
  nn.CosineEmbeddingLoss / nn.CosineSimilarity alongside, pairs built by a custom Dataset, and a
  threshold accuracy on held-out pairs;
- a tabular click model: categorical fields through nn.EmbeddingBag(mode="sum"/"mean") with offsets
  and per_sample_weights, dense fields through BatchNorm1d, a torch.utils.data.TensorDataset split into
  Subset train / validation parts, DataLoader(drop_last=True), BCEWithLogitsLoss, and Adagrad.
"""
import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=2, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    data = torch.utils.data
    DataLoader, Dataset, Subset, TensorDataset = data.DataLoader, data.Dataset, data.Subset, data.TensorDataset

    # ---------------- siamese ----------------
    n_cls, dim = 6, 16
    protos = rng.randn(n_cls, dim).astype(np.float32)

    class PairDataset(Dataset):
        def __init__(self, n, seed):
            r = np.random.RandomState(seed)
            self.items = []
            for i in range(n):
                a = r.randint(n_cls)
                same = i % 2 == 0
                b = a if same else (a + 1 + r.randint(n_cls - 1)) % n_cls
                xa = protos[a] + 0.5 * r.randn(dim).astype(np.float32)
                xb = protos[b] + 0.5 * r.randn(dim).astype(np.float32)
                self.items.append((xa, xb, np.float32(0.0 if same else 1.0)))

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            xa, xb, y = self.items[i]
            return torch.from_numpy(xa), torch.from_numpy(xb), torch.tensor(y)

    class SiameseNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(inplace=True), nn.Linear(32, 32),
                                    nn.ReLU(inplace=True), nn.Linear(32, 8))

        def forward_once(self, x):
            return self.fc(x)

        def forward(self, input1, input2):
            return self.forward_once(input1), self.forward_once(input2)

    class ContrastiveLoss(nn.Module):
        def __init__(self, margin=2.0):
            super().__init__()
            self.margin = margin

        def forward(self, output1, output2, label):
            d = F.pairwise_distance(output1, output2, keepdim=True)
            return torch.mean((1 - label) * torch.pow(d, 2) + label * torch.pow(torch.clamp(self.margin - d, min=0.0), 2))

    # ---------------- tabular ----------------
    n, n_fields, vocab = 256, 3, 20
    bags = [rng.randint(0, vocab, rng.randint(1, 4)) for _ in range(n * n_fields)]
    flat = np.concatenate(bags).astype(np.int64)
    offsets = np.cumsum([0] + [len(b) for b in bags[:-1]]).astype(np.int64)
    weights = rng.uniform(0.5, 1.5, len(flat)).astype(np.float32)
    dense = rng.randn(n, 4).astype(np.float32)
    score = np.array([sum(np.sin(bags[i * n_fields + f]).sum() for f in range(n_fields)) for i in range(n)])
    label = ((score + dense[:, 0] - dense[:, 1]) > 0).astype(np.float32)

    class ClickModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag_sum = nn.EmbeddingBag(vocab, 8, mode="sum")
            self.bag_mean = nn.EmbeddingBag(vocab, 8, mode="mean")
            self.bn = nn.BatchNorm1d(4)
            self.mlp = nn.Sequential(nn.Linear(n_fields * 16 + 4, 32), nn.ReLU(), nn.Linear(32, 1))

        def forward(self, idx, offs, psw, dense_x):
            b = dense_x.shape[0]
            s = self.bag_sum(idx, offs, per_sample_weights=psw).view(b, -1)
            m = self.bag_mean(idx, offs).view(b, -1)
            return self.mlp(torch.cat([s, m, self.bn(dense_x)], dim=1)).squeeze(1)

    siamese, click = SiameseNetwork(), ClickModel()
    init_state = sync_init(torch, nn.ModuleDict({"siamese": siamese, "click": click}), init)

    train_pairs, test_pairs = PairDataset(192, 1), PairDataset(64, 2)
    loader = DataLoader(train_pairs, batch_size=32, shuffle=not deterministic)
    criterion = ContrastiveLoss()
    cos_loss = nn.CosineEmbeddingLoss(margin=0.2)
    opt = torch.optim.Adam(siamese.parameters(), lr=3e-3)
    losses = []
    for epoch in range(epochs):
        for x0, x1, y in loader:
            o1, o2 = siamese(x0, x1)
            loss = criterion(o1, o2, y.unsqueeze(1)) + 0.1 * cos_loss(o1, o2, 1 - 2 * y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    siamese.eval()
    with torch.no_grad():
        xa = torch.stack([p[0] for p in test_pairs])
        xb = torch.stack([p[1] for p in test_pairs])
        yt = torch.stack([p[2] for p in test_pairs])
        o1, o2 = siamese(xa, xb)
        dist = F.pairwise_distance(o1, o2)
        pair_acc = ((dist > 1.0).float() == yt).float().mean().item()
        cos = nn.CosineSimilarity(dim=1, eps=1e-6)(o1, o2)
    log(f"siamese: loss {losses[-1]:.4f} pair accuracy {pair_acc:.3f}")

    # one-sample-per-row tensors for TensorDataset: pad each row's bags into fixed slots
    idx_rows = torch.from_numpy(np.arange(n))
    ds = TensorDataset(idx_rows, torch.from_numpy(dense), torch.from_numpy(label))
    perm = np.arange(n) if deterministic else rng.permutation(n)
    train_ds, val_ds = Subset(ds, perm[:192].tolist()), Subset(ds, perm[192:].tolist())
    assert len(train_ds) == 192 and len(val_ds) == 64

    def bag_batch(rows):
        sel = [rows_i * n_fields + f for rows_i in rows.tolist() for f in range(n_fields)]
        parts = [bags[s] for s in sel]
        idx = torch.from_numpy(np.concatenate(parts).astype(np.int64))
        offs = torch.from_numpy(np.cumsum([0] + [len(p) for p in parts[:-1]]).astype(np.int64))
        w = torch.from_numpy(np.concatenate([weights[offsets[s]:offsets[s] + len(bags[s])] for s in sel]))
        return idx, offs, w

    tab_opt = torch.optim.Adagrad(click.parameters(), lr=0.05)
    bce = nn.BCEWithLogitsLoss()
    tab_losses = []
    for epoch in range(epochs):
        click.train()
        for rows, dx, yb in DataLoader(train_ds, batch_size=32, shuffle=not deterministic, drop_last=True):
            logits = click(*bag_batch(rows), dx)
            loss = bce(logits, yb)
            tab_opt.zero_grad()
            loss.backward()
            tab_opt.step()
            tab_losses.append(loss.item())
    click.eval()
    with torch.no_grad():
        rows, dx, yb = next(iter(DataLoader(val_ds, batch_size=64)))
        val_acc = ((click(*bag_batch(rows), dx) > 0).float() == yb).float().mean().item()
    log(f"tabular: loss {tab_losses[-1]:.4f} val accuracy {val_acc:.3f}")
    return {"losses": losses, "tab_losses": tab_losses, "pair_acc": pair_acc, "val_acc": val_acc,
            "cos": cos[:8].tolist(), "init": init_state}


if __name__ == "__main__":
    main(run)
