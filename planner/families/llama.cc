// Llama / Mistral as HF LlamaForCausalLM lays them out: token embedding, RMSNorm (written
// in Python), rotary embeddings, grouped-query attention (kv_heads), SwiGLU MLP, no biases,
// untied lm_head, and the HF loss that upcasts logits with .float() before cross_entropy.
#include <string>
#include <vector>

#include "planner/families/families.h"
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::families {

namespace {

struct LlamaLayer {
  TensorId q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, input_norm, post_attention_norm;
};

}  // namespace

void build_llama(GraphBuilder& g, const ModelConfig& model) {
  const int64_t layers = dim(model, "layers");
  const int64_t hidden = dim(model, "hidden");
  const int64_t heads = dim(model, "heads");
  const int64_t kv_heads = dim(model, "kv_heads");
  const int64_t ffn = dim(model, "ffn_hidden");
  const int64_t vocab = dim(model, "vocab");
  const bool tied = option_enabled(model, "tied_embeddings", false);
  const int64_t head_dim = hidden / heads;
  const int64_t batch = g.context().batch;
  const int64_t seq = g.context().seq_len;
  const auto tokens = static_cast<uint64_t>(batch * seq);

  // Registration order of LlamaDecoderLayer: self_attn, mlp, input_layernorm,
  // post_attention_layernorm.
  g.push_module("model");
  TensorId embed = g.parameter("embed_tokens.weight", {vocab, hidden});
  std::vector<LlamaLayer> blocks(static_cast<size_t>(layers));
  for (int64_t i = 0; i < layers; ++i) {
    LlamaLayer& b = blocks[static_cast<size_t>(i)];
    g.push_module("layers." + std::to_string(i));
    b.q_proj = g.parameter("self_attn.q_proj.weight", {heads * head_dim, hidden});
    b.k_proj = g.parameter("self_attn.k_proj.weight", {kv_heads * head_dim, hidden});
    b.v_proj = g.parameter("self_attn.v_proj.weight", {kv_heads * head_dim, hidden});
    b.o_proj = g.parameter("self_attn.o_proj.weight", {hidden, heads * head_dim});
    b.gate_proj = g.parameter("mlp.gate_proj.weight", {ffn, hidden});
    b.up_proj = g.parameter("mlp.up_proj.weight", {ffn, hidden});
    b.down_proj = g.parameter("mlp.down_proj.weight", {hidden, ffn});
    b.input_norm = g.parameter("input_layernorm.weight", {hidden});
    b.post_attention_norm = g.parameter("post_attention_layernorm.weight", {hidden});
    g.pop_module();
  }
  TensorId norm = g.parameter("norm.weight", {hidden});
  // rotary_emb.inv_freq: a non-persistent fp32 buffer that .to(device) still moves.
  g.buffer("rotary_emb.inv_freq", static_cast<uint64_t>(head_dim / 2), DType::Float32);
  g.pop_module();
  TensorId lm_head = tied ? embed : g.parameter("lm_head.weight", {vocab, hidden});

  TensorId input_ids = g.input("input_ids", tokens, DType::Int64);
  TensorId labels = g.input("labels", tokens, DType::Int64);

  g.push_module("model");
  TensorId x = ops::embedding(g, "embed_tokens", input_ids, embed, hidden);
  g.begin_scope();
  // cos and sin [1, s, head_dim], computed once per forward in the embeddings' dtype and
  // shared by every layer; held by LlamaModel.forward's locals.
  const DType table_dtype = g.tensor(x).dtype;
  TensorId cos = ops::constant(g, "rotary_emb.cos", static_cast<uint64_t>(seq * head_dim), table_dtype);
  TensorId sin = ops::constant(g, "rotary_emb.sin", static_cast<uint64_t>(seq * head_dim), table_dtype);
  g.hold(cos);
  g.hold(sin);

  ops::AttentionShape shape;
  shape.batch = batch;
  shape.heads = heads;
  shape.seq = seq;
  shape.head_dim = head_dim;
  shape.causal = true;
  const auto q_numel = static_cast<uint64_t>(batch * seq * heads * head_dim);
  for (int64_t i = 0; i < layers; ++i) {
    const LlamaLayer& b = blocks[static_cast<size_t>(i)];
    g.push_module("layers." + std::to_string(i));
    g.begin_unit();
    g.begin_scope();
    g.hold(x);  // residual = hidden_states
    TensorId normed = ops::rms_norm(g, "input_layernorm", x, b.input_norm, hidden);
    g.push_module("self_attn");
    g.begin_scope();
    g.hold(normed);
    TensorId q = ops::linear(g, "q_proj", normed, b.q_proj, kNoTensor, hidden, heads * head_dim);
    TensorId k = ops::linear(g, "k_proj", normed, b.k_proj, kNoTensor, hidden, kv_heads * head_dim);
    TensorId v = ops::linear(g, "v_proj", normed, b.v_proj, kNoTensor, hidden, kv_heads * head_dim);
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
    ops::AttentionShape layer_shape = shape;
    if (kv_heads != heads) {
      // repeat_kv: expand + reshape makes contiguous copies with all query heads; matmul
      // then views them as 3-D without another copy.
      k_rot = ops::expand_copy(g, "repeat_k", k_rot, q_numel);
      v = ops::expand_copy(g, "repeat_v", v, q_numel);
      layer_shape.k_contiguous = true;
      layer_shape.v_contiguous = true;
    }
    // The locals q, k, v hold their last values until forward returns (matmul saves its
    // contiguous copies, not them).
    g.hold(q_rot);
    g.hold(k_rot);
    g.hold(v);
    TensorId attn = ops::attention(g, "attention", q_rot, k_rot, v, layer_shape);
    TensorId o = ops::linear(g, "o_proj", attn, b.o_proj, kNoTensor, heads * head_dim, hidden);
    g.end_scope();
    g.pop_module();
    TensorId x_mid = ops::add(g, "attn_residual", x, o);
    TensorId normed2 = ops::rms_norm(g, "post_attention_layernorm", x_mid, b.post_attention_norm, hidden);
    g.push_module("mlp");
    g.begin_scope();
    g.hold(normed2);
    TensorId gate = ops::linear(g, "gate_proj", normed2, b.gate_proj, kNoTensor, hidden, ffn);
    TensorId act = ops::silu(g, "act_fn", gate);
    TensorId up = ops::linear(g, "up_proj", normed2, b.up_proj, kNoTensor, hidden, ffn);
    TensorId product = ops::mul(g, "gate_mul", act, up);
    TensorId down = ops::linear(g, "down_proj", product, b.down_proj, kNoTensor, ffn, hidden);
    g.end_scope();
    g.pop_module();
    x = ops::add(g, "mlp_residual", x_mid, down);
    g.end_scope();
    g.end_unit();
    g.pop_module();
  }
  TensorId final_hidden = ops::rms_norm(g, "norm", x, norm, hidden);
  g.end_scope();
  g.pop_module();
  TensorId logits = ops::linear(g, "lm_head", final_hidden, lm_head, kNoTensor, hidden, vocab);
  // ForCausalLMLoss: logits.float() (held until the loss returns), padded shift labels.
  g.begin_scope();
  TensorId logits_fp32 = g.cast(logits, DType::Float32, "loss.logits_float");
  g.hold(logits_fp32);
  TensorId shift_labels = ops::constant(g, "loss.shift_labels", tokens, DType::Int64, labels);
  TensorId loss = ops::cross_entropy(g, "loss.cross_entropy", logits_fp32, shift_labels, vocab);
  g.end_scope();
  g.set_named_output("logits", logits);
  g.set_loss(loss);
}

}  // namespace oomcast::planner::families
