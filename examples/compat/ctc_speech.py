"""Sequence labelling without alignments (speech/OCR style): frames of noisy one-hot "sounds" for digit
strings, a Conv1d front end + bidirectional GRU + Linear, log_softmax over classes transposed to
(T, N, C), nn.CTCLoss with per-sample input/target lengths and zero_infinity, Adam with gradient
clipping, and greedy CTC decoding (argmax, unique_consecutive, drop blanks) scored by edit distance.
"""
import numpy as np

from _common import main, sync_init

BLANK, N_CLASSES = 0, 6           # blank + digits 1..5


def make_batch(rng, n, T=20):
    feats = np.zeros((n, T, N_CLASSES), np.float32)
    targets, in_lens, tgt_lens = [], [], []
    for b in range(n):
        L = rng.randint(2, 5)
        labels = rng.randint(1, N_CLASSES, L)
        t, frames = 0, []
        for lab in labels:
            dur = rng.randint(2, 4)
            frames += [lab] * dur + [BLANK] * rng.randint(0, 2)
        frames = frames[:T]
        for t, lab in enumerate(frames):
            feats[b, t, lab] = 1.0
        feats[b] += 0.3 * rng.randn(T, N_CLASSES)
        targets.append(labels)
        in_lens.append(len(frames))
        tgt_lens.append(L)
    flat = np.concatenate(targets)
    return feats, flat, np.array(in_lens), np.array(tgt_lens), targets


def edit_distance(a, b):
    d = np.arange(len(b) + 1)
    for i, x in enumerate(a, 1):
        prev, d[0] = d[0], i
        for j, y in enumerate(b, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (x != y))
    return d[-1]


def run(torch, nn, F, init=None, steps=60, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)

    class Recognizer(nn.Module):
        def __init__(self, hidden=32):
            super().__init__()
            self.conv = nn.Conv1d(N_CLASSES, hidden, kernel_size=3, padding=1)
            self.rnn = nn.GRU(hidden, hidden, batch_first=True, bidirectional=True)
            self.out = nn.Linear(2 * hidden, N_CLASSES)

        def forward(self, x):                      # x: (N, T, F)
            h = F.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
            h, _ = self.rnn(h)
            return self.out(h).log_softmax(-1)     # (N, T, C)

    model = Recognizer()
    init_state = sync_init(torch, model, init)
    ctc = nn.CTCLoss(blank=BLANK, zero_infinity=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for step in range(steps):
        feats, flat, in_lens, tgt_lens, _ = make_batch(rng, 16)
        log_probs = model(torch.from_numpy(feats)).transpose(0, 1)      # (T, N, C)
        loss = ctc(log_probs, torch.from_numpy(flat), torch.from_numpy(in_lens), torch.from_numpy(tgt_lens))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        losses.append(loss.item())

    model.eval()
    feats, flat, in_lens, tgt_lens, targets = make_batch(rng, 16)
    with torch.no_grad():
        best = model(torch.from_numpy(feats)).argmax(-1)
    total, errors, decoded = 0, 0, []
    for b in range(len(targets)):
        path = torch.unique_consecutive(best[b, :in_lens[b]])
        hyp = [int(c) for c in path.tolist() if c != BLANK]
        decoded.append(hyp)
        errors += edit_distance(hyp, list(targets[b]))
        total += len(targets[b])
    cer = errors / total
    log(f"ctc loss {losses[0]:.3f} -> {losses[-1]:.3f}; character error rate {cer:.3f}")
    return {"losses": losses, "cer": cer, "decoded": decoded, "init": init_state}


if __name__ == "__main__":
    main(run)
