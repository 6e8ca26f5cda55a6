"""Saving and loading whole models, as many training scripts do: ``torch.save(model, path)`` of an
nn.Sequential (with BatchNorm running statistics and an LSTM inside a ModuleDict), a checkpoint dict
holding the model object itself next to the optimizer's state and the epoch, ``torch.load(...,
weights_only=False)`` to resume, ``torch.serialization.safe_globals([...])`` / ``add_safe_globals`` to
load the same file with weights_only=True, and a weights-only load that refuses an unlisted class.
"""
import os
import pickle
import tempfile

import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=2, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    X = torch.from_numpy(rng.randn(96, 5, 4).astype(np.float32))
    y = torch.from_numpy((rng.rand(96) * 3).astype(np.int64))

    model = nn.ModuleDict({
        "rnn": nn.LSTM(4, 8, batch_first=True),
        "head": nn.Sequential(nn.Linear(8, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.0), nn.Linear(16, 3)),
    })
    init_state = sync_init(torch, model, init)

    def forward(m, xb):
        out, _ = m["rnn"](xb)
        return m["head"](out[:, -1])

    def train(m, opt, losses):
        m.train()
        for k in range(0, 96, 16):
            loss = F.cross_entropy(forward(m, X[k:k + 16]), y[k:k + 16])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())

    losses = []
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tempfile.TemporaryDirectory() as d:
        for epoch in range(epochs):
            train(model, opt, losses)
            torch.save({"epoch": epoch, "model": model, "optimizer": opt.state_dict()}, os.path.join(d, "ckpt.pt"))
        model.eval()
        with torch.no_grad():
            ref = forward(model, X[:8])
        torch.save(model, os.path.join(d, "model.pt"))

        whole = torch.load(os.path.join(d, "model.pt"), weights_only=False)
        with torch.no_grad():
            same_whole = bool(torch.equal(forward(whole, X[:8]), ref))
        classes = [nn.ModuleDict, nn.LSTM, nn.Sequential, nn.Linear, nn.BatchNorm1d, nn.ReLU, nn.Dropout]
        with torch.serialization.safe_globals(classes):
            safe = torch.load(os.path.join(d, "model.pt"), weights_only=True)
        with torch.no_grad():
            same_safe = bool(torch.equal(forward(safe, X[:8]), ref))
        try:
            torch.load(os.path.join(d, "model.pt"), weights_only=True)
            refused = None
        except pickle.UnpicklingError as e:
            refused = "ModuleDict" in str(e)

        ckpt = torch.load(os.path.join(d, "ckpt.pt"), weights_only=False)
        resumed = ckpt["model"]
        opt2 = torch.optim.Adam(resumed.parameters(), lr=1e-2)
        opt2.load_state_dict(ckpt["optimizer"])
        train(resumed, opt2, losses)  # one more epoch from the checkpoint
        running_mean = resumed["head"][1].running_mean.tolist()
        stats = {"epoch": ckpt["epoch"], "num_batches_tracked": resumed["head"][1].num_batches_tracked.item(),
                 "types": [type(m).__name__ for m in resumed.modules()],
                 "training": [m.training for m in whole.modules()]}
    log(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}; reloaded whole model same outputs: {same_whole}, "
        f"weights_only with safe_globals: {same_safe}; refused without: {refused}")
    return {"losses": losses, "init": init_state, "same_whole": same_whole, "same_safe": same_safe,
            "refused": refused, "stats": stats, "ref": ref.tolist(), "running_mean": running_mean}


if __name__ == "__main__":
    main(run)
