"""Word-level language models (pytorch/examples' word_language_model): a corpus tokenised into a
dictionary, batchify into columns, get_batch with a bptt window; an LSTM model and a Transformer model,
both with the decoder's weight tied to the encoder's (``decoder.weight = encoder.weight``), sinusoidal
PositionalEncoding in a registered buffer, nn.Transformer.generate_square_subsequent_mask, hidden state
repackaged by detach between windows, clip_grad_norm_, the manual SGD update ``p.data.add_(p.grad,
alpha=-lr)``, lr annealing on a worse validation loss, and perplexity with math.exp.
"""
import math

from _common import main, sync_init

TEXT = ("the cat sat on the mat . the dog sat on the log . a cat and a dog met on the mat . "
        "the dog saw the cat . the cat saw a bird on the log . a bird sat on the dog . "
        "the mat was red and the log was brown . a red bird and a brown dog sat together . ") * 3


def run(torch, nn, F, init=None, epochs=2, deterministic=False, log=print):
    torch.manual_seed(0)
    words = TEXT.split()
    vocab = {}
    for w in words:
        vocab.setdefault(w, len(vocab))
    ids = torch.tensor([vocab[w] for w in words], dtype=torch.long)
    ntokens = len(vocab)
    split = int(len(ids) * 0.8)

    def batchify(data, bsz):
        nbatch = data.size(0) // bsz
        return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()

    train_data, val_data = batchify(ids[:split], 4), batchify(ids[split:], 2)
    bptt = 8

    def get_batch(source, i):
        seq_len = min(bptt, len(source) - 1 - i)
        return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)

    class RNNModel(nn.Module):
        def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
            super().__init__()
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            self.decoder.weight = self.encoder.weight  # tied: nhid == ninp
            nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)
            self.nhid, self.nlayers = nhid, nlayers

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            decoded = self.decoder(self.drop(output)).view(-1, self.decoder.out_features)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=64):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

        def forward(self, x):
            return self.dropout(x + self.pe[:x.size(0), :])

    class TransformerModel(nn.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.2):
            super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers,
                             dropout=dropout)
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            self.input_emb = nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn.Linear(ninp, ntoken)
            self.decoder.weight = self.input_emb.weight  # tied
            nn.init.uniform_(self.input_emb.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)

        def forward(self, src, has_mask=True):
            if has_mask:
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    self.src_mask = nn.Transformer.generate_square_subsequent_mask(len(src))
            else:
                self.src_mask = None
            src = self.pos_encoder(self.input_emb(src) * math.sqrt(self.ninp))
            output = self.encoder(src, mask=self.src_mask)
            return F.log_softmax(self.decoder(output), dim=-1)

    def repackage_hidden(h):
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    criterion = nn.NLLLoss()
    losses, inits, ppl, tied, lrs = [], {}, {}, {}, {}
    for kind in ("lstm", "transformer"):
        torch.manual_seed(1)
        dropout = 0.0 if deterministic else 0.2
        model = (RNNModel(ntokens, 16, 16, 2, dropout) if kind == "lstm"
                 else TransformerModel(ntokens, 16, 2, 32, 2, dropout))
        inits[kind] = sync_init(torch, model, None if init is None else init[kind])
        tied[kind] = model.decoder.weight is (model.encoder.weight if kind == "lstm" else model.input_emb.weight)
        n_params = sum(p.numel() for p in model.parameters())
        lr, best_val = 2.0 if kind == "lstm" else 0.5, None

        def evaluate(source):
            model.eval()
            total = 0.0
            hidden = model.init_hidden(2) if kind == "lstm" else None
            with torch.no_grad():
                for i in range(0, source.size(0) - 1, bptt):
                    data, targets = get_batch(source, i)
                    if kind == "lstm":
                        output, hidden = model(data, hidden)
                        hidden = repackage_hidden(hidden)
                    else:
                        output = model(data).view(-1, ntokens)
                    total += len(data) * criterion(output, targets).item()
            return total / (len(source) - 1)

        for epoch in range(epochs):
            model.train()
            hidden = model.init_hidden(4) if kind == "lstm" else None
            for i in range(0, train_data.size(0) - 1, bptt):
                data, targets = get_batch(train_data, i)
                model.zero_grad()
                if kind == "lstm":
                    hidden = repackage_hidden(hidden)
                    output, hidden = model(data, hidden)
                else:
                    output = model(data).view(-1, ntokens)
                loss = criterion(output, targets)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
                for p in model.parameters():
                    p.data.add_(p.grad, alpha=-lr)
                losses.append(loss.item())
            val_loss = evaluate(val_data)
            if best_val is None or val_loss < best_val:
                best_val = val_loss
            else:
                lr /= 4.0
            log(f"{kind} epoch {epoch}: val loss {val_loss:.3f}, ppl {math.exp(val_loss):.2f}, lr {lr}")
        ppl[kind] = math.exp(val_loss)
        lrs[kind] = lr
        log(f"{kind}: {n_params} parameters (tied: {tied[kind]})")
    return {"losses": losses, "init": inits, "ppl": ppl, "tied": tied, "lrs": lrs}


if __name__ == "__main__":
    main(run)
