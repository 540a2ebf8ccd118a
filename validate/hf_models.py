# hf_models.py: tiny Hugging Face architectures written in plain PyTorch from the behaviour of
# HF's modelling code (transformers is not installed), built from the same config.json the
# planner reads: Qwen2 (q/k/v biases), Qwen3 (q_norm/k_norm per head), Gemma (scaled
# embeddings, (1 + w) RMSNorm, GELU-tanh, explicit head_dim), Gemma 2 (sandwich norms, eager
# attention and final logit softcapping), Phi-3 (fused qkv_proj and gate_up_proj), Mixtral (a sparse MoE block),
# GPT-NeoX (parallel residual, partial rotary, fused query_key_value, LayerNorm) and Falcon
# (multi-query fused query_key_value, parallel attention and MLP off one LayerNorm).
# Attention is the eager form the validated Llama of models.py runs (torch 1.13 has no SDPA).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from models import RMSNorm, rotate_half, run_blocks


def _causal_attention(q, k, v, dropout, training, scaling=None, softcap=None):
    T, hd = q.size(-2), q.size(-1)
    att = (q @ k.transpose(-2, -1)) * (scaling if scaling is not None else 1.0 / math.sqrt(hd))
    if softcap is not None:  # Gemma 2's eager attention: scores / cap, tanh, * cap
        att = att / softcap
        att = torch.tanh(att)
        att = att * softcap
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    att = att.masked_fill(causal, float("-inf"))
    att = F.softmax(att, dim=-1)
    att = F.dropout(att, p=dropout, training=training)
    return att @ v


def _repeat_kv(x, rep):
    if rep == 1:
        return x
    B, kv, T, hd = x.shape
    return x[:, :, None].expand(B, kv, rep, T, hd).reshape(B, kv * rep, T, hd)


def _causal_lm_loss(logits, targets):
    # ForCausalLMLoss: logits.float(), labels padded with -100 and shifted.
    shift = F.pad(targets, (0, 1), value=-100)[..., 1:].contiguous()
    return F.cross_entropy(logits.float().view(-1, logits.size(-1)), shift.view(-1), ignore_index=-100)


class GemmaRMSNorm(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(h))
        self.eps = eps

    def forward(self, x):
        output = x.float()
        output = output * torch.rsqrt(output.pow(2).mean(-1, keepdim=True) + self.eps)
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


# ---------------------------------------------------------------- Llama-style decoders

