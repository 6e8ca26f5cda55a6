"""An orthogonal RNN on the adding problem (sum the two marked numbers of a sequence), written with
torch.nn.utils.parametrize the way expRNN-style code is:

- the recurrent matrix is ``parametrizations.orthogonal`` (matrix exponential of a skew-symmetric matrix on
  top of an orthogonal base), the tall input projection uses the Householder map, the readout is
  ``parametrizations.spectral_norm`` and a gate uses ``parametrizations.weight_norm``;
- the unrolled loop evaluates the parametrizations once per step batch inside ``parametrize.cached()``;
- a user-written parametrization (a symmetric matrix from its upper triangle, with ``right_inverse``) is
  stacked on another layer and assigned to;
- after training, ``remove_parametrizations`` bakes the weights in and the outputs stay the same; the
  recurrent weight stays orthogonal throughout.
"""
import numpy as np

from _common import main, sync_init


def _batch(rng, n, T):
    vals = rng.uniform(0, 1, (n, T))
    marks = np.zeros((n, T))
    for i in range(n):
        a, b = rng.choice(T, 2, replace=False)
        marks[i, a] = marks[i, b] = 1
    x = np.stack([vals, marks], -1).astype(np.float32)
    return x, (vals * marks).sum(1, keepdims=True).astype(np.float32)


def run(torch, nn, F, init=None, steps=30, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    P = nn.utils.parametrize
    T, hid = 8, 16

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    class ORNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(2, hid, bias=False)
            self.rec = nn.Linear(hid, hid, bias=False)
            self.gate = nn.Linear(hid, hid)
            self.mix = nn.Linear(hid, hid, bias=False)
            self.out = nn.Linear(hid, 1)
            nn.utils.parametrizations.orthogonal(self.rec)
            nn.utils.parametrizations.orthogonal(self.inp, orthogonal_map="householder")
            nn.utils.parametrizations.weight_norm(self.gate)
            nn.utils.parametrizations.spectral_norm(self.out)
            P.register_parametrization(self.mix, "weight", Symmetric())

        def forward(self, x):
            h = x.new_zeros(x.size(0), hid)
            with P.cached():
                for t in range(x.size(1)):
                    pre = self.inp(x[:, t]) + self.rec(h)
                    h = torch.tanh(pre) * torch.sigmoid(self.gate(h)) + 0.1 * self.mix(h)
            return self.out(h)

    model = ORNN()
    with torch.no_grad():
        model.mix.weight = 0.1 * torch.eye(hid)          # through Symmetric.right_inverse
    init_state = sync_init(torch, model, init)
    keys = sorted(model.state_dict().keys())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    xs, ys = _batch(rng, 64, T)
    x, y = torch.from_numpy(xs), torch.from_numpy(ys)
    losses, orth = [], []
    for step in range(steps):
        if not deterministic:
            xb, yb = (torch.from_numpy(a) for a in _batch(rng, 64, T))
        else:
            xb, yb = x, y
        loss = F.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        with torch.no_grad():
            W = model.rec.weight
            orth.append(float((W.T @ W - torch.eye(hid)).abs().max()))
    model.eval()
    with torch.no_grad():
        before = model(x)
        sym_err = float((model.mix.weight - model.mix.weight.T).abs().max())
        for layer in (model.rec, model.inp, model.gate, model.out, model.mix):
            P.remove_parametrizations(layer, "weight")
        after = model(x)
    log(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}, max |W^T W - I| {max(orth):.2e}")
    return {"losses": losses, "keys": keys, "orth_ok": max(orth) < 1e-4, "sym_err": sym_err,
            "same_after_remove": float((before - after).abs().max()) < 1e-5,
            "plain_class": type(model.rec).__name__, "pred": before[:4, 0].tolist(), "init": init_state}


if __name__ == "__main__":
    main(run)
