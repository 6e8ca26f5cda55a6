"""Tabular regression MLP on scikit-learn's diabetes data: a custom Dataset, random_split, train/eval
loops, ReduceLROnPlateau, early stopping on the validation loss with the best weights kept by
copy.deepcopy(state_dict()), SGD with momentum and weight decay, and the final test metrics.
"""
import copy
import math

from sklearn.datasets import load_diabetes

from _common import main, sync_init


def run(torch, nn, F, init=None, max_epochs=40, deterministic=False, log=print):
    Dataset, DataLoader = torch.utils.data.Dataset, torch.utils.data.DataLoader
    torch.manual_seed(0)

    class DiabetesDataset(Dataset):
        """Standardised features and target, kept as float32 tensors."""

        def __init__(self):
            X, y = load_diabetes(return_X_y=True)
            X = (X - X.mean(0)) / X.std(0)
            self.y_mean, self.y_std = y.mean(), y.std()
            y = (y - self.y_mean) / self.y_std
            self.X = torch.tensor(X, dtype=torch.float32)
            self.y = torch.tensor(y, dtype=torch.float32).unsqueeze(1)

        def __len__(self):
            return len(self.X)

        def __getitem__(self, idx):
            return self.X[idx], self.y[idx]

    full = DiabetesDataset()
    n_val, n_test = 60, 60
    if deterministic:   # RNG streams differ between libraries: split by index for comparable runs
        idx = list(range(len(full)))
        train_set = torch.utils.data.Subset(full, idx[:-n_val - n_test])
        val_set = torch.utils.data.Subset(full, idx[-n_val - n_test:-n_test])
        test_set = torch.utils.data.Subset(full, idx[-n_test:])
    else:
        train_set, val_set, test_set = torch.utils.data.random_split(
            full, [len(full) - n_val - n_test, n_val, n_test], generator=torch.Generator().manual_seed(42))
    assert len(train_set) + len(val_set) + len(test_set) == len(full)
    train_loader = DataLoader(train_set, batch_size=32, shuffle=not deterministic, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=64)
    test_loader = DataLoader(test_set, batch_size=64)

    class MLP(nn.Module):
        def __init__(self, d_in, hidden=(64, 32), p=0.1):
            super().__init__()
            layers, d = [], d_in
            for h in hidden:
                layers += [nn.Linear(d, h), nn.BatchNorm1d(h), nn.SiLU(), nn.Dropout(p)]
                d = h
            layers.append(nn.Linear(d, 1))
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return self.net(x)

    model = MLP(full.X.shape[1], p=0.0 if deterministic else 0.1)
    init_state = sync_init(torch, model, init)
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=2)

    def evaluate(loader):
        model.eval()
        total, n = 0.0, 0
        with torch.no_grad():
            for xb, yb in loader:
                total += criterion(model(xb), yb).item() * xb.size(0)
                n += len(xb)
        return total / n

    best_val, best_state, patience, bad_epochs = math.inf, None, 5, 0
    losses, val_losses, lrs = [], [], []
    for epoch in range(max_epochs):
        model.train()
        running = 0.0
        for xb, yb in train_loader:
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            running += loss.item()
        losses.append(running / len(train_loader))
        val_loss = evaluate(val_loader)
        val_losses.append(val_loss)
        scheduler.step(val_loss)
        lrs.append(optimizer.param_groups[0]["lr"])
        if val_loss < best_val - 1e-4:
            best_val, bad_epochs = val_loss, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad_epochs += 1
            if bad_epochs >= patience:
                log(f"early stopping at epoch {epoch}")
                break
    model.load_state_dict(best_state)
    test_mse = evaluate(test_loader)
    with torch.no_grad():
        preds = torch.cat([model(xb) for xb, _ in test_loader]).squeeze(-1)
        target = torch.stack([test_set[i][1] for i in range(len(test_set))]).squeeze(-1)
        ss_res = ((target - preds) ** 2).sum()
        ss_tot = ((target - target.mean()) ** 2).sum()
        r2 = (1 - ss_res / ss_tot).item()
        mae = F.l1_loss(preds, target).item() * full.y_std
    log(f"best val {best_val:.4f}  test mse {test_mse:.4f}  r2 {r2:.3f}  mae {mae:.1f}  epochs {len(losses)}")
    return {"losses": losses, "val_losses": val_losses, "lrs": lrs, "test_mse": test_mse, "r2": r2,
            "init": init_state}


if __name__ == "__main__":
    main(run)
