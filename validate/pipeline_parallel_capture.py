#!/usr/bin/python3
# pipeline_parallel_capture.py: runs a scenario with real pipeline parallelism on the CPU (gloo,
# one process per stage, torch.distributed.pipelining's PipelineStage and ScheduleGPipe or
# Schedule1F1B) and records every rank's c10 allocations with the hook of capture.py, one trace
# per rank (OUT.rank0, OUT.rank1, ...), with the planner's phase labels per microbatch.
#
#   .venv/bin/python validate/pipeline_parallel_capture.py SCENARIO.yaml -o OUT [--set key=value ...]
#
# The scenario says parallel.pipeline_parallel (= world_size, no data parallelism), the
# schedule (gpipe or 1f1b) and pipeline_microbatches; batch_size is one microbatch's, so
# schedule.step() gets batch_size x microbatches rows and splits them. The model (a llama of
# validate/models.py) is built on the meta device, cut to the stage the way torchtitan's
# pipeline_module_split does (the first stage keeps the embedding, the last the final norm and
# lm_head) and materialised with to_empty, so each rank allocates only its stage. The loss is
# the schedule's loss_fn (HF's ForCausalLMLoss: logits.float(), labels shifted with -100) and
# step() runs with return_outputs=False, as torchtitan's trainer calls it.
import contextlib
import gc
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import capture  # noqa: E402
import rank_launcher  # noqa: E402

SCHEDULES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B",
             # Multi-stage schedules: rank r runs stages r, r + ranks, ... (pipeline_virtual_stages each).
             "interleaved_1f1b": "ScheduleInterleaved1F1B", "zero_bubble": "ScheduleInterleavedZeroBubble"}
MULTI_STAGE = ("interleaved_1f1b", "zero_bubble")


def stage_layers(layers, stages, given):
    """The layers of each stage: as given, or an even split with the remainder on the first
    stages (the planner's chunk_layers)."""
    if given:
        return [int(n) for n in given]
    return [layers // stages + (1 if s < layers % stages else 0) for s in range(stages)]


def build_stage_module(cfg, stage, stages):
    """The stage's part of the llama of validate/models.py, materialised on the CPU."""
    import torch
    import models

    name, family, dims, options = capture.resolve_model(cfg["model"], cfg["_dir"])
    if models.family_of(family) != "llama":
        raise ValueError(f"model family {family!r}: the pipeline capture runs the llama family")
    parallel = cfg.get("parallel") or {}
    counts = stage_layers(int(dims["layers"]), stages, parallel.get("pipeline_layers_per_stage"))
    first_layer = sum(counts[:stage])
    ckpt = capture._mode(cfg.get("checkpointing"), "none") == "full"
    with torch.device("meta"):
        full = models.build_model(family, dims, options, dropout=capture._dropout(cfg.get("dropout", 0.0)),
                                  attention=str(cfg.get("attention", "eager")), checkpointing=ckpt, device="meta")

    class Stage(torch.nn.Module):
        """torchtitan's split: modules outside the stage set to None, layers kept by name."""

        def __init__(self):
            super().__init__()
            self.embed_tokens = full.embed_tokens if stage == 0 else None
            self.layers = torch.nn.ModuleList(full.layers[first_layer:first_layer + counts[stage]])
            last = stage + 1 == stages
            self.norm = full.norm if last else None
            self.lm_head = full.lm_head if last else None
            self.register_buffer("inv_freq", full.inv_freq, persistent=False)
            self.use_checkpoint = full.use_checkpoint

        rotary = models.Llama.rotary

        def forward(self, x):
            if self.embed_tokens is not None:
                x = self.embed_tokens(x)
            cos, sin = self.rotary(x, x.size(1))
            x = models.run_blocks(self.layers, x, self.use_checkpoint, cos, sin)
            if self.norm is None:
                return x
            return self.lm_head(self.norm(x))

    module = Stage()
    module.to_empty(device="cpu")
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_(0.0, 0.02)
        hd = module.inv_freq.numel() * 2
        theta = float(options.get("rope_theta", 10000.0))
        module.inv_freq.copy_(1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd)))
    return module, family, dims, options


def causal_lm_loss(logits, labels):
    """HF's ForCausalLMLoss as models.Llama computes it."""
    import torch.nn.functional as F
    shift = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
    return F.cross_entropy(logits.float().view(-1, logits.size(-1)), shift.view(-1), ignore_index=-100)


