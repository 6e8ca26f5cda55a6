"""Two image-to-image programs from the PyTorch examples' family, on synthetic 16x16 images:

- super-resolution (ESPCN): Conv2d + ReLU/Tanh + nn.PixelShuffle(upscale), MSELoss, PSNR with
  torch.log10, low-res inputs made with F.interpolate(mode='bicubic') / F.avg_pool2d, orthogonal_ init;
- fast neural style (Johnson et al.): ReflectionPad2d + Conv2d + InstanceNorm2d(affine=True) residual
  blocks, nearest Upsample (nn.Upsample and F.interpolate(scale_factor=2)), a frozen VGG-like feature
  net (requires_grad_(False), eval()) whose slices are returned as a namedtuple, Gram matrices with
  bmm / transpose, ImageNet-style normalisation with view(-1, 1, 1) mean/std, a weighted content +
  style + total-variation loss, and clamp_(0, 255) of the stylised output.
"""
import math
from collections import namedtuple

import numpy as np

from _common import main, sync_init


def _images(rng, n, size=16):
    yy, xx = np.mgrid[0:size, 0:size] / size
    out = []
    for _ in range(n):
        f = rng.uniform(1, 4, 3)
        ph = rng.uniform(0, 2 * np.pi, 3)
        img = np.stack([0.5 + 0.5 * np.sin(2 * np.pi * f[c] * (xx + yy * (c - 1)) + ph[c]) for c in range(3)])
        out.append(img)
    return np.stack(out).astype(np.float32)


