// BERT-style post-LN encoder as HF BertModel lays it out: word + token-type + position
// embeddings, LayerNorm, dropout; layers with separate query/key/value, output dense +
// dropout + residual + LayerNorm; GELU intermediate; pooler (first token, dense, tanh).
// Training loss: an optional classifier (num_labels), else cross-entropy over the pooled
// features as a stand-in head (BertModel has none).
#include <string>
#include <vector>

#include "planner/families/families.h"
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::families {

using scenario::AttentionImpl;
using scenario::ModelConfig;
using scenario::OpKind;
using scenario::families::dim;
using scenario::families::option_enabled;

namespace {

struct BertLayer {
  TensorId query_w, query_b, key_w, key_b, value_w, value_b, attn_out_w, attn_out_b, attn_ln_w, attn_ln_b;
  TensorId inter_w, inter_b, out_w, out_b, out_ln_w, out_ln_b;
};

}  // namespace

void build_bert(GraphBuilder& g, const ModelConfig& model) {
  const int64_t layers = dim(model, "layers");
  const int64_t hidden = dim(model, "hidden");
  const int64_t heads = dim(model, "heads");
  const int64_t ffn = dim(model, "ffn_hidden");
  const int64_t vocab = dim(model, "vocab");
  const int64_t positions = dim(model, "max_positions");
  const int64_t type_vocab = dim(model, "type_vocab");
  const int64_t labels_count = model.dims.count("num_labels") ? model.dims.at("num_labels") : 0;
  const bool pooler = option_enabled(model, "pooler", true);
  const int64_t batch = g.context().batch;
  const int64_t seq = g.context().seq_len;
  const auto tokens = static_cast<uint64_t>(batch * seq);

  g.push_module("embeddings");
  TensorId word = g.parameter("word_embeddings.weight", {vocab, hidden});
  TensorId position = g.parameter("position_embeddings.weight", {positions, hidden});
  TensorId token_type = g.parameter("token_type_embeddings.weight", {type_vocab, hidden});
  TensorId emb_ln_w = g.parameter("LayerNorm.weight", {hidden});
  TensorId emb_ln_b = g.parameter("LayerNorm.bias", {hidden});
  TensorId position_ids = g.buffer("position_ids", static_cast<uint64_t>(positions), DType::Int64);
  TensorId token_type_ids = g.buffer("token_type_ids", static_cast<uint64_t>(positions), DType::Int64);
  g.pop_module();
  std::vector<BertLayer> blocks(static_cast<size_t>(layers));
  for (int64_t i = 0; i < layers; ++i) {
    BertLayer& b = blocks[static_cast<size_t>(i)];
    g.push_module("encoder.layer." + std::to_string(i));
    b.query_w = g.parameter("attention.self.query.weight", {hidden, hidden});
    b.query_b = g.parameter("attention.self.query.bias", {hidden});
    b.key_w = g.parameter("attention.self.key.weight", {hidden, hidden});
    b.key_b = g.parameter("attention.self.key.bias", {hidden});
    b.value_w = g.parameter("attention.self.value.weight", {hidden, hidden});
    b.value_b = g.parameter("attention.self.value.bias", {hidden});
    b.attn_out_w = g.parameter("attention.output.dense.weight", {hidden, hidden});
    b.attn_out_b = g.parameter("attention.output.dense.bias", {hidden});
    b.attn_ln_w = g.parameter("attention.output.LayerNorm.weight", {hidden});
    b.attn_ln_b = g.parameter("attention.output.LayerNorm.bias", {hidden});
    b.inter_w = g.parameter("intermediate.dense.weight", {ffn, hidden});
    b.inter_b = g.parameter("intermediate.dense.bias", {ffn});
    b.out_w = g.parameter("output.dense.weight", {hidden, ffn});
    b.out_b = g.parameter("output.dense.bias", {hidden});
    b.out_ln_w = g.parameter("output.LayerNorm.weight", {hidden});
    b.out_ln_b = g.parameter("output.LayerNorm.bias", {hidden});
    g.pop_module();
  }
  TensorId pool_w = kNoTensor, pool_b = kNoTensor, cls_w = kNoTensor, cls_b = kNoTensor;
  if (pooler) {
    pool_w = g.parameter("pooler.dense.weight", {hidden, hidden});
    pool_b = g.parameter("pooler.dense.bias", {hidden});
  }
  if (labels_count > 0) {
    cls_w = g.parameter("classifier.weight", {labels_count, hidden});
    cls_b = g.parameter("classifier.bias", {labels_count});
  }

  TensorId input_ids = g.input("input_ids", tokens, DType::Int64);
  TensorId labels = g.input("labels", static_cast<uint64_t>(batch), DType::Int64);

  g.push_module("embeddings");
  TensorId words = ops::embedding(g, "word_embeddings", input_ids, word, hidden);
  TensorId types = ops::embedding(g, "token_type_embeddings", token_type_ids, token_type, hidden);
  TensorId summed = ops::add(g, "add_token_type", words, types);
  TensorId positions_emb = ops::embedding(g, "position_embeddings", position_ids, position, hidden);
  summed = ops::add(g, "add_position", summed, positions_emb, /*in_place=*/true);
  TensorId x = ops::layer_norm(g, "LayerNorm", summed, emb_ln_w, emb_ln_b, hidden);
  x = ops::dropout(g, "dropout", x);
  g.pop_module();

  ops::AttentionShape shape;
  shape.batch = batch;
  shape.heads = heads;
  shape.seq = seq;
  shape.head_dim = hidden / heads;
  shape.causal = false;
  // BertModel.forward builds the extended attention mask once, in the parameters' dtype
  // (get_extended_attention_mask), and the eager attention of every layer adds it.
  if (g.context().attention == AttentionImpl::Eager) {
    shape.additive_mask = ops::constant(g, "extended_attention_mask", static_cast<uint64_t>(batch * seq),
                                        g.precision().parameter_dtype);
  }
  for (int64_t i = 0; i < layers; ++i) {
    const BertLayer& b = blocks[static_cast<size_t>(i)];
    g.push_module("encoder.layer." + std::to_string(i));
    g.begin_unit();
    g.begin_scope();
    g.hold(x);
    g.push_module("attention.self");
    TensorId q = ops::linear(g, "query", x, b.query_w, b.query_b, hidden, hidden);
    TensorId k = ops::linear(g, "key", x, b.key_w, b.key_b, hidden, hidden);
    TensorId v = ops::linear(g, "value", x, b.value_w, b.value_b, hidden, hidden);
    TensorId context = ops::attention(g, "attention", q, k, v, shape);
    g.pop_module();
    g.push_module("attention.output");
    TensorId dense = ops::linear(g, "dense", context, b.attn_out_w, b.attn_out_b, hidden, hidden);
    dense = ops::dropout(g, "dropout", dense);
    TensorId residual = ops::add(g, "residual", dense, x);
    TensorId attention_output = ops::layer_norm(g, "LayerNorm", residual, b.attn_ln_w, b.attn_ln_b, hidden);
    g.pop_module();
    TensorId inter = ops::linear(g, "intermediate.dense", attention_output, b.inter_w, b.inter_b, hidden, ffn);
    inter = ops::gelu(g, "intermediate.gelu", inter);
    g.push_module("output");
    TensorId out = ops::linear(g, "dense", inter, b.out_w, b.out_b, ffn, hidden);
    out = ops::dropout(g, "dropout", out);
    TensorId residual2 = ops::add(g, "residual", out, attention_output);
    x = ops::layer_norm(g, "LayerNorm", residual2, b.out_ln_w, b.out_ln_b, hidden);
    g.pop_module();
    g.end_scope();
    g.end_unit();
    g.pop_module();
  }

  TensorId features = x;
  int64_t classes = hidden;
  if (pooler) {
    // hidden_states[:, 0]: a select view whose backward zero-fills a full-size grad.
    TensorId first = g.view(x, "pooler.first_token", static_cast<uint64_t>(batch * hidden));
    OpNode& select = g.add_op(OpKind::View, "pooler.first_token", {x}, {first}, {GradRule::New});
    g.finish_op(select);
    TensorId pooled = ops::linear(g, "pooler.dense", first, pool_w, pool_b, hidden, hidden);
    features = ops::tanh(g, "pooler.activation", pooled);
  }
  if (labels_count > 0) {
    features = ops::dropout(g, "dropout", features);
    features = ops::linear(g, "classifier", features, cls_w, cls_b, hidden, labels_count);
    classes = labels_count;
  }
  TensorId loss = ops::cross_entropy(g, "cross_entropy", features, labels, classes);
  g.set_named_output("logits", features);
  g.set_loss(loss);
}

}  // namespace oomcast::planner::families
