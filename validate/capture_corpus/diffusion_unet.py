# A small diffusion U-Net: sinusoidal timestep embedding (arange, exp, sin/cos, cat) fed through
# an MLP into every residual block, GroupNorm + SiLU + conv blocks, a self-attention block at the
# lowest resolution (tokens by reshape/permute, attention by bmm), nearest upsampling by
# F.interpolate, skips by torch.cat; the loss is the MSE against the noise.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CH, TIME_DIM = 16, 32


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.norm1, self.norm2 = nn.GroupNorm(4, c_in), nn.GroupNorm(4, c_out)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1)
        self.time = nn.Linear(TIME_DIM, c_out)
        self.skip = nn.Conv2d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

    def forward(self, x, t):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time(F.silu(t))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class AttentionBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm = nn.GroupNorm(4, c)
        self.qkv = nn.Conv2d(c, 3 * c, 1)
        self.out = nn.Conv2d(c, c, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, c, h * w).unbind(1)
        weights = torch.softmax(torch.bmm(q.permute(0, 2, 1), k) / math.sqrt(c), dim=-1)
        out = torch.bmm(v, weights.permute(0, 2, 1)).reshape(b, c, h, w)
        return x + self.out(out)


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.time_mlp = nn.Sequential(nn.Linear(TIME_DIM, TIME_DIM), nn.SiLU(), nn.Linear(TIME_DIM, TIME_DIM))
        self.stem = nn.Conv2d(3, CH, 3, padding=1)
        self.down1 = ResBlock(CH, CH)
        self.down2 = ResBlock(CH, 2 * CH)
        self.mid = ResBlock(2 * CH, 2 * CH)
        self.attn = AttentionBlock(2 * CH)
        self.up2 = ResBlock(4 * CH, CH)
        self.up1 = ResBlock(2 * CH, CH)
        self.head = nn.Conv2d(CH, 3, 3, padding=1)

    def forward(self, x, t):
        temb = self.time_mlp(timestep_embedding(t, TIME_DIM))
        h0 = self.down1(self.stem(x), temb)
        h1 = self.down2(F.avg_pool2d(h0, 2), temb)
        m = self.attn(self.mid(F.avg_pool2d(h1, 2), temb))
        u = self.up2(torch.cat([F.interpolate(m, scale_factor=2.0, mode="nearest"), h1], dim=1), temb)
        u = self.up1(torch.cat([F.interpolate(u, scale_factor=2.0, mode="nearest"), h0], dim=1), temb)
        return self.head(u)


def model():
    return UNet()


def batch(batch_size, image_size):
    images = torch.randn(batch_size, 3, image_size, image_size)
    steps = torch.randint(0, 1000, (batch_size,))
    noise = torch.randn(batch_size, 3, image_size, image_size)
    return (images, steps), noise


def loss(output, target):
    return F.mse_loss(output, target)


sizes = {"image_size": [16, 24, 32]}
