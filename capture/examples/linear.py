# A bare nn.Linear micro-benchmark: one 1024 -> 1024 layer, cross-entropy over its outputs.
import torch
import torch.nn as nn


def model():
    return nn.Linear(1024, 1024)


def batch(batch_size):
    return torch.randn(batch_size, 1024), torch.randint(0, 1024, (batch_size,))
