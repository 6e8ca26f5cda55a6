"""Classical numerics written with tensors, as in scientific and ML-adjacent scripts: k-means (cdist,
argmin, scatter_reduce "mean", bincount), PCA (torch.linalg.svd, explained variance), ridge regression
(torch.linalg.solve, torch.linalg.lstsq, torch.linalg.pinv), Gaussian-process regression (cholesky,
cholesky_solve, the log marginal likelihood, hyper-parameters fit with Adam through the Cholesky factor),
logistic regression by Newton's method (torch.autograd.functional.hessian / jacobian), eigh of a graph
Laplacian for spectral embedding, matrix_exp/matrix_power, and det / slogdet / inv.
"""
import numpy as np
from sklearn.datasets import load_iris

from _common import main, sync_init


def run(torch, nn, F, init=None, steps=40, deterministic=False, log=print):
    torch.manual_seed(0)
    X, y = load_iris(return_X_y=True)
    X = torch.tensor(X, dtype=torch.float64)
    y = torch.tensor(y)
    Xc = X - X.mean(0)
    out = {}

    # k-means with deterministic init (the first point of each class)
    k = 3
    centers = X[torch.tensor([0, 50, 100])].clone()
    for _ in range(10):
        assign = torch.cdist(X, centers).argmin(dim=1)
        centers = torch.zeros_like(centers).scatter_reduce(
            0, assign.unsqueeze(1).expand(-1, X.size(1)), X, reduce="mean", include_self=False)
    out["kmeans_counts"] = torch.bincount(assign, minlength=k).tolist()
    out["kmeans_inertia"] = ((X - centers[assign]) ** 2).sum().item()

    # PCA
    U, S, Vh = torch.linalg.svd(Xc, full_matrices=False)
    explained = S ** 2 / (S ** 2).sum()
    proj = Xc @ Vh[:2].T
    out["explained"] = explained.tolist()
    out["proj_var"] = proj.var(dim=0).tolist()

    # ridge regression three ways
    A = torch.cat([Xc[:, :3], torch.ones(len(X), 1, dtype=X.dtype)], dim=1)
    t = X[:, 3:4]
    lam = 0.1
    w_solve = torch.linalg.solve(A.T @ A + lam * torch.eye(4, dtype=X.dtype), A.T @ t)
    w_lstsq = torch.linalg.lstsq(A, t).solution
    w_pinv = torch.linalg.pinv(A) @ t
    out["ridge"] = w_solve.squeeze(1).tolist()
    out["lstsq_vs_pinv"] = (w_lstsq - w_pinv).abs().max().item() < 1e-8

    # Gaussian-process regression on a 1-D slice, hyper-parameters fit by maximising the marginal likelihood
    xs = X[::5, 2:3]
    ys = X[::5, 3]
    ys = ys - ys.mean()

    class GP(nn.Module):
        def __init__(self):
            super().__init__()
            self.log_ls = nn.Parameter(torch.tensor(0.0, dtype=torch.float64))
            self.log_sf = nn.Parameter(torch.tensor(0.0, dtype=torch.float64))
            self.log_sn = nn.Parameter(torch.tensor(-1.0, dtype=torch.float64))

        def kernel(self, a, b):
            d2 = torch.cdist(a, b).pow(2)
            return self.log_sf.exp() ** 2 * torch.exp(-0.5 * d2 / self.log_ls.exp() ** 2)

        def nll(self, x, yv):
            K = self.kernel(x, x) + (self.log_sn.exp() ** 2 + 1e-6) * torch.eye(len(x), dtype=x.dtype)
            L = torch.linalg.cholesky(K)
            alpha = torch.cholesky_solve(yv.unsqueeze(1), L)
            return (0.5 * yv @ alpha.squeeze(1) + L.diagonal().log().sum() + 0.5 * len(x) * np.log(2 * np.pi))

    gp = GP()
    init_state = sync_init(torch, gp, init)
    opt = torch.optim.Adam(gp.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = gp.nll(xs, ys)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        K = gp.kernel(xs, xs) + gp.log_sn.exp() ** 2 * torch.eye(len(xs), dtype=xs.dtype)
        sign, logdet = torch.linalg.slogdet(K)
        out["gp_logdet"] = [sign.item(), logdet.item(), torch.logdet(K).item()]
        out["gp_det_inv"] = (torch.det(K) * torch.det(torch.inverse(K))).item()

    # logistic regression (setosa vs rest) by Newton's method
    Xb = torch.cat([Xc[:, :2], torch.ones(len(X), 1, dtype=X.dtype)], dim=1)
    yb = (y == 0).to(X.dtype)

    def nll(w):
        z = Xb @ w
        return F.binary_cross_entropy_with_logits(z, yb, reduction="sum") + 0.5 * (w ** 2).sum()

    w = torch.zeros(3, dtype=X.dtype)
    for _ in range(6):
        g = torch.autograd.functional.jacobian(nll, w)
        H = torch.autograd.functional.hessian(nll, w)
        w = w - torch.linalg.solve(H, g)
    out["newton_w"] = w.tolist()

    # spectral embedding: eigenvectors of a kNN graph Laplacian
    jitter = torch.from_numpy(np.random.RandomState(3).randn(*X.shape) * 1e-3)   # iris has duplicate rows: no ties
    D2 = torch.cdist(X + jitter, X + jitter)
    knn = D2.topk(6, largest=False).indices[:, 1:]
    W = torch.zeros(len(X), len(X), dtype=X.dtype)
    W.scatter_(1, knn, 1.0)
    W = ((W + W.T) > 0).to(X.dtype)
    Lap = torch.diag(W.sum(1)) - W
    evals, evecs = torch.linalg.eigh(Lap)
    out["laplacian_evals"] = evals[:4].tolist()
    out["n_components"] = int((evals < 1e-8).sum())

    M = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64) * 0.5
    out["matrix_exp"] = torch.linalg.matrix_exp(M).tolist()
    out["matrix_power"] = torch.linalg.matrix_power(M * 2, 3).tolist()
    log(f"kmeans {out['kmeans_counts']}, explained {explained[:2].sum():.3f}, gp nll {losses[0]:.3f} -> "
        f"{losses[-1]:.3f}, components {out['n_components']}")
    out.update({"losses": losses, "init": init_state})
    return out


if __name__ == "__main__":
    main(run)
