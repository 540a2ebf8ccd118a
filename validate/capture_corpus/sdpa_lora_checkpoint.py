# F.scaled_dot_product_attention with masks (a boolean causal mask from torch.ones().tril() and
# an additive float bias), LoRA adapters written by hand on a frozen base (A, B parameters,
# x @ A.T @ B.T scaled), buffers for the mask template, and torch.utils.checkpoint around
# every block's MLP inside forward.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

VOCAB, DIM, HEADS, LAYERS, RANK = 80, 32, 4, 2, 4


class LoRALinear(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.base = nn.Linear(d_in, d_out)
        self.base.weight.requires_grad_(False)
        self.base.bias.requires_grad_(False)
        self.A = nn.Parameter(torch.randn(RANK, d_in) * 0.01)
        self.B = nn.Parameter(torch.zeros(d_out, RANK))

    def forward(self, x):
        return self.base(x) + (x @ self.A.T @ self.B.T) * (16 / RANK)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.q, self.v = LoRALinear(DIM, DIM), LoRALinear(DIM, DIM)
        self.k = nn.Linear(DIM, DIM)
        self.o = nn.Linear(DIM, DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x, mask, bias):
        b, s, _ = x.shape
        h = self.norm1(x)
        q, k, v = (t.view(b, s, HEADS, -1).transpose(1, 2) for t in (self.q(h), self.k(h), self.v(h)))
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        attn = attn + F.scaled_dot_product_attention(q, k, v, attn_mask=bias) * 0.0
        x = x + self.o(attn.transpose(1, 2).reshape(b, s, DIM))
        return x + checkpoint(self.mlp, self.norm2(x), use_reentrant=False)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.embed.weight.requires_grad_(False)
        self.register_buffer("slopes", torch.linspace(-1.0, 0.0, HEADS).view(1, HEADS, 1, 1), persistent=False)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        s = ids.shape[1]
        mask = torch.ones(s, s, dtype=torch.bool).tril()
        distance = (torch.arange(s)[None, :] - torch.arange(s)[:, None]).float()
        bias = self.slopes * distance.abs()
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, mask, bias)
        return self.head(x)


def model():
    return Model()


def batch(batch_size, seq_len):
    ids = torch.randint(0, VOCAB, (batch_size, seq_len + 1))
    return ids[:, :-1], ids[:, 1:]
