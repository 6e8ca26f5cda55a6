"""DCGAN on 16x16 synthetic "blob" images, in the style of the PyTorch DCGAN tutorial: a generator of
ConvTranspose2d + BatchNorm2d + ReLU + Tanh from a (N, nz, 1, 1) latent, a discriminator of strided
Conv2d + BatchNorm2d + LeakyReLU(0.2, inplace=True) + Sigmoid trained with nn.BCELoss, weights_init
applied by class name (``classname.find('Conv')``), label tensors made with torch.full((b,), label,
dtype=torch.float), Adam(betas=(0.5, 0.999)), fake.detach() for the discriminator step, D(x).mean()
statistics, and a fixed-noise sample batch normalised to [0, 1] with clamp/min/max for saving.
"""
import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, steps=12, deterministic=False, log=print):
    torch.manual_seed(999)
    rng = np.random.RandomState(0)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    nz, ngf, ndf, nc, bs = 8, 8, 8, 1, 16
    yy, xx = np.mgrid[0:16, 0:16]

    def real_batch(n):
        cx, cy = rng.uniform(4, 12, n), rng.uniform(4, 12, n)
        img = np.exp(-((xx[None] - cx[:, None, None]) ** 2 + (yy[None] - cy[:, None, None]) ** 2) / 8.0)
        return torch.from_numpy((img * 2 - 1).astype(np.float32)).unsqueeze(1)

    def latent(n):
        if deterministic:
            return torch.from_numpy(rng.randn(n, nz, 1, 1).astype(np.float32))
        return torch.randn(n, nz, 1, 1, device=device)

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),  # 4x4
                nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),  # 8
                nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False), nn.Tanh())                    # 16x16

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),          # 8x8
                nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2),
                nn.LeakyReLU(0.2, inplace=True),                                                  # 4x4
                nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())

        def forward(self, input):
            return self.main(input)

    netG, netD = Generator().to(device), Discriminator().to(device)
    netG.apply(weights_init)
    netD.apply(weights_init)
    init_state = sync_init(torch, nn.ModuleList([netG, netD]), init)
    criterion = nn.BCELoss()
    fixed_noise = torch.from_numpy(rng.randn(16, nz, 1, 1).astype(np.float32)).to(device)
    real_label, fake_label = 1.0, 0.0
    optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    errDs, errGs, dxs = [], [], []
    for i in range(steps):
        # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
        netD.zero_grad()
        real_cpu = real_batch(bs).to(device)
        b_size = real_cpu.size(0)
        label = torch.full((b_size,), real_label, dtype=torch.float, device=device)
        output = netD(real_cpu).view(-1)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()
        fake = netG(latent(b_size))
        label.fill_(fake_label)
        output = netD(fake.detach()).view(-1)
        errD_fake = criterion(output, label)
        errD_fake.backward()
        errD = errD_real + errD_fake
        optimizerD.step()
        # (2) update G: maximize log(D(G(z)))
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake).view(-1)
        errG = criterion(output, label)
        errG.backward()
        optimizerG.step()
        errDs.append(errD.item())
        errGs.append(errG.item())
        dxs.append(D_x)
        log(f"[{i}/{steps}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} D(x): {D_x:.4f}")

    netG.eval()
    with torch.no_grad():
        samples = netG(fixed_noise).detach().cpu()
    grid = (samples - samples.min()) / (samples.max() - samples.min())
    grid = grid.clamp(0, 1).mul(255).add_(0.5).clamp_(0, 255).to(torch.uint8)
    return {"losses": errDs, "g_losses": errGs, "d_x": dxs, "sample_mean": samples.mean().item(),
            "grid_shape": list(grid.shape), "grid_dtype": str(grid.dtype).split(".")[-1], "init": init_state}


if __name__ == "__main__":
    main(run)
