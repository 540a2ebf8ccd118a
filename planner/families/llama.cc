// Llama-style decoders as HF lays them out: token embedding, RMSNorm (written in Python),
// rotary embeddings, grouped-query attention (kv_heads), gated MLP, lm_head, and the HF loss
// that upcasts logits with .float() before cross_entropy. The switches of
// scenario/model_families.cc turn it into Mistral, Qwen2/Qwen3 (q/k/v biases, QK-norm, an
// explicit head_dim), Gemma/Gemma 2 (scaled embeddings, (1 + w) norms, GELU-tanh, sandwich
// norms, logit softcapping), Phi-3 (fused qkv_proj and gate_up_proj) and the mixture-of-experts
// models (the MLP replaced by planner/families/moe_block.cc).
#include <string>
#include <vector>

#include "planner/families/families.h"
#include "planner/families/moe_block.h"
#include "planner/families/rotary_decoder.h"
#include "planner/ops/op_catalogue.h"
#include "planner/transformers_release_facts.h"

namespace oomcast::planner::families {

using scenario::ModelConfig;
using scenario::families::dim;
using scenario::families::option_enabled;

namespace {

struct LlamaShape {
  int64_t layers, hidden, heads, kv_heads, head_dim, ffn, vocab;
  bool tied, qkv_bias, o_bias, mlp_bias, qk_norm, fused_qkv, fused_gate_up, gelu_mlp, scale_embedding;
  bool offset_norm, sandwich_norm, final_softcap, attention_softcap;
  // One pipeline stage of the model (planner/parallel/mesh_rank.h sets these): stages after the
  // first receive hidden states instead of embedding tokens, stages before the last send them
  // instead of computing the logits and the loss.
  bool first_stage, last_stage;
  MoeShape moe;
  TransformersReleaseFacts transformers;  // of the model's transformers_version
};

LlamaShape read_shape(const ModelConfig& model) {
  LlamaShape s{};
  s.layers = dim(model, "layers");
  s.hidden = dim(model, "hidden");
  s.heads = dim(model, "heads");
  s.kv_heads = dim(model, "kv_heads");
  s.head_dim = dim(model, "head_dim");
  s.ffn = dim(model, "ffn_hidden");
  s.vocab = dim(model, "vocab");
  s.tied = option_enabled(model, "tied_embeddings", false);
  s.qkv_bias = option_enabled(model, "qkv_bias", false);
  s.o_bias = option_enabled(model, "o_bias", false);
  s.mlp_bias = option_enabled(model, "mlp_bias", false);
  s.qk_norm = option_enabled(model, "qk_norm", false);
  s.fused_qkv = option_enabled(model, "fused_qkv", false);
  s.fused_gate_up = option_enabled(model, "fused_gate_up", false);
  s.gelu_mlp = option_enabled(model, "gelu_mlp", false);
  s.scale_embedding = option_enabled(model, "scale_embedding", false);
  s.offset_norm = option_enabled(model, "offset_norm", false);
  s.sandwich_norm = option_enabled(model, "sandwich_norm", false);
  s.final_softcap = option_enabled(model, "final_logit_softcap", false);
  s.attention_softcap = option_enabled(model, "attn_logit_softcap", false);
  s.first_stage = option_enabled(model, "pipeline_first_stage", true);
  s.last_stage = option_enabled(model, "pipeline_last_stage", true);
  s.moe = read_moe_shape(model);
  s.transformers = transformers_release_facts(static_cast<int>(dim(model, "transformers_version")));
  return s;
}

struct LlamaLayer {
  TensorId q_proj = kNoTensor, k_proj = kNoTensor, v_proj = kNoTensor, qkv_proj = kNoTensor, o_proj = kNoTensor;
  TensorId q_bias = kNoTensor, k_bias = kNoTensor, v_bias = kNoTensor, qkv_bias = kNoTensor, o_bias = kNoTensor;
  TensorId q_norm = kNoTensor, k_norm = kNoTensor;
  bool sparse = false;  // the mixture-of-experts block instead of the dense MLP
  DenseMlp mlp;
  MoeBlock moe;
  TensorId input_norm = kNoTensor, post_attention_norm = kNoTensor, pre_ffn_norm = kNoTensor, post_ffn_norm = kNoTensor;
};

// Registration order of the HF decoder layers: self_attn, mlp, then the norms.
LlamaLayer register_layer(GraphBuilder& g, const LlamaShape& s, int64_t index) {
  LlamaLayer b;
  b.sparse = s.moe.sparse_layer(index);
  const int64_t q_out = s.heads * s.head_dim;
  const int64_t kv_out = s.kv_heads * s.head_dim;
  auto bias = [&](bool on, const char* name, int64_t size) { return on ? g.parameter(name, {size}) : kNoTensor; };
  g.push_module("self_attn");
  if (s.fused_qkv) {
    // Phi3Attention registers o_proj before qkv_proj.
    b.o_proj = g.parameter("o_proj.weight", {s.hidden, q_out});
    b.o_bias = bias(s.o_bias, "o_proj.bias", s.hidden);
    b.qkv_proj = g.parameter("qkv_proj.weight", {q_out + 2 * kv_out, s.hidden});
    b.qkv_bias = bias(s.qkv_bias, "qkv_proj.bias", q_out + 2 * kv_out);
  } else {
    b.q_proj = g.parameter("q_proj.weight", {q_out, s.hidden});
    b.q_bias = bias(s.qkv_bias, "q_proj.bias", q_out);
    b.k_proj = g.parameter("k_proj.weight", {kv_out, s.hidden});
    b.k_bias = bias(s.qkv_bias, "k_proj.bias", kv_out);
    b.v_proj = g.parameter("v_proj.weight", {kv_out, s.hidden});
    b.v_bias = bias(s.qkv_bias, "v_proj.bias", kv_out);
    b.o_proj = g.parameter("o_proj.weight", {s.hidden, q_out});
    b.o_bias = bias(s.o_bias, "o_proj.bias", s.hidden);
  }
  if (s.qk_norm) {
    b.q_norm = g.parameter("q_norm.weight", {s.head_dim});
    b.k_norm = g.parameter("k_norm.weight", {s.head_dim});
  }
  g.pop_module();
  if (b.sparse) {
    b.moe = register_moe_block(g, s.moe, s.hidden);
  } else {
    b.mlp = register_dense_mlp(g, "mlp", s.hidden, s.ffn, s.fused_gate_up, s.mlp_bias);
  }
  b.input_norm = g.parameter("input_layernorm.weight", {s.hidden});
  b.post_attention_norm = g.parameter("post_attention_layernorm.weight", {s.hidden});
  if (s.sandwich_norm) {
    b.pre_ffn_norm = g.parameter("pre_feedforward_layernorm.weight", {s.hidden});
    b.post_ffn_norm = g.parameter("post_feedforward_layernorm.weight", {s.hidden});
  }
  return b;
}

TensorId norm(GraphBuilder& g, const LlamaShape& s, const char* leaf, TensorId x, TensorId weight, int64_t size) {
  return s.offset_norm ? ops::offset_rms_norm(g, leaf, x, weight, size) : ops::rms_norm(g, leaf, x, weight, size);
}

// The attention transformers runs for the model. Gemma 2's classes have no SDPA path
// (modeling_gemma2.py: _supports_sdpa = False, as SDPA takes no soft-capping), so with
// attn_logit_softcapping transformers runs eager attention whatever SDPA would pick; only
// flash_attention_2 on a GPU takes the soft-cap in its kernel.
scenario::AttentionImpl attention_implementation(const GraphBuilder& g, const LlamaShape& s) {
  const scenario::AttentionImpl chosen = g.context().attention;
  const bool cuda_flash = chosen == scenario::AttentionImpl::Flash && !g.context().cpu_kernels;
  return s.attention_softcap && !cuda_flash ? scenario::AttentionImpl::Eager : chosen;
}

// self_attn from the normed input to o_proj's output.
TensorId attention_block(GraphBuilder& g, const LlamaShape& s, const LlamaLayer& b, TensorId normed, TensorId cos,
                         TensorId sin, const ops::AttentionShape& shape) {
  const int64_t q_out = s.heads * s.head_dim;
  const int64_t kv_out = s.kv_heads * s.head_dim;
  const uint64_t tokens = g.tensor(normed).numel / static_cast<uint64_t>(s.hidden);
  const auto q_numel = static_cast<uint64_t>(q_out) * tokens;
  const auto kv_numel = static_cast<uint64_t>(kv_out) * tokens;
  g.push_module("self_attn");
  g.begin_scope();
  g.hold(normed);
  TensorId q, k, v;
  if (s.fused_qkv) {
    TensorId qkv = ops::linear(g, "qkv_proj", normed, b.qkv_proj, b.qkv_bias, s.hidden, q_out + 2 * kv_out);
    g.hold(qkv);  // the local `qkv` lives until forward returns
    // qkv[..., :q], qkv[..., q:q+kv], qkv[..., q+kv:]: views whose backwards zero-fill.
    q = ops::slice(g, "query_states", qkv, q_numel);
    k = ops::slice(g, "key_states", qkv, kv_numel);
    v = ops::slice(g, "value_states", qkv, kv_numel);
  } else {
    q = ops::linear(g, "q_proj", normed, b.q_proj, b.q_bias, s.hidden, q_out);
    k = ops::linear(g, "k_proj", normed, b.k_proj, b.k_bias, s.hidden, kv_out);
    v = ops::linear(g, "v_proj", normed, b.v_proj, b.v_bias, s.hidden, kv_out);
  }
  if (s.qk_norm) {
    // Qwen3: q_norm / k_norm over each head of the projection's view.
    q = norm(g, s, "q_norm", q, b.q_norm, s.head_dim);
    k = norm(g, s, "k_norm", k, b.k_norm, s.head_dim);
  }
  // q = q * cos + rotate_half(q) * sin: the local `q` (the projection's view) is rebound
  // only when the rotary's sum exists, so the projection lives through its rotary (capture
  // llama-tiny-sgd-dropout: q_proj.out is freed after the rotary's add).
  g.begin_scope();
  g.hold(q);
  TensorId q_rot = ops::rotary(g, "q_rotary", q, cos, sin);
  g.end_scope();
  g.begin_scope();
  g.hold(k);
  TensorId k_rot = ops::rotary(g, "k_rotary", k, cos, sin);
  g.end_scope();
  TensorId attn =
      grouped_query_attention(g, q_rot, k_rot, v, shape, s.kv_heads != s.heads, q_numel, attention_implementation(g, s),
                              !s.transformers.dynamic_cache_copies_prefill);
  TensorId o = ops::linear(g, "o_proj", attn, b.o_proj, b.o_bias, q_out, s.hidden);
  g.end_scope();
  g.pop_module();
  return o;
}

}  // namespace

void build_llama(GraphBuilder& g, const ModelConfig& model) {
  const LlamaShape s = read_shape(model);
  const int64_t batch = g.context().batch;
  const int64_t seq = g.context().seq_len;
  const auto tokens = static_cast<uint64_t>(batch * seq);

  g.push_module("model");
  TensorId embed = s.first_stage ? g.parameter("embed_tokens.weight", {s.vocab, s.hidden}) : kNoTensor;
  std::vector<LlamaLayer> blocks;
  blocks.reserve(static_cast<size_t>(s.layers));
  for (int64_t i = 0; i < s.layers; ++i) {
    g.push_module("layers." + std::to_string(i));
    blocks.push_back(register_layer(g, s, i));
    g.pop_module();
  }
  TensorId final_norm = s.last_stage ? g.parameter("norm.weight", {s.hidden}) : kNoTensor;
  // rotary_emb.inv_freq: a non-persistent fp32 buffer that .to(device) still moves.
  g.buffer("rotary_emb.inv_freq", static_cast<uint64_t>(s.head_dim / 2), DType::Float32);
  g.pop_module();
  // Tied: nn.Linear builds its own weight before tie_weights() replaces it with the embedding's.
  // A last stage without the embedding keeps its own copy (Megatron-LM's tied output weight).
  const bool tied_here = s.tied && s.first_stage;
  if (tied_here && s.last_stage) g.construction_temporary("lm_head.weight", {s.vocab, s.hidden});
  TensorId lm_head = !s.last_stage ? kNoTensor : tied_here ? embed : g.parameter("lm_head.weight", {s.vocab, s.hidden});

  // torch.distributed.pipelining (torch 2.13 stage.py): a later stage's input is the receive
  // buffer, made to require grad so that backward yields the gradient it sends back.
  TensorId input_ids = kNoTensor;
  TensorId received = kNoTensor;
  if (s.first_stage) {
    input_ids = g.input("input_ids", tokens, DType::Int64);
  } else {
    received = g.input("pipeline.received_hidden_states", tokens * static_cast<uint64_t>(s.hidden),
                       g.precision().parameter_dtype);
    g.mutable_tensor(received).requires_grad = true;
  }
  TensorId labels = s.last_stage ? g.input("labels", tokens, DType::Int64) : kNoTensor;

  g.push_module("model");
  // LlamaModel.forward's frame: its locals live until it returns after the final norm.
  g.begin_scope();
  // inputs_embeds = embed_tokens(input_ids): the local stays bound while the layers rebind
  // hidden_states, so the embedding output outlives its last use.
  TensorId x = received;
  if (s.first_stage) {
    TensorId inputs_embeds = ops::embedding(g, "embed_tokens", input_ids, embed, s.hidden);
    if (s.scale_embedding && s.transformers.scaled_word_embedding) {
      // Gemma from transformers 5: embed_tokens returns embedding * embed_scale, so the scaled
      // tensor is the local that stays bound and the lookup dies inside the module.
      inputs_embeds = ops::scale(g, "embed_tokens.embed_scale", inputs_embeds);
      g.hold(inputs_embeds);
      x = inputs_embeds;
    } else {
      g.hold(inputs_embeds);
      x = inputs_embeds;
      // Gemma up to 4.x: hidden_states = inputs_embeds * normalizer (a 0-dim tensor of sqrt(hidden)).
      if (s.scale_embedding) x = ops::scale(g, "embed_scale", x);
    }
  }
  const auto [cos, sin] = rotary_tables(g, seq, s.head_dim, g.tensor(x).dtype);

  std::vector<TensorId> router_logits;  // every sparse layer's, for the auxiliary loss
  ops::AttentionShape shape = causal_attention_shape(batch, s.heads, seq, s.head_dim);
  shape.score_softcap = s.attention_softcap;
  for (int64_t i = 0; i < s.layers; ++i) {
    const LlamaLayer& b = blocks[static_cast<size_t>(i)];
    g.push_module("layers." + std::to_string(i));
    g.begin_unit();
    g.begin_scope();
    g.hold(x);  // residual = hidden_states
    TensorId normed = norm(g, s, "input_layernorm", x, b.input_norm, s.hidden);
    TensorId o = attention_block(g, s, b, normed, cos, sin, shape);
    TensorId x_mid;
    TensorId mlp_in;
    if (s.sandwich_norm) {
      // Gemma 2: post_attention_layernorm on the attention output, pre_feedforward_layernorm
      // before the MLP, post_feedforward_layernorm after it.
      TensorId o_normed = norm(g, s, "post_attention_layernorm", o, b.post_attention_norm, s.hidden);
      x_mid = ops::add(g, "attn_residual", x, o_normed);
      mlp_in = norm(g, s, "pre_feedforward_layernorm", x_mid, b.pre_ffn_norm, s.hidden);
    } else {
      x_mid = ops::add(g, "attn_residual", x, o);
      mlp_in = norm(g, s, "post_attention_layernorm", x_mid, b.post_attention_norm, s.hidden);
    }
    TensorId mlp_out = b.sparse ? moe_block_forward(g, s.moe, b.moe, mlp_in, s.hidden, &router_logits)
                                : dense_mlp_forward(g, "mlp", b.mlp, mlp_in, s.gelu_mlp);
    if (s.sandwich_norm) mlp_out = norm(g, s, "post_feedforward_layernorm", mlp_out, b.post_ffn_norm, s.hidden);
    x = ops::add(g, "mlp_residual", x_mid, mlp_out);
    g.end_scope();
    g.end_unit();
    g.pop_module();
  }
  if (!s.last_stage) {
    // The stage's output is sent on; its backward starts from the gradient received for it.
    g.end_scope();
    g.pop_module();
    g.set_named_output("hidden_states", x);
    g.set_loss(x);
    return;
  }
  TensorId final_hidden = norm(g, s, "norm", x, final_norm, s.hidden);
  g.end_scope();
  g.pop_module();
  if (g.context().loss_chunks > 1 && g.context().grad_enabled) {
    // torchtune's chunked output and CEWithChunkedOutputLoss (the loader refuses what it lacks:
    // soft-capping, MoE auxiliary losses, held logits).
    TensorId loss = chunked_causal_loss(g, final_hidden, lm_head, labels, tokens, s.hidden, s.vocab, g.context().loss_chunks);
    g.set_loss(loss);
    return;
  }
  TensorId logits = ops::linear(g, "lm_head", final_hidden, lm_head, kNoTensor, s.hidden, s.vocab);
  if (s.final_softcap) {
    // Gemma 2: logits / cap, tanh, * cap (three vocab-sized tensors; tanh saves its result).
    logits = ops::scale(g, "final_softcap.div", logits);
    logits = ops::tanh(g, "final_softcap.tanh", logits);
    logits = ops::scale(g, "final_softcap.mul", logits);
  }
  // ForCausalLMLoss: logits.float() (held until the loss returns), padded shift labels.
  g.begin_scope();
  const CausalLossInputs loss_in = causal_loss_inputs(g, logits, labels, tokens);
  TensorId loss = ops::cross_entropy(g, "loss.cross_entropy", loss_in.logits_fp32, loss_in.shift_labels, s.vocab);
  if (s.moe.experts > 0) loss = moe_auxiliary_loss(g, s.moe, router_logits, loss);
  g.end_scope();
  g.set_named_output("logits", logits);
  g.set_loss(loss);
}

}  // namespace oomcast::planner::families