class DecoderAttention(nn.Module):
    def __init__(self, c, dropout):
        super().__init__()
        h, self.heads = c["hidden_size"], c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads") or self.heads
        self.hd = c.get("head_dim") or h // self.heads
        self.fused = c["model_type"] == "phi3"
        bias = c["model_type"] in ("qwen2", "qwen2_moe") or c.get("attention_bias", False)
        self.qk_norm = c["model_type"] in ("qwen3", "qwen3_moe")
        self.softcap = c.get("attn_logit_softcapping") if c["model_type"] == "gemma2" else None
        scalar = c.get("query_pre_attn_scalar") if c["model_type"] == "gemma2" else None
        self.scaling = scalar ** -0.5 if scalar else None
        q_out, kv_out = self.heads * self.hd, self.kv_heads * self.hd
        if self.fused:
            self.o_proj = nn.Linear(q_out, h, bias=False)
            self.qkv_proj = nn.Linear(h, q_out + 2 * kv_out, bias=False)
        else:
            self.q_proj = nn.Linear(h, q_out, bias=bias)
            self.k_proj = nn.Linear(h, kv_out, bias=bias)
            self.v_proj = nn.Linear(h, kv_out, bias=bias)
            self.o_proj = nn.Linear(q_out, h, bias=c.get("attention_bias", False))
        if self.qk_norm:  # Qwen3: RMSNorm over each head of q and k, before the transpose
            self.q_norm = RMSNorm(self.hd)
            self.k_norm = RMSNorm(self.hd)
        self.dropout = dropout

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        if self.fused:
            qkv = self.qkv_proj(x)
            q_pos, kv = self.heads * self.hd, self.kv_heads * self.hd
            q = qkv[..., :q_pos].view(B, T, self.heads, self.hd).transpose(1, 2)
            k = qkv[..., q_pos:q_pos + kv].view(B, T, self.kv_heads, self.hd).transpose(1, 2)
            v = qkv[..., q_pos + kv:].view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        elif self.qk_norm:
            q = self.q_norm(self.q_proj(x).view(B, T, self.heads, self.hd)).transpose(1, 2)
            k = self.k_norm(self.k_proj(x).view(B, T, self.kv_heads, self.hd)).transpose(1, 2)
            v = self.v_proj(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        else:
            q = self.q_proj(x).view(B, T, self.heads, self.hd).transpose(1, 2)
            k = self.k_proj(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
            v = self.v_proj(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads
        k, v = _repeat_kv(k, rep), _repeat_kv(v, rep)
        y = _causal_attention(q, k, v, self.dropout, self.training, self.scaling, self.softcap)
        y = y.transpose(1, 2).contiguous().reshape(B, T, -1)
        return self.o_proj(y)


class GatedMLP(nn.Module):
    def __init__(self, h, ffn, fused=False, gelu=False, names=("gate_proj", "up_proj", "down_proj")):
        super().__init__()
        self.fused, self.gelu, self.names = fused, gelu, names
        if fused:
            self.gate_up_proj = nn.Linear(h, 2 * ffn, bias=False)
            self.down_proj = nn.Linear(ffn, h, bias=False)
        else:
            setattr(self, names[0], nn.Linear(h, ffn, bias=False))
            setattr(self, names[2], nn.Linear(ffn, h, bias=False))
            setattr(self, names[1], nn.Linear(h, ffn, bias=False))

    def act(self, x):
        return F.gelu(x, approximate="tanh") if self.gelu else F.silu(x)

    def forward(self, x):
        if self.fused:
            up_states = self.gate_up_proj(x)
            gate, up_states = up_states.chunk(2, dim=-1)
            up_states = up_states * self.act(gate)
            return self.down_proj(up_states)
        gate, up, down = (getattr(self, n) for n in self.names)
        return down(self.act(gate(x)) * up(x))


class SparseMoeBlock(nn.Module):
    """MixtralSparseMoeBlock's training forward: router softmax in fp32, top-k, renormalise,
    a loop over the experts gathering their tokens and index_add_-ing the weighted outputs.
    `force_expert` (validation only) routes every token's first choice to that expert, the
    worst case of moe.imbalance."""

    def __init__(self, c):
        super().__init__()
        h, ffn = c["hidden_size"], c["intermediate_size"]
        self.E, self.k = c["num_local_experts"], c["num_experts_per_tok"]
        self.gate = nn.Linear(h, self.E, bias=False)
        self.experts = nn.ModuleList([GatedMLP(h, ffn, names=("w1", "w3", "w2")) for _ in range(self.E)])
        self.force_expert = c.get("_force_expert")

    def forward(self, x):
        B, T, h = x.shape
        x = x.view(-1, h)
        router_logits = self.gate(x)
        if self.force_expert is not None:
            with torch.no_grad():  # a constant on one column: the routing changes, not the graph
                bias = torch.zeros(self.E, dtype=router_logits.dtype)
                bias[self.force_expert] = 20.0  # every token first; the others keep their order
            router_logits = router_logits + bias
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(x.dtype)
        final = torch.zeros((B * T, h), dtype=x.dtype, device=x.device)
        expert_mask = F.one_hot(selected_experts, num_classes=self.E).permute(2, 1, 0)
        for e in range(self.E):
            idx, top_x = torch.where(expert_mask[e])
            if top_x.numel() == 0:
                continue
            current_state = x[None, top_x].reshape(-1, h)
            current = self.experts[e](current_state) * routing_weights[top_x, idx, None]
            final.index_add_(0, top_x, current.to(x.dtype))
        return final.reshape(B, T, h)


class DecoderLayer(nn.Module):
    def __init__(self, c, dropout):
        super().__init__()
        h, t = c["hidden_size"], c["model_type"]
        gemma = t.startswith("gemma")
        self.self_attn = DecoderAttention(c, dropout)
        if t == "mixtral":
            self.block_sparse_moe = SparseMoeBlock(c)
            self.mlp = None
        else:
            self.mlp = GatedMLP(h, c["intermediate_size"], fused=(t == "phi3"), gelu=gemma)
        norm = GemmaRMSNorm if gemma else RMSNorm
        self.input_layernorm = norm(h)
        self.post_attention_layernorm = norm(h)
        self.sandwich = t == "gemma2"
        if self.sandwich:  # Gemma 2: norms after attention and around the MLP too
            self.pre_feedforward_layernorm = norm(h)
            self.post_feedforward_layernorm = norm(h)

    def forward(self, x, cos, sin):
        if self.sandwich:
            residual = x
            x = self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), cos, sin))
            x = residual + x
            residual = x
            x = self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
            return residual + x
        residual = x
        x = residual + self.self_attn(self.input_layernorm(x), cos, sin)
        ffn = self.mlp if self.mlp is not None else self.block_sparse_moe
        return x + ffn(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    def __init__(self, c, dropout, use_checkpoint):
        super().__init__()
        h, V = c["hidden_size"], c["vocab_size"]
        self.gemma = c["model_type"].startswith("gemma")
        self.use_checkpoint = use_checkpoint
        self.embed_tokens = nn.Embedding(V, h)
        self.layers = nn.ModuleList([DecoderLayer(c, dropout) for _ in range(c["num_hidden_layers"])])
        self.norm = (GemmaRMSNorm if self.gemma else RMSNorm)(h)
        tied = c.get("tie_word_embeddings", self.gemma)
        self.lm_head = nn.Linear(h, V, bias=False)
        if tied:
            self.lm_head.weight = self.embed_tokens.weight
        hd = c.get("head_dim") or h // c["num_attention_heads"]
        theta = float(c.get("rope_theta", 10000.0))
        self.register_buffer("inv_freq", 1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd)), persistent=False)
        self.hidden = h
        self.final_softcap = c.get("final_logit_softcapping") if c["model_type"] == "gemma2" else None

    def rotary(self, x, T):
        with torch.autocast("cpu", enabled=False):
            freqs = torch.outer(torch.arange(T, device=x.device).float(), self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos()[None].to(x.dtype), emb.sin()[None].to(x.dtype)

    def forward(self, idx, targets=None):
        x = self.embed_tokens(idx)
        if self.gemma:
            normalizer = torch.tensor(self.hidden ** 0.5, dtype=x.dtype)
            x = x * normalizer
        cos, sin = self.rotary(x, idx.size(1))
        x = run_blocks(self.layers, x, self.use_checkpoint, cos, sin)
        x = self.norm(x)
        logits = self.lm_head(x)
        if self.final_softcap:  # Gemma 2: logits / cap, tanh, * cap
            logits = logits / self.final_softcap
            logits = torch.tanh(logits)
            logits = logits * self.final_softcap
        loss = _causal_lm_loss(logits, targets) if targets is not None else None
        return logits, loss


# ---------------------------------------------------------------- GPT-NeoX (Pythia)

class NeoXAttention(nn.Module):
    def __init__(self, c, dropout):
        super().__init__()
        h, self.heads = c["hidden_size"], c["num_attention_heads"]
        self.hd = h // self.heads
        self.rot = int(self.hd * c.get("rotary_pct", 0.25))
        self.query_key_value = nn.Linear(h, 3 * h)
        self.dense = nn.Linear(h, h)
        self.dropout = dropout

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        qkv = self.query_key_value(x).view(B, T, self.heads, 3 * self.hd)
        q = qkv[..., :self.hd].permute(0, 2, 1, 3)
        k = qkv[..., self.hd:2 * self.hd].permute(0, 2, 1, 3)
        v = qkv[..., 2 * self.hd:].permute(0, 2, 1, 3)
        q_rot, q_pass = q[..., :self.rot], q[..., self.rot:]
        k_rot, k_pass = k[..., :self.rot], k[..., self.rot:]
        q_emb = q_rot * cos + rotate_half(q_rot) * sin
        k_emb = k_rot * cos + rotate_half(k_rot) * sin
        q = torch.cat((q_emb, q_pass), dim=-1)
        k = torch.cat((k_emb, k_pass), dim=-1)
        y = _causal_attention(q, k, v, self.dropout, self.training)
        y = y.transpose(1, 2).contiguous().reshape(B, T, -1)
        return self.dense(y)


class NeoXMLP(nn.Module):
    def __init__(self, h, ffn):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(h, ffn)
        self.dense_4h_to_h = nn.Linear(ffn, h)

    def forward(self, x):
        return self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(x)))


