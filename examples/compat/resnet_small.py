"""A small ResNet (BasicBlock with BatchNorm2d, a 1x1 downsample shortcut, ReLU(inplace=True)) on
8x8 digits upsampled to 16x16 with F.interpolate: kaiming_normal_ init via model.modules(),
zero-init of the last BN gamma in each block, AdaptiveAvgPool2d, SGD with nesterov momentum and
no weight decay on BN/bias, OneCycleLR stepped per batch, train/eval BatchNorm behaviour and
running statistics, channels counted with sum(p.numel()), top-k accuracy.
"""
from sklearn.datasets import load_digits

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=2, deterministic=False, log=print):
    torch.manual_seed(0)
    X, y = load_digits(return_X_y=True)
    X = torch.tensor(X[:384] / 16.0, dtype=torch.float32).view(-1, 1, 8, 8)
    X = F.interpolate(X, scale_factor=2, mode="bilinear", align_corners=False)
    X = (X - X.mean()) / X.std()
    y = torch.as_tensor(y[:384])
    train = torch.utils.data.TensorDataset(X[:320], y[:320])
    loader = torch.utils.data.DataLoader(train, batch_size=32, shuffle=not deterministic)

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, in_planes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or in_planes != planes:
                self.downsample = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                                                nn.BatchNorm2d(planes))

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return self.relu(out)

    class ResNet(nn.Module):
        def __init__(self, num_classes=10, widths=(8, 16, 32)):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, widths[0], 3, padding=1, bias=False), nn.BatchNorm2d(widths[0]),
                                      nn.ReLU(inplace=True))
            layers, c = [], widths[0]
            for i, w in enumerate(widths):
                layers.append(BasicBlock(c, w, stride=1 if i == 0 else 2))
                c = w
            self.layers = nn.Sequential(*layers)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(c, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
            for m in self.modules():
                if isinstance(m, BasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)

        def forward(self, x):
            x = self.layers(self.stem(x))
            x = self.avgpool(x)
            x = x.reshape(x.size(0), -1)
            return self.fc(x)

    model = ResNet()
    init_state = sync_init(torch, model, init)
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    optimizer = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": no_decay, "weight_decay": 0}],
                                lr=0.05, momentum=0.9, nesterov=True)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.05, epochs=epochs,
                                                    steps_per_epoch=len(loader))
    criterion = nn.CrossEntropyLoss()
    losses, lrs = [], []
    for epoch in range(epochs):
        model.train()
        for inputs, targets in loader:
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            lrs.append(scheduler.get_last_lr()[0])

    bn = model.stem[1]
    assert int(bn.num_batches_tracked) == epochs * len(loader)
    model.eval()
    with torch.no_grad():
        out = model(X[320:])
        _, pred = out.topk(3, 1, True, True)
        pred = pred.t()
        correct = pred.eq(y[320:].view(1, -1).expand_as(pred))
        top1 = correct[:1].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / len(out)).item()
        top3 = correct[:3].reshape(-1).float().sum(0).mul_(100.0 / len(out)).item()
    log(f"params {n_params}, loss {losses[0]:.3f} -> {losses[-1]:.3f}, top1 {top1:.1f}% top3 {top3:.1f}%")
    return {"losses": losses, "lrs": lrs, "top1": top1, "running_mean": bn.running_mean.tolist(),
            "running_var": bn.running_var.tolist(), "init": init_state}


if __name__ == "__main__":
    main(run)
