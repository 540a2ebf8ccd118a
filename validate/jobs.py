# jobs.py: the job-level pieces of a capture (docs/scenario-format.md#job): a hand-written LoRA
# as PEFT builds it (lora.Linear: base layer frozen, lora_A/lora_B in fp32, dropout on the
# adapter input, result = result + lora_B(lora_A(dropout(x))) * scaling), the trainable subset
# (patterns and freeze lists over named_parameters()), PEFT's enable_input_require_grads, and
# the forward-only loops (job: inference / forward). Written from PEFT's documented behaviour,
# device-agnostic.
import contextlib
import math
import fnmatch

import torch
import torch.nn as nn
import torch.nn.functional as F


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

    def __init__(self, base, r, alpha, dropout, autocast_adapter_dtype=True):
        super().__init__()
        self.base_layer = base
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        # get_peft_model(autocast_adapter_dtype=True) makes 16-bit adapters fp32; without it they
        # follow the base layer's floating dtype (LoraLayer._move_adapter_to_device_of_base_layer).
        dtype = base.weight.dtype if not autocast_adapter_dtype and base.weight.is_floating_point() else torch.float32
        self.lora_A = nn.Linear(base.in_features, r, bias=False, device=base.weight.device, dtype=dtype)
        self.lora_B = nn.Linear(r, base.out_features, bias=False, device=base.weight.device, dtype=dtype)
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
    autocast_adapter_dtype = bool(lora.get("autocast_adapter_dtype", True))
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
        setattr(parent, leaf, LoraLinear(getattr(parent, leaf), r, alpha, dropout, autocast_adapter_dtype))
    return chosen


def _planner_name(name):
    """named_parameters() of a LoRA-wrapped model as the planner names them."""
    return name.replace(".base_layer.", ".")


def apply_dora(model, lora):
    """Real PEFT (the venv's peft 0.21.2): LoRA layers with use_dora injected in place; each
    adapted linear gets lora_A, lora_B and a magnitude vector (lora_magnitude_vector)."""
    import peft
    targets = lora.get("target_modules") or []
    config = peft.LoraConfig(r=int(lora.get("r", 8)), lora_alpha=float(lora.get("alpha", lora.get("lora_alpha", 8))),
                             lora_dropout=float(lora.get("dropout", lora.get("lora_dropout", 0.0))),
                             target_modules=[targets] if isinstance(targets, str) else list(targets), use_dora=True)
    peft.inject_adapter_in_model(config, model)


def apply_ia3(model, ia3):
    """Real PEFT (the venv's peft 0.21.2): IA3 layers injected in place around the target linears."""
    import peft
    config = peft.IA3Config(target_modules=list(ia3["target_modules"]),
                            feedforward_modules=list(ia3.get("feedforward_modules") or []))
    peft.inject_adapter_in_model(config, model)


def set_trainable(model, training):
    """Applies training.trainable / freeze (and LoRA or IA3) to requires_grad."""
    trainable = training.get("trainable", "all")
    lora = trainable.get("lora") if isinstance(trainable, dict) else None
    ia3 = trainable.get("ia3") if isinstance(trainable, dict) else None
    if lora is not None and lora.get("use_dora"):
        apply_dora(model, lora)
    elif lora is not None:
        apply_lora(model, lora)
    if ia3 is not None:
        apply_ia3(model, ia3)
    for name, p in model.named_parameters():
        plain = _planner_name(name)
        if ia3 is not None:
            on = ".ia3_l." in name
        elif lora is not None:
            on = ".lora_A." in name or ".lora_B." in name or ".lora_magnitude_vector." in name
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
# (to be appended to validate/jobs.py)


def dynamic_cache_copies_prefill():
    """Whether the installed transformers' DynamicCache copies the prefill's K and V (4.56+:
    DynamicLayer.lazy_initialization makes torch.tensor([]) and torch.cat([keys, key_states]))
    or keeps them (up to 4.55: self.keys = key_states). Without transformers: the newest rule,
    as the planner's default transformers_version (planner/transformers_release_facts.cc)."""
    try:
        import transformers
    except ImportError:
        return True
    major, minor = (int(part) for part in transformers.__version__.split(".")[:2])
    return (major, minor) >= (4, 56)