def run(torch, nn, F, init=None, steps=10, deterministic=False, log=print):
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    hr = torch.from_numpy(_images(rng, 24))                     # (24, 3, 16, 16) in [0, 1]

    # ---- super-resolution: 8x8 -> 16x16 on the luminance channel ----
    class SuperResolutionNet(nn.Module):
        def __init__(self, upscale_factor):
            super().__init__()
            self.relu = nn.ReLU()
            self.conv1 = nn.Conv2d(1, 16, (5, 5), (1, 1), (2, 2))
            self.conv2 = nn.Conv2d(16, 16, (3, 3), (1, 1), (1, 1))
            self.conv3 = nn.Conv2d(16, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
            self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
            nn.init.orthogonal_(self.conv1.weight, nn.init.calculate_gain("relu"))
            nn.init.orthogonal_(self.conv2.weight, nn.init.calculate_gain("relu"))
            nn.init.orthogonal_(self.conv3.weight)

        def forward(self, x):
            x = self.relu(self.conv1(x))
            x = self.relu(self.conv2(x))
            return self.pixel_shuffle(self.conv3(x))

    y_hr = (0.299 * hr[:, 0] + 0.587 * hr[:, 1] + 0.114 * hr[:, 2]).unsqueeze(1)
    y_lr = F.avg_pool2d(y_hr, 2)
    bicubic = F.interpolate(y_lr, scale_factor=2, mode="bicubic", align_corners=False).clamp(0, 1)
    sr = SuperResolutionNet(upscale_factor=2)

    # ---- fast neural style ----
    class ConvLayer(nn.Module):
        def __init__(self, cin, cout, k, stride):
            super().__init__()
            self.reflection_pad = nn.ReflectionPad2d(k // 2)
            self.conv2d = nn.Conv2d(cin, cout, k, stride)

        def forward(self, x):
            return self.conv2d(self.reflection_pad(x))

    class ResidualBlock(nn.Module):
        def __init__(self, ch):
            super().__init__()
            self.conv1, self.in1 = ConvLayer(ch, ch, 3, 1), nn.InstanceNorm2d(ch, affine=True)
            self.conv2, self.in2 = ConvLayer(ch, ch, 3, 1), nn.InstanceNorm2d(ch, affine=True)
            self.relu = nn.ReLU()

        def forward(self, x):
            residual = x
            out = self.relu(self.in1(self.conv1(x)))
            return self.in2(self.conv2(out)) + residual

    class UpsampleConvLayer(nn.Module):
        def __init__(self, cin, cout, k, stride, upsample=None):
            super().__init__()
            self.upsample = upsample
            self.reflection_pad = nn.ReflectionPad2d(k // 2)
            self.conv2d = nn.Conv2d(cin, cout, k, stride)

        def forward(self, x):
            if self.upsample:
                x = F.interpolate(x, mode="nearest", scale_factor=self.upsample)
            return self.conv2d(self.reflection_pad(x))

    class TransformerNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.in1 = ConvLayer(3, 8, 5, 1), nn.InstanceNorm2d(8, affine=True)
            self.conv2, self.in2 = ConvLayer(8, 16, 3, 2), nn.InstanceNorm2d(16, affine=True)
            self.res = nn.Sequential(ResidualBlock(16), ResidualBlock(16))
            self.deconv1 = UpsampleConvLayer(16, 8, 3, 1, upsample=2)
            self.in3 = nn.InstanceNorm2d(8, affine=True)
            self.up = nn.Upsample(scale_factor=1, mode="nearest")
            self.deconv2 = ConvLayer(8, 3, 5, 1)
            self.relu = nn.ReLU()

        def forward(self, X):
            y = self.relu(self.in1(self.conv1(X)))
            y = self.relu(self.in2(self.conv2(y)))
            y = self.res(y)
            y = self.relu(self.in3(self.deconv1(y)))
            return self.deconv2(self.up(y))

    class Features(nn.Module):          # a tiny frozen "VGG"
        def __init__(self, requires_grad=False):
            super().__init__()
            feats = [nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(8, 8, 3, padding=1),
                     nn.ReLU(inplace=True), nn.MaxPool2d(2, 2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(inplace=True)]
            self.slice1, self.slice2 = nn.Sequential(), nn.Sequential()
            for x in range(4):
                self.slice1.add_module(str(x), feats[x])
            for x in range(4, 7):
                self.slice2.add_module(str(x), feats[x])
            if not requires_grad:
                for param in self.parameters():
                    param.requires_grad = False

        def forward(self, X):
            h1 = self.slice1(X)
            h2 = self.slice2(h1)
            return namedtuple("VggOutputs", ["relu1_2", "relu2_1"])(h1, h2)

    def gram_matrix(y):
        (b, ch, h, w) = y.size()
        features = y.view(b, ch, w * h)
        features_t = features.transpose(1, 2)
        return features.bmm(features_t) / (ch * h * w)

    def normalize_batch(batch):
        mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
        std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
        batch = batch.div_(255.0)
        return (batch - mean) / std

    transformer, vgg = TransformerNet(), Features(requires_grad=False).eval()
    init_state = sync_init(torch, nn.ModuleDict({"sr": sr, "style": transformer, "vgg": vgg}), init)

    sr_opt = torch.optim.Adam(sr.parameters(), lr=3e-3)
    st_opt = torch.optim.Adam(transformer.parameters(), lr=3e-3)
    mse = nn.MSELoss()
    style = torch.from_numpy(_images(np.random.RandomState(7), 1)).mul(255)
    gram_style = [gram_matrix(y) for y in vgg(normalize_batch(style.clone()))]
    content_weight, style_weight, tv_weight = 10.0, 1e4, 1e-2
    sr_losses, psnrs, losses, parts = [], [], [], []
    for step in range(steps):
        idx = slice((step * 8) % 24, (step * 8) % 24 + 8)
        # super-resolution step
        sr_opt.zero_grad()
        loss_sr = mse(sr(y_lr[idx]), y_hr[idx])
        loss_sr.backward()
        sr_opt.step()
        sr_losses.append(loss_sr.item())
        psnrs.append(10 * math.log10(1 / loss_sr.item()))
        # style step
        x = hr[idx] * 255
        n_batch = len(x)
        st_opt.zero_grad()
        y = transformer(x)
        y_n, x_n = normalize_batch(y.clone()), normalize_batch(x.clone())
        features_y, features_x = vgg(y_n), vgg(x_n)
        content_loss = content_weight * mse(features_y.relu2_1, features_x.relu2_1)
        style_loss = 0.0
        for ft_y, gm_s in zip(features_y, gram_style):
            gm_y = gram_matrix(ft_y)
            style_loss += mse(gm_y, gm_s[:n_batch, :, :].expand_as(gm_y))
        style_loss *= style_weight
        tv = ((y[:, :, 1:, :] - y[:, :, :-1, :]).abs().mean() + (y[:, :, :, 1:] - y[:, :, :, :-1]).abs().mean())
        total_loss = content_loss + style_loss + tv_weight * tv
        total_loss.backward()
        st_opt.step()
        losses.append(total_loss.item())
        parts.append([content_loss.item(), style_loss.item()])
        log(f"step {step}: sr {loss_sr.item():.5f} style total {total_loss.item():.3f}")

    sr.eval()
    transformer.eval()
    with torch.no_grad():
        out = sr(y_lr[:8]).clamp(0.0, 1.0)
        psnr_net = (10 * torch.log10(1 / F.mse_loss(out, y_hr[:8]))).item()
        psnr_bicubic = (10 * torch.log10(1 / F.mse_loss(bicubic[:8], y_hr[:8]))).item()
        stylised = transformer(hr[:2] * 255).clamp_(0, 255)
        img = stylised[0].permute(1, 2, 0).round().to(torch.uint8).numpy()
    assert all(not p.requires_grad for p in vgg.parameters())
    return {"losses": losses, "sr_losses": sr_losses, "psnr": [psnr_net, psnr_bicubic], "parts": parts,
            "img_sum": int(img.astype(np.int64).sum()), "init": init_state}


if __name__ == "__main__":
    main(run)
