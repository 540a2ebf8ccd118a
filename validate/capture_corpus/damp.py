# A Python scalar raised to a tensor power (0.5 ** arange) in every block: a fresh constant per
# call, at addresses the allocator reuses.
import torch
import torch.nn as nn


class Damp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        weights = 0.5 ** torch.arange(16).float()
        return self.fc(x) * weights


def model():
    return nn.Sequential(*[Damp() for _ in range(6)], nn.Linear(16, 4))


def batch(batch_size):
    return torch.randn(batch_size, 16), torch.randint(0, 4, (batch_size,))
