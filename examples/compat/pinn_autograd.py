"""Autograd-heavy code: a physics-informed network solving u'' = -pi^2 sin(pi x) on [0, 1] with u(0)=u(1)=0,
derivatives from torch.autograd.grad(create_graph=True), Adam followed by LBFGS with a closure;
a custom torch.autograd.Function (straight-through rounding) with ctx.save_for_backward; a gradient
penalty (WGAN-GP style) through autograd.grad on interpolated inputs; tensor and module hooks
(register_hook, register_forward_hook, register_full_backward_hook); torch.autograd.functional.jacobian.
"""
import math


from _common import main, sync_init


def run(torch, nn, F, init=None, steps=60, deterministic=False, log=print):
    torch.manual_seed(0)

    class PINN(nn.Module):
        def __init__(self, width=20):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(1, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(),
                                     nn.Linear(width, 1))

        def forward(self, x):
            return self.net(x)

    model = PINN()
    critic = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))
    init_state = sync_init(torch, nn.ModuleDict({"pinn": model, "critic": critic}), init)
    x = torch.linspace(0, 1, 32).unsqueeze(1).requires_grad_(True)
    xb = torch.tensor([[0.0], [1.0]])

    def pde_loss():
        u = model(x)
        du = torch.autograd.grad(u, x, grad_outputs=torch.ones_like(u), create_graph=True)[0]
        d2u = torch.autograd.grad(du.sum(), x, create_graph=True)[0]
        residual = d2u + math.pi ** 2 * torch.sin(math.pi * x)
        return residual.pow(2).mean() + 10 * model(xb).pow(2).mean()

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = pde_loss()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    lbfgs = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=10, history_size=10,
                              line_search_fn="strong_wolfe")

    def closure():
        lbfgs.zero_grad()
        loss = pde_loss()
        loss.backward()
        return loss

    for _ in range(2):
        losses.append(lbfgs.step(closure).item())
    with torch.no_grad():
        xt = torch.linspace(0, 1, 11).unsqueeze(1)
        err = (model(xt) - torch.sin(math.pi * xt)).abs().max().item()

    # a custom Function: straight-through rounding
    class RoundSTE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, inp, scale):
            ctx.save_for_backward(inp)
            ctx.scale = scale
            return torch.round(inp * scale) / scale

        @staticmethod
        def backward(ctx, grad_out):
            (inp,) = ctx.saved_tensors
            return grad_out * (inp.abs() <= 1).to(grad_out.dtype), None

    w = torch.tensor([0.26, -0.74, 1.5], requires_grad=True)
    q = RoundSTE.apply(w, 2.0)
    (q * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    ste = {"q": q.tolist(), "grad": w.grad.tolist()}

    # gradient penalty on interpolates between "real" and "fake" points
    real = torch.tensor([[1.0, 2.0], [0.5, -1.0]])
    fake = torch.tensor([[0.0, 0.5], [2.0, 1.0]])
    alpha = torch.tensor([[0.3], [0.7]])
    interp = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    grads = torch.autograd.grad(critic(interp).sum(), interp, create_graph=True, retain_graph=True)[0]
    gp = ((grads.norm(2, dim=1) - 1) ** 2).mean()
    gp.backward()
    gp_grad_ok = all(p.grad is not None for p in critic.parameters() if p.dim() > 1)

    # hooks
    seen = {}

    def fwd_hook(module, inputs, output):
        seen["fwd"] = tuple(output.shape)

    def bwd_hook(module, grad_input, grad_output):
        seen["bwd"] = (tuple(grad_input[0].shape), tuple(grad_output[0].shape))

    def tensor_hook(grad):
        seen["tensor_hook"] = tuple(grad.shape)
        return grad * 2

    h1 = model.net[1].register_forward_hook(fwd_hook)
    h2 = model.net[0].register_full_backward_hook(bwd_hook)
    xin = torch.rand(5, 1, requires_grad=True)
    xin.register_hook(tensor_hook)
    model(xin).sum().backward()
    h1.remove()
    h2.remove()
    jac = torch.autograd.functional.jacobian(lambda t: t ** 2 + t.sum(), torch.tensor([1.0, 2.0]))
    log(f"pinn loss {losses[0]:.3f} -> {losses[-1]:.5f}, max error {err:.4f}; ste {ste}; gp {gp.item():.4f}; {seen}")
    return {"losses": losses, "err": err, "ste": ste, "gp": gp.item(), "gp_grad_ok": gp_grad_ok,
            "hooks": seen, "jac": jac.tolist(), "init": init_state}


if __name__ == "__main__":
    main(run)
