#!/usr/bin/python3
# partition_by_device.py: does AOTAutograd's min-cut partitioner, as inductor calls it, save the
# same tensors for a CUDA model as for a CPU one? Traces one training step of a model file's
# model() with the batch on fake tensors of DEVICE (no GPU needed: a CUDA build of torch makes
# fake CUDA tensors without one), partitions the joint graph with
# min_cut_rematerialization_partition(compiler="inductor") and inductor's decompositions
# (torch/_inductor/decomposition.py select_decomp_table), and prints what the forward saves for
# the backward, one line per saved tensor (op, shape, dtype), for diffing two runs:
#   python validate/partition_by_device.py validate/compiled/gpt.py --device cpu  > cpu.txt
#   /tmp/venv-cuda/bin/python validate/partition_by_device.py validate/compiled/gpt.py --device cuda > cuda.txt
# (validate/compiled/README.md has the result.)
import argparse
import functools
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "capture"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--sizes", default="batch_size=6,seq_len=32")
    ap.add_argument("--budget", type=float, default=1.0)
    args = ap.parse_args()
    import runner
    from torch._functorch.aot_autograd import aot_function, make_boxed_func
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._inductor.decomposition import select_decomp_table
    from torch._subclasses.fake_tensor import FakeTensorMode

    user = runner.load_model_file(args.model)
    sizes = {k: int(v) for k, v in (item.split("=") for item in args.sizes.split(","))}
    sizes = {k: v for k, v in sizes.items() if k in runner.size_keys(user)}
    torch.manual_seed(0)
    model = user.model()
    inputs, target = user.batch(**sizes)
    params = dict(model.named_parameters())  # tied weights once (functional_call ties them again)
    loss_fn = getattr(user, "loss", None) or runner.default_loss

    def step(params, inputs, target):
        out = torch.func.functional_call(model, params, (inputs,))
        return loss_fn(out, target)

    saved = []

    def fw_compiler(gm, example_inputs):
        return make_boxed_func(gm.forward)

    def bw_compiler(gm, example_inputs):
        for node in gm.graph.nodes:
            if node.op == "placeholder" and not node.name.startswith("tangents"):
                val = node.meta.get("val")
                shape = list(val.shape) if isinstance(val, torch.Tensor) else "-"
                saved.append(f"{node.name} {shape} {getattr(val, 'dtype', '')}")
        return make_boxed_func(gm.forward)

    partition = functools.partial(min_cut_rematerialization_partition, compiler="inductor")
    compiled = aot_function(step, fw_compiler=fw_compiler, bw_compiler=bw_compiler, partition_fn=partition,
                            decompositions=select_decomp_table())
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        memo = {}
        for v in params.values():
            if id(v) not in memo:
                memo[id(v)] = mode.from_tensor(v).to(args.device).requires_grad_(v.requires_grad)
        fake_params = {k: memo[id(v)] for k, v in params.items()}
        fake_inputs = mode.from_tensor(inputs).to(args.device)
        fake_target = mode.from_tensor(target).to(args.device)
        with torch._functorch.config.patch(activation_memory_budget=args.budget):
            loss = compiled(fake_params, fake_inputs, fake_target)
            loss.backward()
    print(f"# torch {torch.__version__}, device {args.device}, {args.model} {sizes}: {len(saved)} saved")
    print("\n".join(saved))


if __name__ == "__main__":
    main()
