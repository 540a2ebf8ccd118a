# A 32-layer, 4096-wide Llama-shaped decoder (module constants; decoder_70b.py reuses it at 70B shape) (6.7B parameters: RMSNorm, rotary embeddings,
# SwiGLU 11008, vocabulary 32000), written as people write it. The capture runs it on the meta
# device, so it needs no real memory; bench/capture_bench.py times it.
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, WIDTH, HEADS, KV_HEADS, LAYERS, FFN = 32000, 4096, 32, 32, 32, 11008


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(WIDTH, WIDTH, bias=False)
        self.k_proj = nn.Linear(WIDTH, KV_HEADS * (WIDTH // HEADS), bias=False)
        self.v_proj = nn.Linear(WIDTH, KV_HEADS * (WIDTH // HEADS), bias=False)
        self.o_proj = nn.Linear(WIDTH, WIDTH, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        d = WIDTH // HEADS
        q = self.q_proj(x).view(b, t, HEADS, d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, KV_HEADS, d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, KV_HEADS, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if KV_HEADS != HEADS:  # grouped-query attention: repeat_kv as HF writes it
            rep = HEADS // KV_HEADS
            k = k[:, :, None].expand(b, KV_HEADS, rep, t, d).reshape(b, HEADS, t, d)
            v = v[:, :, None].expand(b, KV_HEADS, rep, t, d).reshape(b, HEADS, t, d)
        att = torch.matmul(q, k.transpose(2, 3)) / d ** 0.5 + mask
        att = F.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, WIDTH)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(WIDTH, FFN, bias=False)
        self.up_proj = nn.Linear(WIDTH, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, WIDTH, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm(WIDTH)
        self.self_attn = Attention()
        self.post_attention_layernorm = RMSNorm(WIDTH)
        self.mlp = MLP()

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, WIDTH)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = RMSNorm(WIDTH)
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        d = WIDTH // HEADS
        inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        freqs = torch.outer(torch.arange(t).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.full((t, t), float("-inf")).triu(1)
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.lm_head(self.norm(x))


def model():
    return Decoder()


def batch(batch_size, seq_len):
    return torch.randint(0, VOCAB, (batch_size, seq_len)), torch.randint(0, VOCAB, (batch_size, seq_len))
