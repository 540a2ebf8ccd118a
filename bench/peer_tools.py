"""The peers of bench/peers.py: each function takes a peer_scenarios.Scenario and returns a Cell,
the peer's predicted device memory for one GPU (bytes) or why there is none. Every number comes
from calling the peer's own installed code on the scenario's transformers model:

- accelerate: `accelerate estimate-memory`'s data function (`gather_data`, the table the command
  prints) on the model built with `init_empty_weights`; the CLI takes only Hub names, and this
  machine reaches no Hub, so its model loader is handed the model built from the config.
- DeepSpeed: `estimate_zero{2,3}_model_states_mem_needs_all_cold` with the meta-device model's
  parameter count (and, for ZeRO-3, the largest layer DeepSpeed's `model_to_params` finds); the
  per-GPU figure of the row whose offload options are the scenario's (read from the arguments
  and results of the per-option estimator it calls, not from its 2-decimal printout).
- MemTracker: `torch.distributed._tools.mem_tracker.MemTracker` around the scenario's training
  loop run on FakeTensorMode tensors (fake CPU tensors: a CPU-only torch cannot make fake CUDA
  tensors); its peak "Total".
- llm-analysis: `LLMAnalysis.training`/`inference` with a ModelConfig from the same config.
"""
import argparse
import contextlib
import importlib.util
import inspect
import io

from peer_scenarios import scenario_dropout_fields

GIB = 1024 ** 3


class Cell:
    """One peer's answer for one scenario: `value` in bytes, or None with `note` saying why."""

    def __init__(self, value=None, note=""):
        self.value = value
        self.note = note


def cannot_express(reason):
    return Cell(None, f"cannot express: {reason}")


def installed(module):
    return importlib.util.find_spec(module) is not None


def transformers_config(scenario):
    import transformers
    keys = dict(scenario.hf_config)
    model_type = keys.pop("model_type")
    keys.update(scenario_dropout_fields(model_type, float(scenario.keys.get("dropout", 0.0))))
    return transformers.AutoConfig.for_model(model_type, **keys)


def build_model(scenario, attention="eager"):
    """The scenario's transformers model, in whatever device context the caller opened. The
    attention kernel matters only to a peer that runs the model (Gemma 2 refuses SDPA)."""
    import transformers
    config = transformers_config(scenario)
    auto = (transformers.AutoModelForSequenceClassification if scenario.hf_kind == "sequence_classification"
            else transformers.AutoModelForCausalLM)
    return auto.from_config(config, attn_implementation=attention)


def single_device_reason(scenario):
    world = int(scenario.parallel.get("world_size", 1))
    if world <= 1:
        return None
    kind = next((k for k in ("fsdp2", "fsdp", "ddp", "tensor_parallel", "pipeline") if k in scenario.parallel), None)
    if scenario.zero_stage is not None:
        kind = f"ZeRO-{scenario.zero_stage}"
    return f"{world} ranks, {kind or 'data parallel'}"


# ------------------------------------------------------------------ accelerate estimate-memory

ACCELERATE_DTYPES = {"fp32": "float32", "amp_bf16": "bfloat16", "pure_bf16": "bfloat16", "amp_fp16": "float16",
                     "pure_fp16": "float16"}


def accelerate_estimate(scenario):
    from accelerate import init_empty_weights
    from accelerate.commands import estimate

    reason = single_device_reason(scenario)
    if reason:
        return cannot_express(reason)
    if scenario.lora or scenario.weights_format == "nf4":
        return cannot_express("frozen base / adapters")
    kind = scenario.job_kind
    optimizer_type = scenario.optimizer[0]
    if kind == "train" and optimizer_type not in ("adam", "adamw"):
        return cannot_express(f"optimizer {optimizer_type} (Adam only)")
    precision = scenario.keys.get("precision", "fp32")
    dtype = ACCELERATE_DTYPES.get(precision)
    if kind != "train":
        dtype = {"bf16": "bfloat16", "fp16": "float16"}.get(scenario.weights_format, dtype)
    with init_empty_weights():
        model = build_model(scenario)
    args = argparse.Namespace(model_name=scenario.label, library_name="transformers", trust_remote_code=False,
                              dtypes=[dtype])
    loader = estimate.create_empty_model
    estimate.create_empty_model = lambda *unused, **unused_too: model
    try:
        _, _, total_size, training = estimate.gather_data(args)[0]
    finally:
        estimate.create_empty_model = loader
    if kind != "train":
        return Cell(int(total_size), "Total Size (weights)")
    # The command's "Training using Adam" column shows the largest of the four sizes.
    return Cell(int(max(training.values())), f"Training using Adam, {dtype}")


