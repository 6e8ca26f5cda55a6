"""A GCN whose graph is a sparse CSR matrix, the layout PyG-style and DGL-style code hands to
``torch.sparse.mm``:

- the normalized adjacency D^-1/2 (A + I) D^-1/2 is built as scipy would build a CSR matrix (row pointers
  from per-row counts, column indices, data) and passed to ``torch.sparse_csr_tensor``; its
  ``crow_indices()``/``col_indices()``/``values()`` are read back to get degrees;
- the layers propagate with ``adj @ h`` and ``torch.sparse.mm(adj, h)``;
- a two-hop operator A_hat^2 from ``torch.sparse.mm`` of two COO matrices, converted ``to_sparse_csr()``,
  feeds a second model (SGC-style, one linear layer on A_hat^2 X);
- the CSR adjacency is saved with ``torch.save`` and loaded back.
"""
import io
import math

import numpy as np

from _common import main, sync_init


def _graph(rng, n, n_cls):
    labels = rng.randint(0, n_cls, n)
    p = np.where(labels[:, None] == labels[None, :], 0.12, 0.015)
    a = np.triu(rng.rand(n, n) < p, 1)
    a = (a | a.T).astype(np.float32) + np.eye(n, dtype=np.float32)
    deg = a.sum(1)
    norm = a / np.sqrt(deg)[:, None] / np.sqrt(deg)[None, :]
    counts = (norm != 0).sum(1)
    crow = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    rows, cols = np.nonzero(norm)
    return labels, crow, cols.astype(np.int64), norm[rows, cols].astype(np.float32)


def run(torch, nn, F, init=None, epochs=40, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    n, n_feat, n_hid, n_cls = 90, 10, 16, 3
    labels, crow, col, data = _graph(rng, n, n_cls)
    feats = (rng.randn(n, n_feat) + 1.2 * np.eye(n_cls, n_feat)[labels]).astype(np.float32)
    adj = torch.sparse_csr_tensor(torch.from_numpy(crow), torch.from_numpy(col), torch.from_numpy(data), (n, n))
    degrees = (adj.crow_indices()[1:] - adj.crow_indices()[:-1]).tolist()
    same_as_dense = float((adj.to_dense() @ torch.ones(n, 1) - adj @ torch.ones(n, 1)).abs().max())

    coo = adj.to_sparse_coo()
    two_hop = torch.sparse.mm(coo, coo).coalesce().to_sparse_csr()
    buf = io.BytesIO()
    torch.save({"adj": adj}, buf)
    buf.seek(0)
    loaded = torch.load(buf)["adj"]
    reload_same = bool(torch.equal(loaded.to_dense(), adj.to_dense())) and loaded.layout == adj.layout

    x = torch.from_numpy(feats)
    y = torch.from_numpy(labels.astype(np.int64))
    train = torch.zeros(n, dtype=torch.bool)
    train[::3] = True

    class GraphConv(nn.Module):
        def __init__(self, fin, fout):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(fin, fout))
            self.bias = nn.Parameter(torch.zeros(fout))
            bound = 1.0 / math.sqrt(fout)
            nn.init.uniform_(self.weight, -bound, bound)

        def forward(self, h, a):
            return torch.sparse.mm(a, h @ self.weight) + self.bias

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = GraphConv(n_feat, n_hid)
            self.c2 = GraphConv(n_hid, n_cls)

        def forward(self, h, a):
            h = F.dropout(F.relu(self.c1(h, a)), 0.0 if deterministic else 0.3, self.training)
            return F.log_softmax(a @ (h @ self.c2.weight) + self.c2.bias, dim=1)

    gcn = GCN()
    sgc = nn.Linear(n_feat, n_cls)
    both = nn.ModuleDict({"gcn": gcn, "sgc": sgc})
    init_state = sync_init(torch, both, init)
    pre = two_hop @ x                       # SGC: the propagation is precomputed once
    opt = torch.optim.Adam(both.parameters(), lr=0.02, weight_decay=5e-4)
    losses, sgc_losses, accs = [], [], []
    for epoch in range(epochs):
        both.train()
        out = gcn(x, adj)
        loss = F.nll_loss(out[train], y[train])
        sgc_loss = F.cross_entropy(sgc(pre)[train], y[train])
        opt.zero_grad()
        (loss + sgc_loss).backward()
        opt.step()
        losses.append(loss.item())
        sgc_losses.append(sgc_loss.item())
        both.eval()
        with torch.no_grad():
            accs.append(int((gcn(x, adj).argmax(1)[~train] == y[~train]).sum()))
    log(f"nnz {adj._nnz()} (two-hop {two_hop._nnz()}), loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
        f"correct {accs[-1]}/{int((~train).sum())}")
    return {"losses": losses, "sgc_losses": sgc_losses, "accs": accs, "degrees": degrees,
            "same_as_dense": same_as_dense, "two_hop_nnz": two_hop._nnz(), "reload_same": reload_same,
            "layouts": [str(adj.layout).split(".")[-1], str(two_hop.layout).split(".")[-1]],
            "w_grad_norm": float(gcn.c1.weight.grad.norm()), "init": init_state}


if __name__ == "__main__":
    main(run)
