"""Differentiable physics in float64: fit the parameters of a damped pendulum / Lotka-Volterra system
by back-propagating through an RK4 integrator (torch.stack of the trajectory, Adam on log-parameters),
an implicit (backward-Euler) stiff solve whose Newton steps use torch.autograd.functional.jacobian and
torch.linalg.solve, the Hessian of an energy with torch.autograd.functional.hessian and its
torch.linalg.eigvalsh spectrum, vjp / jvp, torch.func.jacrev under torch.func.vmap for per-sample
Jacobians, torch.linalg.norm / vector_norm / matrix_norm / det / inv / cond, and a Hamiltonian check
(energy drift of a symplectic leapfrog integrator).
"""
import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, steps=12, deterministic=False, log=print):
    torch.manual_seed(0)
    dt = torch.float64
    AF = torch.autograd.functional

    def lotka(state, p):
        x, y = state[..., 0], state[..., 1]
        a, b, c, d = p.unbind(0)
        return torch.stack([a * x - b * x * y, d * x * y - c * y], dim=-1)

    def rk4(f, y0, p, h, n):
        ys = [y0]
        y = y0
        for _ in range(n):
            k1 = f(y, p)
            k2 = f(y + 0.5 * h * k1, p)
            k3 = f(y + 0.5 * h * k2, p)
            k4 = f(y + h * k3, p)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            ys.append(y)
        return torch.stack(ys)

    true_p = torch.tensor([1.0, 0.4, 0.8, 0.2], dtype=dt)
    y0 = torch.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=dt)
    with torch.no_grad():
        target = rk4(lotka, y0, true_p, 0.1, 30)

    class Params(nn.Module):
        def __init__(self):
            super().__init__()
            self.log_p = nn.Parameter(torch.log(torch.tensor([0.8, 0.5, 1.0, 0.3], dtype=dt)))

        def forward(self):
            return self.log_p.exp()

    model = Params()
    init_state = sync_init(torch, model, init)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for step in range(steps):
        traj = rk4(lotka, y0, model(), 0.1, 30)
        loss = F.mse_loss(traj, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 5 == 0:
            log(f"step {step}: loss {loss.item():.6f} params {[round(v, 3) for v in model().tolist()]}")

    # backward Euler on a stiff linear + cubic system, Newton with autograd jacobians
    A = torch.tensor([[-50.0, 1.0], [0.0, -0.5]], dtype=dt)

    def stiff(y):
        return A @ y - 0.1 * y ** 3

    y = torch.tensor([1.0, 1.0], dtype=dt)
    h = 0.1
    newton_iters = []
    for _ in range(5):
        z = y.clone()
        for it in range(20):
            g = z - y - h * stiff(z)
            J = AF.jacobian(lambda v: v - y - h * stiff(v), z)
            z = z - torch.linalg.solve(J, g)
            if torch.linalg.vector_norm(g) < 1e-12:
                break
        newton_iters.append(it)
        y = z
    implicit_end = y.tolist()

    # Hessian of a spring-chain energy and its spectrum
    def energy(q):
        return 0.5 * ((q[1:] - q[:-1]) ** 2).sum() + 0.5 * q[0] ** 2 + 0.25 * (q ** 4).sum()

    q0 = torch.linspace(-0.5, 0.5, 5, dtype=dt)
    H = AF.hessian(energy, q0)
    evals = torch.linalg.eigvalsh(H)
    _, vjp_val = AF.vjp(lambda q: q.sin() * q, q0, torch.ones(5, dtype=dt))
    _, jvp_val = AF.jvp(lambda q: q.sin() * q, q0, torch.ones(5, dtype=dt))
    per_sample = torch.func.vmap(torch.func.jacrev(lambda s: lotka(s, true_p)))(y0)
    norms = [torch.linalg.norm(H).item(), torch.linalg.matrix_norm(H, ord=2).item(),
             torch.linalg.det(H).item(), torch.linalg.inv(H)[0, 0].item(), torch.linalg.cond(H).item()]

    # leapfrog for a pendulum: energy stays bounded
    def pendulum_energy(th, om):
        return 0.5 * om ** 2 - torch.cos(th)

    th, om = torch.tensor(1.0, dtype=dt), torch.tensor(0.0, dtype=dt)
    e0 = pendulum_energy(th, om)
    for _ in range(200):
        om = om - 0.5 * 0.05 * torch.sin(th)
        th = th + 0.05 * om
        om = om - 0.5 * 0.05 * torch.sin(th)
    drift = (pendulum_energy(th, om) - e0).abs().item()
    return {"losses": losses, "params": model().tolist(), "newton_iters": newton_iters, "implicit_end": implicit_end,
            "evals": evals.tolist(), "vjp": vjp_val.tolist(), "jvp": jvp_val.tolist(),
            "per_sample": per_sample.tolist(), "norms": norms, "drift": drift, "init": init_state}


if __name__ == "__main__":
    main(run)
