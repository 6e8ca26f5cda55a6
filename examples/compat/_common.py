"""Shared glue for the compat programs: pick the library (torch or ember) and sync initial weights.

Each program in this folder is written once as ``run(torch, nn, F, ...)`` so the very same code runs
under PyTorch and under ember (``import ember as torch``). ``init`` lets a test start both runs from the
same weights: a run given ``init=None`` records its initial state_dict as NumPy arrays; a run given
that dict loads it before training.
"""
import importlib
import sys


def load_lib(name="ember"):
    """``import <name> as torch; import <name>.nn as nn; import <name>.nn.functional as F``."""
    torch = importlib.import_module(name)
    nn = importlib.import_module(name + ".nn")
    F = importlib.import_module(name + ".nn.functional")
    return torch, nn, F


def sync_init(torch, model, init):
    """Load ``init`` (a dict of NumPy arrays) into ``model`` if given; return the model's state as NumPy."""
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    return {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


def main(run):
    """Command line: ``python prog.py [torch|ember]`` (default ember)."""
    lib = sys.argv[1] if len(sys.argv) > 1 else "ember"
    out = run(*load_lib(lib))
    losses = out.get("losses", [])
    print(f"[{lib}] first loss {losses[0]:.4f}  last loss {losses[-1]:.4f}" if losses else f"[{lib}] done")
