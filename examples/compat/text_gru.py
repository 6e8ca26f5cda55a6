"""Variable-length text classification with a bidirectional GRU (the "packed sequence" recipe): a
Dataset of Python lists, a custom collate_fn with pad_sequence, pack_padded_sequence /
pad_packed_sequence (enforce_sorted=False), final hidden states of both directions concatenated,
CrossEntropyLoss with class weights, RMSprop, ExponentialLR chained after a LinearLR warmup with
SequentialLR, a WeightedRandomSampler for the class imbalance, and precision/recall from a
confusion matrix accumulated with index_put_(accumulate=True).
"""
import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=3, deterministic=False, log=print):
    torch.manual_seed(0)
    rnn_utils = torch.nn.utils.rnn
    rng = np.random.RandomState(1)
    V, n_cls = 20, 3

    def make_example():
        L = rng.randint(3, 12)
        toks = rng.randint(1, V, L)
        label = 0 if toks.mean() < 8 else (1 if toks.mean() < 11 else 2)
        return toks.tolist(), label

    class SeqDataset(torch.utils.data.Dataset):
        def __init__(self, n):
            self.items = [make_example() for _ in range(n)]

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            toks, label = self.items[i]
            return torch.tensor(toks, dtype=torch.long), label

    def collate(batch):
        seqs, labels = zip(*batch)
        lengths = torch.tensor([len(s) for s in seqs])
        padded = rnn_utils.pad_sequence(list(seqs), batch_first=True, padding_value=0)
        return padded, lengths, torch.tensor(labels)

    train_ds, test_ds = SeqDataset(240), SeqDataset(60)
    counts = np.bincount([lab for _, lab in train_ds.items], minlength=n_cls)
    if deterministic:
        loader = torch.utils.data.DataLoader(train_ds, batch_size=24, collate_fn=collate)
    else:
        sample_w = [1.0 / counts[lab] for _, lab in train_ds.items]
        sampler = torch.utils.data.WeightedRandomSampler(sample_w, num_samples=len(train_ds), replacement=True)
        loader = torch.utils.data.DataLoader(train_ds, batch_size=24, sampler=sampler, collate_fn=collate)
    test_loader = torch.utils.data.DataLoader(test_ds, batch_size=30, collate_fn=collate)

    class GRUClassifier(nn.Module):
        def __init__(self, vocab, emb=16, hidden=24):
            super().__init__()
            self.emb = nn.Embedding(vocab, emb, padding_idx=0)
            self.gru = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(2 * hidden, n_cls)

        def forward(self, x, lengths):
            packed = rnn_utils.pack_padded_sequence(self.emb(x), lengths.cpu(), batch_first=True,
                                                    enforce_sorted=False)
            out, h = self.gru(packed)
            out, out_lens = rnn_utils.pad_packed_sequence(out, batch_first=True)
            assert torch.equal(out_lens, lengths)
            h = torch.cat([h[-2], h[-1]], dim=1)            # last layer, both directions
            return self.fc(h)

    model = GRUClassifier(V)
    init_state = sync_init(torch, model, init)
    class_w = torch.tensor(counts.sum() / (n_cls * counts), dtype=torch.float32)
    criterion = nn.CrossEntropyLoss(weight=class_w)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=5e-3, alpha=0.9)
    warm = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.2, total_iters=3)
    decay = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.95)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, schedulers=[warm, decay], milestones=[3])
    losses, lrs = [], []
    for epoch in range(epochs):
        model.train()
        for x, lengths, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x, lengths), y)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            lrs.append(optimizer.param_groups[0]["lr"])

    model.eval()
    confusion = torch.zeros(n_cls, n_cls, dtype=torch.long)
    with torch.no_grad():
        for x, lengths, y in test_loader:
            pred = model(x, lengths).argmax(1)
            confusion.index_put_((y, pred), torch.ones_like(y), accumulate=True)
    tp = confusion.diag().float()
    precision = tp / confusion.sum(0).clamp(min=1)
    recall = tp / confusion.sum(1).clamp(min=1)
    f1 = (2 * precision * recall / (precision + recall).clamp(min=1e-8)).mean().item()
    log(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; confusion {confusion.tolist()}; macro F1 {f1:.3f}")
    return {"losses": losses, "lrs": lrs, "confusion": confusion.tolist(), "init": init_state}


if __name__ == "__main__":
    main(run)
