# A tiny llama-style decoder (RMSNorm, rotary positions, SwiGLU, SDPA with grouped k/v heads
# repeated by hand, untied head) for the compiled validation (validate/compiled/README.md).
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, HIDDEN, HEADS, KV_HEADS, LAYERS, FFN = 96, 32, 4, 2, 2, 64
sizes = {"batch_size": [4, 5, 7], "seq_len": [16, 24, 40]}


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(HIDDEN))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


def rotate(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        d = HIDDEN // HEADS
        self.input_norm = RMSNorm()
        self.q = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.k = nn.Linear(HIDDEN, KV_HEADS * d, bias=False)
        self.v = nn.Linear(HIDDEN, KV_HEADS * d, bias=False)
        self.o = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.post_norm = RMSNorm()
        self.gate = nn.Linear(HIDDEN, FFN, bias=False)
        self.up = nn.Linear(HIDDEN, FFN, bias=False)
        self.down = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        d = HIDDEN // HEADS
        h = self.input_norm(x)
        q = self.q(h).view(b, s, HEADS, d).transpose(1, 2)
        k = self.k(h).view(b, s, KV_HEADS, d).transpose(1, 2)
        v = self.v(h).view(b, s, KV_HEADS, d).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, s, HIDDEN))
        h = self.post_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm()
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids):
        s = ids.shape[1]
        d = HIDDEN // HEADS
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        angles = torch.outer(torch.arange(s, dtype=torch.float32), inv)
        emb = torch.cat((angles, angles), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


def model():
    return Llama()


def batch(batch_size, seq_len):
    return torch.randint(0, VOCAB, (batch_size, seq_len)), torch.randint(0, VOCAB, (batch_size, seq_len))
