"""Audio classification in the torchaudio-tutorial shape, on synthetic tones: torch.stft with a
hann_window into a log power spectrogram, a channels-last CNN (model and input converted with
.to(memory_format=torch.channels_last), as the performance guide recommends) with BatchNorm2d, MaxPool2d,
AdaptiveAvgPool2d, SGD with momentum + OneCycleLR, a bfloat16 autocast evaluation whose loss comes out in
float32, and torch.istft reconstructing a clip from its spectrogram.
"""
import numpy as np

from _common import main, sync_init

SR, N = 800, 800          # samples per second, samples per clip


def _clips(n, seed):
    """Four classes of tones (base frequency) with a random phase, a harmonic and a little noise."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 4
    t = np.arange(N) / SR
    base = np.array([50.0, 90.0, 140.0, 210.0])[labels][:, None]
    x = np.sin(2 * np.pi * base * t + rng.uniform(0, 6.28, (n, 1))) + 0.3 * np.sin(4 * np.pi * base * t)
    return (x + 0.2 * rng.standard_normal((n, N))).astype(np.float32), labels


def run(torch, nn, F, init=None, epochs=6, deterministic=False, log=print):
    torch.manual_seed(0)
    X, y = _clips(96, 0)
    Xv, yv = _clips(32, 1)
    n_fft, hop = 64, 32
    window = torch.hann_window(n_fft)

    def spectrogram(wave):
        spec = torch.stft(wave, n_fft, hop_length=hop, window=window, return_complex=True)
        return torch.log1p(spec.abs().pow(2)).unsqueeze(1)              # (B, 1, freq, frames)

    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.0 if deterministic else 0.1), nn.Linear(16, 4))
    init_state = sync_init(torch, model, init)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    batches = len(X) // 16
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=epochs * batches)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    losses, layouts = [], []
    for epoch in range(epochs):
        model.train()
        order = np.arange(len(X)) if deterministic else np.random.default_rng(epoch).permutation(len(X))
        for b in range(batches):
            idx = torch.from_numpy(order[b * 16:(b + 1) * 16])
            feats = spectrogram(Xt[idx]).to(memory_format=torch.channels_last)
            h = model[0](feats)
            layouts.append(h.is_contiguous(memory_format=torch.channels_last))
            loss = F.cross_entropy(model[1:](h), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        log(f"epoch {epoch}: loss {np.mean(losses[-batches:]):.4f}")

    model.eval()
    with torch.no_grad():
        feats = spectrogram(torch.from_numpy(Xv)).to(memory_format=torch.channels_last)
        acc = (model(feats).argmax(1) == torch.from_numpy(yv)).float().mean().item()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(feats)
            amp_loss = F.cross_entropy(logits, torch.from_numpy(yv))
        spec = torch.stft(torch.from_numpy(Xv[:2]), n_fft, hop_length=hop, window=window, return_complex=True)
        back = torch.istft(spec, n_fft, hop_length=hop, window=window, length=N)
        istft_err = (back - torch.from_numpy(Xv[:2])).abs().max().item()
    log(f"val acc {acc:.3f}, bf16 logits {logits.dtype}, loss {amp_loss.dtype}, istft error {istft_err:.2e}")
    assert istft_err < 1e-4, istft_err
    return {"losses": losses, "acc": acc, "istft_err": istft_err, "channels_last": all(layouts),
            "amp_dtypes": [str(logits.dtype).split(".")[-1], str(amp_loss.dtype).split(".")[-1]],
            "init": init_state}


if __name__ == "__main__":
    main(run)
