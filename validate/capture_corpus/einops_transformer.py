# A course-assignment transformer written with einops.rearrange and einsum: heads split and
# merged by rearrange, a causal mask by comparing aranges, scores masked by
# torch.where(mask, scores, -inf), a learned position table kept as a buffer-indexed parameter,
# and the output head tied to the embedding (logits by einsum with the embedding matrix).
import torch
import torch.nn as nn
from einops import rearrange

VOCAB, DIM, HEADS, LAYERS, MAX_LEN = 100, 32, 4, 2, 64


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.to_qkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.to_out = nn.Linear(DIM, DIM)
        self.scale = (DIM // HEADS) ** -0.5

    def forward(self, x):
        q, k, v = rearrange(self.to_qkv(x), "b n (three h d) -> three b h n d", three=3, h=HEADS)
        scores = torch.einsum("bhid,bhjd->bhij", q, k) * self.scale
        n = x.shape[1]
        positions = torch.arange(n, device=x.device)
        causal = positions[:, None] >= positions[None, :]
        scores = torch.where(causal, scores, torch.tensor(float("-inf")))
        out = torch.einsum("bhij,bhjd->bhid", scores.softmax(dim=-1), v)
        return self.to_out(rearrange(out, "b h n d -> b n (h d)"))


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(DIM, 4 * DIM) * 0.02)
        self.w2 = nn.Parameter(torch.randn(4 * DIM, DIM) * 0.02)

    def forward(self, x):
        return torch.einsum("bnf,fd->bnd", torch.relu(torch.einsum("bnd,df->bnf", x, self.w1)), self.w2)


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Parameter(torch.randn(VOCAB, DIM) * 0.02)
        self.positions = nn.Parameter(torch.zeros(MAX_LEN, DIM))
        self.register_buffer("position_ids", torch.arange(MAX_LEN))
        self.layers = nn.ModuleList([nn.ModuleList([nn.LayerNorm(DIM), Attention(), nn.LayerNorm(DIM), FeedForward()])
                                     for _ in range(LAYERS)])
        self.norm = nn.LayerNorm(DIM)

    def forward(self, tokens):
        n = tokens.shape[1]
        x = self.embedding[tokens] + self.positions[self.position_ids[:n]]
        for norm1, attn, norm2, ff in self.layers:
            x = x + attn(norm1(x))
            x = x + ff(norm2(x))
        return torch.einsum("bnd,vd->bnv", self.norm(x), self.embedding)


def model():
    return Transformer()


def batch(batch_size, seq_len):
    tokens = torch.randint(0, VOCAB, (batch_size, seq_len + 1))
    return tokens[:, :-1], tokens[:, 1:]
