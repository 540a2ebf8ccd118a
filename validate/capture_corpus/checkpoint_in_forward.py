# torch.utils.checkpoint called inside forward, both ways: every block's MLP under the
# non-reentrant checkpoint (use_reentrant=False, what transformers 5 and torchtitan pass), and a
# final block under the reentrant one (use_reentrant=True, torch 2.13's default when not passed).
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
DIM = 64
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.attn = nn.Linear(DIM, DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))
    def forward(self, x):
        x = x + self.attn(self.norm(x))
        return x + checkpoint(self.mlp, x, use_reentrant=False)
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, DIM)
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.last = nn.Sequential(nn.LayerNorm(DIM), nn.Linear(DIM, DIM), nn.ReLU(), nn.Linear(DIM, DIM))
        self.head = nn.Linear(DIM, 50)
    def forward(self, ids):
        x = self.embed(ids)
        for b in self.blocks[:-1]:
            x = b(x)
        x = checkpoint(self.last, x, use_reentrant=True)  # a whole block, the reentrant way
        return self.head(x)
def model(): return M()
def batch(batch_size, seq_len):
    ids = torch.randint(0, 50, (batch_size, seq_len + 1)); return ids[:, :-1], ids[:, 1:]