# ------------------------------------------------------------------ DeepSpeed ZeRO estimators

def deepspeed_estimate(scenario):
    stage = scenario.zero_stage
    if stage not in (2, 3):
        return cannot_express("ZeRO-2/3 jobs only" if stage is None else f"ZeRO-{stage} (estimators: 2, 3)")
    if scenario.lora:
        return cannot_express("frozen base / adapters")
    import torch
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if stage == 2:
            from deepspeed.runtime.zero import stage_1_and_2 as module
            estimator_name = "estimate_zero2_model_states_mem_needs"
        else:
            from deepspeed.runtime.zero import stage3 as module
            estimator_name = "estimate_zero3_model_states_mem_needs"
    zero = scenario.parallel["deepspeed"]["zero_optimization"]
    offload_optimizer = (zero.get("offload_optimizer") or {}).get("device") == "cpu"
    offload_param = (zero.get("offload_param") or {}).get("device") == "cpu"
    world = int(scenario.parallel.get("world_size", 1))
    per_node = int(scenario.parallel.get("gpus_per_node", min(world, 8)))
    with torch.device("meta"):
        model = build_model(scenario)
    # The _live variants count parameters by data_ptr(), which is 0 for every meta tensor (the
    # whole model would count as one tensor), so the total goes to the _cold variant as a user
    # passes it; the largest layer (ZeRO-3) is DeepSpeed's own model_to_params count.
    total_params = sum(p.numel() for p in model.parameters())
    hardware = {"num_gpus_per_node": per_node, "num_nodes": max(1, world // per_node)}
    estimator = getattr(module, estimator_name)
    signature = inspect.signature(estimator)
    rows = []

    def recording(*args, **kwargs):
        result = estimator(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        rows.append((dict(bound.arguments), result))
        return result

    setattr(module, estimator_name, recording)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            if stage == 2:
                module.estimate_zero2_model_states_mem_needs_all_cold(total_params, **hardware)
            else:
                largest_layer_params = module.model_to_params(model)[1]
                module.estimate_zero3_model_states_mem_needs_all_cold(total_params, largest_layer_params, **hardware)
    finally:
        setattr(module, estimator_name, estimator)
    for arguments, result in rows:
        if arguments["cpu_offload"] != offload_optimizer:
            continue
        if stage == 3 and (arguments["cpu_offload_params"] != offload_param or not arguments["zero_init"]):
            continue
        return Cell(int(result[1]), "model states per GPU")
    return cannot_express("no row with these offload options")


# ------------------------------------------------------------------ PyTorch MemTracker

MEMTRACKER_KEYS = {"description", "model", "batch_size", "seq_len", "iterations", "precision", "attention", "dropout",
                   "optimizer", "checkpointing", "training_loop", "device", "allocator", "grad_accum_steps", "eval",
                   "weights", "training", "job"}


def memtracker_estimate(scenario):
    reason = single_device_reason(scenario)
    if reason:
        return cannot_express(reason + "; one process")
    for key in scenario.keys:
        if key not in MEMTRACKER_KEYS:
            return Cell(None, f"not run: harness has no `{key}`")
    if scenario.weights_format == "nf4":
        return cannot_express("nf4 weights (bitsandbytes)")
    optimizer_type, impl, options = scenario.optimizer
    if optimizer_type not in ("adam", "adamw", "sgd", "adafactor"):
        return cannot_express(f"optimizer {optimizer_type} (bitsandbytes)")
    checkpointing = scenario.keys.get("checkpointing", "none")
    if checkpointing not in ("none", "full"):
        return Cell(None, "not run: harness checkpoints all blocks or none")
    if scenario.keys.get("precision") == "pure_bf16" and scenario.get("training.master_weights", True):
        return Cell(None, "not run: harness has no fp32 master weights")
    if scenario.job_kind == "generate":
        return Cell(None, "not run: generate() branches on token values")
    loop_keys = sorted(set(scenario.keys.get("training_loop") or {}) - {"caller_held_outputs", "zero_grad"})
    if loop_keys:
        return Cell(None, f"not run: harness has no `training_loop: {loop_keys[0]}`")
    training = scenario.keys.get("training") or {}
    unknown = sorted(set(training) - {"trainable", "master_weights"}) + sorted(
        set(training.get("trainable") or {}) - {"lora"})
    if unknown:
        return Cell(None, f"not run: harness has no `training: {unknown[0]}`")
    return Cell(run_memtracker(scenario, optimizer_type, impl, options, checkpointing == "full"), "peak Total")


def run_memtracker(scenario, optimizer_type, impl, options, checkpoint):
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    precision = scenario.keys.get("precision", "fp32")
    autocast_dtype = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}.get(precision)
    weights_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(scenario.weights_format)
    if precision == "pure_bf16":
        weights_dtype = torch.bfloat16
    attention = "eager" if scenario.keys.get("attention") == "eager" else "sdpa"
    batch, tokens = int(scenario.keys["batch_size"]), int(scenario.keys["seq_len"])
    iterations = min(int(scenario.keys.get("iterations", 2)), 2)
    accumulation = int(scenario.keys.get("grad_accum_steps", 1))
    eval_keys = scenario.keys.get("eval") or {}
    with FakeTensorMode():
        model = build_model(scenario, attention)
        if weights_dtype is not None:
            model = model.to(weights_dtype)
        if scenario.lora:
            import peft
            lora = scenario.lora
            model = peft.get_peft_model(model, peft.LoraConfig(
                r=lora["r"], lora_alpha=lora.get("alpha", 8), lora_dropout=lora.get("dropout", 0.0),
                target_modules=lora["target_modules"]))
        if checkpoint:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if scenario.lora:
                model.enable_input_require_grads()
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = make_optimizer(torch, optimizer_type, impl, options, trainable)
        ids = torch.zeros(batch, tokens, dtype=torch.long)
        inputs = ({"input_ids": ids, "labels": torch.zeros(batch, dtype=torch.long)}
                  if scenario.hf_kind == "sequence_classification" else {"input_ids": ids, "labels": ids})
        autocast = (lambda: torch.autocast("cpu", dtype=autocast_dtype)) if autocast_dtype else contextlib.nullcontext
        tracker = MemTracker()
        tracker.track_external(model, optimizer)
        with tracker:
            if scenario.job_kind == "inference":
                model.eval()
                held = []
                with torch.no_grad(), autocast():
                    for _ in range(int(scenario.get("job.batches", 1))):
                        tracker.reset_mod_stats()
                        held.append(model(input_ids=ids).logits)
            else:
                set_to_none = scenario.get("training_loop.zero_grad", "set_to_none") != "zero"
                run_training(torch, model, optimizer, inputs, autocast, iterations, accumulation, eval_keys,
                             set_to_none, tracker.reset_mod_stats)
        return int(tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"])


def make_optimizer(torch, optimizer_type, impl, options, parameters):
    flags = {"fused": {"fused": True}, "foreach": {"foreach": True}, "single_tensor": {"foreach": False}}.get(impl, {})
    if optimizer_type == "sgd":
        return torch.optim.SGD(parameters, lr=0.01, momentum=float(options.get("momentum", 0.0)), **flags)
    if optimizer_type == "adafactor":
        return torch.optim.Adafactor(parameters, foreach=flags.get("foreach"))
    optimizer_class = torch.optim.AdamW if optimizer_type == "adamw" else torch.optim.Adam
    return optimizer_class(parameters, lr=1e-4, **flags)


def run_training(torch, model, optimizer, inputs, autocast, iterations, accumulation, eval_keys, set_to_none,
                 before_call):
    """The loop a user writes: micro-batches, step, zero_grad, optional eval; it holds the last
    outputs until the next forward rebinds them.
    `before_call` runs before each call of the model (MemTracker tracks one call at a time)."""
    outputs = None
    for _ in range(iterations):
        model.train()
        for _ in range(accumulation):
            before_call()
            with autocast():
                outputs = model(**inputs)
            (outputs.loss / accumulation if accumulation > 1 else outputs.loss).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=set_to_none)
        if eval_keys:
            model.eval()
            losses = []
            grad_mode = torch.no_grad() if eval_keys.get("no_grad", True) else contextlib.nullcontext()
            with grad_mode:
                for _ in range(int(eval_keys.get("batches", 1))):
                    before_call()
                    with autocast():
                        loss = model(**inputs).loss
                    # loss.item() would free the graph; a fake tensor has no value to read, so drop it.
                    losses.append(loss if eval_keys.get("accumulate_loss_without_item") else None)
    return outputs


# ------------------------------------------------------------------ llm-analysis

def llm_analysis_estimate(scenario):
    """llm-analysis (pip: 0.2.2 requires transformers<5 and huggingface-hub<0.15, so it is not in
    the pinned venv); used when importable, e.g. installed with --no-deps on PYTHONPATH."""
    from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis
    from llm_analysis.config import DtypeConfig, ModelConfig, ParallelismConfig, get_gpu_config_by_name
    if scenario.hf_kind != "causal_lm":
        return cannot_express("decoder-only models")
    if scenario.lora or scenario.weights_format == "nf4":
        return cannot_express("frozen base / adapters")
    if scenario.job_kind != "train":
        return Cell(None, f"not run: harness has no {scenario.job_kind} job")
    checkpointing = scenario.keys.get("checkpointing", "none")
    if checkpointing not in ("none", "full"):
        return cannot_express("checkpointing every n-th block")
    if scenario.keys.get("precision", "fp32") == "fp32":
        return cannot_express("fp32 (4-, 8- or 16-bit only)")
    config = transformers_config(scenario)
    gated = config.model_type != "gpt2"
    try:
        model_config = llm_analysis_model(ModelConfig, scenario, config)
    except AssertionError as refusal:  # its ModelConfig checks the shapes it can model
        return cannot_express(str(refusal))
    world = int(scenario.parallel.get("world_size", 1))
    stage = scenario.zero_stage or (3 if ("fsdp" in scenario.parallel or "fsdp2" in scenario.parallel) else 0)
    dtype = DtypeConfig()  # w16a16e16
    # Its memory figures do not depend on the GPU; an 80 GB one keeps its capacity check quiet.
    analysis = LLMAnalysis(model_config, get_gpu_config_by_name("a100-sxm-80gb"), dtype,
                           ParallelismConfig(dp_size=world))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        summary = analysis.training(
            batch_size_per_gpu=int(scenario.keys["batch_size"]), seq_len=int(scenario.keys["seq_len"]),
            gradient_accumulation_steps=int(scenario.keys.get("grad_accum_steps", 1)), ds_zero=DSZeRO(int(stage)),
            activation_recomputation=ActivationRecomputation.FULL if checkpointing == "full" else ActivationRecomputation.NONE,
            flash_attn=scenario.keys.get("attention", "flash") != "eager", mlp_gated_linear_units=gated)
    return Cell(int(summary["(weight+op_state+grad+act)_memory_per_gpu"]), "weights+optimizer+grads+activations")


def llm_analysis_model(ModelConfig, scenario, config):
    return ModelConfig(
        name=scenario.label, num_layers=config.num_hidden_layers, n_head=config.num_attention_heads,
        hidden_dim=config.hidden_size, vocab_size=config.vocab_size,
        max_seq_len=getattr(config, "max_position_embeddings", None),
        num_key_value_heads=getattr(config, "num_key_value_heads", None) or config.num_attention_heads,
        ffn_embed_dim=getattr(config, "intermediate_size", None) or 4 * config.hidden_size, model_type=config.model_type)


PEERS = [
    ("accelerate estimate-memory", "accelerate", accelerate_estimate),
    ("DeepSpeed ZeRO estimator", "deepspeed", deepspeed_estimate),
    ("torch MemTracker (FakeTensorMode)", "torch", memtracker_estimate),
    ("llm-analysis", "llm_analysis", llm_analysis_estimate),
]
