"""Semantic segmentation of synthetic shapes with a small U-Net: Conv2d + GroupNorm + SiLU blocks,
MaxPool2d(return_indices=True) / MaxUnpool2d, ConvTranspose2d upsampling, skip connections joined with
torch.cat, F.interpolate to match sizes, Dropout2d, a Dice + BCE-with-logits loss, a spatial
transformer front end (F.affine_grid + F.grid_sample), PixelShuffle, F.unfold patches, torch.flip
augmentation, IoU metrics with logical ops, and Adam with a MultiStepLR schedule.
"""
import numpy as np

from _common import main, sync_init


def make_data(n, size=16, seed=0):
    """Images with a bright disc or square on noise; the mask marks the shape's pixels."""
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[:size, :size]
    imgs = np.zeros((n, 1, size, size), np.float32)
    masks = np.zeros((n, 1, size, size), np.float32)
    for i in range(n):
        cy, cx, r = rng.randint(4, size - 4, 2).tolist() + [rng.randint(2, 5)]
        m = ((yy - cy) ** 2 + (xx - cx) ** 2 <= r * r) if i % 2 else ((abs(yy - cy) <= r) & (abs(xx - cx) <= r))
        masks[i, 0] = m
        imgs[i, 0] = m * 1.0 + 0.3 * rng.randn(size, size)
    return imgs, masks


def run(torch, nn, F, init=None, epochs=3, deterministic=False, log=print):
    torch.manual_seed(0)
    imgs, masks = make_data(48)
    X, Y = torch.from_numpy(imgs), torch.from_numpy(masks)

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.GroupNorm(4, cout), nn.SiLU(),
                             nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.GroupNorm(4, cout), nn.SiLU())

    class STN(nn.Module):
        """Predicts an affine warp; initialised to the identity transform."""

        def __init__(self):
            super().__init__()
            self.loc = nn.Sequential(nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(16, 6))
            nn.init.zeros_(self.loc[2].weight)
            with torch.no_grad():
                self.loc[2].bias.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

        def forward(self, x):
            theta = self.loc(x).view(-1, 2, 3)
            grid = F.affine_grid(theta, x.size(), align_corners=False)
            return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)

    class UNet(nn.Module):
        def __init__(self, c=8, p=0.1):
            super().__init__()
            self.stn = STN()
            self.enc1, self.enc2 = block(1, c), block(c, 2 * c)
            self.pool = nn.MaxPool2d(2, return_indices=True)
            self.unpool = nn.MaxUnpool2d(2)
            self.mid = block(2 * c, 2 * c)
            self.up = nn.ConvTranspose2d(2 * c, c, kernel_size=2, stride=2)
            self.dec1 = block(2 * c, c)
            self.drop = nn.Dropout2d(p)
            self.sub = nn.Sequential(nn.Conv2d(c, 4, 1), nn.PixelShuffle(2))     # 4 channels -> 1 at 2x
            self.head = nn.Conv2d(1, 1, 1)

        def forward(self, x):
            x = self.stn(x)
            e1 = self.enc1(x)                       # (B, c, 16, 16)
            p1, idx1 = self.pool(e1)                # (B, c, 8, 8)
            e2 = self.enc2(p1)
            p2, idx2 = self.pool(e2)                # (B, 2c, 4, 4)
            m = self.mid(p2)
            u2 = self.unpool(m, idx2, output_size=e2.size())          # back to 8x8
            u1 = self.up(u2 + e2)                                      # 16x16
            if u1.shape[-2:] != e1.shape[-2:]:
                u1 = F.interpolate(u1, size=e1.shape[-2:], mode="bilinear", align_corners=False)
            d = self.drop(self.dec1(torch.cat([u1, e1], dim=1)))
            s = self.sub(d)                                            # (B, 1, 32, 32)
            s = F.interpolate(s, scale_factor=0.5, mode="bilinear", align_corners=False)
            return self.head(s)

    def dice_loss(logits, target, eps=1.0):
        p = torch.sigmoid(logits)
        inter = (p * target).sum(dim=(1, 2, 3))
        union = p.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3))
        return (1 - (2 * inter + eps) / (union + eps)).mean()

    model = UNet(p=0.0 if deterministic else 0.1)
    init_state = sync_init(torch, model, init)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2], gamma=0.3)
    losses = []
    for epoch in range(epochs):
        model.train()
        for i in range(0, 40, 8):
            xb, yb = X[i:i + 8], Y[i:i + 8]
            if epoch % 2 == 1:                        # flip augmentation, applied to image and mask alike
                xb, yb = torch.flip(xb, dims=[3]), yb.flip(-1)
            logits = model(xb)
            loss = F.binary_cross_entropy_with_logits(logits, yb) + dice_loss(logits, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()

    model.eval()
    with torch.no_grad():
        pred = model(X[40:]) > 0
        target = Y[40:].bool()
        inter = torch.logical_and(pred, target).sum().item()
        union = torch.logical_or(pred, target).sum().item()
        iou = inter / max(union, 1)
        patches = F.unfold(X[40:42], kernel_size=4, stride=4)          # (2, 16, 16)
        folded = F.fold(patches, output_size=(16, 16), kernel_size=4, stride=4)
        roundtrip = torch.allclose(folded, X[40:42])
    log(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; IoU {iou:.3f}; unfold {tuple(patches.shape)} {roundtrip}")
    return {"losses": losses, "iou": iou, "patches": tuple(patches.shape), "roundtrip": roundtrip, "init": init_state}


if __name__ == "__main__":
    main(run)
