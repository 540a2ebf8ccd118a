# A small U-Net for per-pixel classification: conv, GroupNorm, SiLU, a stride-2 down path,
# nearest upsampling and torch.cat skip connections.
import torch
import torch.nn as nn
import torch.nn.functional as F

CLASSES = 4
sizes = {"image_size": [32, 48, 64]}  # multiples of 16 (two stride-2 downsamplings and margin)


class ConvBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm1 = nn.GroupNorm(8, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(8, cout)

    def forward(self, x):
        x = F.silu(self.norm1(self.conv1(x)))
        return F.silu(self.norm2(self.conv2(x)))


class UNet(nn.Module):
    def __init__(self, base=16):
        super().__init__()
        self.enc1 = ConvBlock(3, base)
        self.down1 = nn.Conv2d(base, base, 3, stride=2, padding=1)
        self.enc2 = ConvBlock(base, 2 * base)
        self.down2 = nn.Conv2d(2 * base, 2 * base, 3, stride=2, padding=1)
        self.mid = ConvBlock(2 * base, 4 * base)
        self.dec2 = ConvBlock(4 * base + 2 * base, 2 * base)
        self.dec1 = ConvBlock(2 * base + base, base)
        self.out = nn.Conv2d(base, CLASSES, 1)

    def forward(self, x):
        s1 = self.enc1(x)
        s2 = self.enc2(self.down1(s1))
        m = self.mid(self.down2(s2))
        d2 = self.dec2(torch.cat([F.interpolate(m, scale_factor=2.0, mode="nearest"), s2], dim=1))
        d1 = self.dec1(torch.cat([F.interpolate(d2, scale_factor=2.0, mode="nearest"), s1], dim=1))
        return self.out(d1)


def model():
    return UNet()


def batch(batch_size, image_size):
    return (torch.randn(batch_size, 3, image_size, image_size),
            torch.randint(0, CLASSES, (batch_size, image_size, image_size)))


def loss(output, target):
    return F.cross_entropy(output, target)
