# A model of 12.5 GB of fp32 parameters (one 56000 x 56000 linear), more than the capture's
# test may allocate: the compiled capture runs on fake tensors, so it is captured anyway
# (validate/compiled/check_fake_capture.sh).
import torch
import torch.nn as nn

WIDTH = 56000
sizes = {"batch_size": [2, 3, 5]}


def model():
    return nn.Sequential(nn.Linear(WIDTH, 8, bias=False), nn.ReLU(), nn.Linear(8, WIDTH, bias=False),
                         nn.Linear(WIDTH, WIDTH, bias=False))


def batch(batch_size):
    return torch.randn(batch_size, WIDTH), torch.randint(0, WIDTH, (batch_size,))
