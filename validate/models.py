# models.py: PyTorch implementations of the model families the planner predicts, built from the
# same dimension names as the presets in models/*.yaml, written the way people usually write
# them (nanoGPT GPT-2, a Hugging Face-style Llama, a Hugging Face-style BERT, torchvision's ResNet
# and ViT as vision_models.py writes them), so validate/capture.py can measure what PyTorch
# really allocates. Device-agnostic: build_model(..., device="cuda") works unchanged on a GPU.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import vision_models

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")  # torch >= 2.0; Debian's 1.13 has none


def _dim(dims, *names, default=None):
    for n in names:
        if n in dims and dims[n] is not None:
            return int(dims[n])
    if default is None:
        raise KeyError(f"model dims need one of {names}")
    return default


def _flag(options, name, default):
    v = options.get(name, default)
    return v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes", "on")


# The scenario's checkpointing.reentrant (capture.py sets it before the model is built): True is
# torch.utils.checkpoint's default when use_reentrant is not passed (torch 2.13 warns), False
# what transformers 5.x's gradient_checkpointing_enable passes.
CHECKPOINT_REENTRANT = True


# The scenario's loss.chunks (capture.py sets it): torchtune's chunked output and loss.
LOSS_CHUNKS = 1


def chunked_output_loss(output, h, targets, chunks):
    """torchtune 0.6: TransformerDecoder with num_output_chunks (the output projection per chunk of
    h.chunk(n, dim=1)) and CEWithChunkedOutputLoss (each chunk's logits .float() in a
    reduction="sum" cross-entropy, divided by the count of labels). The list of chunk logits is
    the recipe's `logits`, deleted once the loss returns."""
    logits = [output(chunk) for chunk in h.chunk(chunks, dim=1)]
    ignore = torch.full((targets.size(0), 1), -100, dtype=targets.dtype, device=targets.device)
    labels = torch.hstack((targets[..., 1:], ignore))
    total_elements = (labels != -100).sum()
    label_chunks = [chunk.reshape(-1) for chunk in labels.chunk(chunks, dim=1)]
    total = 0.0
    for logit_chunk, label_chunk in zip(logits, label_chunks):
        total = total + F.cross_entropy(logit_chunk.reshape(-1, logit_chunk.size(-1)).float(), label_chunk,
                                        ignore_index=-100, reduction="sum")
    return total / total_elements


def run_blocks(blocks, x, use_checkpoint, *extra):
    """Runs x through each block, under torch.utils.checkpoint (use_reentrant as
    CHECKPOINT_REENTRANT says) per block when use_checkpoint and training with grad enabled."""
    for block in blocks:
        if use_checkpoint and block.training and torch.is_grad_enabled():
            # named explicitly: 2.x warns without it (later releases raise)
            x = checkpoint(block, x, *extra, use_reentrant=CHECKPOINT_REENTRANT)
        else:
            x = block(x, *extra)
    return x


# ---------------------------------------------------------------- GPT-2 (nanoGPT model.py)

class CausalSelfAttention(nn.Module):
    def __init__(self, h, heads, max_pos, dropout, bias, attention):
        super().__init__()
        self.c_attn = nn.Linear(h, 3 * h, bias=bias)
        self.c_proj = nn.Linear(h, h, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head, self.n_embd, self.dropout = heads, h, dropout
        # nanoGPT uses SDPA when it exists; 1.13 has none, so it falls back to eager attention
        self.flash = HAS_SDPA and attention != "eager"
        if not self.flash:
            self.register_buffer("bias", torch.tril(torch.ones(max_pos, max_pos))
                                 .view(1, 1, max_pos, max_pos))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=True,
                                               dropout_p=self.dropout if self.training else 0)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.resid_dropout(self.c_proj(y))
        return y


