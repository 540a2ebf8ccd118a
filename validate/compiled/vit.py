# A tiny ViT (patch convolution, class token, learned positions, nn.MultiheadAttention blocks)
# for the compiled validation (validate/compiled/README.md).
import torch
import torch.nn as nn

HIDDEN, HEADS, LAYERS, PATCH, CLASSES = 32, 2, 2, 8, 10
sizes = {"batch_size": [2, 3, 5], "image_size": [32, 48, 64]}


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.attn = nn.MultiheadAttention(HIDDEN, HEADS, batch_first=True)
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.mlp = nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(), nn.Linear(4 * HIDDEN, HIDDEN))

    def forward(self, x):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, HIDDEN, PATCH, stride=PATCH)
        self.cls = nn.Parameter(torch.zeros(1, 1, HIDDEN))
        self.pos = nn.Parameter(torch.zeros(1, 1 + (64 // PATCH) ** 2, HIDDEN))
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, images):
        x = self.patch(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
        x = x + self.pos[:, : x.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x[:, 0]))


def model():
    return ViT()


def batch(batch_size, image_size):
    return torch.randn(batch_size, 3, image_size, image_size), torch.randint(0, CLASSES, (batch_size,))
