// The pieces rotary_decoder.h names, shared by llama.cc and gpt_neox.cc.
#include "planner/families/rotary_decoder.h"

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

TensorId grouped_query_attention(GraphBuilder& g, TensorId q_rot, TensorId k_rot, TensorId v,
                                 ops::AttentionShape shape, bool repeat_kv, uint64_t q_numel) {
  g.cache_key_value(k_rot, v);  // the cache keeps them before repeat_kv
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
  return ops::attention(g, "attention", q_rot, k_rot, v, shape);
}

CausalLossInputs causal_loss_inputs(GraphBuilder& g, TensorId logits, TensorId labels, uint64_t tokens) {
  CausalLossInputs inputs;
  inputs.logits_fp32 = g.cast(logits, DType::Float32, "loss.logits_float");
  g.hold(inputs.logits_fp32);
  inputs.shift_labels = ops::constant(g, "loss.shift_labels", tokens, DType::Int64, labels);
  return inputs;
}

}  // namespace oomcast::planner::families
