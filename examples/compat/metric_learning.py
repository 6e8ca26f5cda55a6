"""Metric learning and a tour of less common losses on the digits: an embedding network trained with
TripletMarginLoss on hard-ish triplets mined with torch.cdist + masks, plus CosineEmbeddingLoss,
MarginRankingLoss, KLDivLoss (log_target and batchmean), MultiLabelSoftMarginLoss, NLLLoss with class
weights and ignore_index, PoissonNLLLoss, GaussianNLLLoss, SmoothL1Loss, nn.CosineSimilarity,
nn.PairwiseDistance, F.normalize, and recall@k retrieval with topk; optimiser: RAdam.
"""
import numpy as np
from sklearn.datasets import load_digits

from _common import main, sync_init


def run(torch, nn, F, init=None, steps=25, deterministic=False, log=print):
    torch.manual_seed(0)
    X, y = load_digits(return_X_y=True)
    X = torch.tensor(X[:400] / 16.0, dtype=torch.float32)
    y = torch.tensor(y[:400])
    rng = np.random.RandomState(0)

    class EmbedNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(64, 64), nn.PReLU(), nn.Linear(64, 16))
            self.cls = nn.Linear(16, 10)
            self.var_head = nn.Linear(16, 1)

        def forward(self, x):
            return F.normalize(self.net(x), dim=-1)

    model = EmbedNet()
    init_state = sync_init(torch, model, init)
    optimizer = torch.optim.RAdam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    triplet = nn.TripletMarginLoss(margin=0.3, p=2)
    cos_emb = nn.CosineEmbeddingLoss(margin=0.1)
    rank = nn.MarginRankingLoss(margin=0.2)
    kld = nn.KLDivLoss(reduction="batchmean", log_target=True)
    nll = nn.NLLLoss(weight=torch.linspace(0.5, 1.5, 10), ignore_index=9)
    multilabel = nn.MultiLabelSoftMarginLoss()
    poisson = nn.PoissonNLLLoss(log_input=True)
    gauss = nn.GaussianNLLLoss()
    smooth = nn.SmoothL1Loss(beta=0.5)
    cos = nn.CosineSimilarity(dim=1)
    pdist = nn.PairwiseDistance(p=2)
    losses, parts_hist = [], []
    for step in range(steps):
        idx = torch.from_numpy(rng.choice(400, 64, replace=False))
        xb, yb = X[idx], y[idx]
        emb = model(xb)
        with torch.no_grad():
            d = torch.cdist(emb, emb)
            same = yb.unsqueeze(0) == yb.unsqueeze(1)
            eye = torch.eye(len(yb), dtype=torch.bool)
            pos_d = d.masked_fill(~same | eye, -1.0)
            neg_d = d.masked_fill(same, float("inf"))
            pos_idx = pos_d.argmax(dim=1)
            neg_idx = neg_d.argmin(dim=1)
        parts = {
            "triplet": triplet(emb, emb[pos_idx], emb[neg_idx]),
            "cos_emb": cos_emb(emb[:32], emb[32:], torch.where(yb[:32] == yb[32:], 1, -1)),
            "rank": rank(cos(emb, emb[pos_idx]), cos(emb, emb[neg_idx]), torch.ones(len(yb))),
        }
        logits = model.cls(emb)
        logp = F.log_softmax(logits, dim=1)
        target_dist = F.log_softmax(F.one_hot(yb, 10).float() * 3.0, dim=1)
        parts["kld"] = kld(logp, target_dist)
        parts["nll"] = nll(logp, yb)
        multi_t = torch.zeros(len(yb), 10).scatter_(1, yb.unsqueeze(1), 1.0)
        parts["multilabel"] = multilabel(logits, multi_t)
        parts["poisson"] = poisson(logits[:, :1], yb.float().unsqueeze(1) / 3)
        var = F.softplus(model.var_head(emb)) + 1e-3
        parts["gauss"] = gauss(logits[:, :1], yb.float().unsqueeze(1) / 9, var)
        parts["smooth"] = smooth(pdist(emb, emb[pos_idx]), torch.zeros(len(yb)))
        loss = sum(parts.values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        parts_hist.append([v.item() for v in parts.values()])

    model.eval()
    with torch.no_grad():
        emb = model(X)
        sims = emb @ emb.T
        sims.fill_diagonal_(-2.0)
        top = sims.topk(5, dim=1).indices
        hits = (y[top] == y.unsqueeze(1))
        recall1 = hits[:, 0].float().mean().item()
        recall5 = hits.any(dim=1).float().mean().item()
    log(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; recall@1 {recall1:.3f} recall@5 {recall5:.3f}")
    return {"losses": losses, "parts": parts_hist, "recall1": recall1, "recall5": recall5, "init": init_state}


if __name__ == "__main__":
    main(run)
