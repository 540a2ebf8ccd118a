# sdpa_causal.py: a small causal decoder whose attention calls F.scaled_dot_product_attention
# (is_causal=True), as torch 2.x user code does; the capture writes it as the graph format's
# `attention` op, so the scenario's `attention:` backend applies. Needs torch >= 2.0 (1.13 has
# no SDPA: model() says so, the capture refuses it and its test skips).
import torch
import torch.nn as nn
import torch.nn.functional as F

needs_torch_feature = "torch.nn.functional.scaled_dot_product_attention"  # capture/tests skip without it
VOCAB, HIDDEN, HEADS, LAYERS = 512, 128, 4, 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.fc = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.out = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(h, dim=2)
        q = q.view(b, s, HEADS, h // HEADS).transpose(1, 2)
        k = k.view(b, s, HEADS, h // HEADS).transpose(1, 2)
        v = v.view(b, s, HEADS, h // HEADS).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(b, s, h)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, idx):
        x = self.wte(idx)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln_f(x))


def model():
    if not hasattr(F, "scaled_dot_product_attention"):
        raise RuntimeError(f"needs torch >= 2.0 for F.scaled_dot_product_attention (this is {torch.__version__})")
    return Decoder()


def batch(batch_size, seq_len):
    return torch.randint(0, VOCAB, (batch_size, seq_len)), torch.randint(0, VOCAB, (batch_size, seq_len))


def loss(output, target):
    return F.cross_entropy(output.view(-1, VOCAB), target.view(-1))
