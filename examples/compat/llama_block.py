"""A tiny LLaMA-style language model in the shape of the public llama / nanoGPT-derived code: rotary
position embeddings through torch.polar / view_as_complex / view_as_real, nn.RMSNorm, SwiGLU feed-forward,
grouped-query attention (repeat_kv with expand + reshape, and SDPA's enable_gqa inside
nn.attention.sdpa_kernel), weight tying, AdamW with a decay/no-decay split, linear warmup + cosine decay,
clip_grad_norm_, an EMA of the weights with torch._foreach_lerp_, and greedy / top-p generation.
"""
import math

import numpy as np

from _common import main, sync_init

TEXT = ("the quick brown fox jumps over the lazy dog. a stitch in time saves nine. "
        "all that glitters is not gold. the early bird catches the worm. ") * 4


def run(torch, nn, F, init=None, steps=30, deterministic=False, log=print):
    torch.manual_seed(0)
    attention = __import__(torch.__name__ + ".nn.attention", fromlist=["sdpa_kernel"])
    chars = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in TEXT], dtype=torch.long)
    V, D, H, KV, T = len(chars), 32, 4, 2, 24

    def precompute_freqs_cis(dim, end, theta=10000.0):
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
        t = torch.arange(end, dtype=torch.float32)
        freqs = torch.outer(t, freqs)
        return torch.polar(torch.ones_like(freqs), freqs)

    def apply_rotary_emb(xq, xk, freqs_cis):
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        fc = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
        return torch.view_as_real(xq_ * fc).flatten(3).type_as(xq), torch.view_as_real(xk_ * fc).flatten(3).type_as(xk)

    def repeat_kv(x, n_rep):
        bs, slen, n_kv, hd = x.shape
        return x[:, :, :, None, :].expand(bs, slen, n_kv, n_rep, hd).reshape(bs, slen, n_kv * n_rep, hd)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.hd = D // H
            self.wq = nn.Linear(D, H * self.hd, bias=False)
            self.wk = nn.Linear(D, KV * self.hd, bias=False)
            self.wv = nn.Linear(D, KV * self.hd, bias=False)
            self.wo = nn.Linear(H * self.hd, D, bias=False)

        def forward(self, x, freqs_cis, use_gqa_sdpa):
            B, L, _ = x.shape
            q = self.wq(x).view(B, L, H, self.hd)
            k = self.wk(x).view(B, L, KV, self.hd)
            v = self.wv(x).view(B, L, KV, self.hd)
            q, k = apply_rotary_emb(q, k, freqs_cis)
            if use_gqa_sdpa:
                with attention.sdpa_kernel(attention.SDPBackend.MATH):
                    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                         is_causal=True, enable_gqa=True)
            else:
                k, v = repeat_kv(k, H // KV), repeat_kv(v, H // KV)
                q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
                scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
                mask = torch.triu(torch.full((L, L), float("-inf")), diagonal=1)
                scores = F.softmax((scores + mask).float(), dim=-1).type_as(q)
                out = torch.matmul(scores, v)
            return self.wo(out.transpose(1, 2).contiguous().view(B, L, -1))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention_norm = nn.RMSNorm(D, eps=1e-6)
            self.ffn_norm = nn.RMSNorm(D, eps=1e-6)
            self.attention = Attention()
            self.w1 = nn.Linear(D, 64, bias=False)
            self.w2 = nn.Linear(64, D, bias=False)
            self.w3 = nn.Linear(D, 64, bias=False)

        def forward(self, x, freqs_cis, use_gqa_sdpa):
            h = x + self.attention(self.attention_norm(x), freqs_cis, use_gqa_sdpa)
            return h + self.w2(F.silu(self.w1(self.ffn_norm(h))) * self.w3(self.ffn_norm(h)))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(V, D)
            self.layers = nn.ModuleList([Block(), Block()])
            self.norm = nn.RMSNorm(D, eps=1e-6)
            self.output = nn.Linear(D, V, bias=False)
            self.output.weight = self.tok_embeddings.weight          # weight tying
            self.register_buffer("freqs_cis", precompute_freqs_cis(D // H, T * 2), persistent=False)

        def forward(self, tokens):
            h = self.tok_embeddings(tokens)
            fc = self.freqs_cis[: tokens.shape[1]]
            for i, layer in enumerate(self.layers):
                h = layer(h, fc, use_gqa_sdpa=(i == 1))
            return self.output(self.norm(h)).float()

    model = Transformer()
    nn.init.normal_(model.tok_embeddings.weight, std=0.02)
    init_state = sync_init(torch, model, init)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.95))
    warmup = 5

    def lr_lambda(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    ema = [p.detach().clone() for p in model.parameters()]
    rng = np.random.default_rng(0)
    losses, lrs = [], []
    for step in range(steps):
        starts = (np.arange(8) * 37 + step * 11) % (len(data) - T - 1) if deterministic else \
            rng.integers(0, len(data) - T - 1, 8)
        x = torch.stack([data[s:s + T] for s in starts.tolist()])
        y = torch.stack([data[s + 1:s + T + 1] for s in starts.tolist()])
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        with torch.no_grad():
            torch._foreach_lerp_(ema, list(model.parameters()), 0.1)
        losses.append(loss.item())
        lrs.append(opt.param_groups[0]["lr"])
    log(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")

    model.eval()
    idx = torch.tensor([[stoi["t"], stoi["h"], stoi["e"]]])
    with torch.no_grad():
        for _ in range(12):
            logits = model(idx[:, -T:])[:, -1, :]
            if deterministic:
                nxt = logits.argmax(-1, keepdim=True)
            else:                           # top-p (nucleus) sampling
                probs = F.softmax(logits / 0.8, dim=-1)
                sp, si = torch.sort(probs, dim=-1, descending=True)
                cum = torch.cumsum(sp, dim=-1)
                sp[(cum - sp) > 0.9] = 0.0
                sp.div_(sp.sum(dim=-1, keepdim=True))
                nxt = torch.gather(si, -1, torch.multinomial(sp, num_samples=1))
            idx = torch.cat((idx, nxt), dim=1)
    generated = "".join(chars[i] for i in idx[0].tolist())
    ema_norm = float(torch.stack(torch._foreach_norm(ema)).sum())
    log(f"generated {generated!r}")
    return {"losses": losses, "lrs": lrs, "generated": generated, "ema_norm": ema_norm, "init": init_state}


if __name__ == "__main__":
    main(run)
