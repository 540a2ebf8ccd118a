#!/usr/bin/python3
# tensor_parallel_capture.py: runs a scenario with real tensor parallelism on the CPU (gloo, one
# process per rank, DTensor's parallelize_module with torchtitan's Llama plan: q/k/v and
# gate/up ColwiseParallel, o_proj and down_proj RowwiseParallel) and records every rank's c10
# allocations with the hook of capture.py, one trace per rank (OUT.rank0, OUT.rank1, ...).
#
#   .venv/bin/python validate/tensor_parallel_capture.py SCENARIO.yaml -o OUT [--set key=value ...]
#
# The scenario says parallel.tensor_parallel (= world_size, no data parallelism) and
# vocab_parallel: false (the embedding and output stay replicated: loss_parallel's sharded
# cross-entropy is not captured here). With parallel.sequence_parallel: true the plan is
# torchtitan's sequence-parallel one: SequenceParallel on the norms, the attention and the MLP
# given their input all-gathered (PrepareModuleInput Shard(1) -> Replicate), o_proj and
# down_proj reduce-scattered to Shard(1); the replicated embedding's output is split along the
# sequence before the first block and the final norm's gathered before the replicated lm_head.
# The model is built on the meta device, parallelized there and materialised with to_empty, so
# each rank allocates only its shards, as torchtitan does.
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import capture  # noqa: E402
import rank_launcher  # noqa: E402


def parallelize(model, tp, sequence_parallel=False):
    """torchtitan's Llama TP plan (torchtitan/models/llama3/infra/parallelize.py) without the
    vocab-parallel part, with its sequence-parallel part when asked; heads are counted per rank
    afterwards."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)

    mesh = init_device_mesh("cpu", (tp,))
    # Under SP the residual stream between blocks is each rank's seq/TP rows (local tensors).
    rows = {"output_layouts": Shard(1)} if sequence_parallel else {}
    for block in model.layers:
        plan = {"self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
                "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(**rows),
                "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
                "mlp.down_proj": RowwiseParallel(**rows)}
        if sequence_parallel:
            plan.update({"input_layernorm": SequenceParallel(), "post_attention_layernorm": SequenceParallel(),
                         "self_attn": PrepareModuleInput(input_layouts=(Shard(1), None, None),
                                                         desired_input_layouts=(Replicate(), None, None),
                                                         use_local_output=True),
                         "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),),
                                                   use_local_output=True)})
        parallelize_module(block, mesh, plan)
        block.self_attn.heads //= tp
        block.self_attn.kv_heads //= tp
    if sequence_parallel:
        # The replicated embedding's output split along the sequence (a local chunk), the final
        # norm sequence-parallel and its output gathered for the replicated lm_head.
        parallelize_module(model, mesh, {
            "layers.0": PrepareModuleInput(input_layouts=(Replicate(), None, None),
                                           desired_input_layouts=(Shard(1), None, None), use_local_output=True),
            "norm": SequenceParallel(),
            "lm_head": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),),
                                          use_local_output=True)})
    model.to_empty(device="cpu")
    with torch.no_grad():
        for parameter in model.parameters():
            local = parameter.to_local() if hasattr(parameter, "to_local") else parameter
            local.normal_(0.0, 0.02)
        hd = model.inv_freq.numel() * 2
        model.inv_freq.copy_(1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd)))
    return model


def run_rank(args):
    capture.ensure_preloaded(False)
    import torch
    import torch.distributed as dist
    import models

    cfg = capture.load_config(args.config, args.set)
    tp = int((cfg.get("parallel") or {}).get("tensor_parallel", 1))
    sequence_parallel = bool((cfg.get("parallel") or {}).get("sequence_parallel", False))
    if int((cfg.get("parallel") or {}).get("world_size", tp)) != tp:
        raise ValueError("the capture runs tensor parallelism alone: world_size must equal tensor_parallel")
    dist.init_process_group("gloo", init_method="file://" + args.store, rank=args.rank, world_size=tp)
    build = models.build_model

    def build_on_meta(*a, **k):  # the full model is never materialised on a rank
        with torch.device("meta"):
            return build(*a, device="meta", **k)

    models.build_model = build_on_meta
    hook = capture.Hook()
    info = capture.run(cfg, hook, lambda s: None, prepare_model=lambda m: parallelize(m, tp, sequence_parallel))
    events = hook.events()
    header = [f"oomcast CPU tensor-parallel capture of {args.config}, rank {args.rank} of {tp} "
              f"({'sequence parallel, ' if sequence_parallel else ''}torch {torch.__version__}, gloo, validate/tensor_parallel_capture.py)",
              f"parameters: {info['parameters']}  parameter_bytes: {info['parameter_bytes']}  "
              f"buffer_bytes: {info['buffer_bytes']}"]
    capture.write_trace(f"{args.output}.rank{args.rank}", events, hook.labels, header)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def main(argv=None):
    return rank_launcher.main(argv, __doc__, __file__, run_rank,
                              lambda cfg: int((cfg.get("parallel") or {}).get("tensor_parallel", 1)), "oomcast-tp-store-")


if __name__ == "__main__":
    sys.exit(main())
