"""TensorBoard logging from a training loop (torch.utils.tensorboard.SummaryWriter): per-step
add_scalar, add_scalars of train/val curves, add_histogram of every parameter and its gradient,
add_image of a CHW weight grid and add_images of an NCHW batch, add_text, add_hparams with final
metrics, flush and close via the context manager; the event files are then read back with
tensorboard's EventAccumulator, and the values it returns are the program's output.
"""
import os
import tempfile

import numpy as np
from sklearn.datasets import load_digits

from _common import main, sync_init


def _read(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    found = {}
    for root, _, files in os.walk(log_dir):
        if any(f.startswith("events.out.tfevents") for f in files):
            acc = EventAccumulator(root, size_guidance={"scalars": 0, "histograms": 0, "images": 0, "tensors": 0})
            acc.Reload()
            found[os.path.relpath(root, log_dir)] = acc
    return found


def run(torch, nn, F, init=None, epochs=2, deterministic=False, log=print):
    from importlib import import_module
    SummaryWriter = import_module(torch.__name__ + ".utils.tensorboard").SummaryWriter
    torch.manual_seed(0)
    X, y = load_digits(return_X_y=True)
    X = torch.tensor(X[:256] / 16.0, dtype=torch.float32)
    y = torch.tensor(y[:256])
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X[:192], y[:192]), batch_size=32,
                                         shuffle=not deterministic)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    init_state = sync_init(torch, model, init)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses, step = [], 0
    with tempfile.TemporaryDirectory() as d:
        with SummaryWriter(log_dir=os.path.join(d, "run")) as writer:
            for epoch in range(epochs):
                for xb, yb in loader:
                    loss = F.cross_entropy(model(xb), yb)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    writer.add_scalar("loss/train", loss.item(), step)
                    losses.append(loss.item())
                    step += 1
                with torch.no_grad():
                    val = F.cross_entropy(model(X[192:]), y[192:]).item()
                    acc = (model(X[192:]).argmax(1) == y[192:]).float().mean().item()
                writer.add_scalars("curves", {"train": losses[-1], "val": val}, epoch)
                for name, p in model.named_parameters():
                    writer.add_histogram(name, p, epoch)
                    writer.add_histogram(name + ".grad", p.grad, epoch)
            w = model[0].weight.detach()[:16].view(16, 8, 8)
            grid = torch.cat([torch.cat(list(w[r * 4:(r + 1) * 4]), dim=1) for r in range(4)], dim=0)
            grid = (grid - grid.min()) / (grid.max() - grid.min())
            writer.add_image("weights", grid.unsqueeze(0), step)
            writer.add_images("digits", X[:4].view(4, 1, 8, 8), step)
            writer.add_text("notes", f"final val loss {val:.3f}", step)
            writer.add_hparams({"lr": 0.1, "momentum": 0.9, "hidden": 32}, {"hparam/accuracy": acc})
            writer.flush()
            log_dir = writer.log_dir
        runs = _read(d)
        main_run = runs["run"]
        scalars = [e.value for e in main_run.Scalars("loss/train")]
        steps = [e.step for e in main_run.Scalars("loss/train")]
        hist = main_run.Histograms("0.weight")
        hist_counts = [h.histogram_value.num for h in hist]
        hist_sums = [h.histogram_value.sum for h in hist]
        images = main_run.Images("weights")
        image_size = (images[0].width, images[0].height)
        n_digit_images = len(main_run.Images("digits"))
        text_tags = main_run.Tags().get("tensors", [])
        curve_runs = sorted(k for k in runs if k.startswith("run" + os.sep + "curves"))
        val_curve = [e.value for e in runs[os.path.join("run", "curves_val")].Scalars("curves")]
        hparam_runs = [k for k in runs if k not in curve_runs and k != "run"]
    log(f"logged {len(scalars)} scalars, {len(hist)} histograms, image {image_size}, runs {sorted(runs)}")
    return {"losses": losses, "init": init_state, "scalars": scalars, "steps": steps, "hist_counts": hist_counts,
            "hist_sums": hist_sums, "image_size": image_size, "n_digit_images": n_digit_images,
            "has_text": "notes/text_summary" in text_tags, "curve_runs": [os.path.basename(c) for c in curve_runs],
            "val_curve": val_curve, "n_hparam_runs": len(hparam_runs), "log_dir_named": log_dir.endswith("run")}


if __name__ == "__main__":
    main(run)