class NeoXLayer(nn.Module):
    def __init__(self, c, dropout):
        super().__init__()
        h = c["hidden_size"]
        self.parallel = c.get("use_parallel_residual", True)
        self.input_layernorm = nn.LayerNorm(h)
        self.post_attention_layernorm = nn.LayerNorm(h)
        self.attention = NeoXAttention(c, dropout)
        self.mlp = NeoXMLP(h, c["intermediate_size"])

    def forward(self, x, cos, sin):
        attn = self.attention(self.input_layernorm(x), cos, sin)
        if self.parallel:
            mlp = self.mlp(self.post_attention_layernorm(x))
            return mlp + attn + x
        attn = attn + x
        return self.mlp(self.post_attention_layernorm(attn)) + attn


class NeoX(nn.Module):
    def __init__(self, c, dropout, use_checkpoint):
        super().__init__()
        h, V = c["hidden_size"], c["vocab_size"]
        self.use_checkpoint = use_checkpoint
        self.embed_in = nn.Embedding(V, h)
        self.layers = nn.ModuleList([NeoXLayer(c, dropout) for _ in range(c["num_hidden_layers"])])
        self.final_layer_norm = nn.LayerNorm(h)
        self.embed_out = nn.Linear(h, V, bias=False)
        rot = int(h // c["num_attention_heads"] * c.get("rotary_pct", 0.25))
        base = float(c.get("rotary_emb_base", 10000))
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, rot, 2).float() / rot)), persistent=False)

    def forward(self, idx, targets=None):
        x = self.embed_in(idx)
        with torch.autocast("cpu", enabled=False):
            freqs = torch.outer(torch.arange(idx.size(1)).float(), self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos()[None].to(x.dtype), emb.sin()[None].to(x.dtype)
        x = run_blocks(self.layers, x, self.use_checkpoint, cos, sin)
        logits = self.embed_out(self.final_layer_norm(x))
        loss = _causal_lm_loss(logits, targets) if targets is not None else None
        return logits, loss


# ---------------------------------------------------------------- Falcon (Falcon-7B layout)

class FalconAttention(nn.Module):
    """FalconAttention's eager path without ALiBi: fused query_key_value (multi-query: heads + 2
    head slices, k and v picked with a list index), full rotary, scores / sqrt(d) in place,
    softmax of scores + the additive mask, no attention dropout on this path."""

    def __init__(self, c):
        super().__init__()
        h, self.heads = c["hidden_size"], c.get("num_attention_heads") or c["n_head"]
        self.hd = h // self.heads
        self.multi_query = c.get("multi_query", True)
        out = (self.heads + 2) * self.hd if self.multi_query else 3 * h
        self.query_key_value = nn.Linear(h, out, bias=c.get("bias", False))
        self.dense = nn.Linear(h, h, bias=c.get("bias", False))

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        fused = self.query_key_value(x)
        if self.multi_query:
            fused = fused.view(B, T, self.heads + 2, self.hd)
            q, k, v = fused[..., :-2, :], fused[..., [-2], :], fused[..., [-1], :]
        else:
            fused = fused.view(B, T, self.heads, 3, self.hd)
            q, k, v = fused[..., 0, :], fused[..., 1, :], fused[..., 2, :]
        kv_heads = 1 if self.multi_query else self.heads
        q = q.transpose(1, 2).reshape(B, self.heads, T, self.hd)
        k = k.transpose(1, 2).reshape(B, kv_heads, T, self.hd)
        v = v.transpose(1, 2).reshape(B, kv_heads, T, self.hd)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = q @ k.transpose(-1, -2)
        scores /= math.sqrt(self.hd)
        scores = F.softmax(scores + mask, dim=-1, dtype=x.dtype)
        y = scores @ v
        y = y.view(B, self.heads, T, self.hd).permute(0, 2, 1, 3).reshape(B, T, self.heads * self.hd)
        return self.dense(y)


class FalconMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        ffn = c.get("ffn_hidden_size") or 4 * h
        self.dense_h_to_4h = nn.Linear(h, ffn, bias=c.get("bias", False))
        self.act = nn.GELU()
        self.dense_4h_to_h = nn.Linear(ffn, h, bias=c.get("bias", False))

    def forward(self, x):
        return self.dense_4h_to_h(self.act(self.dense_h_to_4h(x)))


def _dropout_add(x, residual, p, training):
    return residual + F.dropout(x, p=p, training=training)


class FalconLayer(nn.Module):
    def __init__(self, c, dropout):
        super().__init__()
        h = c["hidden_size"]
        self.self_attention = FalconAttention(c)
        self.mlp = FalconMLP(c)
        self.parallel = c.get("parallel_attn", True)
        self.dropout = dropout
        if not self.parallel:
            self.post_attention_layernorm = nn.LayerNorm(h)
        self.input_layernorm = nn.LayerNorm(h)

    def forward(self, x, cos, sin, mask):
        residual = x
        normed = self.input_layernorm(x)
        attn = self.self_attention(normed, cos, sin, mask)
        if self.parallel:
            mlp_in = normed
        else:
            residual = _dropout_add(attn, residual, self.dropout, self.training)
            mlp_in = self.post_attention_layernorm(residual)
        mlp = self.mlp(mlp_in)
        if self.parallel:
            mlp += attn
        return _dropout_add(mlp, residual, self.dropout, self.training)


class Falcon(nn.Module):
    """FalconForCausalLM for the original decoder (Falcon-7B: multi-query, parallel attention
    and MLP off one input_layernorm, no biases, tied lm_head). The causal mask is the additive
    float [b, 1, s, s] HF builds once per forward."""

    def __init__(self, c, dropout, use_checkpoint):
        super().__init__()
        if c.get("new_decoder_architecture") or c.get("alibi"):
            raise ValueError("the capture's Falcon is the original decoder with rotary embeddings")
        h, V = c["hidden_size"], c["vocab_size"]
        self.use_checkpoint = use_checkpoint
        self.word_embeddings = nn.Embedding(V, h)
        self.h = nn.ModuleList([FalconLayer(c, dropout) for _ in range(c.get("num_hidden_layers") or c["n_layer"])])
        self.ln_f = nn.LayerNorm(h)
        self.lm_head = nn.Linear(h, V, bias=False)
        if c.get("tie_word_embeddings", True):
            self.lm_head.weight = self.word_embeddings.weight
        hd = h // (c.get("num_attention_heads") or c["n_head"])
        theta = float(c.get("rope_theta", 10000.0))
        self.register_buffer("inv_freq", 1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd)), persistent=False)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        x = self.word_embeddings(idx)
        with torch.autocast("cpu", enabled=False):
            freqs = torch.outer(torch.arange(T, device=x.device).float(), self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos()[None, None].to(x.dtype), emb.sin()[None, None].to(x.dtype)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        mask = torch.zeros(B, 1, T, T, dtype=x.dtype, device=x.device).masked_fill(causal, torch.finfo(x.dtype).min)
        x = run_blocks(self.h, x, self.use_checkpoint, cos, sin, mask)
        logits = self.lm_head(self.ln_f(x))
        loss = _causal_lm_loss(logits, targets) if targets is not None else None
        return logits, loss


MODEL_TYPES = {"qwen2": Decoder, "qwen3": Decoder, "gemma": Decoder, "gemma2": Decoder, "phi3": Decoder,
               "mixtral": Decoder, "gpt_neox": NeoX, "falcon": Falcon}


def build(config, dropout=0.0, use_checkpoint=False, moe_force_expert=None):
    """The module for a config.json dict; `moe_force_expert` makes every token choose that
    expert first (the worst case of the scenario's moe.imbalance)."""
    cls = MODEL_TYPES.get(config.get("model_type"))
    if cls is None:
        raise ValueError(f"model_type {config.get('model_type')!r}: the capture has {', '.join(MODEL_TYPES)}")
    return cls(dict(config, _force_expert=moe_force_expert), dropout, use_checkpoint)
