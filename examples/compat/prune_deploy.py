"""The model-compression tutorial's path on a small CNN: train, then prune (torch.nn.utils.prune:
ln_structured on channels, l1_unstructured per layer, global_unstructured across layers), fine-tune
with the masks in place (weight_orig / weight_mask, forward pre-hooks), report sparsity, make it
permanent with prune.remove, fold BatchNorm into the convs with torch.nn.utils.fusion.fuse_conv_bn_eval
for inference, check the fused model against the unfused one with torch.testing.assert_close, and
time / profile one inference pass under torch.autograd.profiler.profile + record_function.
"""
import numpy as np

from _common import main, sync_init


def run(torch, nn, F, init=None, steps=12, deterministic=False, log=print):
    import importlib
    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")       # import torch.nn.utils.prune as prune
    fusion = importlib.import_module(torch.__name__ + ".nn.utils.fusion")
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    X = rng.randn(128, 1, 10, 10).astype(np.float32)
    y = (X[:, 0, :5].mean((1, 2)) > X[:, 0, 5:].mean((1, 2))).astype(np.int64) + 2 * (X[:, 0, :, :5].mean((1, 2)) > 0)
    X, Y = torch.from_numpy(X), torch.from_numpy(y)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
            self.conv2, self.bn2 = nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
            self.fc = nn.Linear(16, 4)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
            x = F.relu(self.bn2(self.conv2(x)))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    model = Net()
    init_state = sync_init(torch, model, init)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train(n):
        out = []
        model.train()
        for step in range(n):
            idx = slice((step * 32) % 128, (step * 32) % 128 + 32)
            loss = F.cross_entropy(model(X[idx]), Y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    def sparsity(t):
        return float(torch.sum(t == 0)) / float(t.nelement())

    losses = train(steps)
    # (the convs have no bias: a fully pruned channel plus a bias is a constant that BatchNorm, with batch
    # variance 0, turns into rounding noise, which Adam would amplify into real steps)
    prune.ln_structured(model.conv1, name="weight", amount=0.25, n=2, dim=0)
    prune.l1_unstructured(model.conv2, name="weight", amount=0.3)
    prune.global_unstructured([(model.conv2, "weight"), (model.fc, "weight")],
                              pruning_method=prune.L1Unstructured, amount=0.4)
    names = sorted(n for n, _ in model.named_buffers() if n.endswith("_mask"))
    assert prune.is_pruned(model) and hasattr(model.conv1, "weight_orig")
    losses += train(steps // 2)                   # fine-tune: gradients reach weight_orig through the mask
    sp = [round(sparsity(m.weight), 4) for m in (model.conv1, model.conv2, model.fc)]
    for m in (model.conv1, model.conv2, model.fc):
        prune.remove(m, "weight")
    assert not prune.is_pruned(model)
    log(f"sparsity after pruning: {sp}")

    model.eval()
    fused = nn.Sequential(fusion.fuse_conv_bn_eval(model.conv1, model.bn1), nn.ReLU(), nn.MaxPool2d(2),
                          fusion.fuse_conv_bn_eval(model.conv2, model.bn2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), model.fc).eval()
    with torch.no_grad():
        ref = model(X[:16])
        with torch.autograd.profiler.profile(record_shapes=True) as prof:
            with torch.autograd.profiler.record_function("fused_inference"):
                out = fused(X[:16])
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    events = {e.key for e in prof.key_averages()}
    acc = (out.argmax(1) == Y[:16]).float().mean().item()
    return {"losses": losses, "sparsity": sp, "mask_names": names, "acc": acc, "profiled": "fused_inference" in events,
            "ref_out": ref[:4].tolist(),
            "fused_out": out[:4].tolist(), "init": init_state}


if __name__ == "__main__":
    main(run)
