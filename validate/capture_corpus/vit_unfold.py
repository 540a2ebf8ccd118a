# A ViT whose patch embedding is written by hand with Tensor.unfold (patches -> linear), a class
# token expanded and concatenated, a learned position embedding added, pre-norm blocks with
# nn.MultiheadAttention (batch_first) and a classification head on the class token.
import torch
import torch.nn as nn

PATCH, DIM, HEADS, LAYERS, CLASSES, IMAGE = 8, 48, 4, 2, 10, 32


class PatchEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3 * PATCH * PATCH, DIM)

    def forward(self, images):
        b, c = images.shape[:2]
        patches = images.unfold(2, PATCH, PATCH).unfold(3, PATCH, PATCH)
        patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * PATCH * PATCH)
        return self.proj(patches)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.attn = nn.MultiheadAttention(DIM, HEADS, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = PatchEmbed()
        self.cls = nn.Parameter(torch.zeros(1, 1, DIM))
        self.pos = nn.Parameter(torch.zeros(1, (IMAGE // PATCH) ** 2 + 1, DIM))
        self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, images):
        x = self.patch(images)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


def model():
    return ViT()


def batch(batch_size):
    return torch.randn(batch_size, 3, IMAGE, IMAGE), torch.randint(0, CLASSES, (batch_size,))
