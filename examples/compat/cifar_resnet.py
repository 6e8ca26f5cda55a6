"""A CIFAR-style ResNet (the resnet20 family: 3 stages of BasicBlocks, option-A shortcuts that subsample
and zero-pad channels with F.pad inside a LambdaLayer, BatchNorm2d, kaiming_normal_ init through
model.apply) on tiny synthetic 3x16x16 images: per-channel normalisation, random crop with padding and
horizontal flips written with tensor ops, SGD with momentum and weight decay, CosineAnnealingLR stepped
per epoch, accuracy in eval mode, the running statistics of the first BatchNorm.
"""
import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=3, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    n, classes = 160, 4
    labels = rng.randint(0, classes, n)
    base = rng.randn(classes, 3, 16, 16).astype(np.float32)
    images = base[labels] + 0.8 * rng.randn(n, 3, 16, 16).astype(np.float32)
    X, y = torch.from_numpy(images), torch.from_numpy(labels)
    mean, std = X.mean(dim=(0, 2, 3), keepdim=True), X.std(dim=(0, 2, 3), keepdim=True)
    X = (X - mean) / std
    Xtr, ytr, Xte, yte = X[:128], y[:128], X[128:], y[128:]

    class LambdaLayer(nn.Module):
        def __init__(self, lambd):
            super().__init__()
            self.lambd = lambd

        def forward(self, x):
            return self.lambd(x)

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, in_planes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.shortcut = nn.Sequential()
            if stride != 1 or in_planes != planes:
                pad = planes // 4
                self.shortcut = LambdaLayer(lambda x: F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, pad, pad), "constant", 0))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += self.shortcut(x)
            return F.relu(out)

    def _weights_init(m):
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.kaiming_normal_(m.weight)

    class ResNet(nn.Module):
        def __init__(self, num_blocks=(1, 1, 1), num_classes=classes):
            super().__init__()
            self.in_planes = 8
            self.conv1 = nn.Conv2d(3, 8, kernel_size=3, stride=1, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.layer1 = self._make_layer(8, num_blocks[0], stride=1)
            self.layer2 = self._make_layer(16, num_blocks[1], stride=2)
            self.layer3 = self._make_layer(32, num_blocks[2], stride=2)
            self.linear = nn.Linear(32, num_classes)
            self.apply(_weights_init)

        def _make_layer(self, planes, num_blocks, stride):
            layers = []
            for s in [stride] + [1] * (num_blocks - 1):
                layers.append(BasicBlock(self.in_planes, planes, s))
                self.in_planes = planes * BasicBlock.expansion
            return nn.Sequential(*layers)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.layer3(self.layer2(self.layer1(out)))
            out = F.avg_pool2d(out, out.size()[3])
            return self.linear(out.view(out.size(0), -1))

    def augment(xb):
        if deterministic:
            return xb
        padded = F.pad(xb, (2, 2, 2, 2))
        i, j = torch.randint(0, 5, (2,)).tolist()
        xb = padded[:, :, i:i + 16, j:j + 16]
        flip = torch.rand(xb.size(0)) < 0.5
        return torch.where(flip.view(-1, 1, 1, 1), xb.flip(3), xb)

    model = ResNet()
    init_state = sync_init(torch, model, init)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    losses, lrs, accs = [], [], []
    for epoch in range(epochs):
        model.train()
        order = torch.arange(128) if deterministic else torch.randperm(128)
        for k in range(0, 128, 32):
            idx = order[k:k + 32]
            output = model(augment(Xtr[idx]))
            loss = criterion(output, ytr[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        lrs.append(scheduler.get_last_lr()[0])
        model.eval()
        with torch.no_grad():
            accs.append((model(Xte).argmax(1) == yte).float().mean().item())
        log(f"epoch {epoch}: loss {losses[-1]:.4f}, lr {lrs[-1]:.4f}, test acc {accs[-1]:.3f}")
    return {"losses": losses, "init": init_state, "lrs": lrs, "accs": accs,
            "running_mean": model.bn1.running_mean.tolist(), "running_var": model.bn1.running_var.tolist(),
            "num_batches": model.bn1.num_batches_tracked.item()}


if __name__ == "__main__":
    main(run)
