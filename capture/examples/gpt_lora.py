# A small GPT whose attention and MLP projections carry hand-written LoRA adapters (rank 8):
# the base weights are frozen (requires_grad False), only the adapters train.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, WIDTH, HEADS, LAYERS, MAX_LEN, RANK = 512, 128, 4, 4, 128, 8


class LoRALinear(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.base = nn.Linear(cin, cout)
        self.base.weight.requires_grad_(False)
        self.base.bias.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.randn(RANK, cin) / math.sqrt(cin))
        self.lora_b = nn.Parameter(torch.zeros(cout, RANK))

    def forward(self, x):
        return self.base(x) + (x @ self.lora_a.t()) @ self.lora_b.t() * (16 / RANK)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.attn = LoRALinear(WIDTH, 3 * WIDTH)
        self.proj = LoRALinear(WIDTH, WIDTH)
        self.fc = LoRALinear(WIDTH, 4 * WIDTH)
        self.out = LoRALinear(4 * WIDTH, WIDTH)
        for ln in (self.ln1, self.ln2):
            ln.weight.requires_grad_(False)
            ln.bias.requires_grad_(False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // HEADS))
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.wpe = nn.Embedding(MAX_LEN, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(WIDTH)
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for p in (self.wte.weight, self.wpe.weight, self.ln_f.weight, self.ln_f.bias):
            p.requires_grad_(False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1])
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def model():
    return GPT()


def batch(batch_size, seq_len):
    return torch.randint(0, VOCAB, (batch_size, seq_len)), torch.randint(0, VOCAB, (batch_size, seq_len))
