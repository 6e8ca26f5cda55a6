"""A minGPT-style decoder-only transformer trained on a tiny sorting task.

Exercises: token + position embeddings, causal self-attention written by hand (a registered tril
buffer, masked_fill(-inf), softmax, attention dropout), LayerNorm, GELU MLP, weight tying, a custom
_init_weights applied with model.apply (normal_/zeros_/ones_, scaled init of c_proj by name),
AdamW with weight-decay / no-decay parameter groups built from named_modules / named_parameters,
a warmup + cosine schedule through LambdaLR, clip_grad_norm_, and generation with topk + multinomial.
"""
import math

import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, steps=40, deterministic=False, log=print):
    torch.manual_seed(3)

    class Config:
        vocab_size, block_size, n_layer, n_head, n_embd = 6, 11, 2, 2, 32
        dropout = 0.0 if deterministic else 0.1

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            assert config.n_embd % config.n_head == 0
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                 .view(1, 1, config.block_size, config.block_size), persistent=False)
            self.n_head, self.n_embd = config.n_head, config.n_embd

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = nn.LayerNorm(config.n_embd)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = nn.LayerNorm(config.n_embd)
            self.mlp = nn.ModuleDict(dict(
                c_fc=nn.Linear(config.n_embd, 4 * config.n_embd),
                c_proj=nn.Linear(4 * config.n_embd, config.n_embd),
                act=nn.GELU(approximate="tanh"),
                dropout=nn.Dropout(config.dropout),
            ))
            m = self.mlp
            self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x))))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlpf(self.ln_2(x))
            return x

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.block_size = config.block_size
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=nn.LayerNorm(config.n_embd),
            ))
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight     # weight tying
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
            n_params = sum(p.numel() for p in self.transformer.parameters())
            self.n_params = n_params

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            elif isinstance(module, nn.LayerNorm):
                torch.nn.init.zeros_(module.bias)
                torch.nn.init.ones_(module.weight)

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            decay, no_decay = set(), set()
            whitelist, blacklist = (torch.nn.Linear,), (torch.nn.LayerNorm, torch.nn.Embedding)
            for mn, m in self.named_modules():
                for pn, p in m.named_parameters():
                    fpn = f"{mn}.{pn}" if mn else pn
                    if pn.endswith("bias"):
                        no_decay.add(fpn)
                    elif pn.endswith("weight") and isinstance(m, whitelist):
                        decay.add(fpn)
                    elif pn.endswith("weight") and isinstance(m, blacklist):
                        no_decay.add(fpn)
            param_dict = {pn: p for pn, p in self.named_parameters()}
            decay &= param_dict.keys()      # the tied weight shows up under its first name only
            no_decay -= decay
            inter, union = decay & no_decay, decay | no_decay
            assert len(inter) == 0 and len(param_dict.keys() - union) == 0, (inter, param_dict.keys() - union)
            optim_groups = [
                {"params": [param_dict[pn] for pn in sorted(decay)], "weight_decay": weight_decay},
                {"params": [param_dict[pn] for pn in sorted(no_decay)], "weight_decay": 0.0},
            ]
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

        def forward(self, idx, targets=None):
            device = idx.device
            b, t = idx.size()
            assert t <= self.block_size, f"Cannot forward sequence of length {t}, block size is {self.block_size}"
            pos = torch.arange(0, t, dtype=torch.long, device=device).unsqueeze(0)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, top_k)
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                if do_sample:
                    idx_next = torch.multinomial(probs, num_samples=1)
                else:
                    _, idx_next = torch.topk(probs, k=1, dim=-1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    # the sorting task of minGPT's demo: input 6 digits in 0..5, output them sorted
    rng = np.random.RandomState(0)
    length = 6

    def get_batch(n):
        inp = rng.randint(0, Config.vocab_size, size=(n, length))
        sol = np.sort(inp, axis=1)
        cat = np.concatenate([inp, sol], axis=1)
        x = torch.from_numpy(cat[:, :-1].copy()).long()
        y = torch.from_numpy(cat[:, 1:].copy()).long()
        y[:, :length - 1] = -1             # only predict the sorted half
        return x, y

    model = GPT(Config())
    init_state = sync_init(torch, model, init)
    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=5e-3, betas=(0.9, 0.95))
    warmup = 5

    def lr_lambda(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    losses, lrs = [], []
    model.train()
    for it in range(steps):
        x, y = get_batch(32)
        logits, loss = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        lrs.append(scheduler.get_last_lr()[0])

    model.eval()
    x, _ = get_batch(16)
    prompt = x[:, :length]
    out = model.generate(prompt, length, do_sample=False)
    sol = torch.sort(prompt, dim=1)[0]
    acc = (out[:, length:] == sol).all(dim=1).float().mean().item()
    sampled = model.generate(prompt[:2], length, temperature=1.0, do_sample=True, top_k=3)
    assert sampled.shape == (2, 2 * length)
    log(f"params {model.n_params}, loss {losses[0]:.3f} -> {losses[-1]:.3f}, sorted exactly: {acc:.2f}")
    return {"losses": losses, "lrs": lrs, "acc": acc, "generated": out.tolist(), "init": init_state}


if __name__ == "__main__":
    main(run)
