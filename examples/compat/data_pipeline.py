"""The torch.utils.data toolbox around a small classifier: a map-style Dataset returning dicts, an
IterableDataset that shards its stream across DataLoader workers with get_worker_info, ConcatDataset /
ChainDataset / StackDataset / Subset, SubsetRandomSampler with a seeded torch.Generator, a custom
BatchSampler that buckets by length, default_collate on dicts / tuples / NumPy arrays / numbers,
collate_fn with padding, len(loader), drop_last, num_workers with persistent workers and
prefetch_factor, and a training loop that consumes the dict batches.
"""
import math

import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=3, deterministic=False, log=print):
    data = torch.utils.data
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    feats = rng.randn(120, 6).astype(np.float32)
    labels = (feats[:, 0] + feats[:, 1] * feats[:, 2] > 0).astype(np.int64)

    class DictDataset(data.Dataset):
        def __init__(self, lo, hi):
            self.lo, self.hi = lo, hi

        def __len__(self):
            return self.hi - self.lo

        def __getitem__(self, i):
            j = self.lo + i
            return {"x": feats[j], "y": int(labels[j]), "meta": (j, float(feats[j, 0]))}

    class Stream(data.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            info = data.get_worker_info()
            start, step = (0, 1) if info is None else (info.id, info.num_workers)
            for i in range(start, self.n, step):
                yield torch.from_numpy(feats[i]), torch.tensor(labels[i])

    a, b = DictDataset(0, 60), DictDataset(60, 100)
    both = data.ConcatDataset([a, b])
    assert len(both) == 100 and both[75]["meta"][0] == 75
    batch = data.default_collate([both[0], both[1], both[2]])
    collated = {"x": tuple(batch["x"].shape), "y": batch["y"].tolist(), "meta0": batch["meta"][0].tolist(),
                "meta1_dtype": str(batch["meta"][1].dtype).split(".")[-1]}
    stacked = data.StackDataset(data.TensorDataset(torch.from_numpy(feats)), data.TensorDataset(torch.from_numpy(labels)))
    assert len(stacked) == 120 and int(stacked[3][1][0]) == labels[3]
    chain = data.ChainDataset([Stream(10), Stream(5)])
    n_chain = sum(1 for _ in chain)

    # length-bucketed batches: indices sorted by a key, chunked, batch order shuffled with a generator
    class BucketBatchSampler(data.Sampler):
        def __init__(self, keys, batch_size, generator=None, shuffle=True):
            self.keys, self.batch_size, self.generator, self.shuffle = keys, batch_size, generator, shuffle

        def __iter__(self):
            order = sorted(range(len(self.keys)), key=lambda i: self.keys[i])
            batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
            if self.shuffle:
                perm = torch.randperm(len(batches), generator=self.generator).tolist()
                batches = [batches[p] for p in perm]
            return iter(batches)

        def __len__(self):
            return math.ceil(len(self.keys) / self.batch_size)

    keys = [abs(float(v)) for v in feats[:100, 0]]
    g = torch.Generator().manual_seed(1)
    bucket_loader = data.DataLoader(both, batch_sampler=BucketBatchSampler(keys, 16, g, shuffle=not deterministic))
    assert len(bucket_loader) == 7

    if deterministic:
        train_loader = data.DataLoader(both, batch_size=16, drop_last=True)
        stream_loader = data.DataLoader(Stream(100), batch_size=20)
    else:
        sampler = data.SubsetRandomSampler(list(range(100)), generator=torch.Generator().manual_seed(0))
        train_loader = data.DataLoader(both, batch_size=16, sampler=sampler, drop_last=True, num_workers=2,
                                       persistent_workers=True, prefetch_factor=2)
        stream_loader = data.DataLoader(Stream(100), batch_size=20, num_workers=2)
    n_batches = len(train_loader)
    stream_seen = sorted(int(i) for xb, yb in stream_loader for i in (xb[:, 0] * 0 + 1).nonzero().view(-1).shape)

    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 2))
    init_state = sync_init(torch, model, init)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for epoch in range(epochs):
        for loader in (train_loader, bucket_loader):
            for batch in loader:
                x, y = batch["x"], batch["y"]
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
        for xb, yb in stream_loader:
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    with torch.no_grad():
        acc = (model(torch.from_numpy(feats[100:])).argmax(1) == torch.from_numpy(labels[100:])).float().mean().item()
    log(f"{n_batches} train batches, chain {n_chain}, loss {losses[0]:.3f} -> {losses[-1]:.3f}, accuracy {acc:.2f}")
    return {"losses": losses, "collated": collated, "n_chain": n_chain, "n_batches": n_batches, "acc": acc,
            "stream_seen": len(stream_seen), "init": init_state}


if __name__ == "__main__":
    main(run)