class GPT2MLP(nn.Module):
    def __init__(self, h, ffn, dropout, bias):
        super().__init__()
        self.c_fc = nn.Linear(h, ffn, bias=bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(ffn, h, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class GPT2Block(nn.Module):
    def __init__(self, h, heads, ffn, max_pos, dropout, bias, attention):
        super().__init__()
        self.ln_1 = nn.LayerNorm(h, elementwise_affine=True)
        self.attn = CausalSelfAttention(h, heads, max_pos, dropout, bias, attention)
        self.ln_2 = nn.LayerNorm(h, elementwise_affine=True)
        self.mlp = GPT2MLP(h, ffn, dropout, bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT2(nn.Module):
    def __init__(self, dims, options, dropout, attention, use_checkpoint):
        super().__init__()
        h = _dim(dims, "hidden", "n_embd")
        heads = _dim(dims, "heads", "n_head")
        L = _dim(dims, "layers", "n_layer")
        V = _dim(dims, "vocab", "vocab_size")
        max_pos = _dim(dims, "max_positions", "block_size", "n_positions")
        ffn = _dim(dims, "ffn_hidden", default=4 * h)
        bias = _flag(options, "bias", True)
        self.use_checkpoint = use_checkpoint
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(V, h),
            wpe=nn.Embedding(max_pos, h),
            drop=nn.Dropout(dropout),
            h=nn.ModuleList([GPT2Block(h, heads, ffn, max_pos, dropout, bias, attention)
                             for _ in range(L)]),
            ln_f=nn.LayerNorm(h),
        ))
        self.lm_head = nn.Linear(h, V, bias=False)
        if _flag(options, "tied_embeddings", True):
            self.transformer.wte.weight = self.lm_head.weight  # weight tying, as in nanoGPT

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        x = run_blocks(self.transformer.h, x, self.use_checkpoint)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


# ---------------------------------------------------------------- Llama (Hugging Face style)

class RMSNorm(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        input_dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(input_dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, h, heads, kv_heads, dropout, attention):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, h // heads
        self.q_proj = nn.Linear(h, heads * self.hd, bias=False)
        self.k_proj = nn.Linear(h, kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(h, kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(heads * self.hd, h, bias=False)
        self.dropout = dropout
        self.sdpa = HAS_SDPA and attention != "eager"

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin  # apply_rotary_pos_emb
        k = k * cos + rotate_half(k) * sin
        if self.kv_heads != self.heads:  # repeat_kv for grouped-query attention
            rep = self.heads // self.kv_heads
            k = k[:, :, None].expand(B, self.kv_heads, rep, T, self.hd).reshape(B, self.heads, T, self.hd)
            v = v[:, :, None].expand(B, self.kv_heads, rep, T, self.hd).reshape(B, self.heads, T, self.hd)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.dropout if self.training else 0.0)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            att = att.masked_fill(causal, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = F.dropout(att, p=self.dropout, training=self.training)
            y = att @ v
        y = y.transpose(1, 2).contiguous().reshape(B, T, -1)
        return self.o_proj(y)


class LlamaMLP(nn.Module):
    def __init__(self, h, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(h, ffn, bias=False)
        self.up_proj = nn.Linear(h, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, h, heads, kv_heads, ffn, dropout, attention):
        super().__init__()
        self.self_attn = LlamaAttention(h, heads, kv_heads, dropout, attention)
        self.mlp = LlamaMLP(h, ffn)
        self.input_layernorm = RMSNorm(h)
        self.post_attention_layernorm = RMSNorm(h)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x


class Llama(nn.Module):
    """Hugging Face LlamaForCausalLM's layout: rotary cos/sin computed once per forward from the
    inv_freq buffer, logits.float() for the loss, labels shifted by padding with -100."""

    def __init__(self, dims, options, dropout, attention, use_checkpoint):
        super().__init__()
        h = _dim(dims, "hidden")
        heads = _dim(dims, "heads")
        kv_heads = _dim(dims, "kv_heads", default=heads)
        ffn = _dim(dims, "ffn_hidden")
        V = _dim(dims, "vocab")
        theta = float(options.get("rope_theta", 10000.0))
        self.use_checkpoint = use_checkpoint
        self.embed_tokens = nn.Embedding(V, h)
        self.layers = nn.ModuleList([LlamaBlock(h, heads, kv_heads, ffn, dropout, attention)
                                     for _ in range(_dim(dims, "layers"))])
        self.norm = RMSNorm(h)
        self.lm_head = nn.Linear(h, V, bias=False)
        if _flag(options, "tied_embeddings", False):
            self.lm_head.weight = self.embed_tokens.weight
        hd = h // heads
        self.register_buffer("inv_freq", 1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd)),
                             persistent=False)

    def rotary(self, x, T):
        with torch.autocast("cpu", enabled=False):  # HF computes the tables in fp32
            freqs = torch.outer(torch.arange(T, device=x.device).float(), self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos()[None].to(x.dtype), emb.sin()[None].to(x.dtype)

    def forward(self, idx, targets=None):
        x = self.embed_tokens(idx)
        cos, sin = self.rotary(x, idx.size(1))
        x = run_blocks(self.layers, x, self.use_checkpoint, cos, sin)
        x = self.norm(x)
        if LOSS_CHUNKS > 1 and targets is not None:
            return None, chunked_output_loss(self.lm_head, x, targets, LOSS_CHUNKS)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            shift = F.pad(targets, (0, 1), value=-100)[..., 1:].contiguous()
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), shift.view(-1),
                                   ignore_index=-100)
        return logits, loss


# ---------------------------------------------------------------- encoder (HF BertModel)

class BertSelfAttention(nn.Module):
    def __init__(self, h, heads, dropout):
        super().__init__()
        self.heads, self.hd = heads, h // heads
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.dropout = nn.Dropout(dropout)

    def split_heads(self, x):  # transpose_for_scores
        B, T, _ = x.shape
        return x.view(B, T, self.heads, self.hd).permute(0, 2, 1, 3)

    def forward(self, x, extended_mask):
        q, k, v = self.split_heads(self.query(x)), self.split_heads(self.key(x)), self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hd)
        scores = scores + extended_mask  # [B, 1, 1, T] in the parameters' dtype
        probs = self.dropout(F.softmax(scores, dim=-1))
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return context.view(x.shape)


class BertLayer(nn.Module):
    """BertLayer's post-LN order: attention, dense + dropout + residual + LayerNorm, GELU
    intermediate, dense + dropout + residual + LayerNorm (HF's BertAttention/BertOutput)."""

    def __init__(self, h, heads, ffn, dropout):
        super().__init__()
        self.attention = BertSelfAttention(h, heads, dropout)
        self.attn_dense, self.attn_ln = nn.Linear(h, h), nn.LayerNorm(h, eps=1e-12)
        self.intermediate = nn.Linear(h, ffn)
        self.out_dense, self.out_ln = nn.Linear(ffn, h), nn.LayerNorm(h, eps=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, extended_mask):
        a = self.attn_ln(self.dropout(self.attn_dense(self.attention(x, extended_mask))) + x)
        return self.out_ln(self.dropout(self.out_dense(F.gelu(self.intermediate(a)))) + a)


class Bert(nn.Module):
    """BERT as Hugging Face writes BertForSequenceClassification: word + token-type + position
    embeddings, post-LN layers, pooler (first token, dense, tanh), dropout and a classifier of
    num_labels outputs (without num_labels the pooled features are the logits, as the planner's
    stand-in head)."""

    def __init__(self, dims, options, dropout, attention, use_checkpoint):
        super().__init__()
        h = _dim(dims, "hidden")
        positions = _dim(dims, "max_positions", default=512)
        self.use_checkpoint = use_checkpoint
        self.word_embeddings = nn.Embedding(_dim(dims, "vocab"), h)
        self.position_embeddings = nn.Embedding(positions, h)
        self.token_type_embeddings = nn.Embedding(_dim(dims, "type_vocab", default=2), h)
        self.emb_ln = nn.LayerNorm(h, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("position_ids", torch.arange(positions).expand((1, -1)))
        self.register_buffer("token_type_ids", torch.zeros((1, positions), dtype=torch.long))
        self.layers = nn.ModuleList([BertLayer(h, _dim(dims, "heads"), _dim(dims, "ffn_hidden"), dropout)
                                     for _ in range(_dim(dims, "layers"))])
        self.pooler = nn.Linear(h, h) if _flag(options, "pooler", True) else None
        labels = _dim(dims, "num_labels", default=0)
        self.classifier = nn.Linear(h, labels) if labels else None

    def forward(self, idx, targets=None):
        T = idx.size(1)
        x = self.word_embeddings(idx) + self.token_type_embeddings(self.token_type_ids[:, :T].expand(idx.shape))
        x += self.position_embeddings(self.position_ids[:, :T])
        x = self.dropout(self.emb_ln(x))
        # get_extended_attention_mask: an all-ones mask as [B, 1, 1, T] in the parameters'
        # dtype, 0 where attended and the dtype's minimum elsewhere.
        dtype = self.word_embeddings.weight.dtype
        ones = torch.ones(idx.shape, device=idx.device)
        extended_mask = (1.0 - ones[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
        x = run_blocks(self.layers, x, self.use_checkpoint, extended_mask)
        logits = torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else x[:, 0]
        if self.classifier is not None:
            logits = self.classifier(self.dropout(logits))
        loss = F.cross_entropy(logits, targets) if targets is not None else None
        return logits, loss


# ---------------------------------------------------------------- nn.TransformerEncoder classifier

class TransformerEncoderClassifier(nn.Module):
    """The transformer_encoder family (planner/families/transformer_encoder.cc): token embedding
    plus a learned position table, nn.TransformerEncoder built from a template layer, a linear
    head on the mean over the sequence or on every token. batch_first=False takes [s, b]
    tokens (make_batch gives them so)."""

    def __init__(self, dims, options, dropout, attention, use_checkpoint):
        super().__init__()
        h, P = _dim(dims, "hidden"), _dim(dims, "max_positions", default=512)
        self.batch_first = _flag(options, "batch_first", False)
        self.per_token = _flag(options, "per_token_head", False)
        self.use_checkpoint = use_checkpoint
        self.embed = nn.Embedding(_dim(dims, "vocab"), h)
        self.pos = nn.Parameter(torch.zeros((1, P, h) if self.batch_first else (P, 1, h)))
        layer = nn.TransformerEncoderLayer(
            h, _dim(dims, "heads"), dim_feedforward=_dim(dims, "ffn_hidden", default=2048), dropout=dropout,
            activation="gelu" if _flag(options, "gelu", False) else "relu", batch_first=self.batch_first,
            norm_first=_flag(options, "norm_first", False))
        norm = nn.LayerNorm(h) if _flag(options, "final_norm", False) else None
        self.encoder = nn.TransformerEncoder(layer, _dim(dims, "layers"), norm=norm, enable_nested_tensor=False)
        self.head = nn.Linear(h, _dim(dims, "num_labels", default=2))

    def forward(self, tokens, targets=None):
        T = tokens.shape[1] if self.batch_first else tokens.shape[0]
        x = self.embed(tokens) + (self.pos[:, :T] if self.batch_first else self.pos[:T])
        if self.use_checkpoint:
            x = run_blocks(self.encoder.layers, x, True)
            if self.encoder.norm is not None:
                x = self.encoder.norm(x)
        else:
            x = self.encoder(x)
        logits = self.head(x if self.per_token else x.mean(dim=1 if self.batch_first else 0))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss


# ---------------------------------------------------------------- torchvision's layouts (ResNet, ViT)

class Checkpointed(nn.Module):
    """Wraps a block so its forward runs under torch.utils.checkpoint while training."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return run_blocks([self.inner], x, True)


class VisionClassifier(nn.Module):
    """A torchvision-layout classifier plus the loss, so every family has forward(x, y) -> (logits, loss)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, targets=None):
        logits = self.net(x)
        loss = F.cross_entropy(logits, targets) if targets is not None else None
        return logits, loss


def build_resnet(dims, options, dropout, use_checkpoint):
    net = vision_models.resnet(_dim(dims, "depth", "layers", default=18),
                               num_classes=_dim(dims, "num_classes", "classes", default=1000))
    if use_checkpoint:
        for name in ("layer1", "layer2", "layer3", "layer4"):
            stage = getattr(net, name)
            setattr(net, name, nn.Sequential(*[Checkpointed(b) for b in stage]))
    return VisionClassifier(net)


def build_vit(dims, options, dropout, use_checkpoint):
    net = vision_models.VisionTransformer(
        image_size=_dim(dims, "image_size", default=224), patch_size=_dim(dims, "patch_size", "patch", default=16),
        num_layers=_dim(dims, "layers", default=12), num_heads=_dim(dims, "heads", default=12),
        hidden_dim=_dim(dims, "hidden", default=768), mlp_dim=_dim(dims, "ffn_hidden", default=3072),
        dropout=dropout, attention_dropout=dropout, num_classes=_dim(dims, "num_classes", "classes", default=1000))
    if use_checkpoint:
        layers = net.encoder.layers
        for name, block in list(layers.named_children()):
            setattr(layers, name, Checkpointed(block))
    return VisionClassifier(net)


# ---------------------------------------------------------------- MLP (smallest family)

class MLP(nn.Module):
    def __init__(self, dims, options, dropout, attention, use_checkpoint):
        super().__init__()
        h = _dim(dims, "hidden")
        self.inputs = _dim(dims, "input", "inputs", default=h)
        self.use_checkpoint = use_checkpoint
        self.body = nn.ModuleList([nn.Sequential(nn.Linear(self.inputs if i == 0 else h, h),
                                                 nn.ReLU(), nn.Dropout(dropout))
                                   for i in range(_dim(dims, "layers", default=2))])
        self.head = nn.Linear(h, _dim(dims, "output", "classes", default=10))

    def forward(self, x, targets=None):
        logits = self.head(run_blocks(self.body, x, self.use_checkpoint))
        loss = F.cross_entropy(logits, targets) if targets is not None else None
        return logits, loss


FAMILIES = ("gpt2", "llama", "bert", "vit", "resnet", "mlp", "transformer_encoder")
_ALIASES = {"encoder": "bert", "nanogpt": "gpt2"}


def family_of(name):
    f = _ALIASES.get(name, name)
    if f not in FAMILIES:
        raise ValueError(f"unknown model family {name!r}; known: {', '.join(FAMILIES)}")
    return f


def build_model(family, dims, options=None, dropout=0.0, attention="eager",
                checkpointing=False, device="cpu"):
    """Builds the family's module from dims (and options); returns it on `device`."""
    options = options or {}
    f = family_of(family)
    if f == "resnet":
        model = build_resnet(dims, options, dropout, checkpointing)
    elif f == "vit":
        model = build_vit(dims, options, dropout, checkpointing)
    else:
        cls = {"gpt2": GPT2, "llama": Llama, "bert": Bert, "mlp": MLP,
               "transformer_encoder": TransformerEncoderClassifier}[f]
        model = cls(dims, options, dropout, attention, checkpointing)
    return model.to(device)


def make_batch(family, dims, batch_size, seq_len, generator, device="cpu", options=None):
    """One (inputs, targets) micro-batch: token ids for language models, images and labels for
    vision models (seq_len is the image size), features and labels for the MLP."""
    if family == "hf":  # a config.json dict (validate/hf_models.py): token ids and next tokens
        V = int(dims["vocab_size"])
        x = torch.randint(0, V, (batch_size, seq_len), generator=generator, device=device)
        return x, torch.randint(0, V, (batch_size, seq_len), generator=generator, device=device)
    f = family_of(family)
    if f in ("gpt2", "llama", "bert"):
        V = _dim(dims, "vocab", "vocab_size")
        x = torch.randint(0, V, (batch_size, seq_len), generator=generator, device=device)
        if f == "bert":  # sequence classification: one label per sample
            labels = _dim(dims, "num_labels", default=0) or _dim(dims, "hidden")
            return x, torch.randint(0, labels, (batch_size,), generator=generator, device=device)
        y = torch.randint(0, V, (batch_size, seq_len), generator=generator, device=device)
        return x, y
    if f == "transformer_encoder":
        options = options or {}
        V, first = _dim(dims, "vocab"), _flag(options, "batch_first", False)
        shape = (batch_size, seq_len) if first else (seq_len, batch_size)
        x = torch.randint(0, V, shape, generator=generator, device=device)
        labels = _dim(dims, "num_labels", default=2)
        y_shape = shape if _flag(options, "per_token_head", False) else (batch_size,)
        return x, torch.randint(0, labels, y_shape, generator=generator, device=device)
    if f == "mlp":
        x = torch.randn(batch_size, _dim(dims, "input", "inputs", "hidden"), generator=generator, device=device)
        classes = _dim(dims, "output", "classes", default=10)
    else:
        size = seq_len or _dim(dims, "image_size", default=224)
        x = torch.randn(batch_size, _dim(dims, "channels", default=3), size, size, generator=generator, device=device)
        classes = _dim(dims, "num_classes", "classes", default=1000)
    y = torch.randint(0, classes, (batch_size,), generator=generator, device=device)
    return x, y
