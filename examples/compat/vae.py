"""Variational autoencoder on scikit-learn's 8x8 digits (the pytorch/examples VAE): encoder to
(mu, logvar), the reparameterisation trick with randn_like, BCE-with-logits reconstruction summed
over pixels plus the analytic KL term, Adam, and sampling new digits from the prior with torch.randn.
"""
import numpy as np
from sklearn.datasets import load_digits

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=4, deterministic=False, log=print):
    torch.manual_seed(0)
    X, _ = load_digits(return_X_y=True)
    X = torch.from_numpy((X[:512] / 16.0).astype(np.float32))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X), batch_size=64,
                                         shuffle=not deterministic)

    class VAE(nn.Module):
        def __init__(self, d=64, h=128, z=8):
            super().__init__()
            self.fc1 = nn.Linear(d, h)
            self.fc21 = nn.Linear(h, z)
            self.fc22 = nn.Linear(h, z)
            self.fc3 = nn.Linear(z, h)
            self.fc4 = nn.Linear(h, d)
            self.deterministic = False

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar):
            if self.deterministic:      # comparable runs: a fixed noise pattern instead of randn_like
                eps = torch.linspace(-1, 1, mu.numel()).view_as(mu)
            else:
                eps = torch.randn_like(mu)
            std = torch.exp(0.5 * logvar)
            return mu + eps * std

        def decode(self, z):
            return self.fc4(F.relu(self.fc3(z)))       # logits

        def forward(self, x):
            mu, logvar = self.encode(x.view(-1, 64))
            z = self.reparameterize(mu, logvar)
            return self.decode(z), mu, logvar

    def loss_function(recon_logits, x, mu, logvar):
        bce = F.binary_cross_entropy_with_logits(recon_logits, x.view(-1, 64), reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return bce + kld, bce, kld

    model = VAE()
    model.deterministic = deterministic
    init_state = sync_init(torch, model, init)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    losses, klds = [], []
    for epoch in range(epochs):
        model.train()
        train_loss = 0
        for (data,) in loader:
            optimizer.zero_grad()
            recon, mu, logvar = model(data)
            loss, bce, kld = loss_function(recon, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
            losses.append(loss.item() / len(data))
            klds.append(kld.item() / len(data))
        log(f"epoch {epoch}: average loss {train_loss / len(loader.dataset):.4f}")

    model.eval()
    with torch.no_grad():
        mu, logvar = model.encode(X[:100])
        recon = torch.sigmoid(model.decode(mu))
        recon_err = F.mse_loss(recon, X[:100]).item()
        sample = torch.sigmoid(model.decode(torch.randn(16, 8)))
        assert sample.shape == (16, 64) and bool(((sample >= 0) & (sample <= 1)).all())
        grid = sample.view(16, 1, 8, 8)
    log(f"reconstruction mse {recon_err:.4f}, sample grid {tuple(grid.shape)}")
    return {"losses": losses, "klds": klds, "recon_err": recon_err, "init": init_state}


if __name__ == "__main__":
    main(run)
