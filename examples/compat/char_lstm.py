"""Character-level LSTM language model (the char-rnn recipe): Embedding -> 2-layer LSTM -> Linear,
cross_entropy over flattened logits, truncated BPTT with the hidden state detached between chunks,
clip_grad_norm_, and sampling with softmax(logits / temperature) + multinomial.
"""

from _common import main, sync_init

TEXT = ("the quick brown fox jumps over the lazy dog. " * 6 +
        "pack my box with five dozen liquor jugs. " * 6 +
        "how vexingly quick daft zebras jump! " * 6)


def run(torch, nn, F, init=None, steps=30, deterministic=False, log=print):
    torch.manual_seed(1)
    chars = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(chars)}
    itos = {i: c for c, i in stoi.items()}
    data = torch.tensor([stoi[c] for c in TEXT], dtype=torch.long)
    vocab, seq_len, batch = len(chars), 24, 8

    class CharLSTM(nn.Module):
        def __init__(self, vocab, emb=16, hidden=48, layers=2, dropout=0.2):
            super().__init__()
            self.embed = nn.Embedding(vocab, emb)
            self.lstm = nn.LSTM(emb, hidden, num_layers=layers, batch_first=True, dropout=dropout)
            self.head = nn.Linear(hidden, vocab)

        def forward(self, idx, state=None):
            out, state = self.lstm(self.embed(idx), state)
            return self.head(out), state

    model = CharLSTM(vocab, dropout=0.0 if deterministic else 0.2)
    init_state = sync_init(torch, model, init)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    n_chunks = (len(data) - 1) // (batch * seq_len)
    # batchify: one contiguous stream per row, as in the word_language_model example
    stream = data[: n_chunks * batch * seq_len + 1]
    inputs = stream[:-1].view(batch, -1)
    targets = stream[1:].view(batch, -1)

    losses, grad_norms = [], []
    state = None
    model.train()
    for step in range(steps):
        j = (step % n_chunks) * seq_len
        if j == 0:
            state = None
        x, y = inputs[:, j:j + seq_len], targets[:, j:j + seq_len]
        if state is not None:
            state = tuple(s.detach() for s in state)    # truncated BPTT
        logits, state = model(x, state)
        loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(float(total_norm))

    @torch.no_grad()
    def sample(prompt, n, temperature=0.8):
        model.eval()
        idx = torch.tensor([[stoi[c] for c in prompt]])
        logits, h = model(idx)
        out = list(prompt)
        for _ in range(n):
            probs = F.softmax(logits[:, -1, :] / temperature, dim=-1)
            nxt = torch.multinomial(probs, num_samples=1)
            out.append(itos[nxt.item()])
            logits, h = model(nxt, h)
        return "".join(out)

    text = sample("the ", 40)
    # the perplexity of the training stream under the trained model (no sampling noise)
    with torch.no_grad():
        logits, _ = model(inputs)
        ppl = torch.exp(F.cross_entropy(logits.transpose(1, 2), targets)).item()
    log(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, perplexity {ppl:.2f}, sample: {text!r}")
    return {"losses": losses, "grad_norms": grad_norms, "ppl": ppl, "sample": text, "init": init_state}


if __name__ == "__main__":
    main(run)
