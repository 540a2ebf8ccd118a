# A top-2-routed mixture of experts in the gather style: the router's topk indices pick each
# token's experts' weights by integer indexing (w[indices]), combined with the softmaxed gate
# values by einsum; no value-dependent shape anywhere.
import torch
import torch.nn as nn
import torch.nn.functional as F

DIM, HIDDEN, EXPERTS, TOP_K, VOCAB = 32, 64, 4, 2, 64


class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(DIM, EXPERTS, bias=False)
        self.w_in = nn.Parameter(torch.randn(EXPERTS, DIM, HIDDEN) * 0.02)
        self.w_out = nn.Parameter(torch.randn(EXPERTS, HIDDEN, DIM) * 0.02)

    def forward(self, x):
        gates, chosen = self.router(x).topk(TOP_K, dim=-1)
        gates = F.softmax(gates, dim=-1)
        hidden = F.silu(torch.einsum("bsd,bskdh->bskh", x, self.w_in[chosen]))
        out = torch.einsum("bskh,bskhd->bskd", hidden, self.w_out[chosen])
        return torch.einsum("bskd,bsk->bsd", out, gates)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.norm = nn.LayerNorm(DIM)
        self.moe = MoE()
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        x = self.embed(ids)
        x = x + self.moe(self.norm(x))
        return self.head(x)


def model():
    return Model()


def batch(batch_size, seq_len):
    ids = torch.randint(0, VOCAB, (batch_size, seq_len + 1))
    return ids[:, :-1], ids[:, 1:]
