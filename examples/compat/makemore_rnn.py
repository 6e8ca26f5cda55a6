"""A makemore-style character model of names with hand-written recurrent cells: a vanilla RNN cell
(``tanh(W [x, h])``) and a GRU cell (reset/update gates, candidate state) written from nn.Linear, a
learned start state expanded over the batch, targets padded with -1 and ignored by cross_entropy
(ignore_index=-1), AdamW with weight decay, a loss evaluated under torch.inference_mode, and names
sampled one character at a time (greedy argmax when deterministic, torch.multinomial otherwise).
"""
from _common import main, sync_init

NAMES = ("emma olivia ava isabella sophia mia charlotte amelia harper evelyn abigail emily ella elizabeth "
         "camila luna sofia avery mila aria scarlett penelope layla chloe victoria madison eleanor grace nora "
         "riley zoey hannah hazel lily ellie violet lillian zoe stella aurora natalie emilia everly leah "
         "aubrey willow addison lucy audrey bella nova brooklyn paisley savannah claire skylar isla").split()


def run(torch, nn, F, init=None, steps=30, deterministic=False, log=print):
    torch.manual_seed(0)
    chars = sorted(set("".join(NAMES)))
    stoi = {ch: i + 1 for i, ch in enumerate(chars)}  # 0: the <START>/<STOP> token
    itos = {i: s for s, i in stoi.items()}
    vocab_size, block_size = len(chars) + 1, max(len(w) for w in NAMES) + 1

    def encode(word):
        ix = torch.zeros(block_size + 1, dtype=torch.long)
        iy = torch.zeros(block_size + 1, dtype=torch.long)
        ix[1:1 + len(word)] = torch.tensor([stoi[c] for c in word])
        iy[:len(word)] = ix[1:1 + len(word)]
        iy[len(word) + 1:] = -1  # masked: no loss past the end token
        return ix, iy

    pairs = [encode(w) for w in NAMES]
    X = torch.stack([p[0] for p in pairs])
    Y = torch.stack([p[1] for p in pairs])

    class RNNCell(nn.Module):
        def __init__(self, n_embd, n_embd2):
            super().__init__()
            self.xh_to_h = nn.Linear(n_embd + n_embd2, n_embd2)

        def forward(self, xt, hprev):
            return F.tanh(self.xh_to_h(torch.cat([xt, hprev], dim=1)))

    class GRUCell(nn.Module):
        def __init__(self, n_embd, n_embd2):
            super().__init__()
            self.xh_to_z = nn.Linear(n_embd + n_embd2, n_embd2)
            self.xh_to_r = nn.Linear(n_embd + n_embd2, n_embd2)
            self.xh_to_hbar = nn.Linear(n_embd + n_embd2, n_embd2)

        def forward(self, xt, hprev):
            xh = torch.cat([xt, hprev], dim=1)
            r = F.sigmoid(self.xh_to_r(xh))
            xhr = torch.cat([xt, r * hprev], dim=1)
            hbar = F.tanh(self.xh_to_hbar(xhr))
            z = F.sigmoid(self.xh_to_z(xh))
            return (1 - z) * hprev + z * hbar

    class RNN(nn.Module):
        def __init__(self, cell_type, n_embd=12, n_embd2=24):
            super().__init__()
            self.start = nn.Parameter(torch.zeros(1, n_embd2))
            self.wte = nn.Embedding(vocab_size, n_embd)
            self.cell = RNNCell(n_embd, n_embd2) if cell_type == "rnn" else GRUCell(n_embd, n_embd2)
            self.lm_head = nn.Linear(n_embd2, vocab_size)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            emb = self.wte(idx)
            hprev = self.start.expand((b, -1))
            hiddens = []
            for i in range(t):
                hprev = self.cell(emb[:, i, :], hprev)
                hiddens.append(hprev)
            logits = self.lm_head(torch.stack(hiddens, 1))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

    @torch.no_grad()
    def generate(model, n):
        idx = torch.zeros(n, 1, dtype=torch.long)
        for _ in range(block_size):
            logits, _ = model(idx)
            probs = F.softmax(logits[:, -1, :], dim=-1)
            nxt = probs.argmax(-1, keepdim=True) if deterministic else torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, nxt), dim=1)
        out = []
        for row in idx[:, 1:].tolist():
            out.append("".join(itos[i] for i in row[:row.index(0)] if i) if 0 in row else "".join(itos[i] for i in row))
        return out

    losses, inits, evals, samples = [], {}, {}, {}
    for kind in ("rnn", "gru"):
        model = RNN(kind)
        inits[kind] = sync_init(torch, model, None if init is None else init[kind])
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)
        for step in range(steps):
            ix = torch.arange(16) + (step * 16) % (len(NAMES) - 16) if deterministic else torch.randint(0, len(NAMES), (16,))
            _, loss = model(X[ix], Y[ix])
            model.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        with torch.inference_mode():
            evals[kind] = model(X, Y)[1].item()
        samples[kind] = generate(model, 5)
        log(f"{kind}: train loss {losses[-1]:.4f}, full loss {evals[kind]:.4f}, samples {samples[kind]}")
    return {"losses": losses, "init": inits, "evals": evals, "samples": samples if deterministic else None}


if __name__ == "__main__":
    main(run)
