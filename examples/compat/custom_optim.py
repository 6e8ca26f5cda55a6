"""Custom optimizers and schedulers the way research code writes them: an Optimizer subclass (SGD with
decoupled weight decay and gradient centralisation) using defaults, param_groups, self.state[p],
@torch.no_grad() step(closure) and in-place updates (add_, mul_, addcmul_, lerp_); a Lookahead wrapper
around Adam that keeps slow weights in its own state; a LRScheduler subclass with warmup + inverse square
root decay; optimizer.add_param_group for a layer unfrozen mid-training; state_dict / load_state_dict round
trips of the custom optimizer; torch.optim.Adamax/NAdam/Adagrad on the same problem; and
parameters_to_vector / vector_to_parameters to evaluate a weight-perturbation sharpness estimate.
"""
import math

import numpy as np
from sklearn.datasets import load_wine

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=25, deterministic=False, log=print):
    torch.manual_seed(0)
    X, y = load_wine(return_X_y=True)
    X = torch.tensor((X - X.mean(0)) / X.std(0), dtype=torch.float32)
    y = torch.tensor(y)

    class CentralizedSGDW(torch.optim.Optimizer):
        def __init__(self, params, lr=0.1, momentum=0.9, weight_decay=0.0, centralize=True):
            if lr < 0.0:
                raise ValueError(f"Invalid learning rate: {lr}")
            defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay, centralize=centralize)
            super().__init__(params, defaults)

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    d_p = p.grad
                    if group["centralize"] and d_p.dim() > 1:
                        d_p = d_p - d_p.mean(dim=tuple(range(1, d_p.dim())), keepdim=True)
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["momentum_buffer"] = torch.clone(d_p).detach()
                    else:
                        state["momentum_buffer"].mul_(group["momentum"]).add_(d_p)
                    state["step"] += 1
                    if group["weight_decay"]:
                        p.mul_(1 - group["lr"] * group["weight_decay"])
                    p.add_(state["momentum_buffer"], alpha=-group["lr"])
            return loss

    class Lookahead(torch.optim.Optimizer):
        def __init__(self, base, k=5, alpha=0.5):
            self.base, self.k, self.alpha = base, k, alpha
            self.param_groups = base.param_groups
            self.defaults = base.defaults
            self.state = base.state
            self._slow = [[p.detach().clone() for p in g["params"]] for g in self.param_groups]
            self._count = 0

        @torch.no_grad()
        def step(self, closure=None):
            loss = self.base.step(closure)
            self._count += 1
            if self._count % self.k == 0:
                for group, slow in zip(self.param_groups, self._slow):
                    for p, s in zip(group["params"], slow):
                        s.lerp_(p, self.alpha)
                        p.copy_(s)
            return loss

        def zero_grad(self, set_to_none=True):
            self.base.zero_grad(set_to_none=set_to_none)

    class WarmupInvSqrt(torch.optim.lr_scheduler.LRScheduler):
        def __init__(self, optimizer, warmup=5, last_epoch=-1):
            self.warmup = warmup
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            step = max(1, self.last_epoch + 1)
            scale = min(step / self.warmup, math.sqrt(self.warmup / step))
            # groups added after construction carry no initial_lr yet: take their lr at first sight
            for g in self.optimizer.param_groups:
                g.setdefault("initial_lr", g["lr"])
            return [g["initial_lr"] * scale for g in self.optimizer.param_groups]

    def make_model():
        return nn.Sequential(nn.Linear(13, 32), nn.ReLU(), nn.Linear(32, 3))

    models = nn.ModuleList([make_model() for _ in range(5)])
    init_state = sync_init(torch, models, init)
    m_sgd, m_look, m_adamax, m_nadam, m_adagrad = models
    for p in m_sgd[2].parameters():
        p.requires_grad_(False)                 # frozen at first, unfrozen later via add_param_group
    opt_sgd = CentralizedSGDW(m_sgd[0].parameters(), lr=0.05, weight_decay=1e-2)
    sched = WarmupInvSqrt(opt_sgd, warmup=5)
    opt_look = Lookahead(torch.optim.Adam(m_look.parameters(), lr=1e-2), k=3, alpha=0.5)
    others = [(m_adamax, torch.optim.Adamax(m_adamax.parameters(), lr=1e-2)),
              (m_nadam, torch.optim.NAdam(m_nadam.parameters(), lr=1e-2)),
              (m_adagrad, torch.optim.Adagrad(m_adagrad.parameters(), lr=5e-2, lr_decay=1e-3))]
    losses, lrs, per_model = [], [], []
    for epoch in range(epochs):
        if epoch == 10:
            for p in m_sgd[2].parameters():
                p.requires_grad_(True)
            opt_sgd.add_param_group({"params": m_sgd[2].parameters(), "lr": 0.02, "centralize": False})
        row = []
        for model, opt in [(m_sgd, opt_sgd), (m_look, opt_look)] + others:
            def closure():
                opt.zero_grad()
                loss = F.cross_entropy(model(X), y)
                loss.backward()
                return loss
            row.append(opt.step(closure).item() if opt is opt_sgd else None)
            if opt is not opt_sgd:
                row[-1] = closure().item()
                opt.step()
        sched.step()
        lrs.append([g["lr"] for g in opt_sgd.param_groups])
        losses.append(sum(row))
        per_model.append(row)

    # the custom optimizer's state survives a state_dict round trip
    sd = opt_sgd.state_dict()
    opt2 = CentralizedSGDW(m_sgd[0].parameters(), lr=0.05)
    opt2.add_param_group({"params": m_sgd[2].parameters(), "lr": 0.02, "centralize": False})
    opt2.load_state_dict(sd)
    same_state = all(torch.equal(opt2.state[p]["momentum_buffer"], opt_sgd.state[p]["momentum_buffer"])
                     for p in m_sgd.parameters())
    # sharpness: loss increase under a fixed perturbation of the flattened weights
    vec = nn.utils.parameters_to_vector(m_look.parameters())
    direction = torch.from_numpy(np.random.RandomState(1).randn(vec.numel()).astype(np.float32))
    direction = direction / direction.norm() * 0.05
    with torch.no_grad():
        base = F.cross_entropy(m_look(X), y).item()
        nn.utils.vector_to_parameters(vec + direction, m_look.parameters())
        sharp = F.cross_entropy(m_look(X), y).item() - base
        nn.utils.vector_to_parameters(vec, m_look.parameters())
    log(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; lrs {lrs[-1]}; state ok {same_state}; sharpness {sharp:.5f}")
    return {"losses": losses, "per_model": per_model, "lrs": lrs, "same_state": same_state, "sharp": sharp,
            "n_groups": len(opt_sgd.param_groups), "init": init_state}


if __name__ == "__main__":
    main(run)
