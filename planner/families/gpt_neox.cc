// GPT-NeoX (Pythia), Phi-1.5/Phi-2 and Falcon as HF lays them out: token embedding, LayerNorm
// with bias, attention with partial rotary (the first rotary_dims of each head), a GELU MLP,
// and a parallel residual (x + attn(ln1(x)) + mlp(ln2(x)), or one shared norm feeding both
// branches as Phi and Falcon-7B do); the sequential form otherwise. Switches in
// scenario/model_families.cc: fused query_key_value (NeoX, Falcon) or separate q/k/v (Phi),
// biases, an lm_head bias (Phi), HF's Python gelu_new (Phi), tied embeddings (Falcon).
#include <string>
#include <vector>

#include "planner/families/families.h"
#include "planner/families/rotary_decoder.h"
#include "planner/ops/op_catalogue.h"
#include "planner/transformers_release_facts.h"

namespace oomcast::planner::families {

using scenario::ModelConfig;
using scenario::families::dim;
using scenario::families::option_enabled;

namespace {

struct NeoxShape {
  int64_t layers, hidden, heads, kv_heads, head_dim, ffn, vocab, rotary_dims;
  bool tied, parallel, shared_norm, fused_qkv, bias, lm_head_bias, python_gelu;
  TransformersReleaseFacts transformers;  // of the model's transformers_version
};

struct NeoxLayer {
  TensorId ln1_w = kNoTensor, ln1_b = kNoTensor, ln2_w = kNoTensor, ln2_b = kNoTensor;
  TensorId qkv_w = kNoTensor, qkv_b = kNoTensor, q_w = kNoTensor, q_b = kNoTensor, k_w = kNoTensor, k_b = kNoTensor;
  TensorId v_w = kNoTensor, v_b = kNoTensor, dense_w = kNoTensor, dense_b = kNoTensor;
  TensorId fc1_w = kNoTensor, fc1_b = kNoTensor, fc2_w = kNoTensor, fc2_b = kNoTensor;
};

NeoxShape read_shape(const ModelConfig& model) {
  NeoxShape s{};
  s.layers = dim(model, "layers");
  s.hidden = dim(model, "hidden");
  s.heads = dim(model, "heads");
  s.kv_heads = dim(model, "kv_heads");
  s.head_dim = s.hidden / s.heads;
  s.ffn = dim(model, "ffn_hidden");
  s.vocab = dim(model, "vocab");
  s.rotary_dims = dim(model, "rotary_dims");
  s.tied = option_enabled(model, "tied_embeddings", false);
  s.parallel = option_enabled(model, "parallel_residual", true);
  s.shared_norm = option_enabled(model, "shared_norm", false);
  s.fused_qkv = option_enabled(model, "fused_qkv", true);
  s.bias = option_enabled(model, "bias", true);
  s.lm_head_bias = option_enabled(model, "lm_head_bias", false);
  s.python_gelu = option_enabled(model, "python_gelu", false);
  s.transformers = transformers_release_facts(static_cast<int>(dim(model, "transformers_version")));
  return s;
}

NeoxLayer register_layer(GraphBuilder& g, const NeoxShape& s) {
  NeoxLayer b;
  const int64_t kv_out = s.kv_heads * s.head_dim;
  auto bias = [&](const char* leaf, int64_t size) { return s.bias ? g.parameter(leaf, {size}) : kNoTensor; };
  b.ln1_w = g.parameter("input_layernorm.weight", {s.hidden});
  b.ln1_b = g.parameter("input_layernorm.bias", {s.hidden});
  if (!s.shared_norm) {
    b.ln2_w = g.parameter("post_attention_layernorm.weight", {s.hidden});
    b.ln2_b = g.parameter("post_attention_layernorm.bias", {s.hidden});
  }
  g.push_module("attention");
  if (s.fused_qkv) {
    b.qkv_w = g.parameter("query_key_value.weight", {s.hidden + 2 * kv_out, s.hidden});
    b.qkv_b = bias("query_key_value.bias", s.hidden + 2 * kv_out);
  } else {
    b.q_w = g.parameter("q_proj.weight", {s.hidden, s.hidden});
    b.q_b = bias("q_proj.bias", s.hidden);
    b.k_w = g.parameter("k_proj.weight", {kv_out, s.hidden});
    b.k_b = bias("k_proj.bias", kv_out);
    b.v_w = g.parameter("v_proj.weight", {kv_out, s.hidden});
    b.v_b = bias("v_proj.bias", kv_out);
  }
  b.dense_w = g.parameter("dense.weight", {s.hidden, s.hidden});
  b.dense_b = bias("dense.bias", s.hidden);
  g.pop_module();
  g.push_module("mlp");
  b.fc1_w = g.parameter("dense_h_to_4h.weight", {s.ffn, s.hidden});
  b.fc1_b = bias("dense_h_to_4h.bias", s.ffn);
  b.fc2_w = g.parameter("dense_4h_to_h.weight", {s.hidden, s.ffn});
  b.fc2_b = bias("dense_4h_to_h.bias", s.hidden);
  g.pop_module();
  return b;
}

TensorId attention_block(GraphBuilder& g, const NeoxShape& s, const NeoxLayer& b, TensorId normed, TensorId cos,
                         TensorId sin, const ops::AttentionShape& shape) {
  const uint64_t tokens = g.tensor(normed).numel / static_cast<uint64_t>(s.hidden);
  const auto q_numel = static_cast<uint64_t>(s.hidden) * tokens;
  const auto kv_numel = static_cast<uint64_t>(s.kv_heads * s.head_dim) * tokens;
  g.push_module("attention");
  g.begin_scope();
  g.hold(normed);
  TensorId q, k, v;
  if (s.fused_qkv) {
    TensorId qkv = ops::linear(g, "query_key_value", normed, b.qkv_w, b.qkv_b, s.hidden,
                               s.hidden + 2 * s.kv_heads * s.head_dim);
    g.hold(qkv);
    // qkv.view(b, s, heads, 3 * d) then [..., :d], [..., d:2d], [..., 2d:]: slice views.
    q = ops::slice(g, "query", qkv, q_numel);
    k = ops::slice(g, "key", qkv, kv_numel);
    v = ops::slice(g, "value", qkv, kv_numel);
  } else {
    q = ops::linear(g, "q_proj", normed, b.q_w, b.q_b, s.hidden, s.hidden);
    k = ops::linear(g, "k_proj", normed, b.k_w, b.k_b, s.hidden, s.kv_heads * s.head_dim);
    v = ops::linear(g, "v_proj", normed, b.v_w, b.v_b, s.hidden, s.kv_heads * s.head_dim);
  }
  g.begin_scope();
  g.hold(q);
  TensorId q_rot = ops::partial_rotary(g, "q_rotary", q, cos, sin, s.rotary_dims, s.head_dim);
  g.end_scope();
  g.begin_scope();
  g.hold(k);
  TensorId k_rot = ops::partial_rotary(g, "k_rotary", k, cos, sin, s.rotary_dims, s.head_dim);
  g.end_scope();
  ops::AttentionShape layer_shape = shape;
  if (s.rotary_dims < s.head_dim) {
    // torch.cat((rotated, pass), -1) makes q and k contiguous [b, heads, s, d] tensors.
    layer_shape.q_contiguous = true;
    layer_shape.k_contiguous = true;
  }
  TensorId attn = grouped_query_attention(g, q_rot, k_rot, v, layer_shape, s.kv_heads != s.heads, q_numel,
                                          g.context().attention, !s.transformers.dynamic_cache_copies_prefill);
  TensorId out = ops::linear(g, "dense", attn, b.dense_w, b.dense_b, s.hidden, s.hidden);
  g.end_scope();
  g.pop_module();
  return out;
}

TensorId mlp_block(GraphBuilder& g, const NeoxShape& s, const NeoxLayer& b, TensorId normed) {
  g.push_module("mlp");
  g.begin_scope();
  g.hold(normed);
  TensorId h = ops::linear(g, "dense_h_to_4h", normed, b.fc1_w, b.fc1_b, s.hidden, s.ffn);
  TensorId act = s.python_gelu ? ops::gelu_tanh_python(g, "act", h) : ops::gelu(g, "act", h);
  TensorId out = ops::linear(g, "dense_4h_to_h", act, b.fc2_w, b.fc2_b, s.ffn, s.hidden);
  g.end_scope();
  g.pop_module();
  return out;
}

}  // namespace

void build_gpt_neox(GraphBuilder& g, const ModelConfig& model) {
  const NeoxShape s = read_shape(model);
  const int64_t batch = g.context().batch;
  const int64_t seq = g.context().seq_len;
  const auto tokens = static_cast<uint64_t>(batch * seq);

  g.push_module("gpt_neox");
  TensorId embed = g.parameter("embed_in.weight", {s.vocab, s.hidden});
  std::vector<NeoxLayer> blocks;
  blocks.reserve(static_cast<size_t>(s.layers));
  for (int64_t i = 0; i < s.layers; ++i) {
    g.push_module("layers." + std::to_string(i));
    blocks.push_back(register_layer(g, s));
    g.pop_module();
  }
  TensorId final_w = g.parameter("final_layer_norm.weight", {s.hidden});
  TensorId final_b = g.parameter("final_layer_norm.bias", {s.hidden});
  g.buffer("rotary_emb.inv_freq", static_cast<uint64_t>(s.rotary_dims / 2), DType::Float32);
  g.pop_module();
  // Tied (Falcon): nn.Linear builds its own weight before tying replaces it with the embedding's.
  if (s.tied) g.construction_temporary("embed_out.weight", {s.vocab, s.hidden});
  TensorId lm_head = s.tied ? embed : g.parameter("embed_out.weight", {s.vocab, s.hidden});
  TensorId lm_bias = s.lm_head_bias ? g.parameter("embed_out.bias", {s.vocab}) : kNoTensor;

  TensorId input_ids = g.input("input_ids", tokens, DType::Int64);
  TensorId labels = g.input("labels", tokens, DType::Int64);

  g.push_module("gpt_neox");
  // The model's forward frame: inputs_embeds (GPT-NeoX, Falcon) stays bound until it returns
  // after the final norm. Phi rebinds inputs_embeds to the dropout's output instead, which
  // differs only when training with embedding dropout.
  g.begin_scope();
  TensorId inputs_embeds = ops::embedding(g, "embed_in", input_ids, embed, s.hidden);
  g.hold(inputs_embeds);
  TensorId x = ops::dropout(g, "emb_dropout", inputs_embeds);
  const auto [cos, sin] = rotary_tables(g, seq, s.rotary_dims, g.tensor(x).dtype);
  const ops::AttentionShape shape = causal_attention_shape(batch, s.heads, seq, s.head_dim);
  for (int64_t i = 0; i < s.layers; ++i) {
    const NeoxLayer& b = blocks[static_cast<size_t>(i)];
    g.push_module("layers." + std::to_string(i));
    g.begin_unit();
    g.begin_scope();
    g.hold(x);
    TensorId ln1 = ops::layer_norm(g, "input_layernorm", x, b.ln1_w, b.ln1_b, s.hidden);
    TensorId attn = ops::dropout(g, "post_attention_dropout", attention_block(g, s, b, ln1, cos, sin, shape));
    if (s.parallel) {
      TensorId ln2 = s.shared_norm ? ln1 : ops::layer_norm(g, "post_attention_layernorm", x, b.ln2_w, b.ln2_b, s.hidden);
      TensorId mlp = ops::dropout(g, "post_mlp_dropout", mlp_block(g, s, b, ln2));
      // mlp_output + attn_output + hidden_states
      x = ops::add(g, "residual", ops::add(g, "branches", mlp, attn), x);
    } else {
      TensorId mid = ops::add(g, "attn_residual", attn, x);
      TensorId ln2 = ops::layer_norm(g, "post_attention_layernorm", mid, b.ln2_w, b.ln2_b, s.hidden);
      TensorId mlp = ops::dropout(g, "post_mlp_dropout", mlp_block(g, s, b, ln2));
      x = ops::add(g, "mlp_residual", mlp, mid);
    }
    g.end_scope();
    g.end_unit();
    g.pop_module();
  }
  TensorId final_hidden = ops::layer_norm(g, "final_layer_norm", x, final_w, final_b, s.hidden);
  g.end_scope();
  g.pop_module();
  TensorId logits = ops::linear(g, "embed_out", final_hidden, lm_head, lm_bias, s.hidden, s.vocab);
  g.begin_scope();
  const CausalLossInputs loss_in = causal_loss_inputs(g, logits, labels, tokens);
  TensorId loss = ops::cross_entropy(g, "loss.cross_entropy", loss_in.logits_fp32, loss_in.shift_labels, s.vocab);
  g.end_scope();
  g.set_named_output("logits", logits);
  g.set_loss(loss);
}

}  // namespace oomcast::planner::families
