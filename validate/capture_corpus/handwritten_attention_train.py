# Hand-written attention and softmax in a training step (issue 26's item 6, the training side of
# handwritten_attention_no_grad.py): scores by einsum, a causal mask by comparison and
# torch.where, a second mask by masked_fill, softmax as exp(x - max) / sum in a plain function,
# a SwiGLU MLP; autograd saves the S x S temporaries the backward needs, the locals hold the rest.
import torch
import torch.nn as nn

VOCAB, WIDTH, HEADS, LAYERS = 256, 64, 4, 2


def softmax(x):
    shifted = x - x.max(dim=-1, keepdim=True).values
    e = shifted.exp()
    return e / e.sum(dim=-1, keepdim=True)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
        self.out = nn.Linear(WIDTH, WIDTH, bias=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, c // HEADS).unbind(2)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * (c // HEADS) ** -0.5
        pos = torch.arange(t)
        causal = pos[None, :] <= pos[:, None]
        scores = torch.where(causal, scores, float("-inf"))
        scores = scores.masked_fill(torch.isnan(scores), 0.0)
        probs = softmax(scores)
        y = torch.einsum("bhqk,bkhd->bqhd", probs, v)
        return self.out(y.reshape(b, t, c))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.attn = Attention()
        self.gate = nn.Linear(WIDTH, 4 * WIDTH, bias=False)
        self.up = nn.Linear(WIDTH, 4 * WIDTH, bias=False)
        self.down = nn.Linear(4 * WIDTH, WIDTH, bias=False)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        h = self.norm2(x)
        g = self.gate(h)
        return x + self.down(g * torch.sigmoid(g) * self.up(h))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

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
