"""A Kipf & Welling style two-layer GCN on a random graph, written the way the reference implementation
(pygcn) is: the normalized adjacency D^-1/2 (A + I) D^-1/2 built as a sparse COO tensor from scipy-free
NumPy (row/col/data -> torch.sparse_coo_tensor), `torch.spmm(adj, support)` in the layer, Xavier-style
uniform weights set in reset_parameters, dropout, log_softmax + nll_loss on the training nodes, Adam with
weight decay. Around it, other sparse idioms GCN code uses: degrees from torch.sparse.sum, coalesce()
with _indices()/_values(), adj.t(), `adj @ x` and torch.sparse.mm, to_dense() checks, a learnable edge
weighting (sigmoid of per-edge logits as the sparse values, trained through sparse_coo_tensor), and the
adjacency saved with torch.save and loaded back.
"""
import io
import math

import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=40, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    n, n_feat, n_hid, n_cls = 80, 12, 16, 3
    labels_np = rng.randint(0, n_cls, n)
    p = np.where(labels_np[:, None] == labels_np[None, :], 0.15, 0.02)
    a = np.triu(rng.rand(n, n) < p, 1)
    a = (a | a.T).astype(np.float32)
    feats = (rng.randn(n, n_feat) + 1.5 * np.eye(n_cls, n_feat)[labels_np]).astype(np.float32)

    # ---- the normalized adjacency as a sparse tensor ---------------------------------------------
    row, col = np.nonzero(a + np.eye(n, dtype=np.float32))
    indices = torch.from_numpy(np.vstack([row, col]).astype(np.int64))
    ones = torch.ones(len(row))
    a_hat = torch.sparse_coo_tensor(indices, ones, (n, n))
    deg = torch.sparse.sum(a_hat, dim=1).to_dense()
    d_inv_sqrt = deg.pow(-0.5)
    idx = a_hat.coalesce()._indices()
    norm_vals = d_inv_sqrt[idx[0]] * a_hat.coalesce()._values() * d_inv_sqrt[idx[1]]
    adj = torch.sparse_coo_tensor(idx, norm_vals, (n, n)).coalesce()
    sym_err = float((adj.to_dense() - adj.t().to_dense()).abs().max())

    buf = io.BytesIO()
    torch.save({"adj": adj}, buf)
    buf.seek(0)
    adj_loaded = torch.load(buf)["adj"]
    reload_same = bool(torch.equal(adj_loaded.to_dense(), adj.to_dense())) and adj_loaded.is_sparse

    x = torch.from_numpy(feats)
    y = torch.from_numpy(labels_np.astype(np.int64))
    train_mask = torch.zeros(n, dtype=torch.bool)
    train_mask[torch.arange(0, n, 4)] = True

    class GraphConvolution(nn.Module):
        def __init__(self, in_features, out_features, bias=True):
            super().__init__()
            self.weight = nn.Parameter(torch.FloatTensor(in_features, out_features))
            self.bias = nn.Parameter(torch.FloatTensor(out_features)) if bias else None
            self.reset_parameters()

        def reset_parameters(self):
            stdv = 1.0 / math.sqrt(self.weight.size(1))
            self.weight.data.uniform_(-stdv, stdv)
            if self.bias is not None:
                self.bias.data.uniform_(-stdv, stdv)

        def forward(self, input, adj):
            support = torch.mm(input, self.weight)
            output = torch.spmm(adj, support)
            return output + self.bias if self.bias is not None else output

    class GCN(nn.Module):
        def __init__(self, nfeat, nhid, nclass, dropout):
            super().__init__()
            self.gc1 = GraphConvolution(nfeat, nhid)
            self.gc2 = GraphConvolution(nhid, nclass)
            self.dropout = dropout

        def forward(self, x, adj):
            x = F.relu(self.gc1(x, adj))
            x = F.dropout(x, self.dropout, training=self.training)
            x = self.gc2(x, adj)
            return F.log_softmax(x, dim=1)

    class EdgeWeighted(nn.Module):
        """One propagation with learnable edge weights: the sparse values carry the gradient."""

        def __init__(self, nnz, nfeat, nclass):
            super().__init__()
            self.edge_logit = nn.Parameter(torch.zeros(nnz))
            self.lin = nn.Linear(nfeat, nclass)

        def forward(self, x, idx, size):
            w = torch.sparse_coo_tensor(idx, torch.sigmoid(self.edge_logit), size)
            return F.log_softmax(torch.sparse.mm(w, self.lin(x)), dim=1)

    model = GCN(n_feat, n_hid, n_cls, 0.0 if deterministic else 0.5)
    edge_model = EdgeWeighted(idx.size(1), n_feat, n_cls)
    both = nn.ModuleDict({"gcn": model, "edge": edge_model})
    init_state = sync_init(torch, both, init)
    optimizer = torch.optim.Adam(both.parameters(), lr=0.01, weight_decay=5e-4)
    losses, edge_losses, accs = [], [], []
    for epoch in range(epochs):
        both.train()
        optimizer.zero_grad()
        out = model(x, adj)
        loss = F.nll_loss(out[train_mask], y[train_mask])
        edge_loss = F.nll_loss(edge_model(x, idx, (n, n))[train_mask], y[train_mask])
        (loss + edge_loss).backward()
        optimizer.step()
        losses.append(loss.item())
        edge_losses.append(edge_loss.item())
        both.eval()
        with torch.no_grad():
            pred = model(x, adj).argmax(1)
            accs.append(int((pred[~train_mask] == y[~train_mask]).sum()))
    with torch.no_grad():
        h = x @ model.gc1.weight
        same_product = float(((adj @ h) - torch.sparse.mm(adj, h)).abs().max() + (torch.mm(adj, h) - adj.to_dense() @ h).abs().max())
    log(f"{adj._nnz()} entries, loss {losses[0]:.3f} -> {losses[-1]:.3f}, correct {accs[-1]}/{n - n // 4}")
    return {"losses": losses, "edge_losses": edge_losses, "accs": accs, "sym_err": sym_err, "reload_same": reload_same,
            "same_product": same_product, "nnz": adj._nnz(), "deg": deg.tolist(),
            "edge_grad_norm": float(edge_model.edge_logit.grad.norm()), "init": init_state}


if __name__ == "__main__":
    main(run)