def _cached_attention(attn, x, cos, sin, cache, layer, pos, static):
    """LlamaAttention.forward with a KV cache as Hugging Face's DynamicCache (torch.cat per step)
    or StaticCache (preallocated, written in place) keeps it; attention over the filled part."""
    from models import rotate_half
    B, T, _ = x.shape
    q = attn.q_proj(x).view(B, T, attn.heads, attn.hd).transpose(1, 2)
    k = attn.k_proj(x).view(B, T, attn.kv_heads, attn.hd).transpose(1, 2)
    v = attn.v_proj(x).view(B, T, attn.kv_heads, attn.hd).transpose(1, 2)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    if static:
        cache[layer][0][:, :, pos:pos + T] = k
        cache[layer][1][:, :, pos:pos + T] = v
        k, v = cache[layer][0][:, :, :pos + T], cache[layer][1][:, :, :pos + T]
    elif cache[layer][0] is None and not dynamic_cache_copies_prefill():
        cache[layer] = [k, v]
    else:
        if cache[layer][0] is None:  # DynamicLayer.lazy_initialization, then the same torch.cat
            cache[layer] = [torch.tensor([], dtype=k.dtype, device=k.device)] * 2
        cache[layer] = [torch.cat([cache[layer][0], k], dim=-2), torch.cat([cache[layer][1], v], dim=-2)]
        k, v = cache[layer]
    L = k.shape[-2]
    if attn.kv_heads != attn.heads:
        rep = attn.heads // attn.kv_heads
        k = k[:, :, None].expand(B, attn.kv_heads, rep, L, attn.hd).reshape(B, attn.heads, L, attn.hd)
        v = v[:, :, None].expand(B, attn.kv_heads, rep, L, attn.hd).reshape(B, attn.heads, L, attn.hd)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(attn.hd))
    causal = torch.ones(T, L, dtype=torch.bool, device=x.device).triu(L - T + 1)
    att = att.masked_fill(causal, float("-inf"))
    att = torch.softmax(att, dim=-1)
    y = att @ v
    y = y.transpose(1, 2).contiguous().reshape(B, T, -1)
    return attn.o_proj(y)


