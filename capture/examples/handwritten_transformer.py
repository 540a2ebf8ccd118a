# A course-assignment decoder written from primitives: softmax as exp / sum / div, SiLU as
# x * sigmoid(x), RMSNorm by hand, a causal mask from a registered tril buffer, SwiGLU MLP.
import math

import torch
import torch.nn as nn

VOCAB, WIDTH, HEADS, LAYERS, MAX_LEN = 512, 64, 4, 3, 128


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.weight


def softmax(x):
    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(WIDTH), RMSNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
        self.proj = nn.Linear(WIDTH, WIDTH, bias=False)
        self.gate = nn.Linear(WIDTH, 4 * WIDTH, bias=False)
        self.up = nn.Linear(WIDTH, 4 * WIDTH, bias=False)
        self.down = nn.Linear(4 * WIDTH, WIDTH, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(MAX_LEN, MAX_LEN)))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q = q.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        k = k.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        v = v.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(c // HEADS)
        att = att.masked_fill(self.mask[:t, :t] == 0, float("-inf"))
        y = softmax(att) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        h = self.norm2(x)
        g = self.gate(h)
        return x + self.down(g * torch.sigmoid(g) * self.up(h))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx):
        x = self.tok(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def model():
    return Decoder()


def batch(batch_size, seq_len):
    return torch.randint(0, VOCAB, (batch_size, seq_len)), torch.randint(0, VOCAB, (batch_size, seq_len))