def run_rank(args):
    capture.ensure_preloaded(False)
    # A stage that waits forever on gloo (a schedule out of step) ends the run instead.
    import faulthandler
    faulthandler.dump_traceback_later(300, exit=True)
    import torch
    import torch.distributed as dist
    from torch.distributed import pipelining
    import models

    cfg = capture.load_config(args.config, args.set)
    parallel = cfg.get("parallel") or {}
    stages = int(parallel.get("pipeline_parallel", 1))
    if int(parallel.get("world_size", stages)) != stages:
        raise ValueError("the capture runs pipeline parallelism alone: world_size must equal pipeline_parallel")
    schedule_name = str(parallel.get("pipeline_schedule", "1f1b"))
    if schedule_name not in SCHEDULES:
        raise ValueError(f"pipeline_schedule {schedule_name!r}: the capture runs {', '.join(SCHEDULES)}")
    virtual = int(parallel.get("pipeline_virtual_stages", 1))
    multi = schedule_name in MULTI_STAGE
    total_stages = stages * virtual
    microbatches = int(parallel.get("pipeline_microbatches", stages))
    if capture._mode(cfg.get("precision"), "fp32") != "fp32":
        raise ValueError("the pipeline capture runs fp32")
    dist.init_process_group("gloo", init_method="file://" + args.store, rank=args.rank, world_size=stages)
    seed = int(cfg.get("seed", 0))
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    batch, seq = int(cfg.get("batch_size", 1)), int(cfg["seq_len"])
    iterations = int(cfg.get("iterations", 3))
    set_to_none = capture.loop_settings(cfg)[0]
    opt_cfg = cfg.get("optimizer") or {}
    opt_cfg = {"type": opt_cfg} if isinstance(opt_cfg, str) else opt_cfg
    gen = torch.Generator().manual_seed(seed + 1)
    hidden = int(capture.resolve_model(cfg["model"], cfg["_dir"])[2]["hidden"])
    # Shapes known up front (PipelineStage's static metadata): no inference pass at the first
    # step. Received hidden states and stage outputs require grad, so gradients flow back.
    local_stages = [args.rank + v * stages for v in range(virtual)] if multi else [args.rank]
    count = total_stages if multi else stages
    first, last = args.rank == 0, (args.rank + 1 == stages)

    hook = capture.Hook()
    gc.collect()
    gc.disable()
    hook.start()
    hook.mark("setup")
    modules, pipeline_stages = [], []
    for index in local_stages:
        module, family, dims, options = build_stage_module(cfg, index, count)
        vocab = int(dims["vocab"])
        is_first, is_last = index == 0, index + 1 == count
        with torch.device("meta"):
            stage_input = (torch.empty(batch, seq, dtype=torch.long) if is_first
                           else torch.empty(batch, seq, hidden, requires_grad=True))
            stage_output = torch.empty(batch, seq, vocab if is_last else hidden, requires_grad=True)
            # The gradients sent back: one per received hidden state (none for token ids or the loss).
            input_grads = None if is_first else torch.empty(batch, seq, hidden)
            output_grads = None if is_last else torch.empty(batch, seq, hidden)
        modules.append(module)
        pipeline_stages.append(pipelining.PipelineStage(module, index, count, torch.device("cpu"),
                                                        input_args=stage_input, output_args=stage_output,
                                                        input_grads=input_grads, output_grads=output_grads))
    # Every stage gets the loss_fn: a schedule without one runs no backward (_has_backward).
    schedule = getattr(pipelining, SCHEDULES[schedule_name])(pipeline_stages if multi else pipeline_stages[0],
                                                              n_microbatches=microbatches, loss_fn=causal_lm_loss)
    parameters_of = [p for module in modules for p in module.parameters()]
    opt = capture.make_optimizer(torch, parameters_of, opt_cfg)
    state = {"iteration": 0}

    def marked(method, phase):
        def run(chunk, *a, **k):
            hook.mark(f"iter{state['iteration']}/mb{chunk}/{phase}")
            return method(chunk, *a, **k)
        return run

    for stage in pipeline_stages:
        stage.forward_one_chunk = marked(stage.forward_one_chunk, "forward")
        stage.backward_one_chunk = marked(stage.backward_one_chunk, "backward")
        if hasattr(stage, "backward_weight_one_chunk"):  # zero bubble's split weight gradient
            stage.backward_weight_one_chunk = marked(stage.backward_weight_one_chunk, "backward")
    for iteration in range(iterations):
        state["iteration"] = iteration
        x, y = models.make_batch(family, dims, batch * microbatches, seq, gen, options=options)
        losses = []
        if first:
            schedule.step(x, target=y if last else None, losses=losses, return_outputs=False)
        else:
            schedule.step(target=y if last else None, losses=losses, return_outputs=False)
        del x, y, losses
        hook.mark(f"iter{iteration}/optimizer")
        opt.step()
        hook.mark(f"iter{iteration}/zero_grad")
        opt.zero_grad(set_to_none=set_to_none)
    hook.mark("teardown")
    hook.stop()
    gc.enable()
    events = hook.events()
    parameters = sum(p.numel() for p in parameters_of)
    header = [f"oomcast CPU pipeline-parallel capture of {args.config}, rank {args.rank} of {stages} "
              f"({schedule_name}, {virtual} stages per rank, {microbatches} microbatches; torch {torch.__version__}, gloo, "
              f"validate/pipeline_parallel_capture.py)",
              f"parameters: {parameters}"]
    capture.write_trace(f"{args.output}.rank{args.rank}", events, hook.labels, header)
    with contextlib.suppress(Exception):
        dist.barrier()
    dist.destroy_process_group()
    return 0


def main(argv=None):
    return rank_launcher.main(argv, __doc__, __file__, run_rank,
                              lambda cfg: int((cfg.get("parallel") or {}).get("pipeline_parallel", 1)), "oomcast-pp-store-")


if __name__ == "__main__":
    sys.exit(main())
