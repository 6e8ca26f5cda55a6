"""torch.cuda's memory statistics (``memory_stats`` keys) for an OpenCL device's caching allocator.

What the keys mean here: "allocated"/"active" bytes are the size-class-rounded blocks of live device
arrays ("requested" is the same rounded figure: the requests' exact sizes are not kept), "reserved"
bytes are what the allocator holds from the driver (live + cached); "allocation"/"active" count live
blocks, "segment" counts driver buffers held (its peak is not tracked: it reports the current count).
There is one pool ("all"): blocks are never split, so the split and oversize counters are 0.
"""
from __future__ import annotations

import collections

from ._device_runtime import _existing, _runtime


def torch_memory_stats(device=None) -> "collections.OrderedDict[str, int]":
    rt = _existing(device) or _runtime(device)
    with rt.lock:
        st = dict(rt.stats)
        alloc, cached, blocks = rt.allocated, rt.cached, rt.blocks
        segments = blocks + sum(len(b) for b in rt.free.values())
    out = {}
    live = (alloc, st["peak_allocated_bytes"], st["allocated_bytes_total"], st["freed_bytes_total"])
    held = (alloc + cached, st["peak_driver_bytes"], st["driver_bytes_total"], st["driver_freed_bytes_total"])
    count = (blocks, st["peak_blocks"], st["num_allocs"], st["num_frees"])
    seg = (segments, segments, st["num_driver_allocs"], st["num_driver_frees"])
    for key, vals in (("allocated_bytes", live), ("active_bytes", live), ("requested_bytes", live),
                      ("reserved_bytes", held), ("allocation", count), ("active", count), ("segment", seg)):
        out.update({f"{key}.all.{k}": int(v) for k, v in zip(("current", "peak", "allocated", "freed"), vals)})
    for key in ("inactive_split", "inactive_split_bytes", "oversize_allocations", "oversize_segments"):
        out.update({f"{key}.all.{k}": 0 for k in ("current", "peak", "allocated", "freed")})
    out.update({"num_alloc_retries": st["num_alloc_retries"], "num_ooms": st["num_ooms"], "num_sync_all_streams": 0,
                "num_device_alloc": st["num_driver_allocs"], "num_device_free": st["num_driver_frees"],
                "max_split_size": -1})
    return collections.OrderedDict(sorted(out.items()))
