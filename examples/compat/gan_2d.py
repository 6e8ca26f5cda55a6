"""A GAN on 2-D points (a ring of 8 Gaussians): generator and discriminator MLPs with LeakyReLU,
BCEWithLogitsLoss against ones_like / zeros_like targets, two Adam optimizers with betas=(0.5, 0.999),
detach() of fake samples for the discriminator step, requires_grad_(False) freezing of the
discriminator during the generator step, and per-parameter-group learning rates.
"""
import math

import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, steps=60, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    centers = np.array([(math.cos(2 * math.pi * k / 8), math.sin(2 * math.pi * k / 8)) for k in range(8)])

    def real_batch(n):
        pts = centers[rng.randint(0, 8, n)] * 2 + 0.05 * rng.randn(n, 2)
        return torch.from_numpy(pts.astype(np.float32))

    fixed_z = torch.from_numpy(rng.randn(64, 4).astype(np.float32))

    def noise(n):
        if deterministic:
            return torch.from_numpy(rng.randn(n, 4).astype(np.float32))
        return torch.randn(n, 4)

    class Generator(nn.Module):
        def __init__(self, z=4, h=64):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(z, h), nn.LeakyReLU(0.2, inplace=True),
                                     nn.Linear(h, h), nn.LeakyReLU(0.2, inplace=True), nn.Linear(h, 2))

        def forward(self, z):
            return self.net(z)

    class Discriminator(nn.Module):
        def __init__(self, h=64):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, h), nn.LeakyReLU(0.2), nn.Linear(h, h), nn.LeakyReLU(0.2),
                                     nn.Linear(h, 1))

        def forward(self, x):
            return self.net(x).squeeze(1)

    G, D = Generator(), Discriminator()
    both = nn.ModuleDict({"G": G, "D": D})
    init_state = sync_init(torch, both, init)
    criterion = nn.BCEWithLogitsLoss()
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam([{"params": D.net[0].parameters(), "lr": 1e-3},
                              {"params": [p for n, p in D.named_parameters() if not n.startswith("net.0.")]}],
                             lr=2e-3, betas=(0.5, 0.999))
    d_losses, g_losses = [], []
    for step in range(steps):
        real = real_batch(64)
        fake = G(noise(64))
        # discriminator: real -> 1, fake -> 0
        opt_d.zero_grad()
        d_real = D(real)
        d_fake = D(fake.detach())
        loss_d = criterion(d_real, torch.ones_like(d_real)) + criterion(d_fake, torch.zeros_like(d_fake))
        loss_d.backward()
        opt_d.step()
        # generator: fool the (frozen) discriminator
        for p in D.parameters():
            p.requires_grad_(False)
        opt_g.zero_grad()
        out = D(fake)
        loss_g = criterion(out, torch.full_like(out, 1.0))
        loss_g.backward()
        opt_g.step()
        for p in D.parameters():
            p.requires_grad_(True)
        assert all(p.grad is None or float(p.grad.abs().sum()) >= 0 for p in D.parameters())
        d_losses.append(loss_d.item())
        g_losses.append(loss_g.item())

    G.eval()
    with torch.no_grad():
        samples = G(fixed_z)
        radius = samples.norm(dim=1)
        d_acc = ((D(real_batch(256)) > 0).float().mean().item() + (D(G(noise(256))) < 0).float().mean().item()) / 2
    log(f"D loss {d_losses[-1]:.3f}, G loss {g_losses[-1]:.3f}, mean radius {radius.mean().item():.3f}, "
        f"D accuracy {d_acc:.2f}")
    return {"losses": d_losses, "g_losses": g_losses, "radius": radius.mean().item(), "init": init_state}


if __name__ == "__main__":
    main(run)