def _cached_forward(model, ids, cache, pos, static, last_only):
    """Llama forward over `ids` at positions pos.. with the cache (HF LlamaModel: inputs_embeds
    stays bound while the layers run)."""
    T = ids.shape[1]
    inputs_embeds = model.embed_tokens(ids)
    freqs = torch.outer(torch.arange(pos, pos + T, device=ids.device).float(), model.inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[None].to(inputs_embeds.dtype), emb.sin()[None].to(inputs_embeds.dtype)
    x = inputs_embeds
    for i, block in enumerate(model.layers):
        x = x + _cached_attention(block.self_attn, block.input_layernorm(x), cos, sin, cache, i, pos, static)
        x = x + block.mlp(block.post_attention_layernorm(x))
    x = model.norm(x)
    return model.lm_head(x[:, -1:, :] if last_only else x)


def _cached_gpt2_attention(attn, x, cache, layer, pos):
    """nanoGPT's CausalSelfAttention (eager) with Hugging Face's DynamicCache: the cache keeps
    k and v as they are, views of the fused c_attn output, so all of it lives until the next
    step's torch.cat replaces them."""
    B, T, C = x.size()
    hd = C // attn.n_head
    q, k, v = attn.c_attn(x).split(attn.n_embd, dim=2)
    k = k.view(B, T, attn.n_head, hd).transpose(1, 2)
    q = q.view(B, T, attn.n_head, hd).transpose(1, 2)
    v = v.view(B, T, attn.n_head, hd).transpose(1, 2)
    if cache[layer][0] is None:
        cache[layer] = [k, v]
    else:
        cache[layer] = [torch.cat([cache[layer][0], k], dim=-2), torch.cat([cache[layer][1], v], dim=-2)]
        k, v = cache[layer]
    L = k.shape[-2]
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
    att = att.masked_fill(attn.bias[:, :, pos:pos + T, :L] == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    y = att @ v
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    return attn.resid_dropout(attn.c_proj(y))


def _cached_gpt2_block(block, x, cache, layer, pos):
    """nanoGPT's Block.forward: its own frame, so the caller's `x` lives until it returns."""
    x = x + _cached_gpt2_attention(block.attn, block.ln_1(x), cache, layer, pos)
    x = x + block.mlp(block.ln_2(x))
    return x


def _cached_gpt2_forward(model, ids, cache, pos, last_only):
    """nanoGPT's GPT forward over `ids` at positions pos.. with the cache (pos, tok_emb and
    pos_emb are locals that live until it returns, as in GPT.forward)."""
    T = ids.shape[1]
    tr = model.transformer
    positions = torch.arange(pos, pos + T, dtype=torch.long, device=ids.device)
    tok_emb = tr.wte(ids)
    pos_emb = tr.wpe(positions)
    x = tr.drop(tok_emb + pos_emb)
    for i, block in enumerate(tr.h):
        x = _cached_gpt2_block(block, x, cache, i, pos)
    x = tr.ln_f(x)
    return model.lm_head(x[:, -1:, :] if last_only else x)


def generate_settings(cfg):
    job = cfg.get("job") or {}
    return dict(prompt_len=int(job.get("prompt_len") or cfg.get("seq_len")), new_tokens=int(job.get("new_tokens", 32)),
                sequences=int(job.get("num_return_sequences", 1)), beams=int(job.get("num_beams", 1)),
                static=str(job.get("cache", "dynamic")) == "static", max_cache_len=job.get("max_cache_len"),
                last_only=str(job.get("prefill_logits", "last")) == "last")


def run_transformers_generate(hook, model, g, batch, gen):
    """transformers' own model.generate() (greedy, exactly new_tokens tokens, its DynamicCache or
    StaticCache): marks iter0/prefill before the prompt is made and iter{t}/decode before each
    later forward of the model, as the planner's generate job names its phases."""
    seqs = batch * g["sequences"]
    calls = [0]

    def mark(module, args, kwargs):
        if calls[0]:
            hook.mark(f"iter{calls[0]}/decode")
        calls[0] += 1

    model.eval()
    # Exactly new_tokens tokens with no logits processor: no end-of-sequence token to stop at;
    # the prompt holds no padding token, so the attention mask is all ones (no padding mask).
    config = model.generation_config
    config.eos_token_id = None
    config.pad_token_id = 0
    config.do_sample = False
    config.use_cache = True  # the capture's model_file builds its classes for training, without a cache
    model.config.use_cache = True
    handle = model.register_forward_pre_hook(mark, with_kwargs=True)
    try:
        with torch.no_grad():
            hook.mark("iter0/prefill")
            input_ids = torch.randint(1, model.config.vocab_size, (seqs, g["prompt_len"]), generator=gen)
            kwargs = dict(max_new_tokens=g["new_tokens"], num_beams=1)
            if g["static"]:
                kwargs["cache_implementation"] = "static"
            out = model.generate(input_ids, **kwargs)
            del out, input_ids
    finally:
        handle.remove()


def run_generate_job(cfg, hook, model, dims, batch, gen):
    """`job: generate`: greedy decoding as HF's generate loop runs it (next_token_logits =
    logits[:, -1, :].clone().float(); input_ids grown with torch.cat; the step's locals live
    until the next step rebinds them)."""
    from models import _dim
    g = generate_settings(cfg)
    if g["beams"] > 1:
        raise ValueError("the CPU capture runs greedy/sampled generation, not beam search")
    inner = getattr(model, "inner", None)
    if inner is not None and hasattr(inner, "generate"):  # a transformers class (capture.py --transformers)
        return run_transformers_generate(hook, inner, g, batch, gen)
    seqs = batch * g["sequences"]
    V = _dim(dims, "vocab")
    if hasattr(model, "transformer"):  # nanoGPT's GPT-2: dynamic cache only
        if g["static"]:
            raise ValueError("the CPU capture runs GPT-2 generation with the dynamic cache only")
        model.eval()
        with torch.no_grad():
            hook.mark("iter0/prefill")
            cache = [[None, None] for _ in model.transformer.h]
            input_ids = torch.randint(0, V, (seqs, g["prompt_len"]), generator=gen)
            next_token_logits = next_tokens = None
            for step in range(g["new_tokens"]):
                if step:
                    hook.mark(f"iter{step}/decode")
                    step_ids = input_ids[:, -1:].clone()
                    pos = g["prompt_len"] + step - 1
                else:
                    step_ids, pos = input_ids, 0
                logits = _cached_gpt2_forward(model, step_ids, cache, pos, g["last_only"] and step == 0)
                next_token_logits = logits[:, -1, :].clone().float()
                del logits, step_ids
                next_tokens = torch.argmax(next_token_logits, dim=-1)
                input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
            del cache, next_token_logits, next_tokens, input_ids
        return
    layers = len(model.layers)
    attn = model.layers[0].self_attn
    dtype = model.embed_tokens.weight.dtype
    model.eval()
    with torch.no_grad():
        hook.mark("iter0/prefill")
        cache = [[None, None] for _ in range(layers)]
        if g["static"]:
            M = int(g["max_cache_len"] or g["prompt_len"] + g["new_tokens"])
            cache = [[torch.zeros(seqs, attn.kv_heads, M, attn.hd, dtype=dtype),
                      torch.zeros(seqs, attn.kv_heads, M, attn.hd, dtype=dtype)] for _ in range(layers)]
        input_ids = torch.randint(0, V, (seqs, g["prompt_len"]), generator=gen)
        next_token_logits = next_tokens = None
        for step in range(g["new_tokens"]):
            if step:
                hook.mark(f"iter{step}/decode")
                step_ids = input_ids[:, -1:].clone()
                pos = g["prompt_len"] + step - 1
            else:
                step_ids, pos = input_ids, 0
            logits = _cached_forward(model, step_ids, cache, pos, g["static"], g["last_only"] and step == 0)
            next_token_logits = logits[:, -1, :].clone().float()
            del logits, step_ids
            next_tokens = torch.argmax(next_token_logits, dim=-1)
            input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
        del cache, next_token_logits, next_tokens, input_ids


class MuonWithAdamW:
    """optimizer.type muon: torch.optim.Muon (torch >= 2.9) on the 2-D parameters whose names
    match none of optimizer.adamw_params, and a torch.optim.AdamW (built by `make_adamw`) on the
    others, stepped in that order, as torch's Muon docstring pairs them."""

    DEFAULT_ADAMW = ["embed_tokens", "lm_head", "wte", "wpe", "embeddings"]

    def __init__(self, torch_module, named, cfg, make_adamw):
        patterns = cfg.get("adamw_params", self.DEFAULT_ADAMW)
        patterns = [patterns] if isinstance(patterns, str) else list(patterns)
        muon, rest = [], []
        for name, p in named:
            if not p.requires_grad:
                continue
            is_muon = p.ndim == 2 and not any(name_matches(pat, _planner_name(name)) for pat in patterns)
            (muon if is_muon else rest).append(p)
        self.optimizers = []
        if muon:
            self.optimizers.append(torch_module.optim.Muon(muon, lr=float(cfg.get("lr", 1e-3)),
                                                           nesterov=bool(cfg.get("nesterov", True)),
                                                           ns_steps=int(cfg.get("ns_steps", 5))))
        if rest:
            self.optimizers.append(make_adamw(rest))

    def step(self):
        for optimizer in self.optimizers:
            optimizer.step()

    def zero_grad(self, set_to_none=True):
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)


class AnyPrecisionAdamW(torch.optim.Optimizer):
    """optimizer.type anyprecision_adamw: the AdamW of torchdistx / llama-recipes
    (policies/anyprecision_optimizer.py, llama-cookbook 0.0.5) written out with the same tensor
    operations in the same order, so that it allocates what that one does: per parameter a CPU
    step counter, exp_avg and exp_avg_sq in their dtypes (and a Kahan compensation buffer), then
    per step in-place moment updates, a centred variance (sqrt, division, in-place eps) and, with
    Kahan summation, a clone of the parameter."""

    def __init__(self, params, cfg):
        dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}
        defaults = dict(lr=float(cfg.get("lr", 1e-3)), betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                        use_kahan_summation=bool(cfg.get("use_kahan_summation", False)),
                        momentum_dtype=dtype[cfg.get("momentum_dtype", "bf16")],
                        variance_dtype=dtype[cfg.get("variance_dtype", "bf16")],
                        compensation_buffer_dtype=dtype[cfg.get("compensation_buffer_dtype", "bf16")])
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, kahan = group["lr"], group["eps"], group["use_kahan_summation"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p, dtype=group["momentum_dtype"])
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=group["variance_dtype"])
                    if kahan:
                        state["compensation"] = torch.zeros_like(p, dtype=group["compensation_buffer_dtype"])
                state["step"] += 1
                step = state["step"]
                exp_avg, exp_avg_sq, grad = state["exp_avg"], state["exp_avg_sq"], p.grad
                if group["weight_decay"]:
                    p.data.mul_(1 - lr * group["weight_decay"])
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step_size = lr / (1 - beta1**step)
                centered_variance = (exp_avg_sq.sqrt() / (1 - beta2**step) ** 0.5).add_(eps, alpha=1)
                if kahan:
                    compensation = state["compensation"]
                    compensation.addcdiv_(exp_avg, centered_variance, value=-step_size)
                    temp_buffer = p.detach().clone()
                    p.data.add_(compensation)
                    compensation.add_(temp_buffer.sub_(p.data))
                else:
                    p.data.addcdiv_(exp_avg, centered_variance, value=-step_size)
