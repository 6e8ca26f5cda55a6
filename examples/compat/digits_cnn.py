"""MNIST-style CNN classifier (the classic pytorch/examples mnist script) on scikit-learn's 8x8 digits.

Exercises: TensorDataset / Subset / DataLoader, Conv2d + MaxPool2d + Dropout, log_softmax + nll_loss,
Adam, StepLR, argmax accuracy under no_grad, checkpointing model/optimizer/scheduler with save/load
and resuming training from the checkpoint.
"""
import io

import numpy as np
from sklearn.datasets import load_digits

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=3, deterministic=False, log=print):
    from_ds = torch.utils.data
    X, y = load_digits(return_X_y=True)
    X = (X[:640] / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y = y[:640]
    dataset = from_ds.TensorDataset(torch.from_numpy(X), torch.from_numpy(y))
    train_set = from_ds.Subset(dataset, list(range(512)))
    test_set = from_ds.Subset(dataset, range(512, 640))
    train_loader = from_ds.DataLoader(train_set, batch_size=64, shuffle=not deterministic)
    test_loader = from_ds.DataLoader(test_set, batch_size=100)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 3, 1, padding=1)
            self.conv2 = nn.Conv2d(16, 32, 3, 1)
            self.dropout1 = nn.Dropout(0.0 if deterministic else 0.25)
            self.dropout2 = nn.Dropout(0.0 if deterministic else 0.5)
            self.fc1 = nn.Linear(32 * 3 * 3, 64)
            self.fc2 = nn.Linear(64, 10)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = self.dropout2(x)
            return F.log_softmax(self.fc2(x), dim=1)

    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")
    model = Net().to(device)
    init_state = sync_init(torch, model, init)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)

    def train_epoch(model, optimizer, losses):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())

    def test(model):
        model.eval()
        test_loss, correct = 0, 0
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()
                pred = output.argmax(dim=1, keepdim=True)
                correct += pred.eq(target.view_as(pred)).sum().item()
        test_loss /= len(test_loader.dataset)
        return test_loss, correct / len(test_loader.dataset)

    losses, accs = [], []
    ckpt = io.BytesIO()
    for epoch in range(1, epochs + 1):
        train_epoch(model, optimizer, losses)
        test_loss, acc = test(model)
        accs.append(acc)
        log(f"Epoch {epoch}: lr={scheduler.get_last_lr()[0]:.5f} test loss {test_loss:.4f}, "
            f"accuracy {100. * acc:.1f}%")
        scheduler.step()
        if epoch == epochs - 1:   # checkpoint before the last epoch, then resume from it below
            ckpt = io.BytesIO()
            torch.save({"epoch": epoch, "model_state_dict": model.state_dict(),
                        "optimizer_state_dict": optimizer.state_dict(),
                        "scheduler_state_dict": scheduler.state_dict(), "loss": test_loss}, ckpt)

    # resume: a fresh model/optimizer/scheduler restored from the checkpoint redoes the last epoch
    ckpt.seek(0)
    checkpoint = torch.load(ckpt, weights_only=True)
    model2 = Net().to(device)
    model2.load_state_dict(checkpoint["model_state_dict"])
    optimizer2 = torch.optim.Adam(model2.parameters(), lr=3e-3)
    optimizer2.load_state_dict(checkpoint["optimizer_state_dict"])
    scheduler2 = torch.optim.lr_scheduler.StepLR(optimizer2, step_size=1, gamma=0.7)
    scheduler2.load_state_dict(checkpoint["scheduler_state_dict"])
    resumed = []
    train_epoch(model2, optimizer2, resumed)
    scheduler2.step()
    log(f"resumed from epoch {checkpoint['epoch']}: last-epoch losses match: "
        f"{np.allclose(resumed, losses[-len(resumed):], rtol=1e-4, atol=1e-5)}")
    return {"losses": losses, "accs": accs, "resumed": resumed, "init": init_state,
            "lr": scheduler2.get_last_lr()[0]}


if __name__ == "__main__":
    main(run)
