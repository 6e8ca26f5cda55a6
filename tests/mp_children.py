"""Functions that tests/test_multiprocessing.py runs in child processes (importable by name: the spawn
start method pickles them by reference). Only ember and NumPy are imported, to keep children quick."""
import os
import sys

import ember


def write_rank(i, out_dir, scale):
    """Child i writes a tensor built from its rank; the parent checks every file."""
    t = ember.arange(4, dtype=ember.float64) * scale + i
    ember.save({"rank": i, "t": t}, os.path.join(out_dir, f"rank{i}.pt"))


def fail_on_one(i):
    if i == 1:
        raise ValueError(f"child {i} refuses: bad shard")


def exit_with(i, code):
    if i == 0:
        sys.exit(code)


def kill_self(i):
    if i == 0:
        os.kill(os.getpid(), 9)


def double_through_queues(inq, outq):
    """Read tensors from ``inq`` until None; put each doubled (and the original's metadata) on ``outq``."""
    while True:
        item = inq.get()
        if item is None:
            break
        outq.put((item * 2, item.dtype, tuple(item.shape), item.requires_grad, type(item).__name__))
