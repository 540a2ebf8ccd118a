// The gated MLPs of the Llama-style decoders: the dense one (gate/up/down or Phi-3's fused
// gate_up_proj) and the sparse mixture-of-experts block of Mixtral and Qwen-MoE (router,
// top-k, one dense MLP per expert on the tokens routed to it, the weighted index_add back).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/ops/graph_builder.h"
#include "scenario/scenario.h"

namespace oomcast::planner::families {

struct DenseMlp {
  TensorId gate = kNoTensor, up = kNoTensor, gate_up = kNoTensor, down = kNoTensor;
  TensorId gate_bias = kNoTensor, up_bias = kNoTensor, gate_up_bias = kNoTensor, down_bias = kNoTensor;
  int64_t hidden = 0, ffn = 0;
};

// Registers module `name`'s weights: gate_proj, up_proj, down_proj (or gate_up_proj,
// down_proj when `fused`); Mixtral's experts name them w1, w3, w2 (`mixtral_names`).
DenseMlp register_dense_mlp(GraphBuilder& g, const std::string& name, int64_t hidden, int64_t ffn, bool fused,
                            bool bias, bool mixtral_names = false);
// down(act(gate(x)) * up(x)) with act silu (or GELU-tanh with `gelu`) in module `name`.
TensorId dense_mlp_forward(GraphBuilder& g, const std::string& name, const DenseMlp& mlp, TensorId x, bool gelu);

struct MoeShape {
  int64_t experts = 0;           // 0: a dense MLP
  int64_t experts_per_token = 2;
  int64_t expert_ffn = 0;
  int64_t shared_expert_ffn = 0; // Qwen2-MoE's always-on expert (0: none)
  bool normalize_top_k = true;   // routing weights renormalised over the chosen experts
  bool mixtral_names = false;    // block_sparse_moe.experts.i.w1/w2/w3
  bool router_logits_output = false;  // output_router_logits: the auxiliary loss is computed
  int64_t sparse_step = 1;              // Qwen-MoE decoder_sparse_step
  std::vector<int64_t> mlp_only_layers; // Qwen-MoE: layers that keep the dense MLP
  // transformers 5's 3-D experts run by grouped_mm (planner/transformers_release_facts.h).
  bool stacked = false;
  // Ranks the experts are split across (planner/families/expert_parallel_moe.h): each holds
  // experts / expert_parallel of them and the whole router.
  int64_t expert_parallel = 1;

  // HF's rule: layer i (from 0) has experts unless listed in mlp_only_layers or
  // (i + 1) % decoder_sparse_step != 0; the others have a dense MLP of intermediate_size.
  bool sparse_layer(int64_t layer) const;
};

MoeShape read_moe_shape(const scenario::ModelConfig& model);

struct MoeBlock {
  TensorId router = kNoTensor;
  // transformers 5's stacked experts (planner/transformers_release_facts.h stacked_experts):
  // experts.gate_up_proj [E, 2F, H] and experts.down_proj [E, H, F]; else one MLP per expert.
  TensorId stacked_gate_up = kNoTensor, stacked_down = kNoTensor;
  std::vector<DenseMlp> experts;
  DenseMlp shared_expert;
  TensorId shared_expert_gate = kNoTensor;
};

MoeBlock register_moe_block(GraphBuilder& g, const MoeShape& shape, int64_t hidden);
// The sparse block's forward on x [tokens, hidden]; the tokens each expert gets follow the
// build context's routing (balanced or the worst case of moe.imbalance).
// Appends the block's router logits to `router_logits` (the model keeps them for the
// auxiliary loss when output_router_logits is on).
TensorId moe_block_forward(GraphBuilder& g, const MoeShape& shape, const MoeBlock& block, TensorId x, int64_t hidden,
                           std::vector<TensorId>* router_logits);
// With output_router_logits: load_balancing_loss_func over every layer's router logits
// (cat, softmax, top-k, one_hot, means), added to `loss`; otherwise `loss` unchanged.
TensorId moe_auxiliary_loss(GraphBuilder& g, const MoeShape& shape, const std::vector<TensorId>& router_logits,
                            TensorId loss);

// Tokens routed to each expert: `balanced` spreads tokens*k evenly; otherwise the busiest
// expert gets k times its share (at most every token) and the others split the rest.
std::vector<uint64_t> expert_token_counts(uint64_t tokens, int64_t experts, int64_t top_k, bool balanced);

}  // namespace oomcast::planner::families
