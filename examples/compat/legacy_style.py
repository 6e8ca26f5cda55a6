"""Old-style PyTorch (the 0.3/0.4-era code still common in repositories): Variable, .data, the
torch.FloatTensor / LongTensor constructors, torch.Tensor(n, m) with in-place init, x.new(...),
F.sigmoid / F.tanh, size_average / reduce loss arguments, nn.init.xavier_uniform (no underscore),
clip_grad_norm (no underscore), manual learning-rate decay through optimizer.param_groups,
torch.max(x, 1)[1] predictions, .cuda() guarded by is_available, unsqueeze_, x.numpy(), x.data[0]
and model.double().
"""
import numpy as np
from sklearn.datasets import load_iris

from _common import main, sync_init


def run(torch, nn, F, init=None, epochs=30, deterministic=False, log=print):
    from_autograd = torch.autograd
    Variable = from_autograd.Variable
    torch.manual_seed(0)
    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    perm = np.random.RandomState(0).permutation(len(X))
    X, y = X[perm], y[perm]
    use_cuda = torch.cuda.is_available()

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.fc1 = nn.Linear(4, 16)
            self.fc2 = nn.Linear(16, 3)
            self.gate = nn.Parameter(torch.Tensor(16))
            self.gate.data.fill_(0.5)
            nn.init.xavier_uniform(self.fc1.weight)

        def forward(self, x):
            h = F.tanh(self.fc1(x)) * F.sigmoid(self.gate)
            return F.log_softmax(self.fc2(h), dim=1)

    model = Net()
    init_state = sync_init(torch, model, init)
    if use_cuda:
        model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    X_t = torch.FloatTensor(X.astype(np.float32))
    y_t = torch.LongTensor(y.astype(np.int64))
    losses = []
    for epoch in range(epochs):
        if epoch and epoch % 10 == 0:
            for param_group in optimizer.param_groups:
                param_group["lr"] = param_group["lr"] * 0.5
        for i in range(0, 120, 40):
            data, target = Variable(X_t[i:i + 40]), Variable(y_t[i:i + 40])
            if use_cuda:
                data, target = data.cuda(), target.cuda()
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target, size_average=True)
            loss.backward()
            nn.utils.clip_grad_norm(model.parameters(), 5.0)
            optimizer.step()
            losses.append(loss.data.item())
    test_x = Variable(X_t[120:], volatile=True)
    output = model(test_x)
    pred = torch.max(output, 1)[1]
    correct = pred.eq(y_t[120:]).sum().item()
    summed = F.nll_loss(output, y_t[120:], size_average=False).data.item()
    per_sample = F.nll_loss(output, y_t[120:], reduce=False)
    # tensor constructors and in-place reshapes of the old API
    buf = X_t.new(2, 3).zero_()
    eye = torch.Tensor(3, 3).zero_()
    eye[torch.arange(3), torch.arange(3)] = 1.0
    v = torch.FloatTensor([1.0, 2.0, 3.0])
    v.unsqueeze_(0)
    grads = [p.grad.data.norm().item() for p in model.parameters()]
    as_np = output.data.numpy()
    first = output.data[0][1].item()
    dmodel = Net().double()
    dmodel.load_state_dict({k: v_.double() for k, v_ in model.state_dict().items()})
    dout = dmodel(X_t[120:].double())
    log(f"accuracy {correct}/30, summed nll {summed:.3f}, lr {optimizer.param_groups[0]['lr']}")
    return {"losses": losses, "correct": correct, "summed": summed, "per_sample": per_sample.tolist(),
            "shapes": [tuple(buf.shape), tuple(v.shape), eye.trace().item(), as_np.shape, dout.dtype == torch.float64],
            "grads": grads, "first": first, "dout": dout.tolist(), "init": init_state}


if __name__ == "__main__":
    main(run)
