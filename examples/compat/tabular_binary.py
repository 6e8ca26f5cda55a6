"""Binary classification on scikit-learn's breast-cancer table with a wide & deep model: continuous
features standardised, and also bucketized into quantile bins (torch.quantile + torch.bucketize) that
feed per-feature embeddings in an nn.ModuleList; BCEWithLogitsLoss with pos_weight, Adagrad,
CosineAnnealingWarmRestarts stepped with fractional epochs, ROC-AUC from torch.sort + cumsum,
a histogram of predicted probabilities with torch.histc, a calibration table by searchsorted, and
torch.bincount for class counts.
"""
from sklearn.datasets import load_breast_cancer

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=4, deterministic=False, log=print):
    torch.manual_seed(0)
    X, y = load_breast_cancer(return_X_y=True)
    X = torch.tensor(X, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.float32)
    n_train = 420
    X_train, X_test, y_train, y_test = X[:n_train], X[n_train:], y[:n_train], y[n_train:]
    mean, std = X_train.mean(0, keepdim=True), X_train.std(0, keepdim=True)
    n_bins, n_bucketized = 8, 6
    # quantile bin edges of the first few features, from the training split only
    qs = torch.linspace(0, 1, n_bins + 1)[1:-1]
    edges = torch.quantile(X_train[:, :n_bucketized], qs, dim=0).T.contiguous()     # (features, bins-1)

    def featurize(x):
        cont = (x - mean) / std
        bins = torch.stack([torch.bucketize(x[:, j].contiguous(), edges[j]) for j in range(n_bucketized)], dim=1)
        return cont, bins

    class WideDeep(nn.Module):
        def __init__(self, n_cont, n_cat, n_bins, emb=4, hidden=32, p=0.2):
            super().__init__()
            self.embs = nn.ModuleList([nn.Embedding(n_bins, emb) for _ in range(n_cat)])
            self.wide = nn.Linear(n_cont, 1)
            self.deep = nn.Sequential(nn.Linear(n_cont + n_cat * emb, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                      nn.Dropout(p), nn.Linear(hidden, 1))

        def forward(self, cont, bins):
            e = torch.cat([emb(bins[:, i]) for i, emb in enumerate(self.embs)], dim=1)
            return (self.wide(cont) + self.deep(torch.cat([cont, e], dim=1))).squeeze(-1)

    model = WideDeep(X.shape[1], n_bucketized, n_bins, p=0.0 if deterministic else 0.2)
    init_state = sync_init(torch, model, init)
    counts = torch.bincount(y_train.long(), minlength=2)
    pos_weight = counts[0].float() / counts[1].float()
    criterion = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
    batch = 60
    iters = n_train // batch
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=2, T_mult=1, eta_min=1e-3)
    train_ds = torch.utils.data.TensorDataset(*featurize(X_train), y_train)
    loader = torch.utils.data.DataLoader(train_ds, batch_size=batch, shuffle=not deterministic)
    losses, lrs = [], []
    for epoch in range(epochs):
        model.train()
        for i, (cont, bins, yb) in enumerate(loader):
            optimizer.zero_grad()
            loss = criterion(model(cont, bins), yb)
            loss.backward()
            optimizer.step()
            scheduler.step(epoch + i / iters)
            losses.append(loss.item())
            lrs.append(scheduler.get_last_lr()[0])

    model.eval()
    with torch.no_grad():
        probs = torch.sigmoid(model(*featurize(X_test)))
    preds = (probs > 0.5).float()
    acc = (preds == y_test).float().mean().item()
    # ROC-AUC: sort by score, sweep thresholds
    order = torch.argsort(probs, descending=True)
    ys = y_test[order]
    tpr = torch.cumsum(ys, 0) / ys.sum()
    fpr = torch.cumsum(1 - ys, 0) / (1 - ys).sum()
    tpr = torch.cat([torch.zeros(1), tpr])
    fpr = torch.cat([torch.zeros(1), fpr])
    auc = torch.trapz(tpr, fpr).item()
    hist = torch.histc(probs, bins=5, min=0, max=1)
    bucket = torch.searchsorted(torch.tensor([0.2, 0.4, 0.6, 0.8]), probs.contiguous())
    calib = [(y_test[bucket == b].mean().item() if (bucket == b).any() else float("nan")) for b in range(5)]
    log(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; accuracy {acc:.3f}; AUC {auc:.3f}; "
        f"histogram {hist.tolist()}; calibration {[round(c, 2) for c in calib]}")
    return {"losses": losses, "lrs": lrs, "acc": acc, "auc": auc, "hist": hist.tolist(),
            "edges": edges.tolist(), "init": init_state}


if __name__ == "__main__":
    main(run)
