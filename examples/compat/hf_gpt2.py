"""A GPT-2 language model written the way Hugging Face transformers writes it: ``Conv1D`` layers (addmm on
a transposed weight), a boolean causal-mask buffer registered with ``persistent=False``, masking with
``torch.finfo(dtype).min`` through ``torch.where``, a padding ``attention_mask`` turned into an additive
mask, ``_init_weights`` applied with ``module.apply`` plus the scaled residual-projection init, tied
input/output embeddings, shifted-label cross entropy with ``ignore_index=-100`` on padding, AdamW with a
no-decay group for biases and LayerNorm weights, gradient accumulation, ``clip_grad_norm_``, a warmup
LambdaLR, greedy generation with a key/value cache (checked against full recomputation), and reloading
a DataParallel-style checkpoint whose keys carry a ``module.`` prefix
(``consume_prefix_in_state_dict_if_present``).
"""
import io
import math

import numpy as np

from _common import main, sync_init

TEXT = ("to be or not to be that is the question. whether tis nobler in the mind to suffer "
        "the slings and arrows of outrageous fortune. ") * 3


def run(torch, nn, F, init=None, steps=24, deterministic=False, log=print):
    torch.manual_seed(0)
    utils = __import__(torch.__name__ + ".nn.modules.utils", fromlist=["consume_prefix_in_state_dict_if_present"])
    chars = sorted(set(TEXT))
    stoi = {c: i + 1 for i, c in enumerate(chars)}          # 0 is the pad token
    data = [stoi[c] for c in TEXT]
    V, D, H, P, NL = len(chars) + 1, 32, 4, 32, 2
    pdrop = 0.0 if deterministic else 0.1

    class Conv1D(nn.Module):
        def __init__(self, nf, nx):
            super().__init__()
            self.nf = nf
            self.weight = nn.Parameter(torch.empty(nx, nf))
            self.bias = nn.Parameter(torch.zeros(nf))
            nn.init.normal_(self.weight, std=0.02)

        def forward(self, x):
            size_out = x.size()[:-1] + (self.nf,)
            x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
            return x.view(size_out)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("bias", torch.tril(torch.ones((P, P), dtype=torch.bool)).view(1, 1, P, P),
                                 persistent=False)
            self.head_dim = D // H
            self.c_attn = Conv1D(3 * D, D)
            self.c_proj = Conv1D(D, D)
            self.attn_dropout = nn.Dropout(pdrop)
            self.resid_dropout = nn.Dropout(pdrop)

        def _split(self, t):
            return t.view(t.size()[:-1] + (H, self.head_dim)).permute(0, 2, 1, 3)

        def _merge(self, t):
            t = t.permute(0, 2, 1, 3).contiguous()
            return t.view(t.size()[:-2] + (H * self.head_dim,))

        def forward(self, h, layer_past=None, attention_mask=None):
            q, k, v = self.c_attn(h).split(D, dim=2)
            q, k, v = self._split(q), self._split(k), self._split(v)
            if layer_past is not None:
                k = torch.cat((layer_past[0], k), dim=-2)
                v = torch.cat((layer_past[1], v), dim=-2)
            w = torch.matmul(q, k.transpose(-1, -2)) / torch.full([], v.size(-1) ** 0.5, dtype=q.dtype)
            ql, kl = q.size(-2), k.size(-2)
            causal = self.bias[:, :, kl - ql:kl, :kl]
            w = torch.where(causal, w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype))
            if attention_mask is not None:
                w = w + attention_mask
            w = self.attn_dropout(nn.functional.softmax(w, dim=-1).type(v.dtype))
            return self.resid_dropout(self.c_proj(self._merge(torch.matmul(w, v)))), (k, v)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(D, eps=1e-5)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(D, eps=1e-5)
            self.mlp = nn.ModuleDict(dict(c_fc=Conv1D(4 * D, D), c_proj=Conv1D(D, 4 * D), dropout=nn.Dropout(pdrop)))

        def forward(self, x, layer_past=None, attention_mask=None):
            a, present = self.attn(self.ln_1(x), layer_past, attention_mask)
            x = x + a
            m = self.mlp
            return x + m.dropout(m.c_proj(F.gelu(m.c_fc(self.ln_2(x)), approximate="tanh"))), present

    class GPT2LMHeadModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, D)
            self.wpe = nn.Embedding(P, D)
            self.drop = nn.Dropout(pdrop)
            self.h = nn.ModuleList([Block() for _ in range(NL)])
            self.ln_f = nn.LayerNorm(D, eps=1e-5)
            self.lm_head = nn.Linear(D, V, bias=False)
            self.lm_head.weight = self.wte.weight
            self.apply(self._init_weights)
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    p.data.normal_(mean=0.0, std=0.02 / math.sqrt(2 * NL))

        def _init_weights(self, module):
            if isinstance(module, (nn.Linear, Conv1D)):
                module.weight.data.normal_(mean=0.0, std=0.02)
                if module.bias is not None:
                    module.bias.data.zero_()
            elif isinstance(module, nn.Embedding):
                module.weight.data.normal_(mean=0.0, std=0.02)
            elif isinstance(module, nn.LayerNorm):
                module.bias.data.zero_()
                module.weight.data.fill_(1.0)

        def forward(self, input_ids, past_key_values=None, attention_mask=None, position_ids=None, labels=None):
            B, T = input_ids.shape
            past_len = 0 if past_key_values is None else past_key_values[0][0].size(-2)
            if position_ids is None:
                position_ids = torch.arange(past_len, T + past_len, dtype=torch.long).unsqueeze(0)
            if attention_mask is not None:
                attention_mask = attention_mask.view(B, -1)[:, None, None, :].to(dtype=self.wte.weight.dtype)
                attention_mask = (1.0 - attention_mask) * torch.finfo(self.wte.weight.dtype).min
            x = self.drop(self.wte(input_ids) + self.wpe(position_ids))
            presents = ()
            for block, past in zip(self.h, past_key_values or (None,) * NL):
                x, present = block(x, past, attention_mask)
                presents = presents + (present,)
            logits = self.lm_head(self.ln_f(x))
            loss = None
            if labels is not None:
                shift_logits = logits[..., :-1, :].contiguous()
                shift_labels = labels[..., 1:].contiguous()
                loss = nn.CrossEntropyLoss()(shift_logits.view(-1, V), shift_labels.view(-1))
            return loss, logits, presents

    model = GPT2LMHeadModel()
    init_state = sync_init(torch, model, init)
    no_decay = ["bias", "ln_1.weight", "ln_2.weight", "ln_f.weight"]
    groups = [{"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
               "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
               "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=3e-3, eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 4))

    def batch(step, micro, rng):
        """Left-padded rows of different lengths: labels -100 and attention_mask 0 on the padding."""
        T = 20
        ids = torch.zeros(4, T, dtype=torch.long)
        mask = torch.zeros(4, T, dtype=torch.long)
        for r in range(4):
            n = T - (r % 3) * 3
            s = (step * 53 + micro * 29 + r * 17) % (len(data) - T) if deterministic else \
                int(rng.integers(0, len(data) - T))
            ids[r, T - n:] = torch.tensor(data[s:s + n])
            mask[r, T - n:] = 1
        labels = ids.masked_fill(mask == 0, -100)
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        return ids, mask, labels, position_ids

    rng = np.random.default_rng(0)
    losses, lrs, accum = [], [], 2
    model.train()
    for step in range(steps):
        total = 0.0
        for micro in range(accum):
            ids, mask, labels, pos = batch(step, micro, rng)
            loss, _, _ = model(ids, attention_mask=mask, position_ids=pos, labels=labels)
            (loss / accum).backward()
            total += loss.item() / accum
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total)
        lrs.append(sched.get_last_lr()[0])
    log(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")

    model.eval()
    prompt = torch.tensor([[stoi[c] for c in "to be or "]])
    with torch.no_grad():
        _, logits, past = model(prompt)
        out = prompt
        for _ in range(12):
            nxt = logits[:, -1, :].argmax(-1, keepdim=True)
            out = torch.cat([out, nxt], dim=1)
            _, logits, past = model(nxt, past_key_values=past)
        _, full, _ = model(out)
        cached_same = bool(torch.allclose(full[:, -1], logits[:, -1], atol=1e-4))
    generated = "".join(chars[i - 1] for i in out[0].tolist())
    log(f"generated {generated!r}")

    # a DataParallel checkpoint: every key prefixed with "module."; the tied head is one tensor
    ckpt = {"module." + k: v for k, v in model.state_dict().items()}
    buf = io.BytesIO()
    torch.save(ckpt, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)
    utils.consume_prefix_in_state_dict_if_present(loaded, "module.")
    fresh = GPT2LMHeadModel()
    report = fresh.load_state_dict(loaded)
    fresh.eval()
    with torch.no_grad():
        reload_same = bool(torch.equal(fresh(out)[1], model(out)[1]))
    return {"losses": losses, "lrs": lrs, "generated": generated, "cached_same": cached_same,
            "reload_same": reload_same, "missing": list(report.missing_keys),
            "buffers": sorted(n for n, _ in model.named_buffers()), "init": init_state}


if __name__ == "__main__":
    main(run)
