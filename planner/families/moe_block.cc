// Dense gated MLPs and the sparse mixture-of-experts block as HF's Mixtral / Qwen-MoE
// modelling code runs them in training: x.view(-1, h); router logits = gate(x);
// softmax in fp32; topk; (renormalise); .to(dtype). Then, up to transformers 4: zeros
// accumulator; one_hot expert mask; per expert: torch.where on its mask row, x[top_x] (a
// gather), the expert MLP, times its routing weights, index_add_ into the accumulator. From
// transformers 5: 3-D stacked experts run by grouped_mm on the choices sorted by expert.
#include "planner/families/moe_block.h"

#include <algorithm>
#include <string>

#include "planner/ops/op_catalogue.h"
#include "planner/families/expert_parallel_moe.h"
#include "planner/transformers_release_facts.h"
#include "scenario/model_families.h"

namespace oomcast::planner::families {

using scenario::ModelConfig;
using scenario::OpKind;
using scenario::families::dim;
using scenario::families::option_enabled;

DenseMlp register_dense_mlp(GraphBuilder& g, const std::string& name, int64_t hidden, int64_t ffn, bool fused,
                            bool bias, bool mixtral_names) {
  DenseMlp mlp;
  mlp.hidden = hidden;
  mlp.ffn = ffn;
  g.push_module(name);
  auto bias_of = [&](const char* leaf, int64_t size) { return bias ? g.parameter(leaf, {size}) : kNoTensor; };
  if (fused) {
    mlp.gate_up = g.parameter("gate_up_proj.weight", {2 * ffn, hidden});
    mlp.gate_up_bias = bias_of("gate_up_proj.bias", 2 * ffn);
    mlp.down = g.parameter("down_proj.weight", {hidden, ffn});
    mlp.down_bias = bias_of("down_proj.bias", hidden);
  } else if (mixtral_names) {
    // MixtralBlockSparseTop2MLP: w1 (gate), w2 (down), w3 (up).
    mlp.gate = g.parameter("w1.weight", {ffn, hidden});
    mlp.down = g.parameter("w2.weight", {hidden, ffn});
    mlp.up = g.parameter("w3.weight", {ffn, hidden});
  } else {
    mlp.gate = g.parameter("gate_proj.weight", {ffn, hidden});
    mlp.gate_bias = bias_of("gate_proj.bias", ffn);
    mlp.up = g.parameter("up_proj.weight", {ffn, hidden});
    mlp.up_bias = bias_of("up_proj.bias", ffn);
    mlp.down = g.parameter("down_proj.weight", {hidden, ffn});
    mlp.down_bias = bias_of("down_proj.bias", hidden);
  }
  g.pop_module();
  return mlp;
}

TensorId dense_mlp_forward(GraphBuilder& g, const std::string& name, const DenseMlp& mlp, TensorId x, bool gelu) {
  auto activation = [&](const char* leaf, TensorId t) { return gelu ? ops::gelu(g, leaf, t) : ops::silu(g, leaf, t); };
  g.push_module(name);
  g.begin_scope();
  g.hold(x);
  TensorId down;
  if (mlp.gate_up != kNoTensor) {
    // Phi-3: up_states = gate_up_proj(x); gate, up_states = up_states.chunk(2, dim=-1);
    // up_states = up_states * act(gate).
    TensorId both = ops::linear(g, "gate_up_proj", x, mlp.gate_up, mlp.gate_up_bias, mlp.hidden, 2 * mlp.ffn);
    g.hold(both);
    std::vector<TensorId> halves = ops::split(g, "chunk", both, 2);
    TensorId act = activation("activation_fn", halves[0]);
    TensorId product = ops::mul(g, "gate_mul", halves[1], act);
    down = ops::linear(g, "down_proj", product, mlp.down, mlp.down_bias, mlp.ffn, mlp.hidden);
  } else {
    TensorId gate = ops::linear(g, "gate_proj", x, mlp.gate, mlp.gate_bias, mlp.hidden, mlp.ffn);
    TensorId act = activation("act_fn", gate);
    TensorId up = ops::linear(g, "up_proj", x, mlp.up, mlp.up_bias, mlp.hidden, mlp.ffn);
    TensorId product = ops::mul(g, "gate_mul", act, up);
    down = ops::linear(g, "down_proj", product, mlp.down, mlp.down_bias, mlp.ffn, mlp.hidden);
  }
  g.end_scope();
  g.pop_module();
  return down;
}

MoeShape read_moe_shape(const ModelConfig& model) {
  MoeShape shape;
  if (model.dims.count("experts") == 0) return shape;
  shape.experts = dim(model, "experts");
  shape.experts_per_token = dim(model, "experts_per_token");
  shape.expert_ffn = dim(model, "expert_ffn_hidden");
  shape.shared_expert_ffn = model.dims.count("shared_expert_ffn") ? dim(model, "shared_expert_ffn") : 0;
  shape.normalize_top_k = option_enabled(model, "normalize_top_k", true);
  shape.mixtral_names = option_enabled(model, "mixtral_expert_names", false);
  shape.router_logits_output = option_enabled(model, "router_logits_output", false);
  shape.sparse_step = dim(model, "decoder_sparse_step");
  shape.mlp_only_layers = model.mlp_only_layers;
  shape.stacked = transformers_release_facts(static_cast<int>(dim(model, "transformers_version"))).stacked_experts;
  shape.expert_parallel = dim(model, "expert_parallel");  // set per rank by planner/parallel/mesh_rank.cc
  return shape;
}

bool MoeShape::sparse_layer(int64_t layer) const {
  if (experts <= 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) return false;
  return (layer + 1) % sparse_step == 0;
}

namespace {

// The module the sparse block registers under: Mixtral's block_sparse_moe up to transformers 4.
std::string moe_module(const MoeShape& shape) { return shape.mixtral_names && !shape.stacked ? "block_sparse_moe" : "mlp"; }

}  // namespace

MoeBlock register_moe_block(GraphBuilder& g, const MoeShape& shape, int64_t hidden) {
  MoeBlock block;
  g.push_module(moe_module(shape));
  if (shape.stacked) {
    // Qwen3MoeSparseMoeBlock registers experts, then gate; MixtralSparseMoeBlock gate first.
    auto experts = [&] {
      const int64_t local = shape.experts / shape.expert_parallel;  // the rank's experts
      block.stacked_gate_up = g.parameter("experts.gate_up_proj", {local, 2 * shape.expert_ffn, hidden});
      block.stacked_down = g.parameter("experts.down_proj", {local, hidden, shape.expert_ffn});
    };
    if (!shape.mixtral_names) experts();
    block.router = g.parameter("gate.weight", {shape.experts, hidden});
    if (shape.mixtral_names) experts();
  } else {
    block.router = g.parameter("gate.weight", {shape.experts, hidden});
  }
  for (int64_t e = 0; e < shape.experts / shape.expert_parallel && !shape.stacked; ++e) {
    block.experts.push_back(register_dense_mlp(g, "experts." + std::to_string(e), hidden, shape.expert_ffn, false,
                                               false, shape.mixtral_names));
  }
  if (shape.shared_expert_ffn > 0) {
    block.shared_expert = register_dense_mlp(g, "shared_expert", hidden, shape.shared_expert_ffn, false, false);
    block.shared_expert_gate = g.parameter("shared_expert_gate.weight", {1, hidden});
  }
  g.pop_module();
  return block;
}

std::vector<uint64_t> expert_token_counts(uint64_t tokens, int64_t experts, int64_t top_k, bool balanced) {
  const auto e = static_cast<uint64_t>(experts);
  const auto k = static_cast<uint64_t>(std::min(top_k, experts));
  const uint64_t routed = tokens * k;  // every token goes to k distinct experts
  std::vector<uint64_t> counts(e, 0);
  uint64_t busiest = 0;
  if (!balanced && e > 1) {
    // The busiest expert gets k times its even share, at most every token once.
    busiest = std::min(tokens, k * ((routed + e - 1) / e));
    counts[0] = busiest;
  }
  const uint64_t first = busiest > 0 ? 1 : 0;
  const uint64_t rest = routed - busiest;
  const uint64_t others = e - first;
  for (uint64_t i = first; i < e; ++i) counts[i] = rest / others + ((i - first) < rest % others ? 1 : 0);
  // No expert takes a token twice: spill what exceeds `tokens` onto the next experts.
  uint64_t spill = 0;
  for (uint64_t i = first; i < e; ++i) {
    counts[i] += spill;
    spill = counts[i] > tokens ? counts[i] - tokens : 0;
    counts[i] = std::min(counts[i], tokens);
  }
  return counts;
}

namespace {

// torch._grouped_mm(x, weight, offs): x [rows, in] against a stacked weight, each expert's rows
// (the offsets) against its slice; the backward keeps x, the weight and the offsets and makes
// a grad for x and one for the whole stacked weight.
TensorId grouped_mm(GraphBuilder& g, const std::string& name, TensorId x, TensorId weight, TensorId offsets,
                    uint64_t out_numel, uint64_t inner) {
  TensorId out = g.activation(name + ".out", out_numel, g.tensor(x).dtype);
  OpNode& op = g.add_op(OpKind::Matmul, name, {x, weight, offsets}, {out}, {GradRule::New, GradRule::New, GradRule::None});
  op.saved = {weight, offsets, x};
  op.forward_flops = 2.0 * static_cast<double>(out_numel) * static_cast<double>(inner);
  g.finish_op(op);
  return out;
}

// transformers 5's grouped_mm_experts_forward (integrations/moe.py) on the routed tokens:
// sort the S = tokens x k choices by expert, gather their hidden states and weights, the
// histogram of tokens per expert and its cumsum as offsets, gate_up and down as grouped GEMMs,
// the routing weights, the inverse permutation and a sum over the k choices of each token.
TensorId stacked_experts_forward(GraphBuilder& g, const MoeShape& shape, const MoeBlock& block, TensorId flat,
                                 const ops::Routing& routing, int64_t hidden, uint64_t tokens, int64_t k) {
  const auto choices = tokens * static_cast<uint64_t>(k);
  const auto experts = static_cast<uint64_t>(shape.experts);
  const auto ffn = static_cast<uint64_t>(shape.expert_ffn);
  const auto width = static_cast<uint64_t>(hidden);
  g.push_module("experts");
  g.begin_scope();
  TensorId sample_weights = ops::view(g, "sample_weights", routing.weights, choices);
  g.hold(sample_weights);
  // expert_ids_g, perm = torch.sort(expert_ids): both int64 [S], locals until forward returns.
  TensorId sorted_ids = ops::constant(g, "sort.values", choices, DType::Int64, routing.selected);
  TensorId perm = ops::constant(g, "sort.indices", choices, DType::Int64, routing.selected);
  g.hold(sorted_ids);
  TensorId token_of = ops::constant(g, "floor_divide", choices, DType::Int64, perm);
  TensorId selected = ops::gather_rows(g, "selected_hidden_states", flat, token_of, choices * width);
  TensorId weights = ops::gather_rows(g, "sample_weights_g", sample_weights, perm, choices);
  // histc on the CPU takes a float copy of the sorted ids; offsets = cumsum(..., int32).
  TensorId histc_input = ops::constant(g, "histc_input", choices, g.context().cpu_kernels ? DType::Float32 : DType::Int32,
                                       sorted_ids);
  g.hold(histc_input);
  TensorId per_expert = ops::constant(g, "tokens_per_expert", experts, DType::Float32, histc_input);
  g.hold(per_expert);
  TensorId offsets = ops::constant(g, "offsets", experts, DType::Int32, per_expert);
  TensorId gate_up = grouped_mm(g, "gate_up_proj", selected, block.stacked_gate_up, offsets, choices * 2 * ffn, width);
  std::vector<TensorId> halves = ops::split(g, "chunk", gate_up, 2);
  TensorId act = ops::silu(g, "act_fn", halves[0]);
  TensorId product = ops::mul(g, "gate_mul", act, halves[1]);
  TensorId down = grouped_mm(g, "down_proj", product, block.stacked_down, offsets, choices * width, ffn);
  TensorId weighted = ops::mul(g, "weighted", down, weights);
  // inv_perm = torch.empty_like(perm); inv_perm[perm] = torch.arange(S): weighted_out[inv_perm].
  TensorId inverse = ops::constant(g, "inv_perm", choices, DType::Int64, perm);
  TensorId restored = ops::gather_rows(g, "restore_order", weighted, inverse, choices * width);
  g.hold(restored);
  TensorId summed = ops::mean_rows(g, "sum_choices", restored, tokens * width);
  g.end_scope();
  g.pop_module();
  return summed;
}

}  // namespace

TensorId moe_block_forward(GraphBuilder& g, const MoeShape& shape, const MoeBlock& block, TensorId x, int64_t hidden,
                           std::vector<TensorId>* router_logits) {
  const uint64_t tokens = g.tensor(x).numel / static_cast<uint64_t>(hidden);
  const int64_t k = std::min(shape.experts_per_token, shape.experts);
  const DType dtype = g.tensor(x).dtype;
  g.push_module(moe_module(shape));
  g.begin_scope();
  TensorId flat = ops::view(g, "view", x, g.tensor(x).numel);
  g.hold(flat);
  TensorId logits = ops::linear(g, "gate", flat, block.router, kNoTensor, hidden, shape.experts);
  if (router_logits) router_logits->push_back(logits);
  ops::Routing routing = ops::top_k_routing(g, "routing", logits, shape.experts, k, shape.normalize_top_k, dtype);
  g.hold(routing.weights);
  if (block.stacked_gate_up != kNoTensor) {
    g.hold(logits);
    TensorId summed = stacked_experts_forward(g, shape, block, flat, routing, hidden, tokens, k);
    if (shape.shared_expert_ffn > 0) {
      TensorId shared = dense_mlp_forward(g, "shared_expert", block.shared_expert, flat, false);
      TensorId gate = ops::linear(g, "shared_expert_gate", flat, block.shared_expert_gate, kNoTensor, hidden, 1);
      TensorId gated = ops::mul(g, "shared_expert.gated", shared, ops::sigmoid(g, "shared_expert_gate.sigmoid", gate));
      summed = ops::add(g, "shared_expert.add", summed, gated);
    }
    TensorId out = ops::view(g, "reshape", summed, g.tensor(summed).numel);
    g.end_scope();
    g.pop_module();
    return out;
  }
  TensorId final_states =
      shape.expert_parallel > 1
          ? expert_parallel_experts_forward(g, shape, block, flat, routing, hidden, tokens, k)
          : ops::constant(g, "final_hidden_states", tokens * static_cast<uint64_t>(hidden), dtype);
  if (shape.expert_parallel == 1) {
    // expert_mask = one_hot(selected_experts, E).permute(2, 1, 0): int64 [E, k, tokens].
    TensorId mask = ops::constant(g, "expert_mask", tokens * static_cast<uint64_t>(k * shape.experts), DType::Int64,
                                  routing.selected);
    g.hold(mask);
    const std::vector<uint64_t> counts =
        expert_token_counts(tokens, shape.experts, k, !g.context().moe_worst_case);
    for (int64_t e = 0; e < shape.experts; ++e) {
      const uint64_t rows = counts[static_cast<size_t>(e)];
      if (rows == 0) continue;  // HF skips experts no token chose
      const std::string prefix = "experts." + std::to_string(e);
      g.begin_scope();
      // idx, top_x = torch.where(expert_mask[expert_idx]): one int64 [rows, 2] nonzero result,
      // unbound into two views (so saving either keeps both).
      TensorId where = ops::constant(g, prefix + ".where", 2 * rows, DType::Int64, mask);
      TensorId top_x = g.view(where, prefix + ".top_x", rows);
      g.hold(where);
      TensorId current = ops::gather_rows(g, prefix + ".current_state", flat, top_x, rows * static_cast<uint64_t>(hidden));
      TensorId expert_out = dense_mlp_forward(g, prefix, block.experts[static_cast<size_t>(e)], current, false);
      // routing_weights[top_x, idx, None]: a [rows, 1] gather, then the broadcasting mul.
      TensorId weight = ops::gather_rows(g, prefix + ".routing_weight", routing.weights, top_x, rows);
      TensorId weighted = ops::mul(g, prefix + ".weighted", expert_out, weight);
      final_states = ops::index_add(g, prefix + ".index_add", final_states, top_x, weighted);
      g.end_scope();
    }
  }
  if (shape.shared_expert_ffn > 0) {
    // Qwen2-MoE: shared_expert(x) * sigmoid(shared_expert_gate(x)), added to the sparse sum.
    TensorId shared = dense_mlp_forward(g, "shared_expert", block.shared_expert, flat, false);
    TensorId gate = ops::linear(g, "shared_expert_gate", flat, block.shared_expert_gate, kNoTensor, hidden, 1);
    TensorId gate_sigmoid = ops::sigmoid(g, "shared_expert_gate.sigmoid", gate);
    TensorId gated = ops::mul(g, "shared_expert.gated", shared, gate_sigmoid);
    final_states = ops::add(g, "shared_expert.add", final_states, gated);
  }
  TensorId out = ops::view(g, "reshape", final_states, g.tensor(final_states).numel);
  g.end_scope();
  g.pop_module();
  return out;
}

TensorId moe_auxiliary_loss(GraphBuilder& g, const MoeShape& shape, const std::vector<TensorId>& router_logits,
                            TensorId loss) {
  if (!shape.router_logits_output || router_logits.empty()) return loss;
  const std::string name = "load_balancing_loss";
  // torch.cat of every layer's logits, softmax (fp32), topk, one_hot, two means and a sum.
  TensorId all = router_logits.front();
  for (size_t i = 1; i < router_logits.size(); ++i) all = ops::cat(g, name + ".cat", all, router_logits[i]);
  const uint64_t rows = g.tensor(all).numel / static_cast<uint64_t>(shape.experts);
  const int64_t k = std::min(shape.experts_per_token, shape.experts);
  ops::Routing routing = ops::top_k_routing(g, name, all, shape.experts, k, false, DType::Float32);
  TensorId mask = ops::constant(g, name + ".expert_mask", rows * static_cast<uint64_t>(k * shape.experts),
                                DType::Int64, routing.selected);
  TensorId mask_float = ops::constant(g, name + ".expert_mask_float", g.tensor(mask).numel, DType::Float32, mask);
  TensorId fraction = ops::constant(g, name + ".tokens_per_expert", static_cast<uint64_t>(k * shape.experts),
                                    DType::Float32, mask_float);
  TensorId probability = ops::mean_rows(g, name + ".router_prob_per_expert", routing.probabilities,
                                        static_cast<uint64_t>(shape.experts));
  TensorId product = ops::mul(g, name + ".product", fraction, probability);
  TensorId aux = ops::mean_rows(g, name + ".sum", product, 1);
  TensorId scaled = ops::scale(g, name + ".coef", aux);
  return ops::add(g, name + ".add", loss, scaled);
}

}  // namespace oomcast::planner::families
