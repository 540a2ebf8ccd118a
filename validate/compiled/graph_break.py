# An MLP whose forward breaks the graph in the middle (torch._dynamo.graph_break()): two graphs,
# each partitioned alone, the tensor between them an eager one (validate/compiled/README.md).
import torch
import torch.nn as nn
import torch.nn.functional as F

sizes = {"batch_size": [4, 6, 10]}


class Broken(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 256)
        self.b = nn.Linear(256, 256)
        self.c = nn.Linear(256, 10)

    def forward(self, x):
        x = F.gelu(self.a(x))
        torch._dynamo.graph_break()
        x = F.gelu(self.b(x))
        return self.c(x)


def model():
    return Broken()


def batch(batch_size):
    return torch.randn(batch_size, 64), torch.randint(0, 10, (batch_size,))
