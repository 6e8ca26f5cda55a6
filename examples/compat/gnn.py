"""A message-passing graph network for node classification on a synthetic two-community graph
(a stochastic block model), written with index ops the way PyG-free GNN code is:
edge_index gathering with index_select, scatter_add_ / index_add_ aggregation, degree normalisation
with bincount and pow(-0.5) + masked_fill_ of inf, a GAT-style attention with a scatter softmax
(scatter_reduce "amax", gather, exp, index_add_), torch.where, train/val masks with boolean indexing.
"""
import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=40, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    n, n_feat, n_cls = 60, 8, 2
    labels_np = np.repeat(np.arange(n_cls), n // n_cls)
    p = np.where(labels_np[:, None] == labels_np[None, :], 0.25, 0.03)
    adj = np.triu(rng.rand(n, n) < p, 1)
    src, dst = np.nonzero(adj | adj.T)
    edge_index = torch.from_numpy(np.stack([src, dst])).long()
    x = torch.from_numpy((rng.randn(n, n_feat) + 0.6 * labels_np[:, None]).astype(np.float32))
    y = torch.from_numpy(labels_np)
    train_mask = torch.zeros(n, dtype=torch.bool)
    train_mask[torch.arange(0, n, 3)] = True
    val_mask = ~train_mask

    def add_self_loops(edge_index, num_nodes):
        loops = torch.arange(num_nodes, device=edge_index.device).unsqueeze(0).repeat(2, 1)
        return torch.cat([edge_index, loops], dim=1)

    class GCNConv(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.lin = nn.Linear(d_in, d_out, bias=False)
            self.bias = nn.Parameter(torch.zeros(d_out))

        def forward(self, x, edge_index):
            edge_index = add_self_loops(edge_index, x.size(0))
            row, col = edge_index[0], edge_index[1]
            deg = torch.bincount(col, minlength=x.size(0)).to(x.dtype)
            deg_inv_sqrt = deg.pow(-0.5)
            deg_inv_sqrt.masked_fill_(deg_inv_sqrt == float("inf"), 0)
            norm = deg_inv_sqrt[row] * deg_inv_sqrt[col]
            h = self.lin(x)
            msg = h.index_select(0, row) * norm.view(-1, 1)
            out = torch.zeros_like(h).scatter_add_(0, col.unsqueeze(-1).expand_as(msg), msg)
            return out + self.bias

    class GATConv(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.lin = nn.Linear(d_in, d_out, bias=False)
            self.att_src = nn.Parameter(torch.empty(1, d_out))
            self.att_dst = nn.Parameter(torch.empty(1, d_out))
            nn.init.xavier_uniform_(self.att_src)
            nn.init.xavier_uniform_(self.att_dst)

        def forward(self, x, edge_index):
            edge_index = add_self_loops(edge_index, x.size(0))
            src, dst = edge_index
            h = self.lin(x)
            a_src = (h * self.att_src).sum(-1)
            a_dst = (h * self.att_dst).sum(-1)
            e = F.leaky_relu(a_src[src] + a_dst[dst], 0.2)
            # softmax over the incoming edges of each node
            e_max = torch.full((x.size(0),), float("-inf")).scatter_reduce(0, dst, e, reduce="amax", include_self=True)
            e = (e - e_max.gather(0, dst)).exp()
            denom = x.new_zeros(x.size(0)).index_add_(0, dst, e)
            alpha = e / denom[dst].clamp_min(1e-16)
            out = torch.zeros_like(h)
            out.index_add_(0, dst, h[src] * alpha.unsqueeze(-1))
            return out

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = GCNConv(n_feat, 16)
            self.conv2 = GATConv(16, 16)
            self.out = nn.Linear(16, n_cls)
            self.dropout = 0.0 if deterministic else 0.5

        def forward(self, x, edge_index):
            x = F.dropout(x, p=self.dropout, training=self.training)
            x = F.elu(self.conv1(x, edge_index))
            x = torch.where(x > 0, x, 0.1 * x) + self.conv2(x, edge_index)
            return F.log_softmax(self.out(x), dim=1)

    model = Net()
    init_state = sync_init(torch, model, init)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    losses, val_accs = [], []
    for epoch in range(epochs):
        model.train()
        optimizer.zero_grad()
        out = model(x, edge_index)
        loss = F.nll_loss(out[train_mask], y[train_mask])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            pred = model(x, edge_index).argmax(dim=1)
            val_accs.append(int((pred[val_mask] == y[val_mask]).sum()) / int(val_mask.sum()))
    log(f"{edge_index.size(1)} edges, loss {losses[0]:.3f} -> {losses[-1]:.3f}, val acc {val_accs[-1]:.2f}")
    return {"losses": losses, "val_accs": val_accs, "init": init_state}


if __name__ == "__main__":
    main(run)
