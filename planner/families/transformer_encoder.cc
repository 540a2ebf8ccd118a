// A classifier on plain PyTorch nn.TransformerEncoder, laid out as people write it: a token
// nn.Embedding plus a learned position table (an nn.Parameter, sliced to the sequence), then
// nn.TransformerEncoder(nn.TransformerEncoderLayer(...), num_layers[, norm=nn.LayerNorm]),
// then a linear head on the mean over the sequence (sequence classification) or on every
// token (per-token labels). The layer runs the module path that training takes (the fused
// fast path needs eval mode with no graph), post-LN or pre-LN (norm_first), batch_first or
// not, ReLU or GELU, dropout in the four places the layer has it; attention is
// nn.MultiheadAttention with its packed in_proj (multihead_attention.h, shared with ViT).
#include <string>
#include <utility>
#include <vector>

#include "planner/families/families.h"
#include "planner/families/multihead_attention.h"
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::families {

using scenario::ModelConfig;
using scenario::families::dim;
using scenario::families::option_enabled;

namespace {

struct EncoderLayer {
  MultiheadAttentionWeights attention;
  TensorId linear1_w, linear1_b, linear2_w, linear2_b, norm1_w, norm1_b, norm2_w, norm2_b;
};

// nn.TransformerEncoderLayer's parameters after self_attn's, in registration order.
std::vector<std::pair<std::string, std::vector<int64_t>>> feed_forward_and_norm_shapes(int64_t hidden, int64_t ffn) {
  return {{"linear1.weight", {ffn, hidden}}, {"linear1.bias", {ffn}},   {"linear2.weight", {hidden, ffn}},
          {"linear2.bias", {hidden}},        {"norm1.weight", {hidden}}, {"norm1.bias", {hidden}},
          {"norm2.weight", {hidden}},        {"norm2.bias", {hidden}}};
}

EncoderLayer layer_parameters(GraphBuilder& g, int64_t hidden, int64_t ffn) {
  EncoderLayer b;
  b.attention = multihead_attention_parameters(g, "self_attn", hidden);
  std::vector<TensorId> rest;
  for (const auto& [leaf, shape] : feed_forward_and_norm_shapes(hidden, ffn)) rest.push_back(g.parameter(leaf, shape));
  b.linear1_w = rest[0], b.linear1_b = rest[1], b.linear2_w = rest[2], b.linear2_b = rest[3];
  b.norm1_w = rest[4], b.norm1_b = rest[5], b.norm2_w = rest[6], b.norm2_b = rest[7];
  return b;
}

// The template layer the caller builds and nn.TransformerEncoder deep-copies num_layers
// times (_get_clones); it is not one of the model's parameters and dies with the constructor.
void template_layer(GraphBuilder& g, int64_t hidden, int64_t ffn) {
  g.construction_temporary("self_attn.in_proj_weight", {3 * hidden, hidden});
  g.construction_temporary("self_attn.in_proj_bias", {3 * hidden});
  g.construction_temporary("self_attn.out_proj.weight", {hidden, hidden});
  g.construction_temporary("self_attn.out_proj.bias", {hidden});
  for (const auto& [leaf, shape] : feed_forward_and_norm_shapes(hidden, ffn)) g.construction_temporary(leaf, shape);
}

TensorId feed_forward(GraphBuilder& g, const EncoderLayer& b, TensorId x, int64_t hidden, int64_t ffn, bool gelu) {
  // _ff_block: linear2(dropout(activation(linear1(x)))), then dropout2.
  TensorId h = ops::linear(g, "linear1", x, b.linear1_w, b.linear1_b, hidden, ffn);
  h = gelu ? ops::gelu(g, "activation", h) : ops::relu(g, "activation", h, /*in_place=*/false);
  h = ops::dropout(g, "dropout", h);
  h = ops::linear(g, "linear2", h, b.linear2_w, b.linear2_b, ffn, hidden);
  return ops::dropout(g, "dropout2", h);
}

}  // namespace

void build_transformer_encoder(GraphBuilder& g, const ModelConfig& model) {
  const int64_t layers = dim(model, "layers");
  const int64_t hidden = dim(model, "hidden");
  const int64_t heads = dim(model, "heads");
  const int64_t ffn = dim(model, "ffn_hidden");
  const int64_t vocab = dim(model, "vocab");
  const int64_t positions = dim(model, "max_positions");
  const int64_t classes = dim(model, "num_labels");
  const bool norm_first = option_enabled(model, "norm_first", false);
  const bool batch_first = option_enabled(model, "batch_first", false);
  const bool gelu = option_enabled(model, "gelu", false);
  const bool final_norm = option_enabled(model, "final_norm", false);
  const bool per_token = option_enabled(model, "per_token_head", false);
  const int64_t batch = g.context().batch;
  const int64_t seq = g.context().seq_len;
  const auto tokens = static_cast<uint64_t>(batch * seq);

  // The classifier's own parameter (pos) comes before its children's in parameters().
  TensorId position_table = g.parameter("pos", batch_first ? std::vector<int64_t>{1, positions, hidden}
                                                            : std::vector<int64_t>{positions, 1, hidden});
  TensorId embed = g.parameter("embed.weight", {vocab, hidden});
  g.push_module("encoder_template");
  template_layer(g, hidden, ffn);
  g.pop_module();
  g.push_module("encoder");
  std::vector<EncoderLayer> blocks;
  for (int64_t i = 0; i < layers; ++i) {
    g.push_module("layers." + std::to_string(i));
    blocks.push_back(layer_parameters(g, hidden, ffn));
    g.pop_module();
  }
  TensorId norm_w = kNoTensor, norm_b = kNoTensor;
  if (final_norm) {
    norm_w = g.parameter("norm.weight", {hidden});
    norm_b = g.parameter("norm.bias", {hidden});
  }
  g.pop_module();
  TensorId head_w = g.parameter("head.weight", {classes, hidden});
  TensorId head_b = g.parameter("head.bias", {classes});

  TensorId input_ids = g.input("tokens", tokens, DType::Int64);
  TensorId labels = g.input("labels", per_token ? tokens : static_cast<uint64_t>(batch), DType::Int64);

  // embed(tokens) + pos[:, :s] (pos[:s] seq-first): the broadcast add makes a new tensor.
  TensorId x = ops::embedding(g, "embed", input_ids, embed, hidden);
  TensorId positions_used = ops::slice(g, "pos_slice", position_table, static_cast<uint64_t>(seq * hidden));
  x = ops::add(g, "add_positions", x, positions_used);

  ops::AttentionShape shape;
  shape.batch = batch;
  shape.heads = heads;
  shape.seq = seq;
  shape.head_dim = hidden / heads;
  shape.causal = false;
  // Every residual add is `x + block(x)`: its first operand is the contiguous stream, so the
  // transposed attention output of batch_first never reaches a LayerNorm.
  // forward's local x and TransformerEncoder.forward's src hold the embedded input until the
  // encoder returns.
  g.begin_scope();
  g.hold(x);
  g.push_module("encoder");
  for (int64_t i = 0; i < layers; ++i) {
    const EncoderLayer& b = blocks[static_cast<size_t>(i)];
    g.push_module("layers." + std::to_string(i));
    g.begin_unit();
    g.begin_scope();
    g.hold(x);  // src, the layer's argument
    if (norm_first) {
      TensorId normed = ops::layer_norm(g, "norm1", x, b.norm1_w, b.norm1_b, hidden);
      g.begin_scope();
      g.hold(normed);  // _sa_block's argument
      TensorId attended = multihead_self_attention(g, "self_attn", b.attention, normed, shape, hidden, batch_first);
      attended = ops::dropout(g, "dropout1", attended);
      g.end_scope();
      x = ops::add(g, "attention_residual", x, attended);
      g.hold(x);
      TensorId normed2 = ops::layer_norm(g, "norm2", x, b.norm2_w, b.norm2_b, hidden);
      x = ops::add(g, "feed_forward_residual", x, feed_forward(g, b, normed2, hidden, ffn, gelu));
    } else {
      TensorId attended = multihead_self_attention(g, "self_attn", b.attention, x, shape, hidden, batch_first);
      attended = ops::dropout(g, "dropout1", attended);
      x = ops::layer_norm(g, "norm1", ops::add(g, "attention_residual", x, attended), b.norm1_w, b.norm1_b, hidden);
      g.hold(x);
      TensorId ff = feed_forward(g, b, x, hidden, ffn, gelu);
      x = ops::layer_norm(g, "norm2", ops::add(g, "feed_forward_residual", x, ff), b.norm2_w, b.norm2_b, hidden);
    }
    g.end_scope();
    g.end_unit();
    g.pop_module();
  }
  if (final_norm) x = ops::layer_norm(g, "norm", x, norm_w, norm_b, hidden);
  g.pop_module();
  g.end_scope();

  TensorId features = x;
  if (!per_token) features = ops::mean_rows(g, "mean_over_sequence", x, static_cast<uint64_t>(batch * hidden));
  TensorId logits = ops::linear(g, "head", features, head_w, head_b, hidden, classes);
  TensorId loss = ops::cross_entropy(g, "cross_entropy", logits, labels, classes);
  g.set_named_output("logits", logits);
  g.set_loss(loss);
}

}  // namespace oomcast::planner::families
