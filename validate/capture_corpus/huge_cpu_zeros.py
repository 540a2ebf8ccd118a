# A model whose __init__ creates its weights on the CPU with torch.zeros whatever device it is
# asked for (some with device="cpu" spelled out), at a size no machine's RAM holds (about 52 GB
# of fp32): the capture must materialise none of it. Not run for real; its test
# (capture/tests/check_capture.py unmaterialised) checks the parameter count and the capture's
# peak memory.
import torch
import torch.nn as nn

VOCAB, DIM, LAYERS = 65536, 16384, 12


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(DIM, DIM, device="cpu"))
        self.scale = nn.Parameter(torch.zeros(DIM))

    def forward(self, x):
        return torch.relu(x @ self.weight.T) * self.scale


class Huge(nn.Module):
    def __init__(self, device="cuda"):
        super().__init__()
        self.embed = nn.Parameter(torch.zeros(VOCAB, DIM))
        self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])

    def forward(self, ids):
        x = self.embed[ids]
        for layer in self.layers:
            x = layer(x)
        return x @ self.embed.T


PARAMETERS = VOCAB * DIM + LAYERS * (DIM * DIM + DIM)


def model():
    return Huge(device="cuda")


def batch(batch_size):
    ids = torch.randint(0, VOCAB, (batch_size, 4))
    return ids, ids
