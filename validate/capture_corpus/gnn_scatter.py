# A message-passing GNN over a fixed edge list (a ring with chords, kept as a buffer): messages
# gathered by integer indexing (x[:, src]), summed into nodes by index_add_ in one layer and
# scatter_add_ in the other, degree normalisation from the fixed edges; graph-level readout.
import torch
import torch.nn as nn

NODES, FEATURES, HIDDEN, CLASSES = 24, 12, 32, 5


def ring_with_chords(n):
    i = torch.arange(n)
    src = torch.cat([i, i, i])
    dst = torch.cat([(i + 1) % n, (i - 1) % n, (i + n // 3) % n])
    return torch.stack([src, dst])


class MessagePassing(nn.Module):
    def __init__(self, d_in, d_out, by_scatter):
        super().__init__()
        self.message = nn.Linear(2 * d_in, d_out)
        self.update = nn.Linear(d_in + d_out, d_out)
        self.by_scatter = by_scatter

    def forward(self, x, edges, degree):
        src, dst = edges[0], edges[1]
        messages = torch.relu(self.message(torch.cat([x[:, src], x[:, dst]], dim=-1)))
        total = torch.zeros(x.shape[0], x.shape[1], messages.shape[-1], dtype=x.dtype)
        if self.by_scatter:
            index = dst.view(1, -1, 1).expand_as(messages)
            total = total.scatter_add_(1, index, messages)
        else:
            total.index_add_(1, dst, messages)
        return torch.relu(self.update(torch.cat([x, total / degree], dim=-1)))


class GNN(nn.Module):
    def __init__(self):
        super().__init__()
        edges = ring_with_chords(NODES)
        self.register_buffer("edges", edges)
        self.register_buffer("degree", torch.bincount(edges[1], minlength=NODES).float().clamp(min=1).view(1, -1, 1))
        self.layers = nn.ModuleList([MessagePassing(FEATURES, HIDDEN, False), MessagePassing(HIDDEN, HIDDEN, True)])
        self.readout = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x, self.edges, self.degree)
        return self.readout(x.mean(dim=1))


def model():
    return GNN()


def batch(batch_size):
    return torch.randn(batch_size, NODES, FEATURES), torch.randint(0, CLASSES, (batch_size,))
