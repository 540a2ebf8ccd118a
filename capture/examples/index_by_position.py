# A text encoder written the way transformers' CLIP and its masking code are: an embedding by
# integer indexing (`self.table[ids]`), position ids from arange checked for packed sequences
# (`if (diff != 1).any()` on values computed from constants), a causal mask by triu, and the
# pooled token picked by integer indexing at `ids.argmax(-1)` per row. None of the shapes
# depends on the batch's values, so the capture takes it (capture/known_values.py,
# recorder._INDEXING); a boolean mask of the batch's values stays refused.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self, vocab=96, hidden=48, classes=5):
        super().__init__()
        self.table = nn.Parameter(torch.randn(vocab, hidden) * 0.02)
        self.positions = nn.Parameter(torch.randn(64, hidden) * 0.02)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, ids):
        b, t = ids.shape
        position_ids = torch.arange(t, device=ids.device).unsqueeze(0).expand(b, -1)
        first = position_ids[:, :1] - 1
        packed = (torch.diff(position_ids, prepend=first, dim=-1) != 1).cumsum(-1)
        if (packed[:, -1] != 0).any():  # a packed batch would need a block mask; this one is not
            raise ValueError("packed sequences are not supported")
        h = self.table[ids] + self.positions[position_ids]
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        causal = torch.ones(t, t, dtype=torch.bool, device=ids.device).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        h = h + self.out(F.softmax(scores, dim=-1) @ v)
        pooled = h[torch.arange(b, device=h.device), ids.argmax(dim=-1)]
        return self.head(pooled)


def model():
    return Encoder()


def batch(batch_size, seq_len):
    return torch.randint(0, 96, (batch_size, seq_len)), torch.randint(0, 5, (batch_size,))
