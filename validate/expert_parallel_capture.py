#!/usr/bin/python3
# expert_parallel_capture.py: runs a MoE scenario with real expert parallelism on the CPU (gloo,
# one process per rank) and records every rank's c10 allocations with the hook of capture.py,
# one trace per rank (OUT.rank0, OUT.rank1, ...).
#
#   .venv/bin/python validate/expert_parallel_capture.py SCENARIO.yaml -o OUT [--set key=value ...]
#
# The scenario is a Mixtral of validate/hf_models.py (one module per expert) and says
# parallel.expert_parallel (= world_size: each rank its own batch and experts / EP of the
# experts, rank r experts r*L .. r*L+L-1). Every sparse block is replaced by its
# expert-parallel form, torchtitan's token dispatch (torchtitan/distributed/expert_parallel.py,
# models/moe: the router over all experts, the choices sorted by expert, the counts exchanged
# with one all_to_all_single, the chosen rows dispatched and combined with
# torch.distributed._functional_collectives.all_to_all_single_autograd), the routing weights
# applied after the combine and the choices summed per token with index_add_. One local expert
# runs on every received row; several run HF's loop (torch.where, gather, index_add_) over
# them. The model is built on the meta device and materialised with to_empty after the
# non-local experts are dropped, so each rank allocates only its experts.
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import capture  # noqa: E402
import rank_launcher  # noqa: E402


def expert_parallel_block(block, ep, rank, group):
    """Turns hf_models.SparseMoeBlock `block` into its expert-parallel form in place."""
    import torch
    import torch.nn.functional as F
    import torch.distributed as dist
    from torch.distributed._functional_collectives import all_to_all_single_autograd

    experts, k = block.E, block.k
    local = experts // ep
    block.experts = torch.nn.ModuleList(list(block.experts)[rank * local:(rank + 1) * local])

    def forward(x):
        B, T, h = x.shape
        x = x.view(-1, h)
        router_logits = block.gate(x)
        if block.force_expert is not None:
            with torch.no_grad():
                bias = torch.zeros(experts, dtype=router_logits.dtype)
                bias[block.force_expert] = 20.0
            router_logits = router_logits + bias
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected = torch.topk(routing_weights, k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(x.dtype)
        with torch.no_grad():
            # The choices sorted by expert, so by the rank that holds it; how many each rank
            # sends to every expert, exchanged so each knows what it receives.
            order = torch.argsort(selected.view(-1), stable=True)
            token_of = order // k
            counts = torch.bincount(selected.view(-1), minlength=experts)
            received_counts = torch.empty_like(counts)
            dist.all_to_all_single(received_counts, counts, group=group)
            input_splits = counts.view(ep, local).sum(dim=1).tolist()
            output_splits = received_counts.view(ep, local).sum(dim=1).tolist()
        routed = x[token_of]
        received = all_to_all_single_autograd(routed, output_splits, input_splits, group)
        if local == 1:
            out = block.experts[0](received)
        else:
            with torch.no_grad():
                # Received rows come per source rank, each source's rows grouped by expert.
                expert_of_row = torch.repeat_interleave(torch.arange(local).repeat(ep), received_counts)
            out = torch.zeros_like(received)
            for e in range(local):
                rows = torch.where(expert_of_row == e)[0]
                if rows.numel() == 0:
                    continue
                out.index_add_(0, rows, block.experts[e](received[rows]))
        combined = all_to_all_single_autograd(out, input_splits, output_splits, group)
        weighted = combined * routing_weights.view(-1)[order, None]
        final = torch.zeros((B * T, h), dtype=x.dtype, device=x.device)
        final.index_add_(0, token_of, weighted)
        return final.reshape(B, T, h)

    block.forward = forward


def prepare(model, cfg, ep, rank):
    import torch
    import torch.distributed as dist

    group = dist.group.WORLD
    for layer in model.layers:
        if getattr(layer, "block_sparse_moe", None) is not None:
            expert_parallel_block(layer.block_sparse_moe, ep, rank, group)
    model.to_empty(device="cpu")
    torch.manual_seed(int(cfg.get("seed", 0)) + rank)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.02)
        hd = model.inv_freq.numel() * 2
        theta = float(model.rope_theta)
        model.inv_freq.copy_(1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd)))
    return model


def run_rank(args):
    capture.ensure_preloaded(False)
    import torch
    import torch.distributed as dist
    import hf_models

    cfg = capture.load_config(args.config, args.set)
    parallel = cfg.get("parallel") or {}
    ep = int(parallel.get("expert_parallel", 1))
    if int(parallel.get("world_size", ep)) != ep:
        raise ValueError("the capture runs expert parallelism alone: world_size must equal expert_parallel")
    dist.init_process_group("gloo", init_method="file://" + args.store, rank=args.rank, world_size=ep)
    build = hf_models.build

    def build_on_meta(config, *a, **k):  # the full model is never materialised on a rank
        if config.get("model_type") != "mixtral":
            raise ValueError("the expert-parallel capture runs Mixtral")
        if int(config["num_local_experts"]) % ep:
            raise ValueError("expert_parallel must divide num_local_experts")
        with torch.device("meta"):
            model = build(config, *a, **k)
        model.rope_theta = float(config.get("rope_theta", 10000.0))
        return model

    hf_models.build = build_on_meta
    # Each rank its own batch, as a data-parallel rank would draw it.
    cfg["seed"] = int(cfg.get("seed", 0)) + 1000 * args.rank
    hook = capture.Hook()
    info = capture.run(cfg, hook, lambda s: None, prepare_model=lambda m: prepare(m, cfg, ep, args.rank))
    events = hook.events()
    header = [f"oomcast CPU expert-parallel capture of {args.config}, rank {args.rank} of {ep} "
              f"(torch {torch.__version__}, gloo, validate/expert_parallel_capture.py)",
              f"parameters: {info['parameters']}  parameter_bytes: {info['parameter_bytes']}  "
              f"buffer_bytes: {info['buffer_bytes']}"]
    capture.write_trace(f"{args.output}.rank{args.rank}", events, hook.labels, header)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def main(argv=None):
    return rank_launcher.main(argv, __doc__, __file__, run_rank,
                              lambda cfg: int((cfg.get("parallel") or {}).get("expert_parallel", 1)), "oomcast-ep-store-")


if __name__ == "__main__":
    sys.exit(main())
