// What the rotary decoder families (llama.cc: Llama, Mistral, Qwen, Gemma, Phi-3, MoE models;
// gpt_neox.cc: GPT-NeoX, Phi-1.5/2, Falcon) build the same way, because HF's modelling code
// for them does the same thing: the cos/sin tables computed once per forward, grouped-query
// attention (repeat_kv copies except under the flash kernel), and the causal-LM loss.
#pragma once

#include <cstdint>

#include "planner/ops/graph_builder.h"
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::families {

// cos and sin [1, seq, dims], made once per forward in the embeddings' dtype and held by the
// model's forward locals, so every layer shares them.
struct RotaryTables {
  TensorId cos = kNoTensor;
  TensorId sin = kNoTensor;
};
RotaryTables rotary_tables(GraphBuilder& g, int64_t seq, int64_t dims, DType dtype);

// The attention shape of a causal decoder's layers (per-layer switches are set by the caller).
ops::AttentionShape causal_attention_shape(int64_t batch, int64_t heads, int64_t seq, int64_t head_dim);

// From the rotated q and k and the value to the attention's output. With fewer kv heads than
// query heads (`grouped`), the flash kernel takes k and v as they are (SDPA's enable_gqa, as
// transformers passes it); eager and math attention copy k and v to every query head
// (`q_numel` elements: repeat_kv, or the math kernel's repeat_interleave). The locals q, k, v
// hold their last values until forward returns.
// `impl` is the attention the model runs (the scenario's, or eager where the class has no
// SDPA path). `cache_keeps_prefill`: the prefill's DynamicCache keeps k and v themselves (up
// to transformers 4.55), not a copy (4.56+; planner/transformers_release_facts.h).
TensorId grouped_query_attention(GraphBuilder& g, TensorId q_rot, TensorId k_rot, TensorId v,
                                 ops::AttentionShape shape, bool grouped, uint64_t q_numel,
                                 scenario::AttentionImpl impl, bool cache_keeps_prefill);

// Whether an attention of `impl` copies grouped k and v to every query head (repeat_kv, or
// the math kernel's repeat_interleave): every kernel but flash, and flash above head_dim 256.
bool repeats_key_value(scenario::AttentionImpl impl, int64_t head_dim);

// HF's ForCausalLMLoss opening: logits.float() (held until the loss returns) and the padded
// shift labels. Call inside the loss's scope; returns the fp32 logits and the labels.
struct CausalLossInputs {
  TensorId logits_fp32 = kNoTensor;
  TensorId shift_labels = kNoTensor;
};
CausalLossInputs causal_loss_inputs(GraphBuilder& g, TensorId logits, TensorId labels, uint64_t tokens);

// torchtune's chunked output and loss (loss.chunks; modules/transformer.py TransformerDecoder
// with num_output_chunks, modules/loss/ce_chunked_output_loss.py CEWithChunkedOutputLoss,
// torchtune 0.6): the final hidden states split into `chunks` along the sequence
// (h.chunk(n, dim=1)), the output projection run per chunk (a non-contiguous chunk of a batch
// above 1 is copied by matmul's reshape, and the copy is saved), the list of chunk logits held
// by the recipe until the loss returns, and per chunk F.cross_entropy(chunk.float(), labels,
// reduction="sum"): only one chunk's fp32 copy exists at a time, while every chunk's fp32
// log-probabilities are saved. Returns the loss.
TensorId chunked_causal_loss(GraphBuilder& g, TensorId hidden, TensorId lm_head, TensorId labels, uint64_t tokens,
                             int64_t hidden_size, int64_t vocab, int64_t chunks);

}  // namespace oomcast::planner::families
