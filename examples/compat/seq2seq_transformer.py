"""Sequence-to-sequence nn.Transformer on a toy reversal task (the pytorch translation tutorial's
shape): sinusoidal PositionalEncoding as a registered buffer, Embedding scaled by sqrt(d_model),
generate_square_subsequent_mask, src/tgt key-padding masks from PAD tokens, CrossEntropyLoss with
ignore_index and label_smoothing, xavier_uniform_ init over p.dim() > 1, and greedy decoding.
"""
import math

import numpy as np

from _common import main, sync_init

PAD, BOS, EOS = 0, 1, 2


def run(torch, nn, F, init=None, steps=30, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    vocab, d_model = 12, 32

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout, max_len=64):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            position = torch.arange(max_len).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
            pe = torch.zeros(max_len, 1, d_model)
            pe[:, 0, 0::2] = torch.sin(position * div_term)
            pe[:, 0, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe)

        def forward(self, x):            # x: (seq, batch, d_model)
            x = x + self.pe[:x.size(0)]
            return self.dropout(x)

    class Seq2Seq(nn.Module):
        def __init__(self, dropout):
            super().__init__()
            self.src_emb = nn.Embedding(vocab, d_model, padding_idx=PAD)
            self.tgt_emb = nn.Embedding(vocab, d_model, padding_idx=PAD)
            self.pos = PositionalEncoding(d_model, dropout)
            self.transformer = nn.Transformer(d_model=d_model, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                                              dim_feedforward=64, dropout=dropout)
            self.generator = nn.Linear(d_model, vocab)

        def encode(self, src, src_pad):
            return self.transformer.encoder(self.pos(self.src_emb(src) * math.sqrt(d_model)),
                                            src_key_padding_mask=src_pad)

        def decode(self, tgt, memory, tgt_mask, memory_pad=None):
            return self.transformer.decoder(self.pos(self.tgt_emb(tgt) * math.sqrt(d_model)), memory,
                                            tgt_mask=tgt_mask, memory_key_padding_mask=memory_pad)

        def forward(self, src, tgt_in, src_pad, tgt_pad):
            tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(0))
            out = self.transformer(self.pos(self.src_emb(src) * math.sqrt(d_model)),
                                   self.pos(self.tgt_emb(tgt_in) * math.sqrt(d_model)),
                                   tgt_mask=tgt_mask, src_key_padding_mask=src_pad,
                                   tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
            return self.generator(out)

    def make_batch(n, max_len=7):
        lens = rng.randint(3, max_len + 1, n)
        src = np.full((max_len, n), PAD)
        tgt = np.full((max_len + 2, n), PAD)
        for j, L in enumerate(lens):
            toks = rng.randint(3, vocab, L)
            src[:L, j] = toks
            tgt[:L + 2, j] = np.concatenate([[BOS], toks[::-1], [EOS]])
        return torch.tensor(src), torch.tensor(tgt)

    model = Seq2Seq(dropout=0.0 if deterministic else 0.1)
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    init_state = sync_init(torch, model, init)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
    losses = []
    model.train()
    for step in range(steps):
        src, tgt = make_batch(32)
        tgt_in, tgt_out = tgt[:-1, :], tgt[1:, :]
        src_pad = (src == PAD).transpose(0, 1)
        tgt_pad = (tgt_in == PAD).transpose(0, 1)
        logits = model(src, tgt_in, src_pad, tgt_pad)
        optimizer.zero_grad()
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

    def greedy_decode(src, max_len):
        src_pad = (src == PAD).transpose(0, 1)
        memory = model.encode(src, src_pad)
        ys = torch.full((1, src.size(1)), BOS, dtype=torch.long)
        for _ in range(max_len - 1):
            tgt_mask = nn.Transformer.generate_square_subsequent_mask(ys.size(0)).type(torch.bool)
            out = model.decode(ys, memory, tgt_mask, src_pad)
            prob = model.generator(out[-1])
            _, next_word = torch.max(prob, dim=1)
            ys = torch.cat([ys, next_word.unsqueeze(0)], dim=0)
        return ys

    model.eval()
    with torch.no_grad():
        src, tgt = make_batch(8)
        ys = greedy_decode(src, tgt.size(0))
        token_acc = ((ys == tgt) | (tgt == PAD)).float().mean().item()
    log(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, greedy token accuracy {token_acc:.2f}")
    return {"losses": losses, "decoded": ys.tolist(), "init": init_state}


if __name__ == "__main__":
    main(run)
