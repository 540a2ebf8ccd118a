// GPT-2 as nanoGPT (and HF GPT2LMHeadModel) lay it out: learned token and position
// embeddings, pre-LN blocks with a fused qkv c_attn, GELU MLP, biases, final ln_f and an
// lm_head tied to wte. Eager attention adds nanoGPT's causal-mask buffer per block.
#include <string>
#include <vector>

#include "planner/families/families.h"
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::families {

using scenario::AttentionImpl;
using scenario::ModelConfig;
using scenario::families::dim;
using scenario::families::option_enabled;

namespace {

struct Gpt2Block {
  TensorId ln_1_weight, ln_1_bias, c_attn_weight, c_attn_bias, c_proj_weight, c_proj_bias;
  TensorId ln_2_weight, ln_2_bias, c_fc_weight, c_fc_bias, mlp_proj_weight, mlp_proj_bias;
  TensorId mask = kNoTensor;
};

}  // namespace

void build_gpt2(GraphBuilder& g, const ModelConfig& model) {
  const int64_t layers = dim(model, "layers");
  const int64_t hidden = dim(model, "hidden");
  const int64_t heads = dim(model, "heads");
  const int64_t vocab = dim(model, "vocab");
  const int64_t positions = dim(model, "max_positions");
  const int64_t ffn = dim(model, "ffn_hidden");
  const bool tied = option_enabled(model, "tied_embeddings", true);
  const bool bias = option_enabled(model, "bias", true);
  const int64_t batch = g.context().batch;
  const int64_t seq = g.context().seq_len;
  const auto tokens = static_cast<uint64_t>(batch * seq);
  auto maybe_bias = [&](const char* name, int64_t size) {
    return bias ? g.parameter(name, {size}) : kNoTensor;
  };

  // Parameters in model.parameters() order (wte first; lm_head only if untied).
  g.push_module("transformer");
  TensorId wte = g.parameter("wte.weight", {vocab, hidden});
  TensorId wpe = g.parameter("wpe.weight", {positions, hidden});
  std::vector<Gpt2Block> blocks(static_cast<size_t>(layers));
  for (int64_t i = 0; i < layers; ++i) {
    Gpt2Block& b = blocks[static_cast<size_t>(i)];
    g.push_module("h." + std::to_string(i));
    b.ln_1_weight = g.parameter("ln_1.weight", {hidden});
    b.ln_1_bias = maybe_bias("ln_1.bias", hidden);
    b.c_attn_weight = g.parameter("attn.c_attn.weight", {3 * hidden, hidden});
    b.c_attn_bias = maybe_bias("attn.c_attn.bias", 3 * hidden);
    b.c_proj_weight = g.parameter("attn.c_proj.weight", {hidden, hidden});
    b.c_proj_bias = maybe_bias("attn.c_proj.bias", hidden);
    b.ln_2_weight = g.parameter("ln_2.weight", {hidden});
    b.ln_2_bias = maybe_bias("ln_2.bias", hidden);
    b.c_fc_weight = g.parameter("mlp.c_fc.weight", {ffn, hidden});
    b.c_fc_bias = maybe_bias("mlp.c_fc.bias", ffn);
    b.mlp_proj_weight = g.parameter("mlp.c_proj.weight", {hidden, ffn});
    b.mlp_proj_bias = maybe_bias("mlp.c_proj.bias", hidden);
    if (g.context().attention == AttentionImpl::Eager) {
      // nanoGPT registers torch.tril(ones(block_size, block_size)) as a float buffer when it
      // cannot use flash; model.to(dtype) converts it with the parameters.
      b.mask = g.buffer("attn.bias", static_cast<uint64_t>(positions * positions), g.precision().parameter_dtype);
    }
    g.pop_module();
  }
  TensorId ln_f_weight = g.parameter("ln_f.weight", {hidden});
  TensorId ln_f_bias = maybe_bias("ln_f.bias", hidden);
  g.pop_module();
  // Tied: the constructor builds an untied lm_head (nanoGPT: wte's own weight) that tying then
  // drops, so both [vocab, hidden] matrices exist until it returns.
  if (tied) g.construction_temporary("lm_head.weight", {vocab, hidden});
  TensorId lm_head = tied ? wte : g.parameter("lm_head.weight", {vocab, hidden});

  TensorId idx = g.input("idx", tokens, DType::Int64);
  TensorId targets = g.input("targets", tokens, DType::Int64);

  // GPT.forward's frame runs to the loss: its locals pos, tok_emb, pos_emb and the final x stay
  // bound until it returns, past their last uses.
  g.begin_scope();
  g.push_module("transformer");
  TensorId pos = ops::constant(g, "pos", static_cast<uint64_t>(seq), DType::Int64);
  TensorId tok_emb = ops::embedding(g, "wte", idx, wte, hidden);
  TensorId pos_emb = ops::embedding(g, "wpe", pos, wpe, hidden);
  g.hold(pos);
  g.hold(tok_emb);
  g.hold(pos_emb);
  TensorId x = ops::add(g, "embed_add", tok_emb, pos_emb);
  x = ops::dropout(g, "drop", x);

  ops::AttentionShape shape;
  shape.batch = batch;
  shape.heads = heads;
  shape.seq = seq;
  shape.head_dim = hidden / heads;
  shape.causal = true;
  for (int64_t i = 0; i < layers; ++i) {
    const Gpt2Block& b = blocks[static_cast<size_t>(i)];
    g.push_module("h." + std::to_string(i));
    g.begin_unit();
    g.begin_scope();
    g.hold(x);  // the block's argument lives until Block.forward returns
    TensorId ln1 = ops::layer_norm(g, "ln_1", x, b.ln_1_weight, b.ln_1_bias, hidden);
    g.push_module("attn");
    g.begin_scope();
    g.hold(ln1);
    TensorId qkv = ops::linear(g, "c_attn", ln1, b.c_attn_weight, b.c_attn_bias, hidden, 3 * hidden);
    std::vector<TensorId> pieces = ops::split(g, "split", qkv, 3);
    for (TensorId piece : pieces) g.hold(piece);  // q, k, v locals keep qkv alive
    shape.causal_mask_buffer = b.mask;
    TensorId y = ops::attention(g, "attention", pieces[0], pieces[1], pieces[2], shape);
    TensorId o = ops::linear(g, "c_proj", y, b.c_proj_weight, b.c_proj_bias, hidden, hidden);
    TensorId attn_out = ops::dropout(g, "resid_dropout", o);
    g.end_scope();
    g.pop_module();
    TensorId x_mid = ops::add(g, "attn_residual", x, attn_out);
    TensorId ln2 = ops::layer_norm(g, "ln_2", x_mid, b.ln_2_weight, b.ln_2_bias, hidden);
    g.push_module("mlp");
    g.begin_scope();
    g.hold(ln2);
    TensorId h = ops::linear(g, "c_fc", ln2, b.c_fc_weight, b.c_fc_bias, hidden, ffn);
    TensorId act = ops::gelu(g, "gelu", h);
    TensorId proj = ops::linear(g, "c_proj", act, b.mlp_proj_weight, b.mlp_proj_bias, ffn, hidden);
    TensorId mlp_out = ops::dropout(g, "dropout", proj);
    g.end_scope();
    g.pop_module();
    x = ops::add(g, "mlp_residual", x_mid, mlp_out);
    g.end_scope();
    g.end_unit();
    g.pop_module();
  }
  TensorId xf = ops::layer_norm(g, "ln_f", x, ln_f_weight, ln_f_bias, hidden);
  g.hold(xf);  // x = self.transformer.ln_f(x)
  g.pop_module();
  TensorId logits = ops::linear(g, "lm_head", xf, lm_head, kNoTensor, hidden, vocab);
  TensorId loss = ops::cross_entropy(g, "cross_entropy", logits, targets, vocab);
  g.end_scope();
  g.set_named_output("logits", logits);
  g.set_loss(loss);
}

}  // namespace oomcast::planner::families
