"""The PyTorch "translation with a sequence to sequence network and attention" tutorial's shape, on a
synthetic task (reverse a digit string and add one to each digit): an EncoderRNN (Embedding + GRU with
batch_first), a Bahdanau-attention decoder (Linear Wa/Ua/Va, scores.squeeze(2).unsqueeze(1),
F.softmax, torch.bmm(weights, keys)), teacher forcing with a per-batch coin flip, decoding step by step
with topk(1) and .detach(), F.log_softmax + nn.NLLLoss over the concatenated outputs, then beam search
with torch.topk over log-probabilities (sorted beams, early finish on EOS) and greedy decoding,
and attention weights collected with torch.cat.
"""
import random

import numpy as np

from _common import main, sync_init

SOS, EOS, PAD = 0, 1, 2
N_TOK = 13       # SOS, EOS, PAD, digits 0-9 as 3..12


def _pairs(rng, n, max_len=5):
    out = []
    for _ in range(n):
        L = rng.randint(2, max_len + 1)
        src = rng.randint(0, 10, L)
        tgt = (src[::-1] + 1) % 10
        out.append((list(src + 3) + [EOS], list(tgt + 3) + [EOS]))
    return out


def run(torch, nn, F, init=None, steps=25, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    rnd = random.Random(0)
    hidden, max_len = 32, 7

    class EncoderRNN(nn.Module):
        def __init__(self, input_size, hidden_size, dropout_p=0.1):
            super().__init__()
            self.embedding = nn.Embedding(input_size, hidden_size)
            self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
            self.dropout = nn.Dropout(dropout_p)

        def forward(self, input):
            embedded = self.dropout(self.embedding(input))
            return self.gru(embedded)

    class BahdanauAttention(nn.Module):
        def __init__(self, hidden_size):
            super().__init__()
            self.Wa = nn.Linear(hidden_size, hidden_size)
            self.Ua = nn.Linear(hidden_size, hidden_size)
            self.Va = nn.Linear(hidden_size, 1)

        def forward(self, query, keys):
            scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
            scores = scores.squeeze(2).unsqueeze(1)
            weights = F.softmax(scores, dim=-1)
            context = torch.bmm(weights, keys)
            return context, weights

    class AttnDecoderRNN(nn.Module):
        def __init__(self, hidden_size, output_size, dropout_p=0.1):
            super().__init__()
            self.embedding = nn.Embedding(output_size, hidden_size)
            self.attention = BahdanauAttention(hidden_size)
            self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
            self.out = nn.Linear(hidden_size, output_size)
            self.dropout = nn.Dropout(dropout_p)

        def forward_step(self, input, hidden, encoder_outputs):
            embedded = self.dropout(self.embedding(input))
            query = hidden.permute(1, 0, 2)
            context, attn_weights = self.attention(query, encoder_outputs)
            input_gru = torch.cat((embedded, context), dim=2)
            output, hidden = self.gru(input_gru, hidden)
            return self.out(output), hidden, attn_weights

        def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
            batch_size = encoder_outputs.size(0)
            decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS)
            decoder_hidden = encoder_hidden
            decoder_outputs, attentions = [], []
            for i in range(max_len):
                decoder_output, decoder_hidden, attn_weights = self.forward_step(decoder_input, decoder_hidden,
                                                                                  encoder_outputs)
                decoder_outputs.append(decoder_output)
                attentions.append(attn_weights)
                if target_tensor is not None:
                    decoder_input = target_tensor[:, i].unsqueeze(1)        # teacher forcing
                else:
                    _, topi = decoder_output.topk(1)
                    decoder_input = topi.squeeze(-1).detach()
            decoder_outputs = F.log_softmax(torch.cat(decoder_outputs, dim=1), dim=-1)
            return decoder_outputs, decoder_hidden, torch.cat(attentions, dim=1)

    def to_tensor(seqs):
        out = np.full((len(seqs), max_len), PAD, np.int64)
        for i, s in enumerate(seqs):
            out[i, :len(s)] = s
        return torch.from_numpy(out)

    encoder, decoder = EncoderRNN(N_TOK, hidden), AttnDecoderRNN(hidden, N_TOK)
    if deterministic:
        encoder.dropout.p = decoder.dropout.p = 0.0
    init_state = sync_init(torch, nn.ModuleDict({"enc": encoder, "dec": decoder}), init)
    enc_opt = torch.optim.Adam(encoder.parameters(), lr=5e-3)
    dec_opt = torch.optim.Adam(decoder.parameters(), lr=5e-3)
    criterion = nn.NLLLoss(ignore_index=PAD)
    train = _pairs(rng, 64 * 4)
    losses = []
    for step in range(steps):
        batch = train[(step % 4) * 64:(step % 4 + 1) * 64]
        src, tgt = to_tensor([p[0] for p in batch]), to_tensor([p[1] for p in batch])
        enc_opt.zero_grad()
        dec_opt.zero_grad()
        encoder_outputs, encoder_hidden = encoder(src)
        teacher = True if deterministic else rnd.random() < 0.5
        decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, tgt if teacher else None)
        loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), tgt.view(-1))
        loss.backward()
        enc_opt.step()
        dec_opt.step()
        losses.append(loss.item())
        if step % 5 == 0:
            log(f"step {step}: loss {loss.item():.4f}")

    encoder.eval()
    decoder.eval()
    test = _pairs(np.random.RandomState(5), 6)

    def beam_search(src_seq, beam=3):
        with torch.no_grad():
            enc_out, enc_h = encoder(to_tensor([src_seq])[:, :len(src_seq)])
            beams = [(0.0, [SOS], enc_h)]
            finished = []
            for _ in range(max_len):
                candidates = []
                for score, seq, h in beams:
                    out, h2, _ = decoder.forward_step(torch.tensor([[seq[-1]]]), h, enc_out)
                    logp = F.log_softmax(out[0, -1], dim=-1)
                    top_lp, top_ix = torch.topk(logp, beam)
                    for lp, ix in zip(top_lp.tolist(), top_ix.tolist()):
                        candidates.append((score + lp, seq + [ix], h2))
                candidates.sort(key=lambda c: c[0], reverse=True)
                beams = []
                for c in candidates[:beam]:
                    (finished if c[1][-1] == EOS else beams).append(c)
                if not beams:
                    break
            best = max(finished + beams, key=lambda c: c[0] / len(c[1]))
            return best[1][1:], round(best[0], 4)

    with torch.no_grad():
        src = to_tensor([p[0] for p in test])
        enc_out, enc_h = encoder(src)
        greedy_out, _, attn = decoder(enc_out, enc_h)
        greedy = greedy_out.argmax(-1).tolist()
    beams = [beam_search(p[0]) for p in test]
    exact = sum(b[0] == p[1] for b, p in zip(beams, test))
    log(f"beam search exact matches: {exact}/{len(test)}")
    return {"losses": losses, "greedy": greedy, "beam_seqs": [b[0] for b in beams],
            "beam_scores": [b[1] for b in beams], "attn_sum": attn.sum(-1).tolist(), "exact": exact,
            "init": init_state}


if __name__ == "__main__":
    main(run)
