#!/usr/bin/python3
"""ddp_bucket_probe.py: what DistributedDataParallel's Reducer buckets when some parameters are
frozen, read from real PyTorch on the CPU (gloo, one rank).

A frozen Linear(256, 256) base with two trainable fp32 adapters (256x4, 4x256) and a trainable
fp64 weight (64x64; gloo cannot broadcast bf16, and any second dtype shows the keying). Checks
the facts planner/parallel/ddp_rank.cc is built on: frozen parameters are not in the Reducer,
and each dtype gets its own buckets (first bucket of the last-defined parameters first).

    .venv/bin/python validate/ddp_bucket_probe.py
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn


class Adapted(nn.Module):
    def __init__(self):
        super().__init__()
        self.base = nn.Linear(256, 256)
        self.lora_a = nn.Linear(256, 4, bias=False)
        self.lora_b = nn.Linear(4, 256, bias=False)
        self.other = nn.Linear(64, 64, bias=False).double()

    def forward(self, x):
        return (self.base(x) + self.lora_b(self.lora_a(x))).sum() + self.other.weight.float().sum()


def main():
    store = tempfile.mktemp(prefix="oomcast-ddp-probe-")
    dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
    model = Adapted()
    for parameter in model.base.parameters():
        parameter.requires_grad = False
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=25)
    ddp(torch.randn(2, 256)).backward()
    data = ddp._get_ddp_logging_data()
    buckets = [int(size) for size in str(data["bucket_sizes"]).split(",")]
    print("Reducer parameters:", data["num_parameter_tensors"], "bytes:", data["total_parameter_size_bytes"])
    print("bucket bytes:", buckets)
    expected_parameters = 3                      # lora_a, lora_b, other; base.weight and base.bias frozen
    expected_buckets = [64 * 64 * 8, 2 * 1024 * 4]  # the fp64 weight's bucket, then the two fp32 adapters'
    ok = int(data["num_parameter_tensors"]) == expected_parameters and buckets == expected_buckets
    dist.destroy_process_group()
    os.unlink(store)
    print("ok" if ok else f"MISMATCH: expected {expected_parameters} parameters, buckets {expected_buckets}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
