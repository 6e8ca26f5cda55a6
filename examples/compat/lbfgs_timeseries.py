"""Sine-wave sequence prediction in float64 (pytorch/examples' time_sequence_prediction): two stacked
LSTMCells unrolled by hand with .double() weights and torch.set_default_dtype(torch.float64), trained
with LBFGS and a closure (each closure call is recorded), then asked to continue the waves for
``future`` steps past the input, feeding its own predictions back.
"""
import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, steps=3, future=20, deterministic=False, log=print):
    torch.manual_seed(0)
    old_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        T, L, N = 20, 30, 10
        rng = np.random.RandomState(2)
        x = np.empty((N, L), "int64")
        x[:] = np.arange(L) + rng.randint(-4 * T, 4 * T, N).reshape(N, 1)
        data = np.sin(x / 1.0 / T)
        inp, target = torch.from_numpy(data[3:, :-1]), torch.from_numpy(data[3:, 1:])
        test_inp, test_target = torch.from_numpy(data[:3, :-1]), torch.from_numpy(data[:3, 1:])
        assert inp.dtype == torch.float64

        class Sequence(nn.Module):
            def __init__(self, hidden=16):
                super().__init__()
                self.hidden = hidden
                self.lstm1 = nn.LSTMCell(1, hidden)
                self.lstm2 = nn.LSTMCell(hidden, hidden)
                self.linear = nn.Linear(hidden, 1)

            def forward(self, input, future=0):
                outputs = []
                h_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
                c_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
                h_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
                c_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
                for input_t in input.split(1, dim=1):
                    h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                    h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                    output = self.linear(h_t2)
                    outputs += [output]
                for i in range(future):  # feed the predictions back in
                    h_t, c_t = self.lstm1(output, (h_t, c_t))
                    h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                    output = self.linear(h_t2)
                    outputs += [output]
                return torch.cat(outputs, dim=1)

        seq = Sequence().double()
        init_state = sync_init(torch, seq, init)
        criterion = nn.MSELoss()
        optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=4, history_size=10)
        losses, step_losses = [], []
        for i in range(steps):
            def closure():
                optimizer.zero_grad()
                out = seq(inp)
                loss = criterion(out, target)
                losses.append(loss.item())
                loss.backward()
                return loss
            step_losses.append(optimizer.step(closure).item())
            with torch.no_grad():
                pred = seq(test_inp, future=future)
                test_loss = criterion(pred[:, :-future], test_target).item()
            log(f"step {i}: loss {step_losses[-1]:.6f}, test loss {test_loss:.6f}")
        y = pred.detach().numpy()
        return {"losses": losses, "init": init_state, "step_losses": step_losses, "test_loss": test_loss,
                "future": y[:, -future:].tolist(), "dtype": str(pred.dtype).split(".")[-1],
                "n_evals": len(losses), "state_keys": sorted(optimizer.state_dict()["state"][0].keys())}
    finally:
        torch.set_default_dtype(old_dtype)


if __name__ == "__main__":
    main(run)
