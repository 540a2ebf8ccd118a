# A tiny U-Net (conv, GroupNorm, SiLU, stride-2 down, nearest upsampling, cat skips) with its
# own loss, compiled too (scope [model, loss]), for the compiled validation
# (validate/compiled/README.md).
import torch
import torch.nn as nn
import torch.nn.functional as F

CLASSES = 4
sizes = {"batch_size": [2, 3, 5], "image_size": [16, 24, 40]}


class ConvBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm1 = nn.GroupNorm(4, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(4, cout)

    def forward(self, x):
        x = F.silu(self.norm1(self.conv1(x)))
        return F.silu(self.norm2(self.conv2(x)))


class UNet(nn.Module):
    def __init__(self, base=8):
        super().__init__()
        self.enc1 = ConvBlock(3, base)
        self.down = nn.Conv2d(base, base, 3, stride=2, padding=1)
        self.mid = ConvBlock(base, 2 * base)
        self.dec = ConvBlock(2 * base + base, base)
        self.out = nn.Conv2d(base, CLASSES, 1)

    def forward(self, x):
        s1 = self.enc1(x)
        m = self.mid(self.down(s1))
        d = self.dec(torch.cat([F.interpolate(m, scale_factor=2.0, mode="nearest"), s1], dim=1))
        return self.out(d)


def model():
    return UNet()


def batch(batch_size, image_size):
    return (torch.randn(batch_size, 3, image_size, image_size),
            torch.randint(0, CLASSES, (batch_size, image_size, image_size)))


def loss(output, target):
    return F.cross_entropy(output, target)
