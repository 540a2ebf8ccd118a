# A three-layer MLP classifier written as nn.Sequential (Linear, ReLU, Linear, ReLU, Linear).
import torch
import torch.nn as nn


def model():
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def batch(batch_size):
    return torch.randn(batch_size, 784), torch.randint(0, 10, (batch_size,))


def optimizer(parameters):        # written into the graph file; a scenario's optimizer: overrides it
    return torch.optim.Adam(parameters, lr=1e-3, foreach=False)
