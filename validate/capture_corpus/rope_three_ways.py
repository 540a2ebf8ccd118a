# A small decoder whose blocks apply rotary position embeddings written three ways, as course
# code does: into a zeros_like by writes into views, by torch.stack of the rotated halves, and
# by complex multiplication; attention by einsum with a triu mask, MLP by hand.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

DIM, HEADS, VOCAB, LAYERS = 64, 4, 96, 3


def rope_frequencies(seq_len, head_dim):
    inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq_len).float(), inv)
    return angles.cos(), angles.sin()


def rope_into_zeros(x, cos, sin):
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.zeros_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def rope_by_stack(x, cos, sin):
    even, odd = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
    return rotated.flatten(-2)


def rope_complex(x, cos, sin):
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())
    rotation = torch.complex(cos, sin)
    return torch.view_as_real(pairs * rotation).flatten(-2).type_as(x)


class Block(nn.Module):
    def __init__(self, rope):
        super().__init__()
        self.rope = rope
        self.norm1, self.norm2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.proj = nn.Linear(DIM, DIM, bias=False)
        self.up = nn.Linear(DIM, 4 * DIM)
        self.down = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(DIM, dim=-1)
        q, k, v = (t.view(b, s, HEADS, DIM // HEADS).transpose(1, 2) for t in (q, k, v))
        cos, sin = rope_frequencies(s, DIM // HEADS)
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(DIM // HEADS)
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        attn = torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), v)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, DIM))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList([Block(r) for r in (rope_into_zeros, rope_by_stack, rope_complex)][:LAYERS])
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def model():
    return Model()


def batch(batch_size, seq_len):
    ids = torch.randint(0, VOCAB, (batch_size, seq_len + 1))
    return ids[:, :-1], ids[:, 1:]
