// The pieces rotary_decoder.h names, shared by llama.cc and gpt_neox.cc.
#include "planner/families/rotary_decoder.h"

#include <string>
#include <vector>

namespace oomcast::planner::families {

RotaryTables rotary_tables(GraphBuilder& g, int64_t seq, int64_t dims, DType dtype) {
  RotaryTables tables;
  tables.cos = ops::constant(g, "rotary_emb.cos", static_cast<uint64_t>(seq * dims), dtype);
  tables.sin = ops::constant(g, "rotary_emb.sin", static_cast<uint64_t>(seq * dims), dtype);
  g.hold(tables.cos);
  g.hold(tables.sin);
  return tables;
}

ops::AttentionShape causal_attention_shape(int64_t batch, int64_t heads, int64_t seq, int64_t head_dim) {
  ops::AttentionShape shape;
  shape.batch = batch;
  shape.heads = heads;
  shape.seq = seq;
  shape.head_dim = head_dim;
  shape.causal = true;
  return shape;
}

bool repeats_key_value(scenario::AttentionImpl impl, int64_t head_dim) {
  // transformers 5.24 (integrations/sdpa_attention.py, sdpa_attention_forward): with grouped kv
  // heads, no attention mask and head_dim <= 256 (use_gqa_in_sdpa), SDPA gets k and v as they
  // are and enable_gqa=True; torch 2.5+ runs that in the flash kernel without a copy, while the
  // math kernel repeat_interleaves k and v (torch/nn/functional.py's reference of
  // scaled_dot_product_attention), copies the size of repeat_kv's. The eager path
  // (eager_attention_forward) calls repeat_kv.
  return impl != scenario::AttentionImpl::Flash || head_dim > 256;
}

TensorId grouped_query_attention(GraphBuilder& g, TensorId q_rot, TensorId k_rot, TensorId v,
                                 ops::AttentionShape shape, bool grouped, uint64_t q_numel,
                                 scenario::AttentionImpl impl, bool cache_keeps_prefill) {
  const bool repeat_kv = grouped && repeats_key_value(impl, shape.head_dim);
  // DynamicLayer.update up to transformers 4.55 keeps the prefill's k and v (the cache holds
  // them before repeat_kv, as GPT-2's nanoGPT-style cache does); from 4.56 it makes them with
  // torch.cat onto an empty tensor (cache_utils.py, lazy_initialization), a copy the generate
  // job allocates at the update.
  if (cache_keeps_prefill) g.cache_key_value(k_rot, v);
  if (repeat_kv) {
    // matmul then views the copies as 3-D without another copy.
    k_rot = ops::expand_copy(g, "repeat_k", k_rot, q_numel);
    v = ops::expand_copy(g, "repeat_v", v, q_numel);
    shape.k_contiguous = true;
    shape.v_contiguous = true;
  }
  // matmul saves its contiguous copies, not the locals.
  g.hold(q_rot);
  g.hold(k_rot);
  g.hold(v);
  return ops::attention_with(g, "attention", q_rot, k_rot, v, shape, impl);
}

CausalLossInputs causal_loss_inputs(GraphBuilder& g, TensorId logits, TensorId labels, uint64_t tokens) {
  CausalLossInputs inputs;
  inputs.logits_fp32 = g.cast(logits, DType::Float32, "loss.logits_float");
  g.hold(inputs.logits_fp32);
  inputs.shift_labels = ops::constant(g, "loss.shift_labels", tokens, DType::Int64, labels);
  return inputs;
}

TensorId chunked_causal_loss(GraphBuilder& g, TensorId hidden, TensorId lm_head, TensorId labels, uint64_t tokens,
                             int64_t hidden_size, int64_t vocab, int64_t chunks) {
  const bool copies = g.context().batch > 1;  // a dim-1 chunk of [B, S, H] is contiguous only for B = 1
  std::vector<TensorId> pieces = ops::split(g, "output.chunk", hidden, static_cast<int>(chunks));
  std::vector<TensorId> logits;
  for (size_t i = 0; i < pieces.size(); ++i) {
    logits.push_back(ops::linear(g, "output.chunk" + std::to_string(i), pieces[i], lm_head, kNoTensor, hidden_size,
                                 vocab, copies));
  }
  g.begin_scope();
  for (TensorId chunk : logits) g.hold(chunk);  // the recipe's `logits` list, deleted after the loss
  // hstack((labels[..., 1:], ignore_labels_cache)): one int64 tensor, chunked into views.
  TensorId shift_labels = ops::constant(g, "loss.shift_labels", tokens, DType::Int64, labels);
  TensorId total = kNoTensor;
  for (size_t i = 0; i < logits.size(); ++i) {
    const std::string name = "loss.chunk" + std::to_string(i);
    TensorId upcast = g.cast(logits[i], DType::Float32, name + ".float");
    TensorId loss = ops::cross_entropy(g, name + ".cross_entropy", upcast, shift_labels, vocab);
    total = total == kNoTensor ? loss : ops::add(g, name + ".sum", total, loss);
  }
  TensorId mean = ops::scale(g, "loss.normalize", total);  // / total_elements
  g.end_scope();
  return mean;
}

}  // namespace oomcast::planner::families
