# jobs.py: the job-level pieces of a capture (docs/scenario-format.md#job): a hand-written LoRA
# as PEFT builds it (lora.Linear: base layer frozen, lora_A/lora_B in fp32, dropout on the
# adapter input, result = result + lora_B(lora_A(dropout(x))) * scaling), the trainable subset
# (patterns and freeze lists over named_parameters()), PEFT's enable_input_require_grads, and
# the forward-only loops (job: inference / forward). Written from PEFT's documented behaviour,
# device-agnostic.
import contextlib
import fnmatch

import torch
import torch.nn as nn


def name_matches(pattern, name):
    """The planner's rule (planner/trainable_policy.cc): a glob with '*' over the whole name,
    or a run of whole dotted components."""
    if "*" in pattern:
        return fnmatch.fnmatchcase(name, pattern)
    parts, want = name.split("."), pattern.split(".")
    return any(parts[i:i + len(want)] == want for i in range(len(parts) - len(want) + 1))


def _ends_with(name, suffix):
    return name == suffix or name.endswith("." + suffix)


class LoraLinear(nn.Module):
    """PEFT's lora.Linear around a base nn.Linear (PEFT >= 0.7 forward)."""

    def __init__(self, base, r, alpha, dropout):
        super().__init__()
        self.base_layer = base
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.lora_A = nn.Linear(base.in_features, r, bias=False, device=base.weight.device, dtype=torch.float32)
        self.lora_B = nn.Linear(r, base.out_features, bias=False, device=base.weight.device, dtype=torch.float32)
        nn.init.zeros_(self.lora_B.weight)
        self.scaling = alpha / r

    def forward(self, x):
        result = self.base_layer(x)
        result_dtype = result.dtype
        x = x.to(self.lora_A.weight.dtype)
        result = result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling
        return result.to(result_dtype)


def apply_lora(model, lora):
    """Wraps every nn.Linear PEFT's target_modules rule selects; returns the wrapped names."""
    targets = lora.get("target_modules") or []
    targets = [targets] if isinstance(targets, str) else list(targets)
    r = int(lora.get("r", 8))
    alpha = float(lora.get("alpha", lora.get("lora_alpha", 8)))
    dropout = float(lora.get("dropout", lora.get("lora_dropout", 0.0)))
    chosen = []
    for name, module in list(model.named_modules()):
        if not isinstance(module, nn.Linear):
            continue
        if any((t == "all-linear" and not _ends_with(name, "lm_head")) or (t != "all-linear" and _ends_with(name, t))
               for t in targets):
            chosen.append(name)
    for name in chosen:
        parent_name, _, leaf = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, leaf, LoraLinear(getattr(parent, leaf), r, alpha, dropout))
    return chosen


def _planner_name(name):
    """named_parameters() of a LoRA-wrapped model as the planner names them."""
    return name.replace(".base_layer.", ".")


def set_trainable(model, training):
    """Applies training.trainable / freeze (and LoRA) to requires_grad."""
    trainable = training.get("trainable", "all")
    lora = trainable.get("lora") if isinstance(trainable, dict) else None
    if lora is not None:
        apply_lora(model, lora)
    for name, p in model.named_parameters():
        plain = _planner_name(name)
        if lora is not None:
            on = ".lora_A." in name or ".lora_B." in name
            bias = str(lora.get("bias", "none"))
            if plain.endswith("bias") and (bias == "all" or (bias == "lora_only" and ".base_layer." in name)):
                on = True
        elif trainable == "all":
            on = True
        elif trainable == "none":
            on = False
        else:
            patterns = [trainable] if isinstance(trainable, str) else list(trainable)
            on = any(name_matches(pt, plain) for pt in patterns)
        if any(name_matches(pt, plain) for pt in (training.get("freeze") or [])):
            on = False
        p.requires_grad_(on)


def input_embeddings(model):
    for name, module in model.named_modules():
        if isinstance(module, nn.Embedding) and name.split(".")[-1] in ("wte", "embed_tokens", "word_embeddings"):
            return module
    return None


def enable_input_require_grads(model):
    """PEFT / transformers' enable_input_require_grads: a forward hook on the input embedding."""
    embedding = input_embeddings(model)
    if embedding is not None:
        embedding.register_forward_hook(lambda module, inputs, output: output.requires_grad_(True))


def wants_input_require_grads(cfg, checkpointing):
    training = cfg.get("training") or {}
    value = training.get("input_require_grads")
    if value is not None:
        return bool(value)
    frozen = training.get("trainable", "all") != "all" or bool(training.get("freeze"))
    return frozen and checkpointing


def job_settings(cfg, iterations):
    """(kind, batches, inference_mode, compute_loss, eval_mode, held) from the scenario's `job`."""
    job = cfg.get("job") or "train"
    if isinstance(job, str):
        job = {"kind": job}
    kind = str(job.get("kind", "train"))
    outputs = str(job.get("outputs", "loss"))
    held = job.get("held_outputs")
    if held is None:
        held = ["loss" if outputs == "loss" else "logits"]
    elif isinstance(held, str):
        held = [held]
    mode = job.get("model_mode")
    eval_mode = (kind == "inference") if mode is None else mode == "eval"
    return (kind, int(job.get("batches") or iterations), str(job.get("grad_mode", "no_grad")) == "inference_mode",
            outputs == "loss", eval_mode, set(held))


def run_forward_job(cfg, hook, model, make_batch, autocast, settings):
    """`job: inference` / `job: forward`: forward passes only; `out` is rebound every batch."""
    kind, batches, inference_mode, compute_loss, eval_mode, held = settings
    model.train(not eval_mode)
    if kind == "inference":
        grad = torch.inference_mode() if inference_mode else torch.no_grad()
    else:
        grad = contextlib.nullcontext()
    logits = loss = None
    with grad:
        for b in range(batches):
            hook.mark(f"iter{b}/forward")
            x, y = make_batch()
            with autocast():
                if compute_loss:
                    if "logits" in held:
                        logits, loss = model(x, y)
                    else:
                        loss = model(x, y)[1]
                else:
                    logits = model(x)[0]
            if not held:
                logits = loss = None
    del logits, loss
